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
  size_t preload_arg = 0;             // the index of env's LD_PRELOAD=... argument; 0: none
};

// Understands env's assignments and its -i, -u NAME, -C DIR and -- options;
// anything else (-S) leaves the command as it is.
EnvCommand through_env(const std::vector<std::string>& command);

// The command with `library` put first in the LD_PRELOAD that env sets, if
// it sets one (which would otherwise replace the LD_PRELOAD it was given).
std::vector<std::string> with_first_preload(const std::vector<std::string>& command,
                                            const std::string& library);

}  // namespace allocscope
