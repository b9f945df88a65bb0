// Go programs whose linker took memory profiling out (no runtime/pprof):
// their runtime set MemProfileRate to 0 and samples nothing. Each one a
// recording samples through its runtime has it set to the recording's rate,
// so that its runtime's own sampling reaches the kernel (runtime.mProf_Malloc,
// and its frees) instead of a trap at every runtime.mallocgc: a running one
// (-p) at once, one starting (a launched command's tree) held at its exec,
// before its runtime starts, with the linker's switch turned off too (the
// runtime's start would set the rate back to 0). At the end each is set
// back, unless the program set it meanwhile.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <vector>

#include "base/result.h"

namespace allocscope {

// Where a Go program keeps its sampling's settings.
struct GoRateSite {
  std::string path;                // the program's file, as allocscope holds it
  uint64_t inode = 0;              // ... and its inode, which the process maps
  uint64_t rate = 0;               // virtual address of runtime.MemProfileRate
  uint64_t linked_out_switch = 0;  // ... of runtime.disableMemoryProfiling (0: not found)
};

class GoRates {
 public:
  GoRates() = default;
  GoRates(const GoRates&) = delete;
  GoRates& operator=(const GoRates&) = delete;
  ~GoRates() { restore_all(); }

  // Process `pid`'s MemProfileRate set to `rate` (and the switch turned
  // off). Fails with ESRCH when the process does not run the program.
  Result<void> set(pid_t pid, const GoRateSite& site, uint64_t rate, uint64_t now_ms);
  // Those set a while ago (by `now_ms`) and not checked since, whose
  // runtime's start wrote its own default after (releases that choose it in
  // the runtime's package init): set again, once. Those of processes that
  // ended are forgotten.
  void recheck(uint64_t now_ms);
  // Process `pid` ended or ran another program: its image's rate is
  // nothing to restore (and a new image of the same program is set anew).
  void forget(pid_t pid) {
    std::erase_if(written_, [pid](const Written& w) { return w.pid == pid; });
  }
  // Each set back to what it was.
  void restore_all();

 private:
  struct Written {
    pid_t pid;
    uint64_t address, was, now;
    uint64_t switch_address;      // 0: the switch was not turned off
    uint64_t start_ticks, inode;  // which process, running which program
    uint64_t set_ms;
    bool checked;
  };
  // Whether the process written to is still that one, running that program.
  static bool same_program(const Written& w);
  static constexpr size_t kMaxWritten = 4096;
  std::vector<Written> written_;
};

}  // namespace allocscope
