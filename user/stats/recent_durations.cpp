#include "stats/recent_durations.h"

#include <algorithm>
#include <cmath>

namespace allocscope {

void RecentDurations::add(uint64_t ns) {
  ++count_;
  max_ = std::max(max_, ns);
  if (capacity_ == 0) return;
  if (recent_.size() < capacity_) {
    recent_.push_back(ns);
    return;
  }
  recent_[next_] = ns;
  next_ = (next_ + 1) % capacity_;
}

uint64_t RecentDurations::quantile(double q) const {
  if (recent_.empty()) return 0;
  std::vector<uint64_t> sorted = recent_;
  // The nearest rank: the smallest value at least a q share of them reach.
  size_t rank = size_t(std::ceil(std::clamp(q, 0.0, 1.0) * double(sorted.size())));
  size_t at = rank == 0 ? 0 : rank - 1;
  std::nth_element(sorted.begin(), sorted.begin() + long(at), sorted.end());
  return sorted[at];
}

}  // namespace allocscope
