// The kernel's table of processes (each one's verdict and in-process mark,
// enum as_process_verdict), the judgements it applies by name, and what it
// counts per process (allocating calls that trapped, samples lost): the
// session's handle over those maps.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "allocscope.h"
#include "base/result.h"

namespace allocscope {

class ProcessMaps {
 public:
  struct Fds {
    int processes = -1, name_verdicts = -1, unjudged_drops = -1, process_drops = -1, busy = -1;
  };
  // judge_cgroups: a judgement by name holds in the judged process's cgroup only.
  ProcessMaps(Fds fds, bool judge_cgroups) : fds_(fds), judge_cgroups_(judge_cgroups) {}

  // Process verdicts for system-wide probes and lifecycle events; 0
  // removes the verdict (an in-process mark stays: the kernel's to clear).
  Result<void> set_verdict(uint32_t tgid, uint8_t verdict);
  // A verdict only where there is none; one removed only if it is `verdict`.
  void set_verdict_if_none(uint32_t tgid, uint8_t verdict);
  bool has_verdict(uint32_t tgid) const;
  void clear_verdict_if(uint32_t tgid, uint8_t verdict);
  // The process samples in process: the allocator probes leave it alone.
  Result<void> mark_in_process(uint32_t tgid);
  // The mark taken back: an entry that failed leaves its process to the probes.
  void unmark_in_process(uint32_t tgid);
  // Whether the kernel has marked the process as sampling in process.
  bool in_process(uint32_t tgid) const;
  // A filter's judgement of every process named `comm` (and in cgroup
  // `cgroup`, with judge_cgroups): AS_PROC_MEMBER or AS_PROC_IGNORED.
  void set_name_verdict(const std::string& comm, uint64_t cgroup, uint8_t verdict);

  // With SessionConfig::count_busy: each recorded process's allocating
  // calls that trapped since the last take (in batches of AS_BUSY_BATCH
  // per thread), taken.
  std::vector<std::pair<uint32_t, uint64_t>> take_busy();
  // Samples lost to a full ring buffer, per process (bounded: the busiest).
  std::vector<std::pair<uint32_t, uint64_t>> drops() const;
  // ... by processes no filter had judged.
  std::vector<std::pair<uint32_t, as_unjudged_drops>> unjudged_drops() const;

 private:
  // Process `tgid`'s entry (verdict and flags); 0 for none.
  uint8_t entry(uint32_t tgid) const;

  Fds fds_;
  bool judge_cgroups_;
};

}  // namespace allocscope
