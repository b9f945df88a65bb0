// What ended processes allocated, kept per program and cgroup after their
// stacks are forgotten, so that /metrics' allocated totals never go down (a
// Prometheus counter that drops reads as a reset). Used from the
// recording's thread only.
#pragma once

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "agent/targets.h"
#include "record/live_view.h"

namespace allocscope {

class RetiredTotals {
 public:
  explicit RetiredTotals(size_t capacity) : capacity_(capacity) {}
  // Beyond the capacity, new cgroups are merged into their program's entry;
  // beyond twice the capacity, new programs into one "[other]".
  void add(const ProcessTotals& p, const TargetLabels& labels);

  struct Entry {
    ProcessTotals totals;  // an ended pseudo-process: tgid 0, its program's name
    TargetLabels labels;   // of its cgroup
  };
  const std::map<std::pair<std::string, std::string>, Entry>& entries() const { return entries_; }
  uint64_t processes() const { return processes_; }

 private:
  size_t capacity_;
  uint64_t processes_ = 0;
  std::map<std::pair<std::string, std::string>, Entry> entries_;  // (comm, cgroup) -> totals
};

}  // namespace allocscope
