// The JVM's room. A JVM allocscope records runs its JVMTI agent (the
// preload library: user/preload/jvm_agent.c), which sends each Java object
// the JVM sampled with its Java frames already named; they are put in
// place here as the stack's frames. A JVM whose agent samples nothing (not
// launched by allocscope, an agent that could not start) is named in one
// note, with why when its agent said.
#pragma once

#include <memory>
#include <string_view>

#include "runtime/registry.h"

namespace allocscope {

// Whether a mapped file's name is HotSpot's library (every HotSpot JVM,
// launched by `java` or embedded, maps it).
bool is_jvm_library_name(std::string_view name);

// The frames an agent's record carries (java_record.h), innermost first, as
// values among a stack's return addresses (Symbolizer::runtime_frame);
// false when the bytes do not hold whole frames (those read are kept).
bool place_java_frames(Symbolizer& symbolizer, std::span<const uint8_t> frames, std::vector<uint64_t>& ips);

std::unique_ptr<Runtime> make_jvm_runtime(const RuntimeServices& services);

}  // namespace allocscope
