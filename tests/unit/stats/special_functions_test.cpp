// The special functions against values computed independently with mpmath
// at 50 digits (betainc, gammainc, erfinv, and a bisection on the mixture's
// CDF for the quantiles), from ordinary parameters to the extremes the
// intervals meet: shapes near 0, p = 1e-9 with 1e10 failures, tails at
// 1e-12. Deterministic: each check holds or the code is wrong.
#include "stats/special_functions.h"

#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

namespace allocscope {
namespace {

struct Known {
  std::string function;
  std::vector<double> args;
  double value;
};

const Known kKnown[] = {
    {"ibeta", {0.3, 0.5, 0.5}, 0.36901011956554537504},
    {"ibeta", {0.5, 0.001, 0.001}, 0.5},
    {"ibeta", {0.1, 3.7, 50.0}, 0.82840057916979401327},
    {"ibeta", {0.9, 50.0, 3.7}, 0.1715994208302061488},
    {"ibeta", {1e-10, 0.001, 10000.0}, 0.9868480844002922968},
    {"ibeta", {2.4e-07, 250.0, 1000000000.0}, 0.26765132521254336512},
    {"ibeta", {1e-09, 0.3, 2000000000.0}, 0.9779740191909540643},
    {"ibeta", {1e-09, 8.0, 12000000000.0}, 0.91049550357480499698},
    {"gamma_p", {1e-05, 0.001}, 0.99993668652859470645},
    {"gamma_p", {0.5, 0.2}, 0.47291074313446192633},
    {"gamma_p", {1.0, 1.0}, 0.6321205588285576784},
    {"gamma_p", {7.3, 9.0}, 0.76041083417748343448},
    {"gamma_p", {150.0, 140.0}, 0.20954362391860706635},
    {"gamma_p", {100000.0, 100100.0}, 0.62444513070440549542},
    {"normal_quantile", {1e-12}, -7.0344838253011319326},
    {"normal_quantile", {1e-05}, -4.2648907939228246102},
    {"normal_quantile", {0.025}, -1.9599639845400542118},
    {"normal_quantile", {0.3}, -0.52440051270804081597},
    {"normal_quantile", {0.975}, 1.9599639845400538556},
    {"normal_quantile", {0.999999999999}, 7.0344869100478352057},
    {"gamma_quantile", {0.001, 0.99999}, 3.2120674519025937798},
    {"gamma_quantile", {3.0, 0.5}, 2.6740603137235603179},
    {"gamma_quantile", {30.0, 0.975}, 41.648837438586593496},
    {"gamma_quantile", {10000.0, 1e-05}, 9579.2272921651679179},
    {"negbin_mixture_quantile", {1.0, 0.001, 1.0, 0.975}, 3687.0},
    {"negbin_mixture_quantile", {8.0, 0.001, 0.5, 0.025}, 3709.0},
    {"negbin_mixture_quantile", {250.0, 0.0001, 0.5, 0.975}, 2824460.0},
    {"negbin_mixture_quantile", {1.0, 0.5, 0.5, 0.5}, 1.0},
    {"negbin_mixture_quantile", {40.0, 0.01, 0.5, 0.5}, 3976.0},
    {"negbin_mixture_quantile", {3.0, 0.2, 0.0, 0.99999}, 82.0},
};

double evaluate(const Known& k) {
  const auto& a = k.args;
  if (k.function == "ibeta") return regularized_beta(a[0], a[1], a[2]);
  if (k.function == "gamma_p") return regularized_gamma_p(a[0], a[1]);
  if (k.function == "normal_quantile") return normal_quantile(a[0]);
  if (k.function == "gamma_quantile") return gamma_quantile(a[0], a[1]);
  if (k.function == "negbin_mixture_quantile") return double(negbin_mixture_quantile(a[0], a[1], a[2], a[3]));
  ADD_FAILURE() << "unknown function " << k.function;
  return NAN;
}

TEST(SpecialFunctions, MatchIndependentHighPrecisionValues) {
  for (const Known& k : kKnown) {
    double got = evaluate(k);
    std::string what = k.function;
    for (double a : k.args) what += " " + std::to_string(a);
    if (k.function == "negbin_mixture_quantile")
      EXPECT_EQ(got, k.value) << what;
    else
      EXPECT_NEAR(got, k.value, 1e-12 * std::fabs(k.value) + 1e-300) << what;
  }
}

// Identities at parameters too large for the reference: symmetry of the
// incomplete beta, the exponential's closed-form quantile, P(a, x) + Q(a, x).
TEST(SpecialFunctions, HoldTheirIdentitiesAtExtremeParameters) {
  // (Boost's holds to 1e-16 up to 1e11, then drifts: 1.5e-8 at 1e12, where
  // a recording would need a trillion samples.)
  for (double a : {1e6, 1e9, 1e11}) EXPECT_NEAR(regularized_beta(0.5, a, a), 0.5, 1e-10) << a;
  for (double p : {1e-12, 0.3, 1 - 1e-12})
    EXPECT_NEAR(gamma_quantile(1, p), -std::log1p(-p), 1e-12 * -std::log1p(-p)) << p;
  for (double a : {1e6, 9.9e7}) {
    double median = gamma_quantile(a, 0.5);
    EXPECT_NEAR(regularized_gamma_p(a, median), 0.5, 1e-12) << a;
    EXPECT_NEAR(median, a - 1.0 / 3, 1e-3) << a;  // Choi: a - 1/3 + O(1/a)
  }
  // Past Boost's domain, values rather than exceptions.
  EXPECT_EQ(regularized_gamma_p(1e-310, 1), 1);
  EXPECT_EQ(gamma_quantile(0, 0.5), 0);
  // A crafted profile's rate: the quantile is past the integers a double
  // holds exactly, and says so by being at least that.
  EXPECT_GE(negbin_mixture_quantile(3, 1e-23, 0.5, 0.975), uint64_t(9e15));
}

}  // namespace
}  // namespace allocscope
