// RingFrees: the frees of the processes' rings put among the kernel's
// events in the order they happened, as a sink would have had them from
// the kernel (each after its allocation, before the next at its address).
#include "record/events/ring_frees.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <optional>
#include <random>
#include <vector>

#include "allocscope.h"

namespace allocscope {
namespace {

Event event(uint32_t kind, uint32_t tgid, uint64_t ts, uint64_t addr) {
  if (kind == AS_EV_ALLOC) {
    AllocEvent a;
    a.tgid = tgid;
    a.ts_ns = ts;
    a.addr = addr;
    return a;
  }
  if (kind == AS_EV_FREE) return FreeEvent{.tgid = tgid, .tid = 0, .ts_ns = ts, .addr = addr};
  ProcessEvent p;
  p.e.kind = kind;
  p.e.tgid = tgid;
  p.e.ts_ns = ts;
  return p;
}

struct Seen {
  uint32_t kind, tgid;
  uint64_t ts, addr;
  bool operator==(const Seen&) const = default;
};

Seen seen_of(const Event& e) {
  if (const auto* a = std::get_if<AllocEvent>(&e)) return {AS_EV_ALLOC, a->tgid, a->ts_ns, a->addr};
  if (const auto* f = std::get_if<FreeEvent>(&e)) return {AS_EV_FREE, f->tgid, f->ts_ns, f->addr};
  const auto& p = std::get<ProcessEvent>(e).e;
  return {p.kind, p.tgid, p.ts_ns, 0};
}

// What the sink is given, in order.
struct Sink {
  std::vector<Seen> seen;
  RingFrees::Emit emit() {
    return [this](Event e) { seen.push_back(seen_of(e)); };
  }
  void take(const Event& e) { seen.push_back(seen_of(e)); }
};

TEST(RingFrees, AFreeGoesBeforeTheNextAllocationAtItsAddress) {
  RingFrees f;
  Sink sink;
  f.add(7, 7, 0x1000, 150, sink.emit());  // read before the pass
  f.pass_begins(1000);
  auto a = event(AS_EV_ALLOC, 7, 100, 0x1000);
  ASSERT_TRUE(f.before(a, sink.emit()));
  sink.take(a);
  auto again = event(AS_EV_ALLOC, 7, 200, 0x1000);
  ASSERT_TRUE(f.before(again, sink.emit()));
  sink.take(again);
  ASSERT_EQ(sink.seen.size(), 3u);
  EXPECT_EQ(sink.seen[0].kind, uint32_t(AS_EV_ALLOC));
  EXPECT_EQ(sink.seen[1].kind, uint32_t(AS_EV_FREE));
  EXPECT_EQ(sink.seen[1].ts, 150u);
  EXPECT_EQ(sink.seen[2].ts, 200u);
  EXPECT_EQ(f.counts().read, 1u);
  EXPECT_EQ(f.counts().pending, 0u);
}

TEST(RingFrees, AnEventLaterThanThePassIsKeptForTheNext) {
  RingFrees f;
  Sink sink;
  f.pass_begins(1000);
  auto late = event(AS_EV_ALLOC, 7, 1001, 0x1000);
  EXPECT_FALSE(f.before(late, sink.emit()));
  EXPECT_TRUE(sink.seen.empty());
  EXPECT_EQ(f.counts().kept, 1u);
  f.pass_ends(false, sink.emit());
  f.add(7, 7, 0x2000, 1000, sink.emit());  // written before the kept event: goes before it
  f.pass_begins(2000);
  std::optional<Event> kept = f.take_kept();
  ASSERT_TRUE(kept.has_value());
  EXPECT_EQ(seen_of(*kept), seen_of(late));
  EXPECT_FALSE(f.take_kept().has_value()) << "handed over once";
  ASSERT_TRUE(f.before(*kept, sink.emit()));
  ASSERT_EQ(sink.seen.size(), 1u);
  EXPECT_EQ(sink.seen[0].addr, 0x2000u);
}

TEST(RingFrees, AnExitFollowsItsOwnFreesOnly) {
  RingFrees f;
  Sink sink;
  f.add(7, 7, 0x1000, 100, sink.emit());
  f.add(8, 8, 0x2000, 110, sink.emit());  // another process's: its allocation may come later
  f.add(7, 7, 0x3000, 300, sink.emit());  // after the exit's time: not this program's
  f.pass_begins(1000);
  ASSERT_TRUE(f.before(event(AS_EV_EXIT, 7, 200, 0), sink.emit()));
  ASSERT_EQ(sink.seen.size(), 1u);
  EXPECT_EQ(sink.seen[0].addr, 0x1000u);
  EXPECT_EQ(f.counts().pending, 2u);
}

TEST(RingFrees, ACompletePassHandsOnWhatWasReadBeforeItInTimeOrder) {
  RingFrees f;
  Sink sink;
  f.add(7, 7, 0x2000, 120, sink.emit());
  f.add(8, 8, 0x1000, 110, sink.emit());
  f.pass_begins(1000);
  f.pass_ends(false, sink.emit());
  EXPECT_TRUE(sink.seen.empty()) << "a pass stopped early may not have read their allocations";
  f.pass_begins(2000);
  f.pass_ends(true, sink.emit());
  ASSERT_EQ(sink.seen.size(), 2u);
  EXPECT_EQ(sink.seen[0].ts, 110u);
  EXPECT_EQ(sink.seen[1].ts, 120u);
}

TEST(RingFrees, BeyondItsCapacityTheEarliestGoesOnCounted) {
  RingFrees f(2);
  Sink sink;
  for (uint64_t ts : {30, 10, 20}) f.add(7, 7, ts, ts, sink.emit());
  ASSERT_EQ(sink.seen.size(), 1u);
  EXPECT_EQ(sink.seen[0].ts, 10u);
  EXPECT_EQ(f.counts().early, 1u);
  EXPECT_EQ(f.counts().pending, 2u);
  f.flush(sink.emit());
  EXPECT_EQ(sink.seen.size(), 3u);
}

// A simulated recording: two processes allocate and free a few addresses
// over and over (each reused at once), their allocations' events in the
// kernel's ring buffer (its time taken a little before its place there),
// their frees in their rings; passes at random moments, each reading what
// was written by then and consuming while more is written. Every free the
// sink gets must find its own allocation live, every allocation its
// address free, and what is live at the end must be the truth.
TEST(RingFrees, ARecordingSeesEveryFreeInItsPlace) {
  std::mt19937_64 rng(12345);
  struct Written {
    uint64_t ts;
    Event data;
  };
  std::vector<Written> kernel, rings;  // in the order they were placed
  std::map<std::pair<uint32_t, uint64_t>, bool> live_truth;
  std::map<std::pair<uint32_t, uint64_t>, uint64_t> freed_at;
  RingFrees f;
  std::map<std::pair<uint32_t, uint64_t>, uint64_t> live;  // the sink's: allocation time
  uint64_t mismatches = 0, allocations = 0, frees = 0;
  auto to_sink = [&](const Event& d) {
    Seen e = seen_of(d);
    auto key = std::make_pair(e.tgid, e.addr);
    if (e.kind == AS_EV_ALLOC) {
      mismatches += live.contains(key);
      live[key] = e.ts;
      ++allocations;
    } else if (e.kind == AS_EV_FREE) {
      auto it = live.find(key);
      mismatches += it == live.end() || it->second > e.ts;
      if (it != live.end()) live.erase(it);
      ++frees;
    }
  };
  size_t kernel_read = 0, rings_read = 0;
  uint64_t now = 1000;
  auto step = [&] {
    now += 1 + rng() % 50;
    uint32_t tgid = 100 + rng() % 2;
    uint64_t addr = 0x1000 * (1 + rng() % 4);
    auto key = std::make_pair(tgid, addr);
    if (live_truth[key]) {
      live_truth[key] = false;
      freed_at[key] = now;
      rings.push_back({now, event(AS_EV_FREE, tgid, now, addr)});
    } else {
      live_truth[key] = true;
      // Its time taken once the block was handed out (after the free of the
      // one before it), before the walk; placed in the ring buffer after it.
      uint64_t ts = std::max(freed_at[key] + 1, now - rng() % 20);
      kernel.push_back({now, event(AS_EV_ALLOC, tgid, ts, addr)});
    }
  };
  for (int pass = 0; pass < 3000; ++pass) {
    for (int i = rng() % 40; i > 0; --i) step();
    // Now and then a ring read short of its end holds the time back.
    uint64_t read_ns = rng() % 4 ? now : now - rng() % 100;
    for (; rings_read < rings.size(); ++rings_read) {
      const auto& e = std::get<FreeEvent>(rings[rings_read].data);
      f.add(e.tgid, e.tid, e.addr, e.ts_ns, to_sink);
    }
    f.pass_begins(read_ns);
    bool stopped = false;
    if (auto kept = f.take_kept()) {
      if (f.before(*kept, to_sink)) to_sink(*kept);
      stopped = f.has_kept();  // still too late: nothing after it goes first
    }
    for (int i = rng() % 10; i > 0; --i) step();  // written while the pass reads
    bool kept_now = false;
    for (; kernel_read < kernel.size() && !stopped; ++kernel_read) {
      if (!f.before(kernel[kernel_read].data, to_sink)) {
        kept_now = stopped = true;
        break;
      }
      to_sink(kernel[kernel_read].data);
    }
    if (kept_now) ++kernel_read;  // consumed, and kept
    f.pass_ends(!stopped, to_sink);
  }
  // The end: the probes gone, the last of both read.
  for (; rings_read < rings.size(); ++rings_read) {
    const auto& e = std::get<FreeEvent>(rings[rings_read].data);
    f.add(e.tgid, e.tid, e.addr, e.ts_ns, to_sink);
  }
  f.pass_begins(UINT64_MAX);
  if (auto kept = f.take_kept(); kept && f.before(*kept, to_sink)) to_sink(*kept);
  for (; kernel_read < kernel.size(); ++kernel_read)
    if (f.before(kernel[kernel_read].data, to_sink)) to_sink(kernel[kernel_read].data);
  f.flush(to_sink);
  EXPECT_EQ(mismatches, 0u);
  EXPECT_EQ(allocations, kernel.size());
  EXPECT_EQ(frees, rings.size());
  size_t truth = 0;
  for (const auto& [key, is_live] : live_truth) {
    truth += is_live;
    EXPECT_EQ(live.contains(key), is_live);
  }
  EXPECT_EQ(live.size(), truth);
  EXPECT_GT(f.counts().kept, 100u) << "passes stopped at later events";
}

}  // namespace
}  // namespace allocscope
