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
#include <vector>

namespace allocscope {

struct ProcessInstance {
  uint32_t tgid = 0;
  std::string comm;
  bool ended = false;     // exited or exec'ed
  bool rejected = false;  // filtered out: its samples are not recorded
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
  // Ends the current instance of `tgid` (exit or exec) and returns it.
  std::optional<uint32_t> end(uint32_t tgid);
  void reject(uint32_t id);
  const ProcessInstance& instance(uint32_t id) const { return instances_[id]; }
  size_t instances() const { return instances_.size(); }
  size_t rejected() const { return rejected_; }
  size_t running() const { return running_; }

 private:
  std::vector<ProcessInstance> instances_;
  std::unordered_map<uint32_t, uint32_t> latest_;  // tgid -> its latest instance
  size_t rejected_ = 0, running_ = 0;
};

}  // namespace allocscope
