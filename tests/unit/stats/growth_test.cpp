// Leak suspects: live growth tested in both halves of a series of interval
// snapshots, simulated through the countdown against known truth.
#include "stats/growth.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <vector>

#include "splitmix.h"
#include "stats/difference.h"
#include "stats/sampling.h"

namespace allocscope {
namespace {

TEST(Growth, NeedsThreePoints) {
  std::vector<LivePoint> two(2);
  EXPECT_DOUBLE_EQ(live_growth(two, 1024, 0.95).p_value, 1);
}

TEST(Growth, ExactModeGrowthIsCertain) {
  std::vector<LivePoint> p(4);
  for (size_t i = 0; i < p.size(); ++i) {
    p[i].seconds = double(i + 1);
    p[i].live.add_exact(i * 10, i * 1000);
    p[i].allocated.add_exact(10, 1000);
  }
  Growth g = live_growth(p, 1, 0.95);
  EXPECT_EQ(g.first, 1u);
  EXPECT_DOUBLE_EQ(g.per_second, 1000);
  EXPECT_DOUBLE_EQ(g.p_value, 0);
  EXPECT_DOUBLE_EQ(g.allocated, 2000);
  // Grew, then shrank back to where it was: not steady.
  p[2].live = p[1].live;
  p[2].live.add_exact(100, 9000);
  p[3].live = p[1].live;
  p[3].live.add_exact(1, 1);
  EXPECT_DOUBLE_EQ(live_growth(p, 1, 0.95).p_value, 1);
}

// A program's three kinds of sites over `intervals` one-second intervals:
// a leak (`leak` blocks of 200 B a second, never freed), churn (20,000
// blocks of 64 B a second, all freed but for up to 50 in flight at each
// snapshot) and a cache (10,000 blocks of 100 B in the first second, kept).
struct Series {
  std::vector<LivePoint> leak, churn, cache;
};

Series simulate(uint64_t rate, int intervals, uint64_t leak, uint64_t seed, const Log2Table& table) {
  Countdown countdown(rate, table, seed);
  Rng rng{seed ^ 0xabc};
  Series s;
  IntervalStats leak_live, churn_live, cache_live;
  struct Held {
    uint64_t size, offset;
  };
  std::vector<Held> in_flight;
  for (int i = 0; i < intervals; ++i) {
    IntervalStats leak_alloc, churn_alloc, cache_alloc;
    for (const Held& h : in_flight) churn_live.remove_sample(h.size, h.offset, rate);
    in_flight.clear();
    uint64_t flying = rng.below(51), churn = 20000;
    uint64_t left[3] = {leak, churn, i == 0 ? 10000u : 0u};
    for (uint64_t total = left[0] + left[1] + left[2]; total > 0; --total) {
      uint64_t r = rng.below(total);
      int k = r < left[0] ? 0 : r < left[0] + left[1] ? 1 : 2;
      --left[k];
      uint64_t size = k == 0 ? 200 : k == 1 ? 64 : 100, offset;
      if (!countdown.sample(size, &offset)) continue;
      IntervalStats& alloc = k == 0 ? leak_alloc : k == 1 ? churn_alloc : cache_alloc;
      IntervalStats& live = k == 0 ? leak_live : k == 1 ? churn_live : cache_live;
      alloc.add_sample(size, offset, rate);
      live.add_sample(size, offset, rate);
      if (k == 1) {  // churn: freed at once, unless among the last `flying` of the interval
        if (left[1] < flying)
          in_flight.push_back({size, offset});
        else
          live.remove_sample(size, offset, rate);
      }
    }
    double t = i + 1;
    s.leak.push_back({t, leak_live, leak_alloc});
    s.churn.push_back({t, churn_live, churn_alloc});
    s.cache.push_back({t, cache_live, cache_alloc});
  }
  return s;
}

struct Tally {
  int trials = 0, leak_found = 0, leak_covered = 0, false_suspects = 0;
};

Tally trials(uint64_t leak, int n, uint64_t seed) {
  Log2Table table = make_log2_table();
  const uint64_t rate = 16 * 1024;
  Rng seeds{seed};
  Tally t;
  for (int i = 0; i < n; ++i) {
    Series s = simulate(rate, 8, leak, seeds.next(), table);
    Growth gl = live_growth(s.leak, rate, 0.95), gc = live_growth(s.churn, rate, 0.95),
           gk = live_growth(s.cache, rate, 0.95);
    std::vector<double> adjusted = holm_adjusted({gl.p_value, gc.p_value, gk.p_value});
    bool leak_called = adjusted[0] < 0.05, others_called = adjusted[1] < 0.05 || adjusted[2] < 0.05;
    double truth = double(leak) * 200;
    t.leak_found += leak > 0 && leak_called;
    t.leak_covered += leak > 0 && gl.interval.lo <= truth && truth <= gl.interval.hi;
    t.false_suspects += others_called || (leak == 0 && leak_called);
  }
  t.trials = n;
  return t;
}

double ceiling(double rate, int n) { return rate + 4.5 * std::sqrt(rate * (1 - rate) / n); }

// 2,000 blocks of 200 B a second: 400 KB/s, about 24 samples a second at
// 16 KiB. Found in nearly every trial, its rate inside the interval; the
// churn and the cache are not suspects beyond the family-wise level.
TEST(GrowthSimulation, LeakAmongChurnAndCache) {
  Tally t = trials(2000, 300, 5);
  std::printf("  [leak 400 KB/s] %d trials: found %.1f %%, rate covered %.1f %%, false suspects %.1f %%\n",
              t.trials, 100.0 * t.leak_found / t.trials, 100.0 * t.leak_covered / t.trials,
              100.0 * t.false_suspects / t.trials);
  EXPECT_GE(double(t.leak_found) / t.trials, 0.95);
  EXPECT_GE(double(t.leak_covered) / t.trials, 0.90);
  EXPECT_LE(double(t.false_suspects) / t.trials, ceiling(0.05, t.trials));
}

TEST(GrowthSimulation, NoLeakNoSuspect) {
  Tally t = trials(0, 300, 6);
  std::printf("  [no leak] %d trials: false suspects %.1f %%\n", t.trials,
              100.0 * t.false_suspects / t.trials);
  EXPECT_LE(double(t.false_suspects) / t.trials, ceiling(0.05, t.trials));
}

}  // namespace
}  // namespace allocscope
