// The timeline's points: sparse changes that rebuild every stack's figures
// at each point kept, through merges (halving) and --interval's resets; and
// the page drawn from them.
#include "model/timeline.h"

#include <gtest/gtest.h>

#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "output/flamegraph.h"
#include "output/timeline.h"
#include "splitmix.h"

namespace allocscope {
namespace {

struct Truth {
  std::vector<double> live;  // by stack
};

// Random allocations and frees over `sites` stacks in exact mode; a point
// offered every 10 ms, the truth noted at each. Returns the truth by time.
std::map<uint64_t, Truth> simulate(Timeline& tl, uint64_t seed, int ticks, uint32_t sites,
                                   int reset_every = 0) {
  Rng rng{seed};
  Profile p(1, 1024, 1 << 20);
  std::vector<std::pair<uint32_t, uint64_t>> live;
  std::map<uint64_t, Truth> truth;
  uint64_t addr = 0x1000;
  for (int tick = 0; tick < ticks; ++tick) {
    for (int k = 0; k < 20; ++k) {
      if (!live.empty() && rng.uniform() < 0.45) {
        size_t i = rng.below(live.size());
        p.on_free(1, live[i].second);
        live[i] = live.back();
        live.pop_back();
      } else {
        uint32_t site = uint32_t(rng.below(sites));
        std::vector<uint64_t> ips = {0x400000 + site * 16};
        uint64_t size = 1 + rng.below(4000);
        p.on_alloc({.pid = 1, .fn = 0, .addr = addr += 0x1000, .size = size, .ips = ips});
        live.push_back({site, addr});
      }
    }
    uint64_t t = uint64_t(tick) * 10;
    if (reset_every && tick % reset_every == reset_every - 1) {
      tl.observe(t, p, true);
      p.reset_alloc_totals();
    } else {
      tl.observe(t, p);
    }
    Truth now;
    for (const StackRecord& s : p.stacks()) now.live.push_back(s.totals.live_bytes);
    truth[t] = now;
  }
  return truth;
}

void expect_rebuilt(const Timeline& tl, const std::map<uint64_t, Truth>& truth) {
  std::vector<double> live;
  uint64_t last_t = 0;
  for (size_t i = 0; i < tl.points().size(); ++i) {
    const TimelinePoint& point = tl.points()[i];
    if (i) {
      EXPECT_GT(point.t_ms, last_t);
    }
    last_t = point.t_ms;
    for (auto [stack, v] : point.live) {
      if (live.size() <= stack) live.resize(stack + 1, 0);
      live[stack] = v;
    }
    const Truth& want = truth.at(point.t_ms);
    double total = 0;
    for (size_t s = 0; s < want.live.size(); ++s) {
      EXPECT_NEAR(s < live.size() ? live[s] : 0, want.live[s], 1e-6 * want.live[s] + 1) << "t " << point.t_ms;
      total += want.live[s];
    }
    EXPECT_NEAR(point.live_total, total, 1e-6 * total + 1);
  }
}

TEST(Timeline, EveryPointRebuildsTheLiveBytesOfEveryStack) {
  Timeline tl;
  auto truth = simulate(tl, 1, 300, 12);
  EXPECT_EQ(tl.period_ms(), Timeline::kFirstPeriodMs);
  EXPECT_EQ(tl.points().size(), 30u);  // one every 100 ms of 3 s
  expect_rebuilt(tl, truth);
}

TEST(Timeline, HalvesPastItsCapacityAndStillRebuilds) {
  Timeline tl(16);
  auto truth = simulate(tl, 2, 2000, 40);
  EXPECT_LE(tl.points().size(), 16u);
  EXPECT_GE(tl.points().size(), 8u);
  EXPECT_GT(tl.period_ms(), Timeline::kFirstPeriodMs);
  EXPECT_EQ(tl.points().front().t_ms, 0u);
  expect_rebuilt(tl, truth);
}

TEST(Timeline, ForcedPointsBetweenTicksRebuildToo) {
  Timeline tl(24);
  auto truth = simulate(tl, 4, 600, 12, 7);
  expect_rebuilt(tl, truth);
}

TEST(Timeline, EntriesBoundHalvesToo) {
  Timeline tl(1000, 200);
  auto truth = simulate(tl, 3, 500, 50);
  EXPECT_LE(tl.entries(), 200u + 2 * 50);  // down to a couple of points at worst
  expect_rebuilt(tl, truth);
}

// --interval sets the profile's allocation totals to zero: the timeline's
// allocated bytes go on growing.
TEST(Timeline, AllocatedBytesCarryOverIntervalResets) {
  Timeline tl;
  Profile p(1, 16, 1024);
  std::vector<uint64_t> ips = {0x401000};
  p.on_alloc({.pid = 1, .fn = 0, .addr = 0x10, .size = 100, .ips = ips});
  tl.observe(0, p);
  tl.observe(100, p, true);
  p.reset_alloc_totals();
  p.on_alloc({.pid = 1, .fn = 0, .addr = 0x20, .size = 30, .ips = ips});
  tl.observe(200, p);
  p.on_free(1, 0x10);
  tl.observe(300, p);
  ASSERT_EQ(tl.points().size(), 4u);
  ASSERT_EQ(tl.points()[2].allocated.size(), 1u);
  EXPECT_EQ(tl.points()[2].allocated[0].second, 130);
  EXPECT_TRUE(tl.points()[3].allocated.empty());  // nothing allocated since
  EXPECT_EQ(tl.points()[3].live_total, 30);
}

// The data the page's script reads.
nlohmann::json page_data_of(const std::string& html) {
  std::string open = "<script type=\"application/json\" id=\"timeline-data\">";
  size_t from = html.find(open) + open.size(), to = html.find("</script>", from);
  return nlohmann::json::parse(html.substr(from, to - from), nullptr, false);
}

// The page: the chart drawn (a path per charted stack and one for the rest),
// the data the script reads, and names that cannot end the script element.
TEST(Timeline, PageHoldsTheChartAndItsData) {
  Timeline tl;
  Profile p(1, 16, 1024);
  std::vector<TimelineStack> stacks;
  for (uint32_t s = 0; s < 12; ++s) {
    std::vector<uint64_t> ips = {0x401000 + s};
    p.on_alloc({.pid = 1, .fn = 0, .addr = 0x10 + s, .size = 100 * (s + 1), .ips = ips});
    stacks.push_back({{"prog (1)", "main", "site</script>" + std::to_string(s), "malloc"}, {}});
    tl.observe(s * 100, p);
  }
  std::string html = render_timeline(tl, stacks, {});
  size_t areas = 0;
  for (size_t at = 0; (at = html.find("class=\"area\"", at)) != std::string::npos; ++at) ++areas;
  EXPECT_EQ(areas, 9u);  // 8 stacks and the rest
  EXPECT_EQ(html.find("site</script>"), std::string::npos);
  auto data = page_data_of(html);
  ASSERT_FALSE(data.is_discarded());
  EXPECT_EQ(data["t"].size(), 12u);
  EXPECT_EQ(data["stacks"].size(), 12u);
  EXPECT_EQ(data["total"].back(), 100 * 12 * 13 / 2);
  EXPECT_EQ(data["frames"][data["stacks"][11][2].get<int>()], "site</script>11");
  // Its flame graph has the SVG flame graph's colours, frame by frame.
  ASSERT_EQ(data["fills"].size(), data["frames"].size());
  for (size_t f = 0; f < data["frames"].size(); ++f) {
    std::string name = data["frames"][f];
    FrameKind kind = name == "prog (1)" ? FrameKind::Process : default_kind(name, 1);
    EXPECT_EQ(data["fills"][f], frame_fill(kind, name)) << name;
  }
  EXPECT_NE(frame_fill(FrameKind::Allocator, "malloc"), frame_fill(FrameKind::Program, "malloc"));
  // The top stacks: the largest first (the 12th, 1200 bytes).
  EXPECT_EQ(timeline_top_stacks(tl, 3), (std::vector<uint32_t>{11, 10, 9}));
}

// A frame is coloured by the kind its stack gives it (the file holding its
// code, as the flame graph has it): a library's named function is the
// library's, though its name alone reads as the program's.
TEST(Timeline, AFramesColourIsTheKindItsStackGivesIt) {
  Timeline tl;
  Profile p(1, 16, 1024);
  std::vector<uint64_t> ips = {0x401000};
  p.on_alloc({.pid = 1, .fn = 0, .addr = 0x10, .size = 100, .ips = ips});
  tl.observe(0, p);
  std::vector<TimelineStack> stacks = {
      {{"prog (1)", "main", "sqlite3_step", "malloc"},
       {FrameKind::Process, FrameKind::Program, FrameKind::Library, FrameKind::Allocator}}};
  auto data = page_data_of(render_timeline(tl, stacks, {}));
  ASSERT_FALSE(data.is_discarded());
  ASSERT_EQ(data["frames"][2], "sqlite3_step");
  EXPECT_EQ(data["fills"][2], frame_fill(FrameKind::Library, "sqlite3_step"));
  ASSERT_EQ(default_kind("sqlite3_step", 2), FrameKind::Program);
  EXPECT_NE(data["fills"][2], frame_fill(FrameKind::Program, "sqlite3_step"));
}

}  // namespace
}  // namespace allocscope
