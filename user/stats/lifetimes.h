// Distributions of object lifetimes (sampled allocations whose free was seen)
// and of the ages of still-live ones: a sparse log-linear histogram, 8
// buckets per power of two (quantiles within ~9 %), additive across stacks.
#pragma once

#include <cstdint>
#include <map>

namespace allocscope {

class DurationHistogram {
 public:
  void add(uint64_t ns, uint64_t count = 1);
  void merge(const DurationHistogram& other);
  uint64_t count() const { return count_; }
  uint64_t max_ns() const { return max_ns_; }
  // The q-quantile (0..1), as the geometric middle of its bucket (the exact
  // maximum for q = 1); 0 when empty.
  double quantile(double q) const;
  // How many durations are at least `ns` (bucket resolution).
  uint64_t count_at_least(uint64_t ns) const;

  // Serialized form: bucket index -> count, and the maximum.
  const std::map<uint16_t, uint64_t>& buckets() const { return buckets_; }
  void set_bucket(uint16_t bucket, uint64_t count);
  void set_max_ns(uint64_t ns) { max_ns_ = ns; }

  static uint16_t bucket_of(uint64_t ns);
  static double bucket_low_ns(uint16_t bucket);

  bool operator==(const DurationHistogram&) const = default;

 private:
  std::map<uint16_t, uint64_t> buckets_;
  uint64_t count_ = 0;
  uint64_t max_ns_ = 0;
};

}  // namespace allocscope
