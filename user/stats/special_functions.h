// The distributions the intervals are built from: incomplete beta and gamma
// functions, the normal, the negative binomial and gamma mixtures, with
// their quantiles. Pure math.
#pragma once

#include <cstdint>

namespace allocscope {

// ---- special functions ---------------------------------------------------

// Regularized incomplete beta I_x(a, b), a, b > 0, 0 <= x <= 1. Continued
// fraction (modified Lentz) with the x^a (1-x)^b / B(a,b) factor computed
// from Stirling-corrected log-gammas. Absolute error ~1e-14 for moderate
// parameters, below 1e-11 up to a, b ~ 1e9 (the unit tests measure it).
double regularized_beta(double x, double a, double b);

// Regularized incomplete gamma P(a, x) = gamma(a, x) / Gamma(a), a > 0.
double regularized_gamma_p(double a, double x);

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
// Smallest integer k >= 0 with P(failures <= k) >= prob: regula falsi on
// the CDF (smooth between the integers) from a gamma guess, then the integer.
uint64_t negbin_quantile(double r, double p, double prob, NegBinCdf cdf = NegBinCdf::IncompleteBeta);

// ---- mixtures --------------------------------------------------------------
// CDF at k of w NegBin(r, p) + (1 - w) NegBin(r + 1, p).
double negbin_mixture_cdf(double k, double r, double p, double w);
// Smallest integer k with that CDF >= prob.
uint64_t negbin_mixture_quantile(double r, double p, double w, double prob);
// P(X <= x) for X ~ Gamma(shape a, scale t), and its density (NaN where only
// an approximation is used); a = 0 is the point mass at 0.
double gamma_cdf(double a, double t, double x);
double gamma_pdf(double a, double t, double x);
// Quantile of w Gamma(a0, t0) + (1 - w) Gamma(a1, t1), a1 > 0.
double gamma_pair_quantile(double a0, double t0, double a1, double t1, double w, double prob);
// Camp-Paulson approximation of P(NegBin(r, p) <= k), for real k.
double camp_paulson_cdf(double k, double r, double p);

}  // namespace allocscope
