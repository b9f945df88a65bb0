#include "stats/special_functions.h"

#include <algorithm>
#include <boost/math/special_functions/beta.hpp>
#include <boost/math/special_functions/erf.hpp>
#include <boost/math/special_functions/gamma.hpp>
#include <boost/math/tools/toms748_solve.hpp>
#include <cmath>
#include <limits>

namespace allocscope {
namespace {

namespace bm = boost::math;

// Every error reported as a value, never thrown: a crafted profile reaches
// parameters (weights near 1e23, shapes near 0) where Boost's default policy
// would throw. The incomplete beta keeps Boost's default of computing in
// long double: in double it is off by 1e-8 at a = b = 1e9 (exact to 1e-16
// so up to 1e11). The gamma functions are as exact in double, at a third
// of the cost.
using Policy = bm::policies::policy<bm::policies::domain_error<bm::policies::ignore_error>,
                                    bm::policies::pole_error<bm::policies::ignore_error>,
                                    bm::policies::overflow_error<bm::policies::ignore_error>,
                                    bm::policies::evaluation_error<bm::policies::ignore_error>>;
using DoublePolicy = bm::policies::normalise<Policy, bm::policies::promote_double<false>>::type;

constexpr std::uintmax_t kSolverSteps = 200;

// A count from a double: past uint64's range (a crafted profile's weights
// reach 1e23) the cast would be undefined, so it saturates.
uint64_t saturated_count(double v) {
  constexpr double kPast = 18446744073709551616.0;  // 2^64
  if (!(v >= 0)) return 0;
  return v >= kPast ? std::numeric_limits<uint64_t>::max() : static_cast<uint64_t>(v);
}

// Smallest integer k >= 0 with cdf(k) >= prob, for a cdf that is
// non-decreasing and defined (smooth) between the integers too, given a
// guess of the answer. A bracket around the guess (additive steps: a good
// guess is within a few of them), then TOMS 748 on the real line until the
// bracket is one wide.
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
  if (b - a > 1) {
    std::uintmax_t steps = kSolverSteps;
    auto f = [&](double x) { return cdf(x) - prob; };
    auto one_wide = [](double lo, double hi) { return hi - lo <= 1; };
    std::tie(a, b) = bm::tools::toms748_solve(f, a, b, fa, fb, one_wide, steps, Policy());
  }
  // cdf(a) <= prob <= cdf(b) and b - a <= 1: ceil(a), or the next one.
  double k = std::ceil(a);
  if (cdf(k) < prob) k += 1;
  return saturated_count(k);
}

// The x > 0 with cdf(x) = prob for a continuous increasing cdf, from a
// guess: Boost's bracketing by factors, then TOMS 748 to 48 bits.
template <class Cdf>
double continuous_quantile(const Cdf& cdf, double prob, double guess) {
  guess = guess > 0 && std::isfinite(guess) ? guess : 1.0;
  std::uintmax_t steps = kSolverSteps;
  auto [lo, hi] = bm::tools::bracket_and_solve_root([&](double x) { return cdf(x) - prob; }, guess, 2.0, true,
                                                    bm::tools::eps_tolerance<double>(48), steps, Policy());
  return lo + (hi - lo) / 2;
}

// Wilson-Hilferty approximation of the Gamma(a, 1) quantile: the solver's guess.
double wilson_hilferty(double a, double prob) {
  double z = normal_quantile(prob);
  double c = 1.0 / (9 * a);
  double t = 1 - c + z * std::sqrt(c);
  return t > 0 ? a * t * t * t : 0.0;
}

}  // namespace

double regularized_beta(double x, double a, double b) {
  if (!(x > 0)) return 0;
  if (!(x < 1)) return 1;
  return bm::ibeta(a, b, x, Policy());
}

double regularized_gamma_p(double a, double x) {
  if (!(x > 0)) return 0;
  if (!std::isfinite(x)) return 1;
  // As a -> 0, Gamma(a) tends to the point mass at 0 (Boost's domain ends
  // where 1/a overflows).
  if (!(a > 1e-300)) return 1;
  return bm::gamma_p(a, x, DoublePolicy());
}

double regularized_gamma_q(double a, double x) {
  if (!(x > 0)) return 1;
  if (!std::isfinite(x)) return 0;
  if (!(a > 1e-300)) return 0;
  return bm::gamma_q(a, x, DoublePolicy());
}

double normal_cdf(double z) { return 0.5 * std::erfc(-z / std::sqrt(2.0)); }

double normal_quantile(double prob) {
  if (!(prob > 0)) return -std::numeric_limits<double>::infinity();
  if (!(prob < 1)) return std::numeric_limits<double>::infinity();
  return -std::sqrt(2.0) * bm::erfc_inv(2 * prob, DoublePolicy());
}

double gamma_quantile(double shape, double prob) {
  if (!(shape > 0) || !(prob > 0)) return 0;
  if (!(prob < 1)) return std::numeric_limits<double>::infinity();
  return bm::gamma_p_inv(shape, prob, DoublePolicy());
}

// CDF at k of the mixture w NegBin(r, p) + (1 - w) NegBin(r + 1, p), from
// I_p(r + 1, k + 1) = I_p(r, k + 1) - p^r q^(k+1) / (r B(r, k + 1)), the
// last term the incomplete beta's derivative times p q / r.
double negbin_mixture_cdf(double k, double r, double p, double w) {
  if (k < 0) return 0;
  if (r <= 0)  // NegBin(0) is the point mass at 0; NegBin(1) is geometric
    return w + (1 - w) * -std::expm1((k + 1) * std::log1p(-p));
  if (!(p < 1)) return 1;
  double c0 = regularized_beta(p, r, k + 1);
  if (w >= 1) return c0;
  double step = bm::ibeta_derivative(r, k + 1, p, Policy()) * p * (1 - p) / r;
  return c0 - (1 - w) * step;
}

// P(X <= x) for X ~ Gamma(shape a, scale t); a = 0 is the point mass at 0.
double gamma_cdf(double a, double t, double x) {
  if (x < 0) return 0;
  if (a <= 0) return 1;
  return regularized_gamma_p(a, x / t);
}

// Quantile of w Gamma(a0, t0) + (1 - w) Gamma(a1, t1), a1 > 0.
double gamma_pair_quantile(double a0, double t0, double a1, double t1, double w, double prob) {
  if (a0 <= 0 && w >= 1) return 0;
  if (a0 <= 0 && prob <= w) return 0;
  if (w >= 1) return t0 * gamma_quantile(a0, prob);
  if (w <= 0) return t1 * gamma_quantile(a1, prob);
  auto cdf = [&](double x) { return w * gamma_cdf(a0, t0, x) + (1 - w) * gamma_cdf(a1, t1, x); };
  double guess = t1 * wilson_hilferty(a1, prob);
  if (!(guess > 0)) guess = std::max(a1 * t1, 1e-300);
  return continuous_quantile(cdf, prob, guess);
}

uint64_t negbin_mixture_quantile(double r, double p, double w, double prob) {
  // For small p, failures * p / (1 - p) is close to Gamma(r) (the geometric
  // tends to the exponential): between the two gamma quantiles is the
  // starting guess (solving the gamma mixture first cost as much as the rest).
  double guess = (w * gamma_quantile(r, prob) + (1 - w) * gamma_quantile(r + 1, prob)) * (1 - p) / p;
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

double negbin_cdf(double k, double r, double p) { return negbin_mixture_cdf(std::floor(k), r, p, 1.0); }

double negbin_cdf_camp_paulson(double k, double r, double p) { return camp_paulson_cdf(std::floor(k), r, p); }

uint64_t negbin_quantile(double r, double p, double prob, NegBinCdf cdf) {
  if (cdf == NegBinCdf::IncompleteBeta) return negbin_mixture_quantile(r, p, 1.0, prob);
  double guess = gamma_quantile(std::max(r, 1e-3), prob) * (1 - p) / p;
  return integer_quantile([&](double k) { return camp_paulson_cdf(k, r, p); }, prob, guess);
}

}  // namespace allocscope
