// What a command run through env(1) runs, and the LD_PRELOAD it sets
// (`env LD_PRELOAD=libjemalloc.so.2 ./server`), so that the preloaded
// allocator is probed before the program runs rather than when it is mapped.
#pragma once

#include <string>
#include <vector>

namespace allocscope {

struct EnvCommand {
  std::string program;                // the program env runs (command[0] when it is no env)
  std::vector<std::string> preloads;  // LD_PRELOAD's entries, as written
};

// Understands env's assignments and its -i, -u NAME, -C DIR and -- options;
// anything else (-S) leaves the command as it is.
EnvCommand through_env(const std::vector<std::string>& command);

}  // namespace allocscope
