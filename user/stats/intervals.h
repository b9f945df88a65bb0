// Interval estimates for sampled allocation totals: how far the unbiased
// estimate can be from the truth. Pure math, no I/O. docs/estimates.md has
// the derivations, the assumptions and the measured coverage.
//
// Model (the one the BPF countdown implements): every allocated byte is a
// Bernoulli trial with success probability p = 1 - exp(-1/R); the first
// success inside an allocation samples it and the rest of that allocation is
// skipped. Allocations are therefore sampled independently of one another,
// whatever thread or stack they come from, so any set of allocations (a
// stack, a process, the live subset, a sum over stacks) is again such a
// process and its accumulators simply add.
#pragma once

#include <cstdint>

#include "stats/special_functions.h"

namespace allocscope {

struct Interval {
  double lo, hi;
};

// ---- intervals -----------------------------------------------------------

// Per-byte success probability of the countdown at mean interval R:
// P(countdown >= k) = exp(-k / R), so p = 1 - exp(-1/R).
double per_byte_probability(uint64_t rate);

// Allocations this large (S >= 12 ln(10) R, so P(not sampled) <= 1e-12) are
// sampled with certainty for every practical purpose: IntervalStats counts
// them exactly instead of as a random quantity.
inline constexpr double kExactSizeFactor = 27.631021115928547;  // -ln(1e-12)
bool is_exact_size(uint64_t size, uint64_t rate);

// How the bounds use the distributions for s and for s + 1 samples (the
// count observed, and the count had one more sample fallen inside the set;
// see docs/estimates.md). objects_interval departs from this for MidP's
// upper bound, see there.
enum class IntervalMethod {
  // Default. Quantiles of the equal mixture of the distributions for s and
  // s + 1 samples: the mid-p interval, closest to nominal coverage.
  MidP,
  // Lower bound from s samples, upper bound from s + 1 (Garwood / Fay-Feuer
  // style): coverage never below nominal, often well above with few samples.
  Conservative,
  // Both bounds from s samples, as the .NET design document describes.
  // Undercovers on the upper side with few samples.
  PlainNegBin,
};

// Total allocated bytes given `samples` sampled allocations whose tails
// (size - offset, offset = bytes before the sampled byte) sum to u_bytes:
// total = u + failures, failures ~ NegBin(samples, 1/R); the interval is
// [u + q((1-C)/2), u + q((1+C)/2)] for the chosen method's distribution q.
// samples = 0 (then u = 0): [0, failures at which P(no sample) = 1 - C],
// i.e. R ln(1/(1-C)) (MidP, PlainNegBin) or R ln(2/(1-C)) (Conservative).
// Exact mode (rate <= 1): [u, u], u is then the exact total. Confidence C in
// [0, 1) (0 gives the median twice).
Interval bytes_interval(uint64_t samples, double u_bytes, uint64_t rate, double confidence,
                        IntervalMethod method = IntervalMethod::MidP);

// The per-stack accumulator the intervals need: ten numbers (80 bytes),
// additive, so stacks merge into aggregates and a free subtracts from the
// live side.
struct IntervalStats {
  // Sampled allocations below the exact size (the random part).
  uint64_t samples = 0;
  uint64_t u_bytes = 0;       // sum of (size - offset)
  double ht_bytes = 0;        // sum of size / p(size)
  double ht_var_bytes = 0;    // sum of size^2 (1 - p) / p^2
  double ht_objects = 0;      // sum of 1 / p(size)
  double ht_var_objects = 0;  // sum of (1 - p) / p^2
  // Smallest sampled size in the random part (0: none ever) and how many of
  // the current samples have it. When a free removes the last of them the
  // next smallest is unknown: min_size then stays (a conservative bound)
  // with min_size_count 0.
  uint64_t min_size = 0;
  uint64_t min_size_count = 0;
  // Sampled allocations at or above the exact size, and every sample in
  // exact mode (rate <= 1): known exactly.
  uint64_t exact_objects = 0;
  uint64_t exact_bytes = 0;

  // offset: bytes before the sampled byte inside the allocation (the BPF
  // countdown's value when it fired); 0 in exact mode. Size 0 is never
  // sampled in sampling mode and is ignored there.
  void add_sample(uint64_t size, uint64_t offset, uint64_t rate);
  // Undo add_sample with the same arguments (a live sample freed).
  void remove_sample(uint64_t size, uint64_t offset, uint64_t rate);
  // Exact mode, in bulk: allocations counted (or freed) without sampling.
  void add_exact(uint64_t objects, uint64_t bytes);
  void remove_exact(uint64_t objects, uint64_t bytes);
  void merge(const IntervalStats& other);
  // What was added since `earlier`, a state of the same accumulator (a
  // delta). The smallest size stays the whole run's: a conservative bound.
  void subtract(const IntervalStats& earlier);

  // Horvitz-Thompson point estimates and their estimated variances.
  double bytes_estimate() const { return double(exact_bytes) + ht_bytes; }
  double objects_estimate() const { return double(exact_objects) + ht_objects; }
  // 1/p of the smallest sampled size: the heaviest objects weight seen
  // (0 without random-part samples ever).
  double max_object_weight(uint64_t rate) const;

 private:
  void apply(uint64_t size, uint64_t offset, uint64_t rate, int sign);
};

// Bytes: exact part + the negative binomial interval of the random part.
// A set that only ever showed exact-size samples is reported exactly.
Interval bytes_interval(const IntervalStats& st, uint64_t rate, double confidence,
                        IntervalMethod method = IntervalMethod::MidP);

// Objects: exact part + a gamma interval for the Horvitz-Thompson sum of
// weights w = 1/p (Fay-Feuer). With y = sum w and v = sum (1-p)/p^2: lower
// bound from Gamma(mean y, variance v); upper from one more sample of the
// heaviest weight seen, 1/pm, which adds the unsampled allocations one more
// success stands for: mean (1-pm)/pm, variance (1-pm)/pm^2. MidP mixes the
// two for the lower bound only and keeps that upper bound (unequal weights
// make the right tail heavier than the gamma shows); Conservative uses them
// as they are, PlainNegBin the first for both. With equal small sizes the
// bounds are those of the bytes construction divided by the size (MidP
// lower, Conservative upper). Never below the sampled count.
// Without samples in the random part: [0, n] with n the largest count of
// allocations of weight t = 1/p that all escape sampling with probability
// >= the upper tail, i.e. ln(tail) / ln(1 - p); t is empty_weight, else the
// set's max_object_weight (a live set whose samples were freed), else
// 1/p(1 byte) ~ R (1-byte objects, the worst case; this gives R ln(1/(1-C))).
// Assumes the samples show the set's smallest sizes: objects hidden in
// rarely sampled tiny allocations among large ones are not covered
// (docs/estimates.md quantifies this).
Interval objects_interval(const IntervalStats& st, uint64_t rate, double confidence,
                          IntervalMethod method = IntervalMethod::MidP, double empty_weight = 0);

// Symmetric normal-approximation interval estimate +- z sqrt(variance),
// clamped at 0: for comparison only, it undercovers with few samples.
Interval normal_interval(double estimate, double variance, double confidence);

}  // namespace allocscope
