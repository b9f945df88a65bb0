// The processes of a recording. Each run of a program in a process (from
// its fork or exec to its next exec or exit) is an instance with samples of
// its own: an exec or a reused process id never mixes with what came before.
// Pure logic.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

namespace allocscope {

struct ProcessInstance {
  uint32_t tgid = 0;
  std::string comm;
  bool ended = false;     // exited or exec'ed
  bool rejected = false;  // filtered out: its samples are not recorded
  uint64_t serial = 0;    // order of making, from 1; 0: a released slot
  uint64_t cgroup = 0;    // the cgroup v2 id of its first sample (0: unknown)
  // As the kernel told at its first sample (0: unknown): its id in its own
  // PID namespace (a container's view), when it started (CLOCK_MONOTONIC
  // ns), which tells it from a later process given the same id, and its
  // exec count, which tells it from a later program of the same process.
  uint32_t ns_tgid = 0;
  uint64_t start_ns = 0;
  uint64_t exec_id = 0;
  uint64_t ended_ms = 0;  // when it ended, on the recording's clock
  // Not a process: what ended instances of one program (in one group of the
  // caller's, a cgroup say) left when their own stacks were forgotten.
  bool folded = false;
  // Its namespace pid where outputs show one: only when it is not its pid.
  uint32_t shown_ns_pid() const { return ns_tgid != tgid ? ns_tgid : 0; }
};

class ProcessTable {
 public:
  // The current instance of `tgid`, made (named `comm`) when there is none;
  // `made` tells which.
  uint32_t current(uint32_t tgid, std::string_view comm, bool* made = nullptr);
  // The current instance of `tgid`, if it has one.
  std::optional<uint32_t> find(uint32_t tgid) const;
  // The latest instance of `tgid`, running or ended.
  std::optional<uint32_t> latest(uint32_t tgid) const;
  // Ends the current instance of `tgid` (exit or exec) and returns it;
  // `in_process`: it was sampled by its own sampler, not by allocator probes.
  std::optional<uint32_t> end(uint32_t tgid, bool in_process = false, uint64_t now_ms = 0);
  void reject(uint32_t id);
  // A folded instance named `comm` (tgid 0, ended, never current).
  uint32_t add_folded(std::string_view comm);
  void set_cgroup(uint32_t id, uint64_t cgroup) { instances_[id].cgroup = cgroup; }
  void set_start(uint32_t id, uint32_t ns_tgid, uint64_t start_ns, uint64_t exec_id) {
    instances_[id].ns_tgid = ns_tgid;
    instances_[id].start_ns = start_ns;
    instances_[id].exec_id = exec_id;
  }
  // Ended instances that nothing refers to any more (`held` is false for
  // them: their stacks were forgotten) give their ids back for new
  // instances: a recording that runs for weeks holds the processes it still
  // shows, not every one it saw. Returns how many were released.
  size_t release_ended(const std::vector<bool>& held);
  const ProcessInstance& instance(uint32_t id) const { return instances_[id]; }
  // Ids in use or free (an id is below this).
  size_t slots() const { return instances_.size(); }
  uint64_t made() const { return made_; }          // instances ever made
  uint64_t rejected() const { return rejected_; }  // ever rejected
  size_t running() const { return running_; }
  // (tgid, instance) of every instance still running.
  std::vector<std::pair<uint32_t, uint32_t>> running_instances() const;
  // Ended instances with samples, by how they were sampled.
  uint64_t ended_in_process() const { return ended_in_process_; }
  uint64_t ended_through_probes() const { return ended_through_probes_; }

 private:
  uint32_t new_id();

  std::vector<ProcessInstance> instances_;
  std::vector<uint32_t> free_;                     // released ids
  std::unordered_map<uint32_t, uint32_t> latest_;  // tgid -> its latest instance
  uint64_t made_ = 0, rejected_ = 0;
  uint64_t ended_in_process_ = 0, ended_through_probes_ = 0;
  size_t running_ = 0;
};

}  // namespace allocscope
