// V8's room (Node.js, Deno, Electron). Today it says that V8's
// garbage-collected heap is not read (native allocations are: ArrayBuffer
// and Buffer backing stores among them).
#pragma once

#include <memory>
#include <string_view>

#include "runtime/registry.h"

namespace allocscope {

// Whether a mapped file's name is a program or library that embeds V8:
// node (nodejs, Debian's libnode.so.N), deno, electron. Electron's apps
// under their own names are not told apart (yet).
bool is_v8_file_name(std::string_view name);

std::unique_ptr<Runtime> make_v8_runtime(const RuntimeServices& services);

}  // namespace allocscope
