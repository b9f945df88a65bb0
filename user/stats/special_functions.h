// The distributions the intervals are built from: the negative binomial
// and gamma mixtures of the intervals, with their quantiles, on Boost.Math's
// incomplete beta and gamma functions, their inverses and its root finders.
// Pure math.
#pragma once

#include <cstdint>

namespace allocscope {

// ---- special functions (Boost.Math's, errors returned as values) ----------

// Regularized incomplete beta I_x(a, b), a, b > 0, 0 <= x <= 1.
double regularized_beta(double x, double a, double b);

// Regularized incomplete gamma P(a, x) = gamma(a, x) / Gamma(a), a > 0, and
// its complement Q(a, x) = 1 - P(a, x), computed as itself (exact in the tail).
double regularized_gamma_p(double a, double x);
double regularized_gamma_q(double a, double x);

// Standard normal CDF and its inverse.
double normal_cdf(double z);
double normal_quantile(double prob);

// Quantile of Gamma(shape, scale 1): the x with P(shape, x) = prob.
double gamma_quantile(double shape, double prob);

// ---- negative binomial ---------------------------------------------------
// Failures before the r-th success of Bernoulli(p) trials.

// P(failures <= k) = I_p(r, k + 1). r = 0 is the point mass at 0.
double negbin_cdf(double k, double r, double p);
// Camp-Paulson normal approximation of the same CDF (Paulson's cube-root
// approximation of the F distribution the CDF is a tail of).
double negbin_cdf_camp_paulson(double k, double r, double p);

enum class NegBinCdf { IncompleteBeta, CampPaulson };
// Smallest integer k >= 0 with P(failures <= k) >= prob: TOMS 748 on the
// CDF (smooth between the integers) from a gamma guess, then the integer.
uint64_t negbin_quantile(double r, double p, double prob, NegBinCdf cdf = NegBinCdf::IncompleteBeta);

// ---- mixtures --------------------------------------------------------------
// CDF at k of w NegBin(r, p) + (1 - w) NegBin(r + 1, p).
double negbin_mixture_cdf(double k, double r, double p, double w);
// Smallest integer k with that CDF >= prob.
uint64_t negbin_mixture_quantile(double r, double p, double w, double prob);
// P(X <= x) for X ~ Gamma(shape a, scale t); a = 0 is the point mass at 0.
double gamma_cdf(double a, double t, double x);
// Quantile of w Gamma(a0, t0) + (1 - w) Gamma(a1, t1), a1 > 0.
double gamma_pair_quantile(double a0, double t0, double a1, double t1, double w, double prob);
// Camp-Paulson approximation of P(NegBin(r, p) <= k), for real k.
double camp_paulson_cdf(double k, double r, double p);

}  // namespace allocscope
