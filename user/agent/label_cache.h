// The labels of the process instances a recording has seen, read from /proc
// when each is first seen (an ended process has nothing left to read).
// Used from the recording's thread only.
#pragma once

#include <cstdint>
#include <unordered_map>

#include "agent/targets.h"
#include "model/process_table.h"

namespace allocscope {

class LabelCache {
 public:
  explicit LabelCache(size_t capacity) : capacity_(capacity) {}
  // Reads the labels of the instances made since the last call. When full,
  // new ones go unlabelled and are counted: an ended instance keeps its
  // labels while its stacks are held (its program, unit or cgroup
  // profiles still show it).
  void refresh(const ProcessTable& table);
  // The instance's stacks are forgotten: its labels go too.
  void forget(uint32_t instance) { labels_.erase(instance); }
  const TargetLabels& of(uint32_t instance) const;
  uint64_t dropped() const { return dropped_; }

 private:
  size_t capacity_;
  size_t seen_ = 0;  // instances of the table read so far
  uint64_t dropped_ = 0;
  std::unordered_map<uint32_t, TargetLabels> labels_;
};

}  // namespace allocscope
