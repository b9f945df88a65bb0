// liballocscope-preload.so, found beside the allocscope executable (a build
// tree) or where it is installed, and the environment that loads it into a
// launched command.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/result.h"

namespace allocscope {

// The library's absolute path. As root, a file another user could change
// is refused: it would run inside the command as root.
Result<std::string> find_preload_library();

// `environment` (NAME=VALUE entries) with the library first in LD_PRELOAD
// (before any allocator already preloaded, which it then forwards to) and
// ALLOCSCOPE_RATE set to the sampling rate.
std::vector<std::string> preload_environment(const std::vector<std::string>& environment,
                                             const std::string& library, uint64_t rate);

}  // namespace allocscope
