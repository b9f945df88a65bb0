#include "stats/special_functions.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace allocscope {

// A count from a double: past uint64's range (a crafted profile's weights
// reach 1e23) the cast would be undefined, so it saturates.
static uint64_t saturated_count(double v) {
  constexpr double kPast = 18446744073709551616.0;  // 2^64
  if (!(v >= 0)) return 0;
  return v >= kPast ? std::numeric_limits<uint64_t>::max() : static_cast<uint64_t>(v);
}
namespace {

constexpr double kEps = 1e-15;
constexpr double kTiny = 1e-300;
constexpr double kHalfLog2Pi = 0.91893853320467274178;  // ln(2 pi) / 2
constexpr int kMaxIterations = 10'000'000;

// log(1 + x) - x without the cancellation near 0: with t = x / (2 + x),
// log(1 + x) = 2 atanh(t) = 2 (t + t^3/3 + t^5/5 + ...) and x = 2t / (1 - t).
double log1pmx(double x) {
  if (std::fabs(x) >= 0.5) return std::log1p(x) - x;
  double t = x / (2 + x), t2 = t * t;
  double sum = 0, power = t * t2;
  for (int k = 3; k < 200; k += 2) {
    double term = power / k;
    sum += term;
    if (std::fabs(term) <= 1e-17 * std::fabs(sum)) break;
    power *= t2;
  }
  return 2 * sum - 2 * t2 / (1 - t);
}

// lgamma(z) - [(z - 1/2) ln z - z + ln(2 pi)/2], the Stirling remainder.
// Asymptotic series for z >= 10 (truncation error below 1e-16 there).
double stirling_delta(double z) {
  if (z < 10) return std::lgamma(z) - ((z - 0.5) * std::log(z) - z + kHalfLog2Pi);
  double r = 1 / z, r2 = r * r;
  return r *
         (1.0 / 12 -
          r2 * (1.0 / 360 - r2 * (1.0 / 1260 -
                                  r2 * (1.0 / 1680 - r2 * (1.0 / 1188 - r2 * (691.0 / 360360 - r2 / 156))))));
}

// a * [ln(x / x0) - (x - x0) / x0] given ln x and ln x0.
double deviance_term(double a, double x, double x0, double ln_x, double ln_x0) {
  double e = (x - x0) / x0;
  if (std::fabs(e) < 0.5) return a * log1pmx(e);
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
           0.5 * (std::log(a) - std::log1p(a / b)) - kHalfLog2Pi + stirling_delta(s) - stirling_delta(a) -
           stirling_delta(b);
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
  // g = 1 + d1 / (1 + d2 / (1 + ...)) by Lentz (f0 = C0 = 1, D0 = 0),
  // and the fraction is 1 / g.
  double f = 1, c = 1, d = 0;
  for (int j = 1; j < kMaxIterations; ++j) {
    int m = j / 2;
    double coef = (j % 2) ? -(a + m) * (a + b + m) * x / ((a + 2 * m) * (a + 2 * m + 1))
                          : m * (b - m) * x / ((a + 2 * m - 1) * (a + 2 * m));
    d = 1 + coef * d;
    if (std::fabs(d) < kTiny) d = kTiny;
    c = 1 + coef / c;
    if (std::fabs(c) < kTiny) c = kTiny;
    d = 1 / d;
    double delta = c * d;
    f *= delta;
    if (std::fabs(delta - 1) < kEps) break;
  }
  return 1 / f;
}

// I_x(a, b) with y = 1 - x given separately.
double regularized_beta_xy(double x, double y, double a, double b) {
  if (x <= 0) return 0;
  if (y <= 0) return 1;
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
  if (x <= 0) return 0;
  return std::exp(log_gamma_factor(a, x)) / x;
}

// Smallest integer k >= 0 with cdf(k) >= prob, for a cdf that is
// non-decreasing and defined (smooth) between the integers too, given a
// guess of the answer. A bracket around the guess, then the Illinois
// variant of regula falsi on the real line until the bracket is one wide:
// from a good guess that is a handful of evaluations instead of the ~30 of
// a bisection.
template <class Cdf>
uint64_t integer_quantile(const Cdf& cdf, double prob, double guess) {
  if (cdf(0.0) >= prob) return 0;
  guess = std::isfinite(guess) ? std::max(guess, 0.0) : 0.0;
  double step = std::max(16.0, guess * 1e-3);
  // Invariant: f(a) < 0 <= f(b) with f = cdf - prob.
  double a = std::max(0.0, guess - step), b = guess + step;
  double fa = cdf(a) - prob, fb = cdf(b) - prob;
  for (int i = 0; fa >= 0 && i < 200; ++i) {  // cdf(0) < prob, so this ends at 0 at the latest
    b = a, fb = fa;
    step *= 4;
    a = std::max(0.0, a - step);
    fa = cdf(a) - prob;
  }
  while (fb < 0) {
    a = b, fa = fb;
    step *= 4;
    b += step;
    if (b > 9e15)  // past the integers a double holds exactly
      return saturated_count(b);
    fb = cdf(b) - prob;
  }
  int side = 0;
  for (int i = 0; i < 200 && b - a > 1; ++i) {
    double x = (a * fb - b * fa) / (fb - fa);
    if (!(x > a && x < b)) x = a + (b - a) / 2;
    // Move at least half a unit so the bracket closes around the root.
    x = std::clamp(x, a + 0.5, b - 0.5);
    double fx = cdf(x) - prob;
    if (fx < 0) {
      a = x, fa = fx;
      if (side < 0) fb /= 2;
      side = -1;
    } else {
      b = x, fb = fx;
      if (side > 0) fa /= 2;
      side = 1;
    }
  }
  // Not reached in practice: bisect what is left, while a double can still
  // split the bracket (past 2^53 it cannot, and the loop would never end).
  for (int i = 0; i < 200 && b - a > 1; ++i) {
    double mid = a + (b - a) / 2;
    if (mid <= a || mid >= b) break;
    if (cdf(mid) >= prob)
      b = mid;
    else
      a = mid;
  }
  // The answer is in (a, b] and b - a <= 1: floor(a) + 1, or the next one.
  double k = std::floor(a) + 1;
  if (k < b && cdf(k) < prob) k += 1;
  return saturated_count(k);
}

// The x > 0 with cdf(x) = prob for a continuous increasing cdf with density
// pdf: Newton steps kept inside a shrinking bracket, bisection otherwise.
template <class Cdf, class Pdf>
double continuous_quantile(const Cdf& cdf, const Pdf& pdf, double prob, double guess) {
  double x = guess > 0 && std::isfinite(guess) ? guess : 1.0;
  double lo = 0, hi = std::numeric_limits<double>::infinity();
  for (int i = 0; i < 1000; ++i) {
    double c = cdf(x) - prob;
    if (c == 0) return x;
    if (c < 0)
      lo = x;
    else
      hi = x;
    if (lo > 0 && std::isfinite(hi) && hi - lo <= 1e-14 * hi) return (lo + hi) / 2;
    double d = pdf(x);
    double next = d > 0 && std::isfinite(d) ? x - c / d : std::numeric_limits<double>::quiet_NaN();
    if (!(next > lo && next < hi)) {
      if (!std::isfinite(hi))
        next = x * 2;
      else if (lo > 0)
        next = std::sqrt(lo * hi);
      else
        next = hi / 16;
    }
    if (std::fabs(next - x) <= 1e-14 * x) return next;
    if (next < 1e-300) return 0;
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

}  // namespace

// CDF at k of the mixture w NegBin(r, p) + (1 - w) NegBin(r + 1, p), from
// I_p(r + 1, k + 1) = I_p(r, k + 1) - p^r q^(k+1) / (r B(r, k + 1)).
double negbin_mixture_cdf(double k, double r, double p, double w) {
  double q = 1 - p;
  if (k < 0) return 0;
  if (r <= 0)  // NegBin(0) is the point mass at 0; NegBin(1) is geometric
    return w + (1 - w) * -std::expm1((k + 1) * std::log1p(-p));
  double c0 = regularized_beta_xy(p, q, r, k + 1);
  if (w >= 1) return c0;
  double step = std::exp(log_beta_factor(r, k + 1, p, q)) / r;
  return c0 - (1 - w) * step;
}

namespace {

// Above this shape Gamma CDFs come from Wilson-Hilferty: its CDF error there
// is below 5e-9 (falling as 1/shape), far inside what an interval shows, and
// the exact series would take ~sqrt(shape) terms per call, for each of the
// solver's steps, for each stack: a crafted profile of stacks with shapes
// just below 1e8 took half a minute to print.
// (Such shapes come from allocations of ~15-27 R, sampled with p ~ 1.)
constexpr double kWilsonHilfertyShape = 1e6;

}  // namespace

// P(X <= x) for X ~ Gamma(shape a, scale t); a = 0 is the point mass at 0.
double gamma_cdf(double a, double t, double x) {
  if (x < 0) return 0;
  if (a <= 0) return 1;
  if (a >= kWilsonHilfertyShape) {
    double c = 1 / (9 * a);
    return normal_cdf((std::cbrt(x / (a * t)) - (1 - c)) / std::sqrt(c));
  }
  return regularized_gamma_p(a, x / t);
}

// Its density, or NaN where only the approximation is used (the solver then
// bisects).
double gamma_pdf(double a, double t, double x) {
  if (a <= 0) return 0;
  if (a >= kWilsonHilfertyShape) return std::numeric_limits<double>::quiet_NaN();
  return gamma_density(a, x / t) / t;
}

// Quantile of w Gamma(a0, t0) + (1 - w) Gamma(a1, t1), a1 > 0.
double gamma_pair_quantile(double a0, double t0, double a1, double t1, double w, double prob) {
  if (a0 <= 0 && w >= 1) return 0;
  if (a0 <= 0 && prob <= w) return 0;
  auto cdf = [&](double x) {
    double c1 = w >= 1 ? 0 : gamma_cdf(a1, t1, x);
    return w * gamma_cdf(a0, t0, x) + (1 - w) * c1;
  };
  auto pdf = [&](double x) {
    double d1 = w >= 1 ? 0 : gamma_pdf(a1, t1, x);
    return w * gamma_pdf(a0, t0, x) + (1 - w) * d1;
  };
  double guess = w >= 1 ? t0 * wilson_hilferty(a0, prob) : t1 * wilson_hilferty(a1, prob);
  if (!(guess > 0)) guess = std::max(a1 * t1, 1e-300);
  return continuous_quantile(cdf, pdf, prob, guess);
}

uint64_t negbin_mixture_quantile(double r, double p, double w, double prob) {
  // For small p, failures * p / (1 - p) is close to Gamma(r) (the geometric
  // tends to the exponential): its quantile is the starting guess.
  double guess = gamma_pair_quantile(r, 1, r + 1, 1, w, prob) * (1 - p) / p;
  return integer_quantile([&](double k) { return negbin_mixture_cdf(k, r, p, w); }, prob, guess);
}

// Camp-Paulson, for real k (the quantile search moves between integers).
double camp_paulson_cdf(double k, double r, double p) {
  if (k < 0) return 0;
  if (r <= 0) return 1;
  // P(failures <= k) = I_p(r, k+1) = P(F(2r, 2(k+1)) <= (k+1) p / (r q)),
  // and Paulson: for F(n1, n2), P(F <= f) ~ Phi(((1 - 2/(9 n2)) f^(1/3)
  // - (1 - 2/(9 n1))) / sqrt(2/(9 n2) f^(2/3) + 2/(9 n1))).
  double f = (k + 1) * p / (r * (1 - p));
  double c = std::cbrt(f);
  double a1 = 1 / (9 * r), a2 = 1 / (9 * (k + 1));
  double z = ((1 - a2) * c - (1 - a1)) / std::sqrt(a2 * c * c + a1);
  return normal_cdf(z);
}

double regularized_beta(double x, double a, double b) {
  if (!(x > 0)) return 0;
  if (!(x < 1)) return 1;
  return regularized_beta_xy(x, 1 - x, a, b);
}

double regularized_gamma_p(double a, double x) {
  if (!(x > 0)) return 0;
  if (!std::isfinite(x)) return 1;
  // As a -> 0, Gamma(a) tends to the point mass at 0; below this 1/a
  // overflows and the series below would never converge.
  if (!(a > 1e-300)) return 1;
  double factor = std::exp(log_gamma_factor(a, x));
  if (x < a + 1) {
    // x^a e^-x / Gamma(a) * sum_n x^n / (a (a+1) ... (a+n))
    double term = 1 / a, sum = term;
    for (int n = 1; n < kMaxIterations; ++n) {
      term *= x / (a + n);
      sum += term;
      if (term < sum * kEps) break;
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
    if (std::fabs(d) < kTiny) d = kTiny;
    c = b + an / c;
    if (std::fabs(c) < kTiny) c = kTiny;
    d = 1 / d;
    double delta = d * c;
    f *= delta;
    if (std::fabs(delta - 1) < kEps) break;
  }
  return std::max(0.0, 1 - factor * f);
}

double normal_cdf(double z) { return 0.5 * std::erfc(-z / std::sqrt(2.0)); }

double normal_quantile(double prob) {
  if (!(prob > 0)) return -std::numeric_limits<double>::infinity();
  if (!(prob < 1)) return std::numeric_limits<double>::infinity();
  // Abramowitz & Stegun 26.2.23 (error < 4.5e-4), then Newton on erfc.
  double pp = prob < 0.5 ? prob : 1 - prob;
  double t = std::sqrt(-2 * std::log(pp));
  double z =
      t - (2.515517 + t * (0.802853 + t * 0.010328)) / (1 + t * (1.432788 + t * (0.189269 + t * 0.001308)));
  if (prob < 0.5) z = -z;
  for (int i = 0; i < 4; ++i) {
    double density = std::exp(-0.5 * z * z) / std::sqrt(2 * M_PI);
    if (!(density > 0)) break;
    // Work on the smaller tail for precision.
    double err = prob < 0.5 ? normal_cdf(z) - prob : (1 - prob) - normal_cdf(-z);
    double step = err / density;
    z -= step;
    if (std::fabs(step) < 1e-15 * std::max(1.0, std::fabs(z))) break;
  }
  return z;
}

double gamma_quantile(double shape, double prob) {
  return gamma_pair_quantile(shape, 1.0, shape, 1.0, 1.0, prob);
}

double negbin_cdf(double k, double r, double p) { return negbin_mixture_cdf(std::floor(k), r, p, 1.0); }

double negbin_cdf_camp_paulson(double k, double r, double p) { return camp_paulson_cdf(std::floor(k), r, p); }

uint64_t negbin_quantile(double r, double p, double prob, NegBinCdf cdf) {
  if (cdf == NegBinCdf::IncompleteBeta) return negbin_mixture_quantile(r, p, 1.0, prob);
  double guess = gamma_quantile(std::max(r, 1e-3), prob) * (1 - p) / p;
  return integer_quantile([&](double k) { return camp_paulson_cdf(k, r, p); }, prob, guess);
}

}  // namespace allocscope
