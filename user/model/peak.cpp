#include "model/peak.h"

#include <algorithm>

namespace allocscope {

bool PeakKeeper::before_change(uint32_t stack, const LiveSide& before, size_t stacks) {
  if (copy_ || !seen_) return false;  // kept whole, or no peak yet: nothing to undo
  journal_.push_back({stack, before});
  // Undoing costs a pass over the stacks: once the journal is as long as
  // the table, copying the peak costs no more than the journal did.
  return journal_.size() >= std::max(kMinJournal, stacks);
}

void PeakKeeper::keep_whole(std::vector<LiveSide> current) {
  copy_ = at_peak(std::move(current));
  journal_.clear();
}

void PeakKeeper::settle(double total, uint64_t ts_ns) {
  if (seen_ && total <= bytes_) return;
  seen_ = true;
  bytes_ = total;
  ts_ns_ = ts_ns;
  journal_.clear();
  copy_.reset();
}

void PeakKeeper::reset() {
  seen_ = false;
  bytes_ = 0;
  ts_ns_ = 0;
  journal_.clear();
  copy_.reset();
}

std::vector<LiveSide> PeakKeeper::at_peak(std::vector<LiveSide> current) const {
  if (copy_) {
    // Stacks made after the copy had nothing live at the peak.
    std::vector<LiveSide> peak = *copy_;
    peak.resize(std::max(peak.size(), current.size()));
    return peak;
  }
  for (auto c = journal_.rbegin(); c != journal_.rend(); ++c)
    if (c->stack < current.size()) current[c->stack] = c->before;
  return current;
}

}  // namespace allocscope
