// Go programs whose linker took memory profiling out (no runtime/pprof):
// their runtime set MemProfileRate to 0 and samples nothing. A running one
// recorded with -p has it set to the recording's rate, so that its
// runtime's own sampling reaches the kernel (runtime.mProf_Malloc, and its
// frees) instead of a trap at every runtime.mallocgc; at the end it is set
// back, unless the program set it meanwhile.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <vector>

#include "base/result.h"

namespace allocscope {

class GoRates {
 public:
  GoRates() = default;
  GoRates(const GoRates&) = delete;
  GoRates& operator=(const GoRates&) = delete;
  ~GoRates() { restore_all(); }

  // Process `pid`'s MemProfileRate, at virtual address `vaddr` of the
  // program it runs (`path`, whose inode `inode` it maps), set to `rate`.
  Result<void> set(pid_t pid, const std::string& path, uint64_t inode, uint64_t vaddr, uint64_t rate);
  // Each set back to what it was.
  void restore_all();

 private:
  struct Written {
    pid_t pid;
    uint64_t address, was, now;
    uint64_t start_ticks, inode;  // which process, running which program
  };
  // Whether the process written to is still that one, running that program.
  static bool same_program(const Written& w);
  std::vector<Written> written_;
};

}  // namespace allocscope
