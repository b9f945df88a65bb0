// The labels of the process instances a recording has seen, read from /proc
// when each is first seen (an ended process has nothing left to read).
// Used from the recording's thread only.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <unordered_map>

#include "agent/targets.h"
#include "model/process_table.h"

namespace allocscope {

class LabelCache {
 public:
  explicit LabelCache(size_t capacity) : capacity_(capacity) {}
  // Reads the labels of the instances made since the last call; an id the
  // table released and gave to a new instance loses the old one's labels.
  // When full, new ones go unlabelled and are counted: an ended instance
  // keeps its labels while its stacks are held (its program, unit or
  // cgroup profiles still show it).
  // Labels come from the cgroup of each instance's first sample (its path
  // from `cgroup_path`), else from /proc while the process lives.
  void refresh(const ProcessTable& table, const std::function<const std::string&(uint64_t)>& cgroup_path);
  // The instance's stacks are forgotten: its labels go too.
  void forget(uint32_t instance) { labels_.erase(instance); }
  // Labels of an instance /proc and cgroups cannot tell (a folded one:
  // LiveView::fold_ended), held as long as its serial is the table's.
  void set(uint32_t instance, uint64_t serial, TargetLabels labels) {
    labels_[instance] = {serial, std::move(labels)};
  }
  const TargetLabels& of(uint32_t instance) const;
  uint64_t dropped() const { return dropped_; }

 private:
  struct Entry {
    uint64_t serial;  // of the instance labelled
    TargetLabels labels;
  };
  size_t capacity_;
  uint64_t seen_ = 0;  // the table's made() when last read
  uint64_t dropped_ = 0;
  std::unordered_map<uint32_t, Entry> labels_;
};

}  // namespace allocscope
