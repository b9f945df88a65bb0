// The folded instances a long recording keeps for ended processes (one per
// program and group of the observer's choosing), and the serials their
// stacks took, so that a delta begun before a fold still subtracts what the
// folded stacks held then. Pure logic.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <map>

#include "record/live_view.h"

namespace allocscope {

class Folds {
 public:
  // `journal_capacity`: folds remembered for deltas; beyond it the oldest go
  // (counted: a delta spanning them shows their stacks' totals since start).
  explicit Folds(size_t journal_capacity) : journal_capacity_(journal_capacity) {}

  // The folded instance of `key` (its id and serial in the table), or
  // nullopt when there is none yet or the table gave its id to another.
  std::optional<uint32_t> find(const FoldKey& key, const ProcessTable& table) const;
  void add(const FoldKey& key, uint32_t instance, uint64_t serial) { instances_[key] = {instance, serial}; }
  size_t size() const { return instances_.size(); }

  // Stack serial `from` was folded into `to` at `now_ms`; folds before
  // `kept_after_ms` are forgotten (no delta reaches back to them).
  void journal(uint64_t from, uint64_t to, uint64_t now_ms);
  void prune(uint64_t kept_after_ms);
  // `since` as the stacks are now: a folded stack's baseline is the sum of
  // those of the stacks folded into it since.
  Baseline through(const Baseline& since) const;
  uint64_t journal_dropped() const { return journal_dropped_; }
  size_t journal_size() const { return journal_.size(); }

 private:
  struct Entry {
    uint64_t from, to, ms;
  };
  struct Instance {
    uint32_t id;
    uint64_t serial;
  };
  size_t journal_capacity_;
  uint64_t journal_dropped_ = 0;
  std::map<FoldKey, Instance> instances_;
  std::deque<Entry> journal_;  // oldest first
};

}  // namespace allocscope
