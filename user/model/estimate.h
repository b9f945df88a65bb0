// What a recording's totals say of the truth: a metric's estimate and the
// interval around it (widened by what the recording lost), and the
// lifetimes of the sampled allocations. Pure logic, for every output.
#pragma once

#include <cstdint>

#include "model/loss.h"
#include "model/recording.h"
#include "stats/intervals.h"

namespace allocscope {

// A metric's point estimate and its interval at the given confidence,
// widened by what the recording lost (any stack may hold all of it).
struct Estimate {
  double value = 0;
  Interval interval{0, 0};
};
Estimate estimate(const StackTotals& t, Metric m, uint64_t rate, double confidence, const Loss& loss = {});

// Lifetimes of a group's sampled allocations: quantiles over those whose
// free was seen, and which share is still live or was long-lived.
struct LifetimeSummary {
  uint64_t freed = 0;                            // sampled allocations freed during the recording
  double median_ns = 0, p90_ns = 0, max_ns = 0;  // over the freed ones
  double live_share = 0;                         // of the sampled allocations, still live at the end
  double long_lived_share = 0;                   // alive (freed or not) longer than the threshold
};
LifetimeSummary summarize_lifetimes(const StackTotals& t, double long_lived_ns);

// The allocations sampled at a row, whatever the metric: the set its
// samples, lifetime, live and long columns all describe.
uint64_t sampled_allocations(const StackTotals& t);

}  // namespace allocscope
