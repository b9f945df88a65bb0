// Significance of a change between two recordings: the conditional test and
// Holm's correction, and by simulation through the countdown the BPF program
// runs, their error rates against known truth.
#include "stats/difference.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <vector>

#include "splitmix.h"
#include "stats/sampling.h"

namespace allocscope {
namespace {

TEST(Difference, BinomialTwoSided) {
  EXPECT_DOUBLE_EQ(binomial_two_sided(0, 0, 0.5), 1);
  EXPECT_DOUBLE_EQ(binomial_two_sided(5, 5, 0.5), 1);
  EXPECT_NEAR(binomial_two_sided(0, 10, 0.5), 2 * std::pow(0.5, 10), 1e-12);
  EXPECT_NEAR(binomial_two_sided(10, 0, 0.5), 2 * std::pow(0.5, 10), 1e-12);
  // 9 of 10 where 0.9 was expected: no evidence at all.
  EXPECT_DOUBLE_EQ(binomial_two_sided(9, 1, 0.9), 1);
  // P(X >= 3) for Bin(3, 0.2) = 0.008, doubled.
  EXPECT_NEAR(binomial_two_sided(3, 0, 0.2), 2 * 0.008, 1e-12);
}

// Tails far below 1e-16 are computed as themselves, not as 1 minus the
// rest (which rounds to 0): 60 of 60 samples on one side at even odds is
// 2 x 2^-60.
TEST(Difference, TinyPValuesAreNotRoundedToZero) {
  EXPECT_NEAR(binomial_two_sided(60, 0, 0.5), 2 * std::ldexp(1.0, -60), 1e-12 * std::ldexp(1.0, -60));
  EXPECT_NEAR(binomial_two_sided(0, 60, 0.5), 2 * std::ldexp(1.0, -60), 1e-12 * std::ldexp(1.0, -60));
}

TEST(Difference, HolmStepsDown) {
  std::vector<double> adjusted = holm_adjusted({0.01, 0.04, 0.03, 0.005});
  // Sorted: 0.005*4 = 0.02, 0.01*3 = 0.03, 0.03*2 = 0.06, 0.04*1 = 0.04 -> 0.06 (monotone).
  ASSERT_EQ(adjusted.size(), 4u);
  EXPECT_NEAR(adjusted[0], 0.03, 1e-12);
  EXPECT_NEAR(adjusted[1], 0.06, 1e-12);
  EXPECT_NEAR(adjusted[2], 0.06, 1e-12);
  EXPECT_NEAR(adjusted[3], 0.02, 1e-12);
  EXPECT_DOUBLE_EQ(holm_adjusted({0.9, 0.8})[0], 1);
}

TEST(Difference, ExactSidesAreCertain) {
  IntervalStats a, b;
  a.add_exact(10, 1000);
  b.add_exact(10, 1000);
  EXPECT_DOUBLE_EQ(compare({&a, 1, 1}, {&b, 1, 1}, DiffMetric::Bytes, 0.95).p_value, 1);
  b.add_exact(1, 8);
  Difference d = compare({&a, 1, 1}, {&b, 1, 1}, DiffMetric::Bytes, 0.95);
  EXPECT_DOUBLE_EQ(d.p_value, 0);
  EXPECT_DOUBLE_EQ(d.change, 8);
  EXPECT_DOUBLE_EQ(d.interval.lo, 8);
  EXPECT_DOUBLE_EQ(d.interval.hi, 8);
}

// ---- by simulation ------------------------------------------------------------

struct Site {
  uint64_t size, count;
};

// A program's allocation sites; site k's allocations are interleaved with
// the others' as a real program's are.
std::vector<Site> program() {
  return {{32, 20000},  {48, 5000},  {64, 900},   {100, 200},   {256, 3000},   {1024, 400},
          {4096, 120},  {8192, 30},  {24, 40000}, {65536, 12},  {200000, 5},   {700000, 3},
          {3000, 2000}, {16, 70000}, {512, 800},  {2000000, 2}, {20000000, 1}, {40, 1},
          {72, 10},     {96, 100},   {128, 1000}, {160, 10000}, {1 << 20, 4},  {300, 150}};
}

// One recording of `sites` (site `extra_site` with `extra` more allocations)
// at `rate`: each site's accumulator.
std::vector<IntervalStats> record(const std::vector<Site>& sites, uint64_t rate, uint64_t seed,
                                  const Log2Table& table, size_t extra_site = 0, uint64_t extra = 0) {
  std::vector<IntervalStats> stats(sites.size());
  std::vector<uint64_t> left(sites.size());
  uint64_t total = 0;
  for (size_t k = 0; k < sites.size(); ++k) total += left[k] = sites[k].count + (k == extra_site ? extra : 0);
  Countdown countdown(rate, table, seed);
  Rng pick{seed ^ 0x5eed};
  for (; total > 0; --total) {  // a random interleaving: draw a site by its allocations left
    uint64_t r = pick.next() % total;
    size_t k = 0;
    while (r >= left[k]) r -= left[k++];
    --left[k];
    uint64_t offset;
    if (countdown.sample(sites[k].size, &offset)) stats[k].add_sample(sites[k].size, offset, rate);
  }
  return stats;
}

struct Rates {
  int trials = 0, tests = 0, false_positive = 0, family_wise = 0, detected = 0, covered = 0;
};

// `trials` pairs of recordings of `sites` at base_rate and now_rate; the new
// one has `extra` more allocations at site 0. Counts the sites called changed
// at 95 % confidence (Holm over all sites) and the intervals that cover the
// true change.
Rates trials(uint64_t base_rate, uint64_t now_rate, uint64_t extra, int n, uint64_t seed) {
  Log2Table table = make_log2_table();
  std::vector<Site> sites = program();
  Rates r;
  Rng seeds{seed};
  for (int t = 0; t < n; ++t) {
    std::vector<IntervalStats> base = record(sites, base_rate, seeds.next(), table);
    std::vector<IntervalStats> now = record(sites, now_rate, seeds.next(), table, 0, extra);
    std::vector<double> p;
    for (size_t k = 0; k < sites.size(); ++k) {
      Difference d = compare({&base[k], base_rate, 1}, {&now[k], now_rate, 1}, DiffMetric::Bytes, 0.95);
      double truth = k == 0 ? double(extra * sites[0].size) : 0;
      r.covered += d.interval.lo <= truth && truth <= d.interval.hi;
      p.push_back(d.p_value);
      r.false_positive += k != 0 && d.p_value < 0.05;
    }
    std::vector<double> adjusted = holm_adjusted(p);
    bool any_null_called = false;
    for (size_t k = 1; k < sites.size(); ++k) any_null_called |= adjusted[k] < 0.05;
    r.family_wise += any_null_called || (extra == 0 && adjusted[0] < 0.05);
    r.detected += extra > 0 && adjusted[0] < 0.05;
    r.tests += int(sites.size()) - 1;
  }
  r.trials = n;
  return r;
}

// A binomial proportion's 4.5-sigma band above `rate`: room for noise that
// a correct test never exceeds by chance in practice.
double ceiling(double rate, int n) { return rate + 4.5 * std::sqrt(rate * (1 - rate) / n); }

void print(const char* name, const Rates& r) {
  std::printf(
      "  [%s] %d trials: unadjusted false positives %.2f %%, family-wise %.2f %%, detected %.1f %%, "
      "interval coverage %.1f %%\n",
      name, r.trials, 100.0 * r.false_positive / r.tests, 100.0 * r.family_wise / r.trials,
      100.0 * r.detected / r.trials, 100.0 * r.covered / (r.trials * 24.0));
}

TEST(DifferenceSimulation, SameProgramSameRate) {
  Rates r = trials(64 * 1024, 64 * 1024, 0, 400, 11);
  print("same rate", r);
  EXPECT_LE(double(r.false_positive) / r.tests, ceiling(0.05, r.tests));
  EXPECT_LE(double(r.family_wise) / r.trials, ceiling(0.05, r.trials));
  EXPECT_GE(double(r.covered) / (r.trials * 24), 0.93);
}

TEST(DifferenceSimulation, SameProgramDifferentRates) {
  Rates r = trials(16 * 1024, 128 * 1024, 0, 400, 22);
  print("16 KiB vs 128 KiB", r);
  EXPECT_LE(double(r.false_positive) / r.tests, ceiling(0.05, r.tests));
  EXPECT_LE(double(r.family_wise) / r.trials, ceiling(0.05, r.trials));
  EXPECT_GE(double(r.covered) / (r.trials * 24), 0.93);
}

// 100,000 more allocations of 32 bytes (3.2 MB, +500 % at that site,
// about 49 expected samples more than its 10 at 64 KiB): found nearly always, and no
// other site called changed beyond the family-wise level.
TEST(DifferenceSimulation, AddedAllocationsAreFound) {
  Rates r = trials(64 * 1024, 64 * 1024, 100000, 300, 33);
  print("+3.2 MB at one site", r);
  EXPECT_GE(double(r.detected) / r.trials, 0.95);
  EXPECT_LE(double(r.family_wise) / r.trials, ceiling(0.05, r.trials));
}

}  // namespace
}  // namespace allocscope
