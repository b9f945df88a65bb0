#include "runtime/v8/v8_runtime.h"

#include "runtime/unread_heap.h"

namespace allocscope {

bool is_v8_file_name(std::string_view name) {
  return name == "node" || name == "nodejs" || name == "deno" || name == "electron" ||
         name.starts_with("libnode.so");
}

std::unique_ptr<Runtime> make_v8_runtime(const RuntimeServices& services) {
  return std::make_unique<UnreadHeapRuntime>(
      services.symbolizer, is_v8_file_name,
      UnreadHeapRuntime::Words{"v8", "V8's garbage-collected heap",
                               "JavaScript objects are not in the profile, only native "
                               "allocations (ArrayBuffer and Buffer backing stores among them)"});
}

}  // namespace allocscope
