// Did a set of allocations (a stack, a function) change between two
// recordings by more than sampling noise? Pure math; docs/estimates.md has
// the derivation and the measured error rates.
//
// Each side is a Horvitz-Thompson estimate from independent sampling. Under
// the null hypothesis the two recordings made the same allocations (or, with
// per-second normalisation, at the same rate per second). Then, given the
// total number n of samples both took, the new side's count is binomial
// with the share its rate (and duration) gives it: the conditional test for
// two Poisson counts, exact at any count and for different rates. Samples of
// allocations large enough to be sampled with certainty (is_exact_size), and
// every sample of exact mode, carry no noise: a change in them is real.
#pragma once

#include <cstdint>
#include <vector>

#include "stats/intervals.h"

namespace allocscope {

// One side of a comparison: a set's accumulator, the recording's rate, and
// the factor its values are shown at (1, or 1/seconds for per-second).
struct DiffSide {
  const IntervalStats* stats = nullptr;
  uint64_t rate = 0;
  double scale = 1;
};

enum class DiffMetric { Bytes, Objects };

struct Difference {
  double base = 0, now = 0;  // scaled estimates
  double change = 0;         // now - base
  Interval interval{0, 0};   // of the change, at the confidence asked
  double p_value = 1;        // two-sided, before any correction
};

// The change of one set. The interval is normal on the Horvitz-Thompson
// variances, each side's floored at one sample's (a side without samples
// is not known to be zero); the p-value is the exact conditional test's.
Difference compare(const DiffSide& base, const DiffSide& now, DiffMetric metric, double confidence);

// Two-sided p-value of the conditional test alone: `now_samples` of
// `now_samples + base_samples` where the null gives the new side the share
// `now_share` (doubled smaller tail, capped at 1).
double binomial_two_sided(uint64_t now_samples, uint64_t base_samples, double now_share);

// Holm's step-down adjustment: p-values that keep the chance of calling any
// unchanged set changed (the family-wise error) at most alpha when compared
// with alpha, whatever the dependence between the tests. Same order as given.
std::vector<double> holm_adjusted(const std::vector<double>& p_values);

}  // namespace allocscope
