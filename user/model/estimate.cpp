#include "model/estimate.h"

#include <algorithm>

namespace allocscope {

Estimate estimate(const StackTotals& t, Metric m, uint64_t rate, double confidence, const Loss& loss) {
  const IntervalStats& st = t.stats(m);
  Interval iv =
      metric_is_bytes(m) ? bytes_interval(st, rate, confidence) : objects_interval(st, rate, confidence);
  iv.lo = std::max(0.0, iv.lo - loss.high(m));
  iv.hi += loss.low(m);
  return {t.value(m), iv};
}

LifetimeSummary summarize_lifetimes(const StackTotals& t, double long_lived) {
  LifetimeSummary l;
  l.freed = t.lifetimes.count();
  l.median_ns = t.lifetimes.quantile(0.5);
  l.p90_ns = t.lifetimes.quantile(0.9);
  l.max_ns = double(t.lifetimes.max_ns());
  double sampled = double(t.lifetimes.count() + t.live_ages.count());
  if (sampled > 0) {
    l.live_share = double(t.live_ages.count()) / sampled;
    uint64_t threshold = uint64_t(long_lived);
    l.long_lived_share =
        double(t.lifetimes.count_at_least(threshold) + t.live_ages.count_at_least(threshold)) / sampled;
  }
  return l;
}

uint64_t sampled_allocations(const StackTotals& t) {
  return t.alloc_stats.samples + t.alloc_stats.exact_objects;
}

}  // namespace allocscope
