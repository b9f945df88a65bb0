// The JVM's room. Today it says that the Java heap is not read (HotSpot's
// native allocations are); issue 68 reads it here through a JVMTI agent.
#pragma once

#include <memory>
#include <string_view>

#include "runtime/registry.h"

namespace allocscope {

// Whether a mapped file's name is HotSpot's library (every HotSpot JVM,
// launched by `java` or embedded, maps it).
bool is_jvm_library_name(std::string_view name);

std::unique_ptr<Runtime> make_jvm_runtime(const RuntimeServices& services);

}  // namespace allocscope
