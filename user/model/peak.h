// The in-use profile at the moment the live estimate was highest (heaptrack's
// peak, heapprofd's dump-at-max), kept without copying the stack table at
// every new high: an undo journal of the live changes since the peak, which
// the current state minus the journal gives back. Pure logic.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>

#include "stats/intervals.h"

namespace allocscope {

// A stack's live side: what an in-use profile shows of it.
struct LiveSide {
  double objects = 0, bytes = 0;
  uint64_t samples = 0;
  IntervalStats stats = {};
};

class PeakKeeper {
 public:
  // A stack's live side is about to change; `before` is its value now. True
  // when the journal is full: the caller then hands over every stack's
  // live side (still `before` for this one) to keep_whole.
  bool before_change(uint32_t stack, const LiveSide& before, size_t stacks);
  void keep_whole(std::vector<LiveSide> current);
  // Every change since the last call makes one step, after which `total`
  // bytes are live (at ts_ns): a new peak when above the highest so far.
  void settle(double total, uint64_t ts_ns);
  // Forgets the peak (the stack table was renumbered): the next settle
  // starts again.
  void reset();

  bool seen() const { return seen_; }
  double bytes() const { return bytes_; }
  uint64_t ts_ns() const { return ts_ns_; }
  // Every stack's live side at the peak, given every stack's now.
  std::vector<LiveSide> at_peak(std::vector<LiveSide> current) const;
  // Journal entries kept (bounded by the stack count, or 4096).
  size_t journal_size() const { return journal_.size(); }

 private:
  struct Change {
    uint32_t stack;
    LiveSide before;
  };
  static constexpr size_t kMinJournal = 4096;

  bool seen_ = false;
  double bytes_ = 0;
  uint64_t ts_ns_ = 0;
  std::vector<Change> journal_;                // since the peak, oldest first
  std::optional<std::vector<LiveSide>> copy_;  // the peak itself, once the journal grew too long
};

}  // namespace allocscope
