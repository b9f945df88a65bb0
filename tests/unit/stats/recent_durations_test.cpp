// The last N durations and their quantiles (how long processes were held).
#include "stats/recent_durations.h"

#include <gtest/gtest.h>

namespace allocscope {
namespace {

// Nearest-rank quantiles of what the ring holds; the count and the largest
// of all ever added.
TEST(RecentDurations, QuantilesByRankOfTheLastOnesAndTheLargestEver) {
  RecentDurations d(100);
  EXPECT_EQ(d.quantile(0.5), 0u);
  for (uint64_t ns = 1; ns <= 100; ++ns) d.add(ns);
  EXPECT_EQ(d.quantile(0.5), 50u);
  EXPECT_EQ(d.quantile(0.99), 99u);
  EXPECT_EQ(d.quantile(1), 100u);
  EXPECT_EQ(d.quantile(0), 1u);
  d.add(1000000);  // replaces the oldest (1)
  EXPECT_EQ(d.quantile(1), 1000000u);
  EXPECT_EQ(d.quantile(0), 2u);
  for (int i = 0; i < 100; ++i) d.add(7);  // the whole ring again
  EXPECT_EQ(d.quantile(0.99), 7u);
  EXPECT_EQ(d.max(), 1000000u) << "the longest of all, not of the ring";
  EXPECT_EQ(d.count(), 201u);
}

}  // namespace
}  // namespace allocscope
