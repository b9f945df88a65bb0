#include "stats/difference.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "stats/special_functions.h"

namespace allocscope {

namespace {

bool exact_mode(uint64_t rate) { return rate <= 1; }

double estimate(const IntervalStats& st, DiffMetric m) {
  return m == DiffMetric::Bytes ? st.bytes_estimate() : st.objects_estimate();
}

double exact_part(const IntervalStats& st, DiffMetric m) {
  return double(m == DiffMetric::Bytes ? st.exact_bytes : st.exact_objects);
}

// The random part's variance, at least one sample's: a side with no sample
// in this set could still have missed about one. A small allocation's
// sample weighs about R bytes, and R objects of 1 byte.
double variance(const DiffSide& s, DiffMetric m) {
  if (exact_mode(s.rate)) return 0;
  double v = m == DiffMetric::Bytes ? s.stats->ht_var_bytes : s.stats->ht_var_objects;
  double one = double(s.rate);
  return std::max(v, one * one) * s.scale * s.scale;
}

// P(X <= k), X ~ Binomial(n, q).
double binomial_cdf(uint64_t k, uint64_t n, double q) {
  if (k >= n) return 1;
  return regularized_beta(1 - q, double(n - k), double(k) + 1);
}

// The sampled count against a Poisson mean (doubled smaller tail).
double poisson_two_sided(uint64_t samples, double mean) {
  if (mean <= 0) return samples == 0 ? 1 : 0;
  double below = regularized_gamma_q(double(samples) + 1, mean);                 // P(X <= k)
  double above = samples == 0 ? 1 : regularized_gamma_p(double(samples), mean);  // P(X >= k)
  return std::min(1.0, 2 * std::min(below, above));
}

double normal_two_sided(double change, double variance) {
  if (variance <= 0) return change == 0 ? 1 : 0;
  return std::min(1.0, 2 * normal_cdf(-std::fabs(change) / std::sqrt(variance)));
}

// Both sides at the same rate: the same allocations are sampled with the
// same chance whatever their sizes, so the null splits the samples by the
// sides' scales alone; exact-size samples are seen with certainty.
double same_rate_p(const DiffSide& base, const DiffSide& now, DiffMetric m) {
  if (exact_part(*base.stats, m) * base.scale != exact_part(*now.stats, m) * now.scale) return 0;
  double share = (1 / now.scale) / (1 / now.scale + 1 / base.scale);
  return binomial_two_sided(now.stats->samples, base.stats->samples, share);
}

// One side exact: the sampled side's count of small allocations against
// the mean the exact side's bytes give it.
double against_exact_p(const DiffSide& known, const DiffSide& sampled) {
  double bytes = estimate(*known.stats, DiffMetric::Bytes) * known.scale / sampled.scale -
                 exact_part(*sampled.stats, DiffMetric::Bytes);
  return poisson_two_sided(sampled.stats->samples, std::max(0.0, bytes) / double(sampled.rate));
}

// Variance per unit of value of a side's random part: about R for small
// allocations, less for large ones (more often sampled).
double dispersion(const DiffSide& s, DiffMetric m) {
  double est = m == DiffMetric::Bytes ? s.stats->ht_bytes : s.stats->ht_objects;
  double v = m == DiffMetric::Bytes ? s.stats->ht_var_bytes : s.stats->ht_var_objects;
  double w = s.stats->samples > 0 && est > 0 ? v / est : double(s.rate);
  return std::max(w, 1.0) * s.scale;
}

// Different rates: an allocation's chance of a sample then differs between
// the sides by its size, which the accumulators do not keep, so no count
// test is exact. The score test: the variance of the change under the null,
// from the two sides' pooled estimate (each weighed by its precision), not
// from each side's own, which is small exactly when a side saw few samples.
double score_p(const DiffSide& base, const DiffSide& now, DiffMetric m, double change) {
  double wb = dispersion(base, m), wn = dispersion(now, m);
  double eb = (m == DiffMetric::Bytes ? base.stats->ht_bytes : base.stats->ht_objects) * base.scale;
  double en = (m == DiffMetric::Bytes ? now.stats->ht_bytes : now.stats->ht_objects) * now.scale;
  double pooled = (eb / wb + en / wn) / (1 / wb + 1 / wn);
  double one_each = std::pow(double(base.rate) * base.scale, 2) + std::pow(double(now.rate) * now.scale, 2);
  return normal_two_sided(change, std::max(pooled * (wb + wn), one_each));
}

double p_value(const DiffSide& base, const DiffSide& now, DiffMetric m, double change) {
  bool base_exact = exact_mode(base.rate), now_exact = exact_mode(now.rate);
  if (base_exact && now_exact) return change == 0 ? 1 : 0;
  if ((base_exact || now_exact) && m == DiffMetric::Bytes)
    return against_exact_p(base_exact ? base : now, base_exact ? now : base);
  if (base.rate == now.rate) return same_rate_p(base, now, m);
  return score_p(base, now, m, change);
}

}  // namespace

double binomial_two_sided(uint64_t now_samples, uint64_t base_samples, double now_share) {
  uint64_t n = now_samples + base_samples;
  if (n == 0) return 1;
  double below = binomial_cdf(now_samples, n, now_share);
  // P(X >= k) = I_q(k, n - k + 1): the tail itself, not 1 minus the rest,
  // so that p-values far below 1e-16 are not rounded to 0.
  double above =
      now_samples == 0 ? 1 : regularized_beta(now_share, double(now_samples), double(base_samples) + 1);
  return std::min(1.0, 2 * std::min(below, above));
}

Difference compare(const DiffSide& base, const DiffSide& now, DiffMetric metric, double confidence) {
  Difference d;
  d.base = estimate(*base.stats, metric) * base.scale;
  d.now = estimate(*now.stats, metric) * now.scale;
  d.change = d.now - d.base;
  double v = variance(base, metric) + variance(now, metric);
  double half = normal_quantile(0.5 + confidence / 2) * std::sqrt(v);
  d.interval = {d.change - half, d.change + half};
  d.p_value = p_value(base, now, metric, d.change);
  return d;
}

std::vector<double> holm_adjusted(const std::vector<double>& p) {
  std::vector<size_t> order(p.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&p](size_t a, size_t b) { return p[a] < p[b]; });
  std::vector<double> adjusted(p.size());
  double running = 0;  // step-down: adjusted values never decrease along the order
  for (size_t i = 0; i < order.size(); ++i) {
    running = std::max(running, std::min(1.0, double(order.size() - i) * p[order[i]]));
    adjusted[order[i]] = running;
  }
  return adjusted;
}

}  // namespace allocscope
