// Where the agent folds an ended process's stacks (LiveView::fold_ended):
// one folded instance per program and cgroup, so that the cumulative
// profiles and counters of every program, unit, container and pod never go
// down however many processes come and go. Bounded: past the capacity a
// new cgroup's processes fold into their program's (no cgroup), and past
// twice it a new program's into "[other]"; both counted. Pure logic.
#pragma once

#include <cstdint>
#include <set>
#include <string>

#include "record/live_view.h"

namespace allocscope {

class FoldGroups {
 public:
  explicit FoldGroups(size_t capacity) : capacity_(capacity) {}
  // The key of an ended process of program `comm` in the cgroup `cgroup`
  // (its path, "" when unknown).
  FoldKey key(const std::string& comm, const std::string& cgroup);
  uint64_t processes() const { return processes_; }  // folded so far
  // Processes folded without their cgroup, or their program, for want of room.
  uint64_t unnamed() const { return unnamed_; }
  size_t size() const { return keys_.size(); }

 private:
  size_t capacity_;
  uint64_t processes_ = 0, unnamed_ = 0;
  std::set<FoldKey> keys_;
};

}  // namespace allocscope
