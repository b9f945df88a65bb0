// report --leaks over the agent's cumulative /heap profiles gives what it
// gives over record --interval's profiles of the same run.
#include "output/leaks.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>

namespace allocscope {
namespace {

constexpr uint64_t kRate = 16 * 1024;

// A program with one site: `leaked` 200-byte samples kept and `churned`
// 64-byte samples freed by the end of each second, for `seconds` seconds.
// Interval profiles hold each second's allocations; cumulative ones (the
// agent's) everything since the start, with one start and growing durations.
std::vector<Recording> series(bool cumulative, int seconds) {
  std::vector<Recording> out;
  IntervalStats live, allocated_total;
  for (int i = 0; i < seconds; ++i) {
    IntervalStats allocated;
    for (int k = 0; k < 30 + i % 3; ++k) {
      allocated.add_sample(200, uint64_t(k * 7 % 200), kRate);
      live.add_sample(200, uint64_t(k * 7 % 200), kRate);
    }
    for (int k = 0; k < 50; ++k) allocated.add_sample(64, uint64_t(k % 64), kRate);
    allocated_total.merge(allocated);
    Recording r;
    r.rate = kRate;
    r.time_nanos = cumulative ? 1000000000 : 1000000000 + int64_t(i) * 1000000000;
    r.duration_nanos = cumulative ? int64_t(i + 1) * 1000000000 : 1000000000;
    r.functions = {{"malloc", "malloc", ""}, {"site_leak", "site_leak", ""}};
    r.locations = {{-1, 0x10, {{0, 0}}}, {-1, 0x20, {{1, 0}}}};
    StackTotals t;
    t.alloc_stats = cumulative ? allocated_total : allocated;
    t.live_stats = live;
    t.alloc_bytes = t.alloc_stats.bytes_estimate();
    t.live_bytes = live.bytes_estimate();
    t.samples = t.alloc_stats.samples;
    t.live_samples = live.samples;
    r.samples.push_back(RecSample{{0, 1}, 1, "prog", t, {}});
    out.push_back(std::move(r));
  }
  return out;
}

TEST(Leaks, AgentCumulativeProfilesReadLikeIntervalProfiles) {
  RenderOptions o;
  LeakReport interval = find_leaks(series(false, 8), o);
  auto shuffled = series(true, 8);  // file order need not be time order
  std::shuffle(shuffled.begin(), shuffled.end(), std::mt19937(7));
  LeakReport cumulative = find_leaks(shuffled, o);
  ASSERT_EQ(interval.rows.size(), 1u);
  ASSERT_EQ(cumulative.rows.size(), 1u);
  const LeakRow &a = interval.rows[0], &b = cumulative.rows[0];
  EXPECT_TRUE(a.suspect);
  EXPECT_EQ(a.suspect, b.suspect);
  EXPECT_DOUBLE_EQ(a.growth.per_second, b.growth.per_second);
  EXPECT_NEAR(a.growth.interval.lo, b.growth.interval.lo, 1e-6 * std::fabs(a.growth.interval.lo));
  EXPECT_NEAR(a.growth.interval.hi, b.growth.interval.hi, 1e-6 * std::fabs(a.growth.interval.hi));
  EXPECT_NEAR(a.kept_share, b.kept_share, 1e-9);
  EXPECT_NEAR(a.live_share, b.live_share, 1e-9);
  EXPECT_DOUBLE_EQ(interval.span_seconds, cumulative.span_seconds);
}

}  // namespace
}  // namespace allocscope
