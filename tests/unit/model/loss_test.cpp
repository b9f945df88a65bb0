// What a recording knows it lost, and how its intervals and titles say so.
#include "model/loss.h"

#include <gtest/gtest.h>

#include "model/estimate.h"
#include "output/render.h"

namespace allocscope {
namespace {

Recording with(uint64_t rate, std::vector<std::pair<std::string, uint64_t>> counters) {
  Recording r;
  r.rate = rate;
  r.counters = std::move(counters);
  return r;
}

StackTotals exact_stack(uint64_t objects, uint64_t bytes) {
  StackTotals t;
  t.alloc_objects = t.live_objects = double(objects);
  t.alloc_bytes = t.live_bytes = double(bytes);
  t.samples = t.live_samples = objects;
  t.alloc_stats.add_exact(objects, bytes);
  t.live_stats.add_exact(objects, bytes);
  return t;
}

TEST(Loss, NothingLostChangesNothing) {
  Recording r = with(1, {{"samples", 10}, {"dropped_ringbuf", 0}});
  Loss l = loss_of(r);
  EXPECT_FALSE(l.any());
  EXPECT_EQ(describe_loss(r, Metric::AllocSpace), "");
  Estimate e = estimate(exact_stack(10, 1000), Metric::AllocSpace, 1, 0.95, l);
  EXPECT_EQ(e.interval.lo, 1000);
  EXPECT_EQ(e.interval.hi, 1000);
}

TEST(Loss, ExactModeThatLostAllocationsIsNotExact) {
  Recording r = with(1, {{"dropped_ringbuf", 2},
                         {"dropped_ringbuf_bytes", 200},
                         {"dropped_exact_full", 1},
                         {"dropped_exact_full_bytes", 100}});
  Loss l = loss_of(r);
  EXPECT_EQ(l.samples, 3u);
  EXPECT_EQ(l.alloc_low_bytes, 300);
  EXPECT_EQ(l.alloc_low_objects, 3);
  // Any stack may be where the lost allocations belonged: [v, v + lost].
  Estimate e = estimate(exact_stack(10, 1000), Metric::AllocSpace, 1, 0.95, l);
  EXPECT_EQ(e.value, 1000);
  EXPECT_EQ(e.interval.lo, 1000);
  EXPECT_EQ(e.interval.hi, 1300);
  std::string d = describe_loss(r, Metric::AllocSpace);
  EXPECT_NE(d.find("3 allocations lost"), std::string::npos) << d;
  EXPECT_NE(d.find("not exact"), std::string::npos) << d;
  EXPECT_NE(describe(r, Metric::AllocSpace).find("not exact"), std::string::npos);
}

TEST(Loss, SampledBoundsCoverTheHeaviestWeights) {
  // A lost sample of S bytes stood for at most S + R bytes and R objects.
  const uint64_t rate = 1000;
  Recording r = with(rate, {{"dropped_ringbuf", 2}, {"dropped_ringbuf_bytes", 50}});
  Loss l = loss_of(r);
  EXPECT_EQ(l.alloc_low_bytes, 50 + 2 * rate);
  EXPECT_EQ(l.alloc_low_objects, 2 * rate);
  EXPECT_EQ(l.high(Metric::AllocSpace), 0);
  EXPECT_NE(describe_loss(r, Metric::AllocSpace).find("2 samples lost"), std::string::npos);
}

TEST(Loss, UnseenFreesAndUntrackedBlocksMoveInuse) {
  Recording sampled = with(1000, {{"dropped_frees", 1},
                                  {"dropped_frees_bytes", 10},
                                  {"dropped_live_map_full", 1},
                                  {"dropped_live_map_full_bytes", 20}});
  Loss s = loss_of(sampled);
  EXPECT_EQ(s.samples, 0u);
  EXPECT_EQ(s.inuse_high_bytes, 10 + 1000);  // a freed sample still counted live
  EXPECT_EQ(s.inuse_low_bytes, 20 + 1000);   // a live sample never counted live
  // Exact mode counts an untracked block allocated and never sees its free.
  Recording exact = with(1, {{"dropped_live_map_full", 1}, {"dropped_live_map_full_bytes", 20}});
  Loss e = loss_of(exact);
  EXPECT_EQ(e.inuse_high_bytes, 20);
  EXPECT_EQ(e.inuse_low_bytes, 0);
  Estimate est = estimate(exact_stack(5, 500), Metric::InuseSpace, 1, 0.95, e);
  EXPECT_EQ(est.interval.lo, 480);
  EXPECT_EQ(est.interval.hi, 500);
}

}  // namespace
}  // namespace allocscope
