// What the sink holds back or takes in bulk: walks that wait for their tables,
// exact totals, the reader's deadline; and --unit's match of a cgroup path.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <functional>
#include <vector>

#include "base/clocks.h"
#include "event_sink_fixture.h"
#include "record/discovery/filter_verdicts.h"
#include "record/events/event_sink.h"

namespace allocscope {
namespace {

// A stack the kernel stopped for want of a table, with its walk to finish.
std::vector<uint8_t> waiting_stack_event(uint64_t id, uint32_t tgid) {
  as_stack_event e = stack_event(id, tgid, {0x1000}, AS_STOP_NO_TABLE);
  as_deferred_walk w{};
  w.len = 64;
  std::vector<uint8_t> out(sizeof e + sizeof w + w.len);
  std::memcpy(out.data(), &e, sizeof e);
  std::memcpy(out.data() + sizeof e, &w, sizeof w);
  return out;
}

as_event free_event(uint32_t tgid, uint64_t addr) {
  as_event e{};
  e.kind = AS_EV_FREE;
  e.tgid = tgid;
  e.addr = addr;
  return e;
}

TEST(EventSink, ExactTotalsAreFoldedInAsWhatChanged) {
  Fixture f;
  f.sink(bytes(stack_event(7, f.tgid, {0x1000}, AS_STOP_COMPLETE)));
  as_exact_totals t{};
  t.allocs = 10;
  t.alloc_bytes = 1000;
  t.frees = 4;
  t.free_bytes = 400;
  t.lifetimes[3] = 4;
  std::vector<ExactEntry> first{{7, t}};
  f.sink.absorb_exact(first);
  t.allocs = 15;
  t.alloc_bytes = 1500;
  std::vector<ExactEntry> second{{7, t}};
  f.sink.absorb_exact(second);
  f.sink.absorb_exact(second);  // nothing new
  ASSERT_EQ(f.profile.stacks().size(), 1u);
  const StackTotals& s = f.profile.stacks()[0].totals;
  EXPECT_EQ(s.alloc_objects, 15);
  EXPECT_EQ(s.alloc_bytes, 1500);
  EXPECT_EQ(s.live_objects, 11);
  EXPECT_EQ(s.live_bytes, 1100);
  EXPECT_EQ(s.lifetimes.count(), 4u);
}

const StackRecord* stack_with(const Profile& p, uint64_t first_ip, size_t frames) {
  for (const StackRecord& s : p.stacks())
    if (!s.ips.empty() && s.ips[0] == first_ip && s.ips.size() == frames) return &s;
  return nullptr;
}

TEST(EventSink, AWalkThatWaitsForItsTableHoldsItsSamplesInOrderUntilItIsIn) {
  Fixture f;
  f.unwind.building = true;
  f.sink(waiting_stack_event(7, f.tgid));
  f.sink(bytes(stack_event(8, f.tgid, {0x2000}, AS_STOP_COMPLETE)));
  f.sink(bytes(alloc_event(7, f.tgid, 0x10, 100)));  // waits with its stack
  f.sink(bytes(alloc_event(8, f.tgid, 0x20, 100)));  // goes on
  f.sink(bytes(free_event(f.tgid, 0x10)));           // waits: its block does
  f.sink(bytes(alloc_event(8, f.tgid, 0x10, 100)));  // the address again: after that free
  ASSERT_EQ(f.profile.stacks().size(), 1u);
  EXPECT_EQ(f.profile.stacks()[0].totals.samples, 1u);
  EXPECT_TRUE(f.sink.has_waiting());
  f.sink.retry_waiting(monotonic_ns(), false);  // no table came in: still waits
  EXPECT_EQ(f.profile.stacks().size(), 1u);

  f.unwind.building = false;
  f.sink.retry_waiting(monotonic_ns(), true);
  EXPECT_FALSE(f.sink.has_waiting());
  const StackRecord* whole = stack_with(f.profile, 0x1000, 3);
  const StackRecord* other = stack_with(f.profile, 0x2000, 1);
  ASSERT_TRUE(whole && other);
  EXPECT_EQ(whole->ips, (std::vector<uint64_t>{0x1000, 0x7000, 0x8000}));
  EXPECT_EQ(whole->totals.samples, 1u);
  EXPECT_EQ(whole->totals.live_samples, 0u);  // freed, in order
  EXPECT_EQ(other->totals.samples, 2u);
  EXPECT_EQ(other->totals.live_samples, 2u);  // 0x20 and 0x10, allocated after the free
  EXPECT_EQ(f.sink.walks_waited(), 1u);
  EXPECT_EQ(f.sink.walks_cut_waiting(), 0u);
  EXPECT_EQ(f.sink.stacks_seen(), 2u);
  EXPECT_EQ(f.sink.stacks_truncated(), 0u);
}

TEST(EventSink, AnExitWaitsBehindItsProcessWalks) {
  Fixture f;
  f.unwind.building = true;
  f.sink(waiting_stack_event(7, f.tgid));
  f.sink(bytes(alloc_event(7, f.tgid, 0x10, 100)));
  f.sink(bytes(process_event(AS_EV_EXIT, f.tgid)));
  EXPECT_TRUE(f.kernel.forgotten_live.empty());  // not ended yet
  f.unwind.building = false;
  f.sink.retry_waiting(monotonic_ns(), true);
  ASSERT_NE(stack_with(f.profile, 0x1000, 3), nullptr);
  EXPECT_EQ(f.kernel.forgotten_live, (std::vector<uint64_t>{0x10}));  // ended after its sample
}

TEST(EventSink, WalksThatWaitAreCutShortAtExecAfterTooLongAndAtTheEnd) {
  auto cut_by = [](const std::function<void(Fixture&)>& event) {
    Fixture f;
    f.unwind.building = true;
    f.sink(waiting_stack_event(7, f.tgid));
    f.sink(bytes(alloc_event(7, f.tgid, 0x10, 100)));
    event(f);
    EXPECT_FALSE(f.sink.has_waiting());
    EXPECT_EQ(f.sink.walks_cut_waiting(), 1u);
    EXPECT_EQ(f.sink.stacks_truncated(), 1u);
    const StackRecord* cut = stack_with(f.profile, 0x1000, 2);
    ASSERT_NE(cut, nullptr);
    EXPECT_EQ(cut->ips.back(), kTruncatedFrame);
    EXPECT_EQ(cut->totals.samples, 1u);
  };
  cut_by([](Fixture& f) { f.sink(bytes(process_event(AS_EV_EXEC, f.tgid))); });
  cut_by([](Fixture& f) { f.sink.retry_waiting(monotonic_ns() + 11'000'000'000ull, false); });
  cut_by([](Fixture& f) { f.sink.release_all_waiting(); });
}

TEST(EventSink, ReturnsToItsLoopAtTheDeadline) {
  // A reader that lags must still get back to its loop (outputs every
  // --interval): past the deadline, delivery stops within 256 records.
  Fixture f;
  f.sink.yield_at(0);
  as_event free_event{};
  free_event.kind = AS_EV_FREE;
  int delivered = 0;
  while (delivered < 1000 && f.sink(bytes(free_event))) ++delivered;
  EXPECT_LT(delivered, 256);
  f.sink.yield_at(UINT64_MAX);
  for (int i = 0; i < 1000; ++i) ASSERT_TRUE(f.sink(bytes(free_event)));
}

// --unit's test: a whole component of the cgroup path, at any depth.
TEST(CgroupInUnit, MatchesWholeComponentsOnly) {
  EXPECT_TRUE(cgroup_in_unit("/system.slice/nginx.service", "nginx.service"));
  EXPECT_TRUE(cgroup_in_unit("/system.slice/nginx.service", "system.slice"));
  EXPECT_TRUE(
      cgroup_in_unit("/user.slice/user-1000.slice/user@1000.service/app.slice/x.scope", "user@1000.service"));
  EXPECT_TRUE(cgroup_in_unit("/system.slice/nginx.service/worker", "nginx.service"));
  EXPECT_FALSE(cgroup_in_unit("/system.slice/nginx.service", "nginx"));
  EXPECT_FALSE(cgroup_in_unit("/system.slice/nginx.service2", "nginx.service"));
  EXPECT_FALSE(cgroup_in_unit("/system.slice/xnginx.service", "nginx.service"));
  EXPECT_FALSE(cgroup_in_unit("", "nginx.service"));  // a process gone before it was judged
  EXPECT_FALSE(cgroup_in_unit("/", "nginx.service"));
}

}  // namespace
}  // namespace allocscope
