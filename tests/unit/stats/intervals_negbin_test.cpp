// The negative binomial behind the intervals: its special functions against
// exact values, its quantiles against the .NET design document's example and table.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <utility>

#include "intervals_confidence.h"
#include "stats/intervals.h"

namespace allocscope {
namespace {

// ---- exact references -------------------------------------------------------

// P(NegBin(r, p) <= k) by summing the pmf in long double, from the first
// term that matters (pmf(j+1) = pmf(j) (j + r) / (j + 1) q).
long double negbin_cdf_by_summation(uint64_t k, uint64_t r, long double p) {
  long double q = 1 - p;
  long double mean = r * q / p, sd = std::sqrt(r * q) / p;
  uint64_t j0 = mean > 60 * sd ? static_cast<uint64_t>(mean - 60 * sd) : 0;
  if (j0 > k) return 0;
  long double log_pmf = std::lgamma(static_cast<long double>(j0 + r)) -
                        std::lgamma(static_cast<long double>(r)) -
                        std::lgamma(static_cast<long double>(j0 + 1)) + r * std::log(p) + j0 * std::log1p(-p);
  long double pmf = std::exp(log_pmf), sum = 0;
  for (uint64_t j = j0; j <= k; ++j) {
    sum += pmf;
    pmf *= static_cast<long double>(j + r) / static_cast<long double>(j + 1) * q;
  }
  return sum;
}

// I_x(a, b) for integer a, b as a binomial tail: P(Binomial(a + b - 1, x) >= a).
long double beta_by_binomial(long double x, int a, int b) {
  int n = a + b - 1;
  long double sum = 0;
  for (int j = a; j <= n; ++j)
    sum += std::exp(std::lgamma(n + 1.0L) - std::lgamma(j + 1.0L) - std::lgamma(n - j + 1.0L) +
                    j * std::log(x) + (n - j) * std::log1p(-x));
  return sum;
}

// ---- special functions -------------------------------------------------------

TEST(NegBinCdf, MatchesSummedPmf) {
  double worst = 0;
  for (uint64_t r : {1, 2, 3, 5, 8, 20, 50})
    for (double p : {0.5, 0.1, 0.01, 1e-3})
      for (uint64_t k : {0, 1, 5, 20, 100, 1000, 5000, 20000, 100000}) {
        double got = negbin_cdf(double(k), double(r), p);
        long double want = negbin_cdf_by_summation(k, r, p);
        double err = std::fabs(got - static_cast<double>(want));
        worst = std::max(worst, err);
        EXPECT_LE(err, 1e-12) << "r=" << r << " p=" << p << " k=" << k;
        if (want > 1e-280 && want < 0.5) {  // the lower tail keeps relative precision
          EXPECT_LE(err / static_cast<double>(want), 1e-10) << "r=" << r << " p=" << p << " k=" << k;
        }
      }
  std::printf("  NB CDF vs summed pmf, small parameters: max abs error %.2e\n", worst);
}

TEST(NegBinCdf, MatchesSummedPmfForLargeParameters) {
  // The Stirling-corrected factor must not lose precision when lgamma(a + b)
  // is ~1e6 and the result is of order 1.
  double worst = 0;
  struct Case {
    uint64_t r;
    double p;
  };
  for (Case c : {Case{1000, 0.01}, Case{10000, 0.1}, Case{300, 1.0 / 4096}, Case{30, 1.0 / 65536}}) {
    double mean = c.r * (1 - c.p) / c.p, sd = std::sqrt(c.r * (1 - c.p)) / c.p;
    for (double z : {-4.0, -2.0, -1.0, 0.0, 1.0, 2.0, 4.0}) {
      auto k = static_cast<uint64_t>(std::max(0.0, mean + z * sd));
      double got = negbin_cdf(double(k), double(c.r), c.p);
      double want = static_cast<double>(negbin_cdf_by_summation(k, c.r, c.p));
      worst = std::max(worst, std::fabs(got - want));
      EXPECT_NEAR(got, want, 1e-11) << "r=" << c.r << " p=" << c.p << " k=" << k;
    }
  }
  std::printf("  NB CDF vs summed pmf, large parameters: max abs error %.2e\n", worst);
}

TEST(NegBinCdf, IncompleteBetaKnownValues) {
  for (double x : {1e-9, 1e-4, 0.1, 0.3, 0.5, 0.77, 0.999}) {
    EXPECT_NEAR(regularized_beta(x, 7, 1), std::pow(x, 7), 1e-15) << x;
    EXPECT_NEAR(regularized_beta(x, 1, 7), -std::expm1(7 * std::log1p(-x)), 1e-15) << x;
    EXPECT_NEAR(regularized_beta(x, 2, 2), 3 * x * x - 2 * x * x * x, 1e-15) << x;
    EXPECT_NEAR(regularized_beta(x, 0.5, 0.5), 2 / M_PI * std::asin(std::sqrt(x)), 1e-14) << x;
    for (auto [a, b] : {std::pair{10, 20}, std::pair{3, 200}, std::pair{150, 40}, std::pair{400, 400}})
      EXPECT_NEAR(regularized_beta(x, a, b), static_cast<double>(beta_by_binomial(x, a, b)), 1e-13)
          << "x=" << x << " a=" << a << " b=" << b;
  }
  EXPECT_NEAR(regularized_beta(0.4, 2, 3), 0.5248, 1e-15);  // P(Bin(4, 0.4) >= 2)
  for (double a : {0.5, 3.0, 1000.0, 1e6}) EXPECT_NEAR(regularized_beta(0.5, a, a), 0.5, 1e-13) << a;
  // ~sqrt(a) continued-fraction terms at a = b = 1e9 accumulate rounding.
  EXPECT_NEAR(regularized_beta(0.5, 1e9, 1e9), 0.5, 1e-10);
  EXPECT_EQ(regularized_beta(0, 2, 3), 0);
  EXPECT_EQ(regularized_beta(1, 2, 3), 1);
  // Symmetry and the recurrence I_x(a + 1, b) = I_x(a, b) - x^a y^b / (a B(a, b)).
  for (double a : {0.7, 4.5, 33.0, 2500.0})
    for (double b : {1.5, 12.0, 900.0, 4e5})
      for (double x : {0.001, 0.2, 0.6}) {
        EXPECT_NEAR(regularized_beta(x, a, b) + regularized_beta(1 - x, b, a), 1, 1e-13);
        double step = std::exp(a * std::log(x) + b * std::log1p(-x) + std::lgamma(a + b) - std::lgamma(a) -
                               std::lgamma(b)) /
                      a;
        EXPECT_NEAR(regularized_beta(x, a + 1, b), regularized_beta(x, a, b) - step, 1e-12)
            << "a=" << a << " b=" << b << " x=" << x;
      }
}

TEST(NegBinCdf, IncompleteGammaAndQuantiles) {
  for (double x : {1e-6, 0.3, 2.5, 17.0, 60.0}) {
    EXPECT_NEAR(regularized_gamma_p(1, x), -std::expm1(-x), 1e-15) << x;
    EXPECT_NEAR(regularized_gamma_p(0.5, x), std::erf(std::sqrt(x)), 1e-15) << x;
  }
  // Integer shape n: P(n, x) = P(Poisson(x) >= n).
  for (int n : {5, 50, 500})
    for (double f : {0.7, 0.95, 1.0, 1.05, 1.3}) {
      long double x = n * f, term = std::exp(-x), below = 0;
      for (int k = 0; k < n; ++k) {
        below += term;
        term *= x / (k + 1);
      }
      EXPECT_NEAR(regularized_gamma_p(n, static_cast<double>(x)), static_cast<double>(1 - below), 1e-13)
          << "n=" << n << " x=" << static_cast<double>(x);
    }
  for (double a : {0.3, 1.0, 3.0, 47.5, 1e4, 1e7})
    for (double prob : {1e-6, 0.025, 0.5, 0.975}) {
      double x = gamma_quantile(a, prob);
      EXPECT_NEAR(regularized_gamma_p(a, x), prob, 1e-11 * std::max(1.0, std::sqrt(a))) << a << " " << prob;
    }
  EXPECT_NEAR(gamma_quantile(1, 0.975), std::log(40.0), 1e-13);
  // A shape so small that 1/a overflows (a crafted profile's): the point
  // mass at 0, at once, not ten million terms of an infinite series.
  EXPECT_EQ(regularized_gamma_p(1e-310, 1e-160), 1);
  for (double prob : {1e-12, 1e-4, 0.025, 0.3, 0.5, 0.9, 0.975, 1 - 1e-9})
    EXPECT_NEAR(normal_cdf(normal_quantile(prob)), prob, 1e-14 * std::max(1.0, prob / (1 - prob))) << prob;
  EXPECT_NEAR(normal_quantile(0.975), 1.959963984540054, 1e-14);
}

TEST(NegBinCdf, CampPaulsonWithinTheDocumentsStatedError) {
  // ".NET: for p=0.00001 this approximation was within ~0.01 of the true CDF
  // for any number of failures at s=1, within ~0.001 at s=5, and continues to
  // get more accurate as the sample count increases."
  const double p = 1e-5;
  double previous = 1;
  for (int s : {1, 5, 20, 100}) {
    double worst = 0;
    double mean = s / p, sd = std::sqrt(double(s)) / p;
    for (double k = 0; k < mean + 12 * sd; k += std::max(1.0, sd / 200))
      worst = std::max(worst, std::fabs(negbin_cdf_camp_paulson(k, s, p) - negbin_cdf(k, s, p)));
    std::printf("  Camp-Paulson at s=%-3d p=1e-5: max |CDF error| %.5f\n", s, worst);
    if (s == 1) {
      EXPECT_LT(worst, 0.015);
    }
    if (s == 5) {
      EXPECT_LT(worst, 0.0015);
    }
    EXPECT_LT(worst, previous);
    previous = worst;
  }
}

// ---- the .NET design document ---------------------------------------------

TEST(IntervalWorkedExample, EightSamplesAtR102400) {
  // "if we select C=0.95, observed 8 samples and u=10,908 then we'd use
  // binary search to find CDF(353666, 8, 1/102400) ~= 0.025 and
  // CDF(1476870, 8, 1/102400) ~= 0.975. Our interval estimate ... would be
  // [353666 + 10908, 1476870 + 10908]."
  const double p = 1.0 / 102400, u = 10908;
  uint64_t lo = negbin_quantile(8, p, 0.025), hi = negbin_quantile(8, p, 0.975);
  uint64_t cp_lo = negbin_quantile(8, p, 0.025, NegBinCdf::CampPaulson);
  uint64_t cp_hi = negbin_quantile(8, p, 0.975, NegBinCdf::CampPaulson);
  Interval plain = bytes_interval(8, u, 102400, kC, IntervalMethod::PlainNegBin);
  Interval midp = bytes_interval(8, u, 102400, kC);
  Interval cons = bytes_interval(8, u, 102400, kC, IntervalMethod::Conservative);
  std::printf("  document:          [%.0f; %.0f]\n", 364574.0, 1487778.0);
  std::printf("  incomplete beta:   [%.0f; %.0f]  (p = 1/R)\n", u + lo, u + hi);
  std::printf("  Camp-Paulson:      [%.0f; %.0f]  (p = 1/R)\n", u + cp_lo, u + cp_hi);
  std::printf(
      "  bytes_interval:    plain [%.0f; %.0f]  mid-p [%.0f; %.0f]  conservative [%.0f; %.0f]"
      "  (p = 1 - exp(-1/R))\n",
      plain.lo, plain.hi, midp.lo, midp.hi, cons.lo, cons.hi);
  // The document reports the last k with CDF(k) <= target, the search here
  // the first with CDF(k) >= target: one failure apart.
  EXPECT_EQ(lo, 353666u + 1);
  EXPECT_EQ(hi, 1476870u + 1);
  EXPECT_LE(negbin_cdf(353666, 8, p), 0.025);
  EXPECT_GT(negbin_cdf(353667, 8, p), 0.025);
  EXPECT_LE(negbin_cdf(1476870, 8, p), 0.975);
  EXPECT_GT(negbin_cdf(1476871, 8, p), 0.975);
  // Camp-Paulson at s = 8 is within its stated ~0.001 of the true CDF there.
  EXPECT_NEAR(negbin_cdf(double(cp_lo), 8, p), 0.025, 0.001);
  EXPECT_NEAR(negbin_cdf(double(cp_hi), 8, p), 0.975, 0.001);
  // p = 1 - exp(-1/R) instead of 1/R moves the bounds by ~5e-6 relative.
  EXPECT_NEAR(plain.lo, 364574, 5);
  EXPECT_NEAR(plain.hi, 1487778, 12);
  EXPECT_GT(midp.lo, plain.lo);
  EXPECT_GT(midp.hi, plain.hi);
  EXPECT_LT(midp.hi, cons.hi);
}

TEST(IntervalQuantileTable, MatchesTheDocumentsTable) {
  struct Row {
    int s;
    uint64_t lo, hi;
  };
  // "table of calculated Negative Binomial failed trials for the 0.025 and
  // 0.975 thresholds of the CDF", p = 1/102400.
  const Row table[] = {
      {1, 2591, 377738},
      {2, 24800, 570531},
      {3, 63349, 739802},
      {4, 111599, 897761},
      {5, 166241, 1048730},
      {6, 225469, 1194827},
      {7, 288185, 1337279},
      {8, 353666, 1476870},
      {9, 421407, 1614137},
      {10, 491039, 1749469},
      {20, 1250954, 3038270},
      {30, 2072639, 4264804},
      {40, 2926207, 5459335},
      {50, 3800118, 6633475},
      {100, 8331581, 12342053},
      {200, 17739679, 23413825},
      {300, 27341465, 34291862},
      {400, 37043463, 45069676},
      {500, 46809487, 55783459},
      {1000, 96149867, 108842093},
      {2000, 195919830, 213870137},
      {3000, 296301551, 318286418},
      {4000, 396999923, 422386047},
      {5000, 497900649, 526283322},
      {10000, 1004017229, 1044156743},
  };
  const double p = 1.0 / 102400;
  int exact_rows = 0;
  for (const Row& r : table) {
    uint64_t lo = negbin_quantile(r.s, p, 0.025), hi = negbin_quantile(r.s, p, 0.975);
    uint64_t cp_lo = negbin_quantile(r.s, p, 0.025, NegBinCdf::CampPaulson);
    uint64_t cp_hi = negbin_quantile(r.s, p, 0.975, NegBinCdf::CampPaulson);
    std::printf("  s=%-5d doc %10lu %10lu  beta %10lu %10lu  Camp-Paulson %10lu %10lu\n", r.s,
                static_cast<unsigned long>(r.lo), static_cast<unsigned long>(r.hi),
                static_cast<unsigned long>(lo), static_cast<unsigned long>(hi),
                static_cast<unsigned long>(cp_lo), static_cast<unsigned long>(cp_hi));
    // Same convention as the worked example: the table's k is the last with
    // CDF(k) <= target, so it equals the first with CDF >= target minus one.
    EXPECT_EQ(lo, r.lo + 1) << r.s;
    EXPECT_EQ(hi, r.hi + 1) << r.s;
    exact_rows += lo == r.lo + 1 && hi == r.hi + 1;
  }
  std::printf("  %d of %zu rows reproduced to the failure\n", exact_rows, std::size(table));
}

}  // namespace
}  // namespace allocscope
