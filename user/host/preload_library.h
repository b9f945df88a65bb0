// liballocscope-preload.so, found beside the allocscope executable (a build
// tree) or where it is installed, and the environment that loads it into a
// launched command.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"

namespace allocscope {

// The memory file an entry copies the library into: its mappings read
// "/memfd:allocscope-preload".
inline constexpr char kInjectedCopyName[] = "allocscope-preload";

// Whether a mapping's path is an entry's copy of the library.
bool is_injected_copy(std::string_view mapped_path);
// Whether a mapping's path is allocscope's library: the file, or an entry's
// copy of it.
bool is_allocscope_library(std::string_view mapped_path);

// The library's absolute path. As root, a file another user could change
// is refused: it would run inside the command as root.
Result<std::string> find_preload_library();

// `environment` (NAME=VALUE entries) with the library first in LD_PRELOAD
// (before any allocator already preloaded, which it then forwards to) and
// ALLOCSCOPE_RATE set to the sampling rate.
std::vector<std::string> preload_environment(const std::vector<std::string>& environment,
                                             const std::string& library, uint64_t rate);

}  // namespace allocscope
