#include "intervals.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "sampling.h"

namespace allocscope {
namespace {

constexpr double kEps = 1e-15;
constexpr double kTiny = 1e-300;
constexpr double kHalfLog2Pi = 0.91893853320467274178;  // ln(2 pi) / 2
constexpr int kMaxIterations = 10'000'000;

// log(1 + x) - x without the cancellation near 0: with t = x / (2 + x),
// log(1 + x) = 2 atanh(t) = 2 (t + t^3/3 + t^5/5 + ...) and x = 2t / (1 - t).
double log1pmx(double x) {
  if (std::fabs(x) >= 0.5)
    return std::log1p(x) - x;
  double t = x / (2 + x), t2 = t * t;
  double sum = 0, power = t * t2;
  for (int k = 3; k < 200; k += 2) {
    double term = power / k;
    sum += term;
    if (std::fabs(term) <= 1e-17 * std::fabs(sum))
      break;
    power *= t2;
  }
  return 2 * sum - 2 * t2 / (1 - t);
}

// lgamma(z) - [(z - 1/2) ln z - z + ln(2 pi)/2], the Stirling remainder.
// Asymptotic series for z >= 10 (error below 1e-17 there).
double stirling_delta(double z) {
  if (z < 10)
    return std::lgamma(z) - ((z - 0.5) * std::log(z) - z + kHalfLog2Pi);
  double r = 1 / z, r2 = r * r;
  return r * (1.0 / 12 -
              r2 * (1.0 / 360 -
                    r2 * (1.0 / 1260 -
                          r2 * (1.0 / 1680 - r2 * (1.0 / 1188 - r2 * (691.0 / 360360 - r2 / 156))))));
}

// a * [ln(x / x0) - (x - x0) / x0] given ln x and ln x0.
double deviance_term(double a, double x, double x0, double ln_x, double ln_x0) {
  double e = (x - x0) / x0;
  if (std::fabs(e) < 0.5)
    return a * log1pmx(e);
  return a * ((ln_x - ln_x0) - e);
}

// ln(x^a y^b / B(a, b)) with y = 1 - x given separately (whichever of the
// two is small carries the precision). For large a and b the gamma
// functions' leading terms cancel analytically: what remains are deviances
// a [ln(x/x0) - (x-x0)/x0] around x0 = a / (a + b), which stay exact even
// when lgamma(a + b) is 1e10 and the result is of order 1.
double log_beta_factor(double a, double b, double x, double y) {
  double ln_x = x < 0.5 ? std::log(x) : std::log1p(-y);
  double ln_y = y < 0.5 ? std::log(y) : std::log1p(-x);
  double s = a + b;
  if (a >= 10 && b >= 10) {
    double x0 = a / s, y0 = b / s;
    double ln_x0 = -std::log1p(b / a), ln_y0 = -std::log1p(a / b);
    return deviance_term(a, x, x0, ln_x, ln_x0) + deviance_term(b, y, y0, ln_y, ln_y0) +
           0.5 * (std::log(a) - std::log1p(a / b)) - kHalfLog2Pi + stirling_delta(s) -
           stirling_delta(a) - stirling_delta(b);
  }
  if (b >= 10)  // lgamma(a + b) - lgamma(b) through Stirling, a small
    return a * (ln_x + std::log(s)) + b * ln_y + (b - 0.5) * std::log1p(a / b) - a - std::lgamma(a) +
           stirling_delta(s) - stirling_delta(b);
  if (a >= 10)
    return b * (ln_y + std::log(s)) + a * ln_x + (a - 0.5) * std::log1p(b / a) - b - std::lgamma(b) +
           stirling_delta(s) - stirling_delta(a);
  return a * ln_x + b * ln_y + std::lgamma(s) - std::lgamma(a) - std::lgamma(b);
}

// The continued fraction of I_x(a, b) / (x^a y^b / (a B(a, b))):
//   1 / (1 + d1 / (1 + d2 / (1 + ...))),
//   d(2m+1) = -(a + m)(a + b + m) x / ((a + 2m)(a + 2m + 1)),
//   d(2m)   = m (b - m) x / ((a + 2m - 1)(a + 2m)),
// evaluated with the modified Lentz method. Converges fast for
// x < (a + 1) / (a + b + 2).
double beta_continued_fraction(double a, double b, double x) {
  // f = 1 / (1 + d1 / (1 + ...)): after the first partial denominator,
  // C = 1 + d1 / C_prev with C_prev -> infinity (so C = 1), D = 1 / 1.
  double f = 1, c = 1, d = 1;
  for (int j = 1; j < kMaxIterations; ++j) {
    int m = j / 2;
    double coef = (j % 2)
                      ? -(a + m) * (a + b + m) * x / ((a + 2 * m) * (a + 2 * m + 1))
                      : m * (b - m) * x / ((a + 2 * m - 1) * (a + 2 * m));
    d = 1 + coef * d;
    if (std::fabs(d) < kTiny)
      d = kTiny;
    c = 1 + coef / c;
    if (std::fabs(c) < kTiny)
      c = kTiny;
    d = 1 / d;
    double delta = c * d;
    f *= delta;
    if (std::fabs(delta - 1) < kEps)
      break;
  }
  return 1 / f;
}

// I_x(a, b) with y = 1 - x given separately.
double regularized_beta_xy(double x, double y, double a, double b) {
  if (x <= 0)
    return 0;
  if (y <= 0)
    return 1;
  if (x < (a + 1) / (a + b + 2))
    return std::exp(log_beta_factor(a, b, x, y)) * beta_continued_fraction(a, b, x) / a;
  return 1 - std::exp(log_beta_factor(b, a, y, x)) * beta_continued_fraction(b, a, y) / b;
}

// ln(x^a e^-x / Gamma(a)), again with the Stirling leading terms cancelled.
double log_gamma_factor(double a, double x) {
  if (a >= 10)
    return deviance_term(a, x, a, std::log(x), std::log(a)) + 0.5 * std::log(a) - kHalfLog2Pi -
           stirling_delta(a);
  return a * std::log(x) - x - std::lgamma(a);
}

// Density of Gamma(a, 1) at x.
double gamma_density(double a, double x) {
  if (x <= 0)
    return 0;
  return std::exp(log_gamma_factor(a, x)) / x;
}

// Smallest integer k >= 0 with cdf(k) >= prob; cdf non-decreasing, guess a
// rough location.
template <class Cdf>
uint64_t integer_quantile(const Cdf& cdf, double prob, double guess) {
  if (cdf(0.0) >= prob)
    return 0;
  double lo = 0, hi;  // invariant: cdf(lo) < prob <= cdf(hi)
  guess = std::isfinite(guess) ? std::max(guess, 0.0) : 0.0;
  double below = std::floor(guess * 0.97) - 16;
  if (below > lo) {
    if (cdf(below) < prob)
      lo = below;
    else
      hi = below;
  }
  if (lo > 0 || below <= 0) {  // hi not set yet: search upwards
    hi = std::max(lo + 1, std::ceil(guess * 1.03) + 16);
    while (cdf(hi) < prob) {
      lo = hi;
      hi = hi * 2 + 1;
      if (hi > 9e15)  // beyond exact integers in a double: give up widening
        return static_cast<uint64_t>(hi);
    }
  }
  while (hi - lo > 1) {
    double mid = std::floor(lo + (hi - lo) / 2);
    if (cdf(mid) >= prob)
      hi = mid;
    else
      lo = mid;
  }
  return static_cast<uint64_t>(hi);
}

// The x > 0 with cdf(x) = prob for a continuous increasing cdf with density
// pdf: safeguarded Newton inside a bracket.
template <class Cdf, class Pdf>
double continuous_quantile(const Cdf& cdf, const Pdf& pdf, double prob, double guess) {
  double x = guess > 0 && std::isfinite(guess) ? guess : 1.0;
  double lo = 0, hi = std::numeric_limits<double>::infinity();
  for (int i = 0; i < 400; ++i) {
    double c = cdf(x) - prob;
    if (c == 0)
      return x;
    if (c < 0)
      lo = x;
    else
      hi = x;
    double next;
    double d = pdf(x);
    if (d > 0 && std::isfinite(d))
      next = x - c / d;
    else
      next = std::numeric_limits<double>::quiet_NaN();
    if (!(next > lo && next < hi))
      next = std::isfinite(hi) ? (lo > 0 ? std::sqrt(lo * hi) : (lo + hi) / 2) : x * 2;
    if (!std::isfinite(hi) && !(next > x))
      next = x * 2;
    if (std::fabs(next - x) <= 1e-14 * x || (std::isfinite(hi) && hi - lo <= 1e-14 * hi))
      return next;
    if (next < 1e-300)
      return 0;
    x = next;
  }
  return x;
}

// Wilson-Hilferty approximation of the Gamma(a, 1) quantile.
double wilson_hilferty(double a, double prob) {
  double z = normal_quantile(prob);
  double c = 1.0 / (9 * a);
  double t = 1 - c + z * std::sqrt(c);
  return t > 0 ? a * t * t * t : 0.0;
}

double clamp_confidence(double confidence) {
  if (!(confidence > 0))
    return 0;
  return std::min(confidence, 1 - 1e-15);
}

// CDF at k of the mixture w NegBin(r, p) + (1 - w) NegBin(r + 1, p), from
// I_p(r + 1, k + 1) = I_p(r, k + 1) - p^r q^(k+1) / (r B(r, k + 1)).
double negbin_mixture_cdf(double k, double r, double p, double w) {
  double q = 1 - p;
  if (k < 0)
    return 0;
  if (r <= 0)  // NegBin(0) is the point mass at 0; NegBin(1) is geometric
    return w + (1 - w) * -std::expm1((k + 1) * std::log1p(-p));
  double c0 = regularized_beta_xy(p, q, r, k + 1);
  if (w >= 1)
    return c0;
  double step = std::exp(log_beta_factor(r, k + 1, p, q)) / r;
  return c0 - (1 - w) * step;
}

uint64_t negbin_mixture_quantile(double r, double p, double w, double prob) {
  double shape = r + (1 - w);
  double guess = wilson_hilferty(std::max(shape, 0.5), prob) * (1 - p) / p;
  return integer_quantile([&](double k) { return negbin_mixture_cdf(k, r, p, w); }, prob, guess);
}

// Above this shape Gamma quantiles come from Wilson-Hilferty directly: its
// relative error there is far below 1e-9 and the exact series would take
// ~sqrt(shape) terms.
constexpr double kWilsonHilfertyShape = 1e8;

// Quantile of w Gamma(a) + (1 - w) Gamma(a + 1), a >= 0 (Gamma(0) = point
// mass at 0), unit scale.
double gamma_mixture_quantile(double a, double w, double prob) {
  if (a <= 0) {
    // w delta_0 + (1 - w) Exp(1)
    if (prob <= w)
      return 0;
    return -std::log1p(-(prob - w) / (1 - w));
  }
  if (a >= kWilsonHilfertyShape) {
    double x0 = wilson_hilferty(a, prob), x1 = wilson_hilferty(a + 1, prob);
    return w * x0 + (1 - w) * x1;  // the two differ by ~1, tiny against a
  }
  auto cdf = [&](double x) {
    double c0 = regularized_gamma_p(a, x);
    if (w >= 1)
      return c0;
    // P(a + 1, x) = P(a, x) - x^a e^-x / Gamma(a + 1)
    return c0 - (1 - w) * std::exp(log_gamma_factor(a, x)) / a;
  };
  auto pdf = [&](double x) {
    double g0 = gamma_density(a, x);
    return w >= 1 ? g0 : w * g0 + (1 - w) * g0 * x / a;
  };
  double guess = wilson_hilferty(a + (1 - w), prob);
  if (!(guess > 0))
    guess = std::max(a, 1e-3);
  return continuous_quantile(cdf, pdf, prob, guess);
}

// Mixture weight on the s-sample distribution for each bound and method.
double lower_weight(IntervalMethod m) { return m == IntervalMethod::MidP ? 0.5 : 1.0; }
double upper_weight(IntervalMethod m) {
  switch (m) {
    case IntervalMethod::MidP: return 0.5;
    case IntervalMethod::Conservative: return 0.0;
    case IntervalMethod::PlainNegBin: return 1.0;
  }
  return 0.5;
}

}  // namespace

double regularized_beta(double x, double a, double b) {
  if (!(x > 0))
    return 0;
  if (!(x < 1))
    return 1;
  return regularized_beta_xy(x, 1 - x, a, b);
}

double regularized_gamma_p(double a, double x) {
  if (!(x > 0))
    return 0;
  if (!std::isfinite(x))
    return 1;
  double factor = std::exp(log_gamma_factor(a, x));
  if (x < a + 1) {
    // x^a e^-x / Gamma(a) * sum_n x^n / (a (a+1) ... (a+n))
    double term = 1 / a, sum = term;
    for (int n = 1; n < kMaxIterations; ++n) {
      term *= x / (a + n);
      sum += term;
      if (term < sum * kEps)
        break;
    }
    return std::min(1.0, factor * sum);
  }
  // Q(a, x) = factor / (x + 1 - a - 1(1-a) / (x + 3 - a - 2(2-a) / (x + 5 - a - ...)))
  double b = x + 1 - a;
  double c = 1 / kTiny, d = 1 / b, f = d;
  for (int n = 1; n < kMaxIterations; ++n) {
    double an = -n * (n - a);
    b += 2;
    d = an * d + b;
    if (std::fabs(d) < kTiny)
      d = kTiny;
    c = b + an / c;
    if (std::fabs(c) < kTiny)
      c = kTiny;
    d = 1 / d;
    double delta = d * c;
    f *= delta;
    if (std::fabs(delta - 1) < kEps)
      break;
  }
  return std::max(0.0, 1 - factor * f);
}

double normal_cdf(double z) { return 0.5 * std::erfc(-z / std::sqrt(2.0)); }

double normal_quantile(double prob) {
  if (!(prob > 0))
    return -std::numeric_limits<double>::infinity();
  if (!(prob < 1))
    return std::numeric_limits<double>::infinity();
  // Abramowitz & Stegun 26.2.23 (error < 4.5e-4), then Newton on erfc.
  double pp = prob < 0.5 ? prob : 1 - prob;
  double t = std::sqrt(-2 * std::log(pp));
  double z = t - (2.515517 + t * (0.802853 + t * 0.010328)) /
                     (1 + t * (1.432788 + t * (0.189269 + t * 0.001308)));
  if (prob < 0.5)
    z = -z;
  for (int i = 0; i < 4; ++i) {
    double density = std::exp(-0.5 * z * z) / std::sqrt(2 * M_PI);
    if (!(density > 0))
      break;
    // Work on the smaller tail for precision.
    double err = prob < 0.5 ? normal_cdf(z) - prob : (1 - prob) - normal_cdf(-z);
    double step = err / density;
    z -= step;
    if (std::fabs(step) < 1e-15 * std::max(1.0, std::fabs(z)))
      break;
  }
  return z;
}

double gamma_quantile(double shape, double prob) { return gamma_mixture_quantile(shape, 1.0, prob); }

double negbin_cdf(double k, double r, double p) { return negbin_mixture_cdf(std::floor(k), r, p, 1.0); }

double negbin_cdf_camp_paulson(double k, double r, double p) {
  k = std::floor(k);
  if (k < 0)
    return 0;
  if (r <= 0)
    return 1;
  // P(failures <= k) = I_p(r, k+1) = P(F(2r, 2(k+1)) <= (k+1) p / (r q)),
  // and Paulson: for F(n1, n2), P(F <= f) ~ Phi(((1 - 2/(9 n2)) f^(1/3)
  // - (1 - 2/(9 n1))) / sqrt(2/(9 n2) f^(2/3) + 2/(9 n1))).
  double f = (k + 1) * p / (r * (1 - p));
  double c = std::cbrt(f);
  double a1 = 1 / (9 * r), a2 = 1 / (9 * (k + 1));
  double z = ((1 - a2) * c - (1 - a1)) / std::sqrt(a2 * c * c + a1);
  return normal_cdf(z);
}

uint64_t negbin_quantile(double r, double p, double prob, NegBinCdf cdf) {
  if (cdf == NegBinCdf::IncompleteBeta)
    return negbin_mixture_quantile(r, p, 1.0, prob);
  double guess = wilson_hilferty(std::max(r, 0.5), prob) * (1 - p) / p;
  return integer_quantile([&](double k) { return negbin_cdf_camp_paulson(k, r, p); }, prob, guess);
}

double per_byte_probability(uint64_t rate) {
  if (rate <= 1)
    return 1.0;
  return -std::expm1(-1.0 / double(rate));
}

bool is_exact_size(uint64_t size, uint64_t rate) {
  return rate <= 1 || double(size) >= kExactSizeFactor * double(rate);
}

Interval bytes_interval(uint64_t samples, double u_bytes, uint64_t rate, double confidence,
                        IntervalMethod method) {
  if (rate <= 1)
    return {u_bytes, u_bytes};
  double c = clamp_confidence(confidence);
  if (c <= 0)
    return {u_bytes, u_bytes};
  double p = per_byte_probability(rate);
  double r = double(samples);
  double lo_prob = (1 - c) / 2, hi_prob = (1 + c) / 2;
  double lo = 0, hi;
  if (samples == 0) {
    // Nothing below u = 0. Above: the failures at which seeing no sample
    // becomes as unlikely as the method's upper tail allows.
    double tail = method == IntervalMethod::Conservative ? (1 - c) / 2 : 1 - c;
    hi = double(negbin_mixture_quantile(0, p, 0.0, 1 - tail));
  } else {
    lo = double(negbin_mixture_quantile(r, p, lower_weight(method), lo_prob));
    hi = double(negbin_mixture_quantile(r, p, upper_weight(method), hi_prob));
  }
  return {u_bytes + lo, u_bytes + hi};
}

void IntervalStats::apply(uint64_t size, uint64_t offset, uint64_t rate, int sign) {
  if (is_exact_size(size, rate)) {
    exact_objects += sign > 0 ? 1 : -1;
    exact_bytes += sign > 0 ? size : -size;
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
    u_bytes += u;
    ht_bytes += s * inv;
    ht_var_bytes += s * s * var;
    ht_objects += inv;
    ht_var_objects += var;
    return;
  }
  if (samples <= 1) {  // empty again: drop the rounding residue
    *this = IntervalStats{.samples = 0,
                          .u_bytes = 0,
                          .ht_bytes = 0,
                          .ht_var_bytes = 0,
                          .ht_objects = 0,
                          .ht_var_objects = 0,
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

void IntervalStats::merge(const IntervalStats& o) {
  samples += o.samples;
  u_bytes += o.u_bytes;
  ht_bytes += o.ht_bytes;
  ht_var_bytes += o.ht_var_bytes;
  ht_objects += o.ht_objects;
  ht_var_objects += o.ht_var_objects;
  exact_objects += o.exact_objects;
  exact_bytes += o.exact_bytes;
}

double IntervalStats::object_weight() const {
  if (samples == 0 || !(ht_objects > 0))
    return 0;
  return ht_var_objects / ht_objects;
}

Interval bytes_interval(const IntervalStats& st, uint64_t rate, double confidence, IntervalMethod method) {
  Interval r = bytes_interval(st.samples, double(st.u_bytes), rate, confidence, method);
  double exact = double(st.exact_bytes);
  return {exact + r.lo, exact + r.hi};
}

Interval objects_interval(const IntervalStats& st, uint64_t rate, double confidence, IntervalMethod method,
                          double empty_weight) {
  double exact = double(st.exact_objects);
  double c = clamp_confidence(confidence);
  if (rate <= 1 || c <= 0)
    return {exact + st.ht_objects, exact + st.ht_objects};
  double lo_prob = (1 - c) / 2, hi_prob = (1 + c) / 2;
  if (st.samples == 0) {
    double t = empty_weight > 0 ? empty_weight : 1 / sample_probability(1, rate);
    double tail = method == IntervalMethod::Conservative ? (1 - c) / 2 : 1 - c;
    return {exact, exact - t * std::log(tail)};
  }
  double y = st.ht_objects, v = st.ht_var_objects;
  if (!(v > 0) || !(y > 0))
    return {exact + y, exact + y};
  double shape = y * y / v, scale = v / y;
  double lo = scale * gamma_mixture_quantile(shape, lower_weight(method), lo_prob);
  double hi = scale * gamma_mixture_quantile(shape, upper_weight(method), hi_prob);
  return {exact + lo, exact + hi};
}

Interval normal_interval(double estimate, double variance, double confidence) {
  double c = clamp_confidence(confidence);
  double z = c > 0 ? normal_quantile((1 + c) / 2) : 0;
  double half = z * std::sqrt(std::max(0.0, variance));
  return {std::max(0.0, estimate - half), estimate + half};
}

}  // namespace allocscope
