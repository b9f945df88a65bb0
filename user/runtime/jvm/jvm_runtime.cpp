#include "runtime/jvm/jvm_runtime.h"

#include "runtime/unread_heap.h"

namespace allocscope {

bool is_jvm_library_name(std::string_view name) { return name == "libjvm.so"; }

std::unique_ptr<Runtime> make_jvm_runtime(const RuntimeServices& services) {
  return std::make_unique<UnreadHeapRuntime>(
      services.symbolizer, is_jvm_library_name,
      UnreadHeapRuntime::Words{"jvm", "the Java heap",
                               "its Java objects are not in the profile, only native allocations "
                               "(HotSpot's own, JNI code's, direct buffers')"});
}

}  // namespace allocscope
