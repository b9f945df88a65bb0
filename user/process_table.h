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
  bool ended = false;  // exited or exec'ed
};

class ProcessTable {
 public:
  // The current instance of `tgid`, made (named `comm`) when there is none.
  uint32_t current(uint32_t tgid, std::string_view comm);
  // The current instance of `tgid`, if it has one.
  std::optional<uint32_t> find(uint32_t tgid) const;
  // The latest instance of `tgid`, running or ended.
  std::optional<uint32_t> latest(uint32_t tgid) const;
  // Ends the current instance of `tgid` (exit or exec) and returns it.
  std::optional<uint32_t> end(uint32_t tgid);
  const ProcessInstance& instance(uint32_t id) const { return instances_[id]; }
  size_t instances() const { return instances_.size(); }
  size_t running() const { return current_.size(); }

 private:
  std::vector<ProcessInstance> instances_;
  std::unordered_map<uint32_t, uint32_t> current_;  // tgid -> instance
  std::unordered_map<uint32_t, uint32_t> latest_;   // tgid -> instance, ended ones too
};

}  // namespace allocscope
