// The last N durations of something (how long processes were held), for
// their median, 99th percentile and largest; bounded, so a recording of
// weeks keeps N, not every one. Pure logic.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace allocscope {

class RecentDurations {
 public:
  explicit RecentDurations(size_t capacity) : capacity_(capacity) {}
  void add(uint64_t ns);
  uint64_t count() const { return count_; }  // ever added
  uint64_t max() const { return max_; }      // ever
  // The q-quantile (0 to 1) of the last `capacity` added, by rank; 0 when none.
  uint64_t quantile(double q) const;

 private:
  size_t capacity_;
  size_t next_ = 0;  // where the next one goes once the ring is full
  uint64_t count_ = 0, max_ = 0;
  std::vector<uint64_t> recent_;
};

}  // namespace allocscope
