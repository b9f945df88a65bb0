#include "stats/lifetimes.h"

#include <algorithm>
#include <bit>
#include <cmath>

namespace allocscope {

// Buckets: values below 8 have their own; above, 3 mantissa bits below the
// top bit pick one of 8 sub-buckets per octave.
uint16_t DurationHistogram::bucket_of(uint64_t ns) {
  if (ns < 8) return uint16_t(ns);
  unsigned top = 63 - unsigned(std::countl_zero(ns));
  unsigned sub = unsigned(ns >> (top - 3)) & 7;
  return uint16_t(8 + (top - 3) * 8 + sub);
}

double DurationHistogram::bucket_low_ns(uint16_t bucket) {
  if (bucket < 8) return bucket;
  unsigned top = (bucket - 8) / 8 + 3, sub = (bucket - 8) % 8;
  return std::ldexp(8.0 + sub, int(top) - 3);
}

void DurationHistogram::add(uint64_t ns, uint64_t count) {
  if (count == 0) return;
  buckets_[bucket_of(ns)] += count;
  count_ += count;
  max_ns_ = std::max(max_ns_, ns);
}

void DurationHistogram::set_bucket(uint16_t bucket, uint64_t count) {
  count_ += count - buckets_[bucket];
  buckets_[bucket] = count;
}

void DurationHistogram::merge(const DurationHistogram& other) {
  for (const auto& [b, n] : other.buckets_) buckets_[b] += n;
  count_ += other.count_;
  max_ns_ = std::max(max_ns_, other.max_ns_);
}

double DurationHistogram::quantile(double q) const {
  if (count_ == 0) return 0;
  if (q >= 1) return double(max_ns_);
  uint64_t rank = uint64_t(std::ceil(q * double(count_)));
  uint64_t seen = 0;
  for (const auto& [b, n] : buckets_) {
    seen += n;
    if (seen >= std::max<uint64_t>(rank, 1)) {
      double lo = bucket_low_ns(b), hi = bucket_low_ns(uint16_t(b + 1));
      return std::min(b < 8 ? lo : std::sqrt(lo * hi), double(max_ns_));
    }
  }
  return double(max_ns_);
}

uint64_t DurationHistogram::count_at_least(uint64_t ns) const {
  uint64_t n = 0;
  for (auto it = buckets_.lower_bound(bucket_of(ns)); it != buckets_.end(); ++it) n += it->second;
  return n;
}

}  // namespace allocscope
