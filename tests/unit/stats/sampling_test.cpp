// The countdown draw shared with the BPF program and the Horvitz-Thompson
// weights, checked against exact math and, statistically, against the
// exponential law the estimator's unbiasedness rests on.
#include "stats/sampling.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

namespace allocscope {
namespace {

constexpr long double kTwo64 = 18446744073709551616.0L;

// floor(rate * -ln((x | 1) / 2^64)) in long double (64-bit mantissa, so the
// uniform is exact); near u = 1 through log1p to keep full precision.
long double exact_countdown(uint64_t x, uint64_t rate) {
  uint64_t v = x | 1;
  long double neg_ln_u;
  if (v >> 63)
    neg_ln_u = -std::log1p(-static_cast<long double>(~v + 1) / kTwo64);  // 1 - u = (2^64 - v) / 2^64
  else
    neg_ln_u = -std::log(static_cast<long double>(v) / kTwo64);
  return std::floor(static_cast<long double>(rate) * neg_ln_u);
}

// Error budget of the fixed-point draw, in units of E = -ln(u):
//  - linear interpolation of log2(1 + t) with step 1/1024 sits below the
//    curve by at most h^2/8 * max|f''| = 2^-20 / 8 / ln 2 = 1.72e-7 (log2
//    units), i.e. 1.19e-7 in E;
//  - dropping 8 fraction bits before the multiply by rate: below 2^-24 = 6e-8;
//  - the Q24 ln 2 constant is off by 4e-8 relative;
//  - the final floor and the reference's floor: 1 unit each.
// So |draw - exact| <= rate * 2e-7 + exact * 1e-7 + 2.
long double draw_tolerance(long double exact, uint64_t rate) {
  return static_cast<long double>(rate) * 2e-7L + exact * 1e-7L + 2;
}

// Upper quantile of chi-square(dof) at normal deviate z (Wilson-Hilferty),
// accurate to well under 1 % at dof ~ 50.
double chi_square_critical(double dof, double z) {
  double a = 2.0 / (9.0 * dof);
  return dof * std::pow(1 - a + z * std::sqrt(a), 3);
}

// z for a one-sided tail of 1e-6: every statistical bound here uses it (or
// 5-6 sigma), so with any seed a correct implementation fails about once in
// a million runs while real biases of a fraction of a percent still show.
constexpr double kZ1e6 = 4.753;

TEST(Log2Table, MatchesLog2WithinOneQ32Unit) {
  Log2Table t = make_log2_table();
  ASSERT_EQ(t.size(), 1025u);
  EXPECT_EQ(t[0], 0u);
  EXPECT_EQ(t[1024], 1ULL << 32);  // log2(2) = 1.0 in Q32
  for (size_t i = 0; i < t.size(); ++i) {
    long double want = std::log2(1.0L + static_cast<long double>(i) / 1024) * 4294967296.0L;
    EXPECT_LE(std::fabs(static_cast<long double>(t[i]) - want), 1.0L) << "entry " << i;
    if (i > 0) {
      EXPECT_GT(t[i], t[i - 1]) << "entry " << i;  // log2 is strictly increasing
    }
  }
}

TEST(Normalize, MovesTopBitTo63AndReportsItsIndex) {
  for (uint32_t k = 0; k < 64; ++k) {
    as_u32 msb = 99;
    EXPECT_EQ(as_normalize(1ULL << k, &msb), 1ULL << 63) << k;
    EXPECT_EQ(msb, k);
    as_u64 x = (1ULL << k) | (k > 0 ? 1 : 0);
    EXPECT_EQ(as_normalize(x, &msb), x << (63 - k)) << k;  // lower bits shift along
    EXPECT_EQ(msb, k);
  }
}

TEST(DrawCountdown, MatchesExactFormulaForRandomInputs) {
  Log2Table table = make_log2_table();
  std::mt19937_64 rng(20240601);
  for (uint64_t rate : {1ULL << 10, 512ULL * 1024, 1ULL << 30, AS_MAX_RATE}) {
    long double worst_relative = 0;
    for (int i = 0; i < 200000; ++i) {
      uint64_t x = rng();
      // Also cover small x (large countdowns), which uniform x almost never hits.
      if (i % 4 == 1) x >>= (x & 63);
      long double exact = exact_countdown(x, rate);
      long double got = static_cast<long double>(draw_countdown(x, rate, table));
      ASSERT_LE(std::fabs(got - exact), draw_tolerance(exact, rate))
          << "x=" << x << " rate=" << rate << " exact=" << static_cast<double>(exact);
      // For E >= 1 the rate-proportional terms are at most 2e-7 of the value;
      // the two floors are whole units and stay out of the relative error.
      if (exact >= rate)
        worst_relative = std::max(worst_relative, std::max(0.0L, std::fabs(got - exact) - 2) / exact);
    }
    EXPECT_LT(worst_relative, 1e-6L) << "rate " << rate;
  }
}

TEST(DrawCountdown, Endpoints) {
  Log2Table table = make_log2_table();
  for (uint64_t rate : {1ULL << 10, 512ULL * 1024, AS_MAX_RATE}) {
    // x = 0 is drawn as 1: u = 2^-64, E = 64 ln 2, the largest countdown.
    long double e_max = exact_countdown(0, rate);
    EXPECT_NEAR(static_cast<long double>(draw_countdown(0, rate, table)), e_max, draw_tolerance(e_max, rate));
    EXPECT_EQ(draw_countdown(0, rate, table), draw_countdown(1, rate, table));
    // u = 1 - 2^-64: E = 5e-20, so the countdown is 0 for any allowed rate.
    EXPECT_EQ(draw_countdown(UINT64_MAX, rate, table), 0u);
    // u = 1/2 + 2^-64: E = ln 2.
    long double half = std::floor(static_cast<long double>(rate) * std::log(2.0L));
    EXPECT_NEAR(static_cast<long double>(draw_countdown(1ULL << 63, rate, table)), half,
                draw_tolerance(half, rate));
  }
}

// The draw must be non-increasing in x, across table knots too, or its
// distribution would not be that of a transformed uniform.
TEST(DrawCountdown, NonIncreasingInX) {
  Log2Table table = make_log2_table();
  std::mt19937_64 rng(7);
  std::vector<uint64_t> xs;
  for (int i = 0; i < 100000; ++i) xs.push_back(rng());
  for (uint64_t knot = 0; knot <= 1024; ++knot) {  // mantissas around each table entry, top bit 63
    uint64_t x = (1ULL << 63) | (knot << 53);
    for (uint64_t d : {0ULL, 1ULL, 2ULL}) xs.push_back(x + d), xs.push_back(x - d);
  }
  std::sort(xs.begin(), xs.end());
  for (uint64_t rate : {512ULL * 1024, AS_MAX_RATE}) {
    uint64_t prev = UINT64_MAX;
    for (uint64_t x : xs) {
      uint64_t c = draw_countdown(x, rate, table);
      ASSERT_LE(c, prev) << "x=" << x << " rate=" << rate;
      prev = c;
    }
  }
}

// The countdown C = floor(R * E) is geometric: P(C >= k) = exp(-k / R). That
// is exactly what makes an allocation of S bytes sampled with 1 - exp(-S / R).
class CountdownDistribution : public ::testing::Test {
 protected:
  static constexpr uint64_t kRate = 512 * 1024;
  static constexpr size_t kN = 1000000;

  static void SetUpTestSuite() {
    Log2Table table = make_log2_table();
    std::mt19937_64 rng(424242);
    draws_ = new std::vector<uint64_t>(kN);
    for (uint64_t& d : *draws_) d = draw_countdown(rng(), kRate, table);
    std::sort(draws_->begin(), draws_->end());
  }
  static void TearDownTestSuite() {
    delete draws_;
    draws_ = nullptr;
  }

  // P(C >= k).
  static double survival(double k) { return std::exp(-k / double(kRate)); }

  static std::vector<uint64_t>* draws_;
};
std::vector<uint64_t>* CountdownDistribution::draws_ = nullptr;

TEST_F(CountdownDistribution, KolmogorovSmirnov) {
  const std::vector<uint64_t>& v = *draws_;
  // Exact discrete CDF: P(C <= k) = 1 - S(k + 1), P(C < k) = 1 - S(k). The sup
  // of |F_n - F| is reached just at or just before a sample point.
  double d = 0;
  for (size_t i = 0; i < v.size(); ++i) {
    double k = double(v[i]);
    d = std::max(d, double(i + 1) / kN - (1 - survival(k + 1)));
    d = std::max(d, (1 - survival(k)) - double(i) / kN);
  }
  // P(sqrt(n) D > t) ~ 2 exp(-2 t^2) = 1e-6 at t = 2.69 (conservative for a
  // discrete law). A 1 % error in the rate gives sqrt(n) D ~ 3.7.
  EXPECT_LT(d * std::sqrt(double(kN)), 2.69);
}

TEST_F(CountdownDistribution, MeanMatchesRate) {
  long double sum = 0;
  for (uint64_t c : *draws_) sum += c;
  double mean = double(sum / kN);
  // E[C] = sum_{k>=1} exp(-k/R) = 1 / expm1(1/R) (= R - 1/2 + ...); sd(C) ~ R.
  double want = 1 / std::expm1(1.0 / kRate);
  EXPECT_NEAR(mean, want, 6 * double(kRate) / std::sqrt(double(kN)));
}

TEST_F(CountdownDistribution, ChiSquareOverEquiprobableBins) {
  constexpr int kBins = 50;
  // Integer edges near the exponential's 2 % quantiles; the expected mass of
  // each bin is exact for the discrete law.
  std::vector<uint64_t> edges;
  for (int j = 0; j < kBins; ++j)
    edges.push_back(uint64_t(std::ceil(-double(kRate) * std::log1p(-double(j) / kBins))));
  std::vector<size_t> counts(kBins, 0);
  for (uint64_t c : *draws_) ++counts[std::upper_bound(edges.begin(), edges.end(), c) - edges.begin() - 1];
  double chi2 = 0;
  for (int j = 0; j < kBins; ++j) {
    double p = survival(double(edges[j])) - (j + 1 < kBins ? survival(double(edges[j + 1])) : 0);
    double expected = p * kN;
    ASSERT_GT(expected, 19000);  // near-equiprobable: about 20000 each
    chi2 += (counts[j] - expected) * (counts[j] - expected) / expected;
  }
  EXPECT_LT(chi2, chi_square_critical(kBins - 1, kZ1e6));  // about 111.6
}

TEST_F(CountdownDistribution, SampledFractionMatchesOneMinusExp) {
  for (uint64_t size : {1ULL << 10, 64ULL << 10, 512ULL << 10, 4ULL << 20}) {
    size_t below = std::lower_bound(draws_->begin(), draws_->end(), size) - draws_->begin();
    double p = 1 - survival(double(size));
    double se = std::sqrt(p * (1 - p) / kN);
    EXPECT_NEAR(double(below) / kN, p, 6 * se) << "size " << size;
  }
}

TEST(SampleProbability, ExactModeAndLimits) {
  for (uint64_t rate : {0ULL, 1ULL}) {
    EXPECT_EQ(sample_probability(1, rate), 1.0);
    EXPECT_EQ(sample_probability(12345, rate), 1.0);
    Weight w = unbias(12345, rate);
    EXPECT_EQ(w.objects, 1.0);
    EXPECT_EQ(w.bytes, 12345.0);
  }
  // S >> R: sampled for sure, counted once.
  EXPECT_EQ(sample_probability(100 * kDefaultRate, kDefaultRate), 1.0);
  Weight big = unbias(100 * kDefaultRate, kDefaultRate);
  EXPECT_EQ(big.objects, 1.0);
  EXPECT_EQ(big.bytes, 100.0 * kDefaultRate);
  // Nothing to sample in an empty allocation; the weight stays finite.
  EXPECT_EQ(sample_probability(0, kDefaultRate), 0.0);
  Weight zero = unbias(0, kDefaultRate);
  EXPECT_EQ(zero.objects, 0.0);
  EXPECT_EQ(zero.bytes, 0.0);
}

TEST(SampleProbability, FollowsOneMinusExpAndWeightIsSizeOverP) {
  for (uint64_t rate : {uint64_t(4096), uint64_t(64) << 10, kDefaultRate}) {
    for (uint64_t size : {uint64_t(1), uint64_t(16), rate / 3, rate, 3 * rate, 20 * rate}) {
      long double want = 1 - std::exp(-static_cast<long double>(size) / rate);
      double p = sample_probability(size, rate);
      EXPECT_NEAR(p, double(want), double(want) * 1e-12) << size << " @ " << rate;
      Weight w = unbias(size, rate);
      EXPECT_NEAR(w.objects, double(1 / want), double(1 / want) * 1e-12);
      EXPECT_NEAR(w.bytes, double(size / want), double(size / want) * 1e-12);
    }
  }
  // Tiny S/R: p ~ S/R, so one sample stands for about R bytes.
  Weight w = unbias(1, kDefaultRate);
  EXPECT_NEAR(w.bytes, double(kDefaultRate) + 0.5, 1e-3);
}

// Per-class tallies of a simulated allocation stream.
struct Tally {
  double true_objects = 0, true_bytes = 0;
  double est_objects = 0, est_bytes = 0;
  double var_objects = 0, var_bytes = 0;  // Horvitz-Thompson variances, from the truth
  double expected_samples = 0, var_samples = 0;
  double samples = 0;

  void add(uint64_t size, uint64_t rate, bool sampled) {
    double p = sample_probability(size, rate);
    double s = double(size);
    true_objects += 1;
    true_bytes += s;
    var_objects += (1 - p) / p;
    var_bytes += s * s * (1 - p) / p;
    expected_samples += p;
    var_samples += p * (1 - p);
    if (sampled) {
      Weight w = unbias(size, rate);
      est_objects += w.objects;
      est_bytes += w.bytes;
      samples += 1;
    }
  }
};

TEST(Countdown, UnbiasedOnMixedAllocationStream) {
  constexpr uint64_t kRate = 64 << 10;
  constexpr int kClasses = 18;  // log2 size classes [16, 32) .. [2 MiB, 4 MiB]
  Log2Table table = make_log2_table();
  Countdown countdown(kRate, table, 0x5eed);
  std::mt19937_64 rng(99);
  std::uniform_real_distribution<double> log_size(4.0, 22.0);  // 16 B .. 4 MiB, log-uniform
  Tally all;
  std::vector<Tally> classes(kClasses);
  for (int i = 0; i < 1000000; ++i) {
    uint64_t size = uint64_t(std::exp2(log_size(rng)));
    uint64_t offset = UINT64_MAX;
    bool sampled = countdown.sample(size, &offset);
    if (sampled) {
      ASSERT_LT(offset, size);  // the sampled byte lies inside the allocation
    }
    int cls = std::min(kClasses - 1, int(std::log2(double(size))) - 4);
    all.add(size, kRate, sampled);
    classes[cls].add(size, kRate, sampled);
  }
  EXPECT_NEAR(all.est_bytes, all.true_bytes, 5 * std::sqrt(all.var_bytes));
  EXPECT_NEAR(all.est_objects, all.true_objects, 5 * std::sqrt(all.var_objects));
  EXPECT_NEAR(all.samples, all.expected_samples, 5 * std::sqrt(all.var_samples));
  // 18 classes x 3 checks: 6 sigma keeps the family-wise false alarm rate tiny.
  for (int c = 0; c < kClasses; ++c) {
    const Tally& t = classes[c];
    ASSERT_GT(t.true_objects, 10000) << "class " << c;
    EXPECT_NEAR(t.est_bytes, t.true_bytes, 6 * std::sqrt(t.var_bytes)) << "class " << c;
    EXPECT_NEAR(t.est_objects, t.true_objects, 6 * std::sqrt(t.var_objects)) << "class " << c;
    EXPECT_NEAR(t.samples, t.expected_samples, 6 * std::sqrt(t.var_samples)) << "class " << c;
  }
}

// All allocations of one size S = R: the sampled fraction is 1 - 1/e and the
// sampled byte's offset has the truncated geometric law P(k) ~ q^k (1 - q).
TEST(Countdown, FixedSizeStreamFractionAndOffsets) {
  constexpr uint64_t kRate = 4096, kSize = 4096;
  constexpr int kN = 400000;
  Log2Table table = make_log2_table();
  Countdown countdown(kRate, table, 1234);
  double samples = 0, offset_sum = 0;
  for (int i = 0; i < kN; ++i) {
    uint64_t offset;
    if (countdown.sample(kSize, &offset)) {
      ASSERT_LT(offset, kSize);
      samples += 1;
      offset_sum += double(offset);
    }
  }
  double p = sample_probability(kSize, kRate);
  EXPECT_NEAR(samples, kN * p, 6 * std::sqrt(kN * p * (1 - p)));
  // Exact moments of the offset given a sample.
  long double q = std::exp(-1.0L / kRate), mass = 0, m1 = 0, m2 = 0, w = 1;
  for (uint64_t k = 0; k < kSize; ++k, w *= q) {
    mass += w;
    m1 += w * k;
    m2 += w * k * k;
  }
  double mean = double(m1 / mass), var = double(m2 / mass - (m1 / mass) * (m1 / mass));
  EXPECT_NEAR(offset_sum / samples, mean, 6 * std::sqrt(var / samples));
}

TEST(Countdown, ExactModeSamplesEverythingAtOffsetZero) {
  Log2Table table = make_log2_table();
  for (uint64_t rate : {0ULL, 1ULL}) {
    Countdown countdown(rate, table, 77);
    for (uint64_t size : {0ULL, 1ULL, 16ULL, 1ULL << 20}) {
      uint64_t offset = 123;
      EXPECT_TRUE(countdown.sample(size, &offset)) << size;
      EXPECT_EQ(offset, 0u);
    }
  }
}

TEST(Countdown, EmptyAllocationsAreNeverSampled) {
  Log2Table table = make_log2_table();
  Countdown countdown(16, table, 5);  // tiny rate: nearly every byte is a sample point
  for (int i = 0; i < 10000; ++i) {
    uint64_t offset;
    ASSERT_FALSE(countdown.sample(0, &offset));
  }
}

}  // namespace
}  // namespace allocscope
