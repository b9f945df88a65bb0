#include "stats/intervals.h"

#include <algorithm>
#include <cmath>

#include "stats/sampling.h"
#include "stats/special_functions.h"

namespace allocscope {
namespace {

// Confidence in [0, 1): 0 gives the median for both bounds.
double clamp_confidence(double confidence) {
  if (!(confidence > 0)) return 0;
  return std::min(confidence, 1 - 1e-15);
}

// Mixture weight on the s-sample distribution for each bound and method.
double lower_weight(IntervalMethod m) { return m == IntervalMethod::MidP ? 0.5 : 1.0; }
double upper_weight(IntervalMethod m) {
  switch (m) {
    case IntervalMethod::MidP:
      return 0.5;
    case IntervalMethod::Conservative:
      return 0.0;
    case IntervalMethod::PlainNegBin:
      return 1.0;
  }
  return 0.5;
}

}  // namespace

double per_byte_probability(uint64_t rate) {
  if (rate <= 1) return 1.0;
  return -std::expm1(-1.0 / double(rate));
}

bool is_exact_size(uint64_t size, uint64_t rate) {
  return rate <= 1 || double(size) >= kExactSizeFactor * double(rate);
}

Interval bytes_interval(uint64_t samples, double u_bytes, uint64_t rate, double confidence,
                        IntervalMethod method) {
  if (rate <= 1) return {u_bytes, u_bytes};
  double c = clamp_confidence(confidence);
  double p = per_byte_probability(rate);
  double r = double(samples);
  double lo_prob = (1 - c) / 2, hi_prob = (1 + c) / 2;
  // Rates past ~1e12 bytes (a crafted profile's) make p smaller than the
  // incomplete beta resolves; failures * p is then Gamma(r) to within p.
  auto quantile = [&](double shape, double w, double prob) {
    if (p < 1e-12) return gamma_pair_quantile(shape, 1, shape + 1, 1, w, prob) / p;
    return double(negbin_mixture_quantile(shape, p, w, prob));
  };
  double lo = 0, hi;
  if (samples == 0) {
    // Nothing below u = 0. Above: the failures at which seeing no sample
    // becomes as unlikely as the method's upper tail allows.
    double tail = method == IntervalMethod::Conservative ? (1 - c) / 2 : 1 - c;
    hi = quantile(0, 0.0, 1 - tail);
  } else {
    lo = quantile(r, lower_weight(method), lo_prob);
    hi = quantile(r, upper_weight(method), hi_prob);
  }
  return {u_bytes + lo, u_bytes + hi};
}

void IntervalStats::apply(uint64_t size, uint64_t offset, uint64_t rate, int sign) {
  if (is_exact_size(size, rate)) {
    if (sign > 0) {
      ++exact_objects;
      exact_bytes += size;
    } else if (exact_objects > 0) {
      --exact_objects;
      exact_bytes -= std::min(size, exact_bytes);
    }
    return;
  }
  if (size == 0)  // never sampled at rate > 1
    return;
  double p = sample_probability(size, rate);
  double s = double(size);
  uint64_t u = size - std::min(offset, size - 1);
  double inv = 1 / p, var = (1 - p) * inv * inv;
  if (sign > 0) {
    ++samples;
    if (min_size == 0 || size < min_size) {
      min_size = size;
      min_size_count = 1;
    } else if (size == min_size) {
      ++min_size_count;
    }
    u_bytes += u;
    ht_bytes += s * inv;
    ht_var_bytes += s * s * var;
    ht_objects += inv;
    ht_var_objects += var;
    return;
  }
  if (size == min_size && min_size_count > 0) --min_size_count;  // at 0, min_size stays as a bound
  if (samples <= 1) {                                            // empty again: drop the rounding residue
    *this = IntervalStats{.samples = 0,
                          .u_bytes = 0,
                          .ht_bytes = 0,
                          .ht_var_bytes = 0,
                          .ht_objects = 0,
                          .ht_var_objects = 0,
                          .min_size = min_size,
                          .min_size_count = 0,
                          .exact_objects = exact_objects,
                          .exact_bytes = exact_bytes};
    return;
  }
  --samples;
  u_bytes -= std::min(u, u_bytes);
  ht_bytes = std::max(0.0, ht_bytes - s * inv);
  ht_var_bytes = std::max(0.0, ht_var_bytes - s * s * var);
  ht_objects = std::max(0.0, ht_objects - inv);
  ht_var_objects = std::max(0.0, ht_var_objects - var);
}

void IntervalStats::add_sample(uint64_t size, uint64_t offset, uint64_t rate) {
  apply(size, offset, rate, +1);
}

void IntervalStats::remove_sample(uint64_t size, uint64_t offset, uint64_t rate) {
  apply(size, offset, rate, -1);
}

void IntervalStats::add_exact(uint64_t objects, uint64_t bytes) {
  exact_objects += objects;
  exact_bytes += bytes;
}

void IntervalStats::remove_exact(uint64_t objects, uint64_t bytes) {
  exact_objects -= std::min(objects, exact_objects);
  exact_bytes -= std::min(bytes, exact_bytes);
}

void IntervalStats::merge(const IntervalStats& o) {
  samples += o.samples;
  u_bytes += o.u_bytes;
  ht_bytes += o.ht_bytes;
  ht_var_bytes += o.ht_var_bytes;
  ht_objects += o.ht_objects;
  ht_var_objects += o.ht_var_objects;
  if (o.min_size != 0) {
    if (min_size == 0 || o.min_size < min_size) {
      min_size = o.min_size;
      min_size_count = o.min_size_count;
    } else if (o.min_size == min_size) {
      min_size_count += o.min_size_count;
    }
  }
  exact_objects += o.exact_objects;
  exact_bytes += o.exact_bytes;
}

void IntervalStats::subtract(const IntervalStats& e) {
  samples -= std::min(samples, e.samples);
  u_bytes -= std::min(u_bytes, e.u_bytes);
  ht_bytes = std::max(0.0, ht_bytes - e.ht_bytes);
  ht_var_bytes = std::max(0.0, ht_var_bytes - e.ht_var_bytes);
  ht_objects = std::max(0.0, ht_objects - e.ht_objects);
  ht_var_objects = std::max(0.0, ht_var_objects - e.ht_var_objects);
  exact_objects -= std::min(exact_objects, e.exact_objects);
  exact_bytes -= std::min(exact_bytes, e.exact_bytes);
}

double IntervalStats::max_object_weight(uint64_t rate) const {
  if (min_size == 0) return 0;
  return 1 / sample_probability(min_size, rate);
}

namespace {

// A set whose samples were all of exact size and that never had a sample in
// the random part: it showed nothing but allocations known exactly.
bool only_exact(const IntervalStats& st) {
  return st.samples == 0 && st.min_size == 0 && st.exact_objects > 0;
}

}  // namespace

Interval bytes_interval(const IntervalStats& st, uint64_t rate, double confidence, IntervalMethod method) {
  double exact = double(st.exact_bytes);
  if (only_exact(st)) return {exact, exact};
  Interval r = bytes_interval(st.samples, double(st.u_bytes), rate, confidence, method);
  return {exact + r.lo, exact + r.hi};
}

Interval objects_interval(const IntervalStats& st, uint64_t rate, double confidence, IntervalMethod method,
                          double empty_weight) {
  double exact = double(st.exact_objects);
  double c = clamp_confidence(confidence);
  if (rate <= 1 || only_exact(st)) return {exact + st.ht_objects, exact + st.ht_objects};
  double lo_prob = (1 - c) / 2, hi_prob = (1 + c) / 2;
  if (st.samples == 0) {
    // n unseen allocations of sampling probability p = 1/t all escape with
    // probability (1 - p)^n: the largest n for which that is still at least
    // the upper tail.
    double seen = st.max_object_weight(rate);
    double t = empty_weight > 0 ? empty_weight : seen > 0 ? seen : 1 / sample_probability(1, rate);
    double tail = method == IntervalMethod::Conservative ? (1 - c) / 2 : 1 - c;
    if (t <= 1) return {exact, exact};
    return {exact, exact + std::log(tail) / std::log1p(-1 / t)};
  }
  double y = st.ht_objects, v = st.ht_var_objects;
  if (!(v > 0) || !(y > 0))  // every sample has p ~ 1: nothing random left
    return {exact + y, exact + y};
  // Fay-Feuer: Gamma with the estimate's mean y and variance v for s
  // samples. For s + 1, one more sample of the heaviest weight seen, 1/pm:
  // like the Garwood bound's extra count, it adds the unsampled allocations
  // one more success would stand for, NegBin(1, pm): mean (1 - pm)/pm,
  // variance (1 - pm)/pm^2 (~ the weight and its square for small sizes,
  // ~0 for allocations sampled almost surely).
  double e = std::max(st.max_object_weight(rate), 1.0);
  double em = e - 1, ev = e * (e - 1);
  double a0 = y * y / v, t0 = v / y;
  double a1 = (y + em) * (y + em) / (v + ev), t1 = (v + ev) / (y + em);
  // The upper bound stays the Fay-Feuer one even for MidP: with unequal
  // weights the estimate's right tail is heavier than any gamma fitted to
  // the samples shows (rarely sampled small allocations carry large
  // weights), and mid-p there measurably undercovers (docs/estimates.md).
  double upper_w = method == IntervalMethod::PlainNegBin ? 1.0 : 0.0;
  double lo = gamma_pair_quantile(a0, t0, a1, t1, lower_weight(method), lo_prob);
  double hi = gamma_pair_quantile(a0, t0, a1, t1, upper_w, hi_prob);
  // The sampled allocations themselves certainly exist.
  double seen = double(st.samples);
  return {exact + std::max(lo, seen), exact + std::max(hi, seen)};
}

Interval normal_interval(double estimate, double variance, double confidence) {
  double c = clamp_confidence(confidence);
  double z = c > 0 ? normal_quantile((1 + c) / 2) : 0;
  double half = z * std::sqrt(std::max(0.0, variance));
  return {std::max(0.0, estimate - half), estimate + half};
}

}  // namespace allocscope
