// The bridge that hands requests to the recording's thread, the queue of
// connections, and the model and host helpers the agent adds.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <future>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "agent/bridge.h"
#include "agent/connection_queue.h"
#include "agent/fold_groups.h"
#include "agent/targets.h"
#include "host/process.h"
#include "model/profile.h"

namespace allocscope {
namespace {

using namespace std::chrono_literals;

// --- Bridge ---

class FakeView : public LiveView {
 public:
  std::vector<ProcessTotals> processes() override { return {}; }
  const ProcessTable& process_table() const override { return table_; }
  void catch_up() override { ++catch_ups; }
  Baseline baseline(const InstanceSelector&) override { return {}; }
  Recording snapshot(const InstanceSelector&, const Baseline*) override { return {}; }
  std::vector<std::pair<std::string, uint64_t>> counters() override { return {}; }
  std::pair<size_t, size_t> stack_table() const override { return {0, 1}; }
  HoldTimes hold_times() const override { return {}; }
  std::vector<Folded> fold_ended(uint64_t, const FoldGrouping&, uint64_t) override { return {}; }
  std::vector<std::pair<std::string, uint64_t>> table_sizes() const override { return {}; }
  const std::string& cgroup_path(uint64_t) override { return none_; }
  size_t forget_removed_cgroups(uint64_t) override { return 0; }

  int catch_ups = 0;

 private:
  ProcessTable table_;
  std::string none_;
};

constexpr auto kPatience = 10s;

// Polls `done` until true or kPatience has passed.
template <typename F>
bool eventually(F done) {
  auto until = std::chrono::steady_clock::now() + kPatience;
  while (!done()) {
    if (std::chrono::steady_clock::now() > until) return false;
    std::this_thread::sleep_for(1ms);
  }
  return true;
}

// As eventually, ticking the bridge on this thread meanwhile.
template <typename F>
bool eventually_ticking(Bridge& bridge, LiveView& view, F done) {
  return eventually([&] {
    bridge.on_tick(view);
    return done();
  });
}

// Server threads calling Bridge::run, each noting its outcome. Declared
// after what their jobs use; on the way out (a failed assertion too) the
// bridge stops, so no thread is left waiting, and each is joined.
class Servers {
 public:
  explicit Servers(Bridge& bridge) : bridge_(bridge) {}
  ~Servers() {
    bridge_.on_stop();
    for (std::thread& t : threads_) t.join();
  }
  // Starts a thread running `job` through the bridge; returns its index.
  size_t start(Bridge::Job job) {
    size_t i = threads_.size();
    threads_.emplace_back([this, i, job = std::move(job)] {
      outcomes_[i] = bridge_.run(job);
      returned_[i] = true;
    });
    return i;
  }
  bool returned(size_t i) const { return returned_[i]; }
  Bridge::Outcome outcome(size_t i) const { return outcomes_[i]; }

 private:
  static constexpr size_t kMax = 8;
  Bridge& bridge_;
  std::atomic<Bridge::Outcome> outcomes_[kMax] = {};
  std::atomic<bool> returned_[kMax] = {};
  std::vector<std::thread> threads_;
};

TEST(Bridge, JobRunsOnTheTickingThread) {
  Bridge bridge(4);
  FakeView view;
  std::atomic<std::thread::id> ran_on;
  std::atomic<LiveView*> seen = nullptr;
  Servers servers(bridge);
  size_t s = servers.start([&](LiveView& v) {
    ran_on = std::this_thread::get_id();
    seen = &v;
  });
  // Without a tick nothing runs.
  std::this_thread::sleep_for(20ms);
  EXPECT_FALSE(servers.returned(s));
  EXPECT_EQ(seen, nullptr);
  ASSERT_TRUE(eventually_ticking(bridge, view, [&] { return servers.returned(s); }));
  EXPECT_EQ(servers.outcome(s), Bridge::Outcome::Done);
  EXPECT_EQ(ran_on, std::this_thread::get_id());
  EXPECT_EQ(seen, &view);
}

TEST(Bridge, TickHookRunsOnEveryTick) {
  Bridge bridge(1);
  FakeView view;
  int ticks = 0;
  bridge.set_tick([&](LiveView& v) {
    EXPECT_EQ(&v, &view);
    ++ticks;
  });
  bridge.on_tick(view);
  bridge.on_tick(view);
  EXPECT_EQ(ticks, 2);
}

// A request is answered with the events placed before it read: the view
// catches up before the jobs run, and a tick without a job leaves it be.
TEST(Bridge, JobsSeeTheViewCaughtUp) {
  Bridge bridge(4);
  FakeView view;
  bridge.on_tick(view);
  EXPECT_EQ(view.catch_ups, 0);
  std::atomic<int> seen = -1;
  Servers servers(bridge);
  size_t s = servers.start([&](LiveView&) { seen = view.catch_ups; });
  ASSERT_TRUE(eventually_ticking(bridge, view, [&] { return servers.returned(s); }));
  EXPECT_EQ(seen, 1);
  EXPECT_EQ(view.catch_ups, 1);
}

// Two requests, room for one: whichever queues first waits, the other is
// turned away at once, before any tick.
TEST(Bridge, FullQueueIsBusy) {
  Bridge bridge(1);
  FakeView view;
  std::atomic<int> ran = 0;
  Servers servers(bridge);
  size_t a = servers.start([&](LiveView&) { ++ran; });
  size_t b = servers.start([&](LiveView&) { ++ran; });
  ASSERT_TRUE(eventually([&] { return servers.returned(a) || servers.returned(b); }));
  size_t busy = servers.returned(a) ? a : b, waiting = busy == a ? b : a;
  EXPECT_EQ(servers.outcome(busy), Bridge::Outcome::Busy);
  EXPECT_EQ(ran, 0);
  ASSERT_TRUE(eventually_ticking(bridge, view, [&] { return servers.returned(waiting); }));
  EXPECT_EQ(servers.outcome(waiting), Bridge::Outcome::Done);
  EXPECT_EQ(ran, 1);
  // The queue has room again.
  size_t again = servers.start([&](LiveView&) { ++ran; });
  ASSERT_TRUE(eventually_ticking(bridge, view, [&] { return servers.returned(again); }));
  EXPECT_EQ(servers.outcome(again), Bridge::Outcome::Done);
  EXPECT_EQ(ran, 2);
}

TEST(Bridge, NoRoomAtAllIsBusy) {
  Bridge bridge(0);
  bool ran = false;
  EXPECT_EQ(bridge.run([&](LiveView&) { ran = true; }), Bridge::Outcome::Busy);
  EXPECT_FALSE(ran);
}

TEST(Bridge, RunAfterStopIsStopped) {
  Bridge bridge(4);
  FakeView view;
  EXPECT_FALSE(bridge.stopped());
  bridge.on_stop();
  EXPECT_TRUE(bridge.stopped());
  bool ran = false;
  EXPECT_EQ(bridge.run([&](LiveView&) { ran = true; }), Bridge::Outcome::Stopped);
  bridge.on_tick(view);
  EXPECT_FALSE(ran);
}

// A request waiting when the recording ends is released, its job not run.
TEST(Bridge, StopReleasesAWaitingRun) {
  Bridge bridge(1);
  FakeView view;
  std::atomic<bool> ran = false;
  Servers servers(bridge);
  size_t a = servers.start([&](LiveView&) { ran = true; });
  size_t b = servers.start([&](LiveView&) { ran = true; });
  // One returned Busy: the other is queued and waiting.
  ASSERT_TRUE(eventually([&] { return servers.returned(a) || servers.returned(b); }));
  size_t busy = servers.returned(a) ? a : b, waiting = busy == a ? b : a;
  EXPECT_EQ(servers.outcome(busy), Bridge::Outcome::Busy);
  bridge.on_stop();
  ASSERT_TRUE(eventually([&] { return servers.returned(waiting); }));
  EXPECT_EQ(servers.outcome(waiting), Bridge::Outcome::Stopped);
  EXPECT_FALSE(ran);
}

TEST(Bridge, SleepEndsEarlyOnStop) {
  Bridge bridge(1);
  EXPECT_TRUE(bridge.sleep(1ms));
  std::atomic<bool> returned = false, slept = true;
  auto start = std::chrono::steady_clock::now();
  std::thread sleeper([&] {
    slept = bridge.sleep(std::chrono::milliseconds(60s));
    returned = true;
  });
  bridge.on_stop();
  EXPECT_TRUE(eventually([&] { return returned.load(); }));
  sleeper.join();
  EXPECT_FALSE(slept);
  EXPECT_LT(std::chrono::steady_clock::now() - start, 30s);
  // Once stopped, no sleep waits.
  EXPECT_FALSE(bridge.sleep(std::chrono::milliseconds(60s)));
}

// --- ConnectionQueue ---

// At capacity, the accepting thread waits until a connection finishes; the
// wait is counted and nothing is dropped.
TEST(ConnectionQueue, AtCapacityEnqueueWaitsForASlot) {
  std::atomic<uint64_t> full{0};
  std::promise<void> release;
  std::shared_future<void> released = release.get_future().share();
  std::atomic<int> ran{0};
  ConnectionQueue q(1, 2, full);
  auto job = [&] {
    released.wait();
    ++ran;
  };
  q.enqueue(job);
  q.enqueue(job);
  EXPECT_EQ(full, 0u);
  auto third = std::async(std::launch::async, [&] { q.enqueue([&] { ++ran; }); });
  // The wait is counted however late the third thread starts; while the
  // first two are held it cannot have returned.
  EXPECT_TRUE(eventually([&] { return full == 1u; }));
  EXPECT_EQ(third.wait_for(0ms), std::future_status::timeout);
  release.set_value();
  EXPECT_EQ(third.wait_for(std::chrono::seconds(30)), std::future_status::ready);
  q.shutdown();
  EXPECT_EQ(ran, 3);
}

// --- window_base, subtract_window_base ---

StackTotals stack_totals() {
  StackTotals t;
  t.alloc_objects = 10;
  t.alloc_bytes = 1000;
  t.samples = 5;
  t.alloc_stats.samples = 5;
  t.alloc_stats.ht_bytes = 1000;
  t.alloc_stats.exact_bytes = 64;
  t.live_objects = 4;
  t.live_bytes = 400;
  t.live_samples = 2;
  t.live_stats.samples = 2;
  t.live_stats.ht_bytes = 400;
  return t;
}

TEST(WindowBase, TakesTheAllocationSideAndTheLiveFigures) {
  WindowBase a = window_base(stack_totals());
  EXPECT_EQ(a.objects, 10);
  EXPECT_EQ(a.bytes, 1000);
  EXPECT_EQ(a.samples, 5u);
  EXPECT_EQ(a.stats.samples, 5u);
  EXPECT_EQ(a.stats.ht_bytes, 1000);
  EXPECT_EQ(a.stats.exact_bytes, 64u);
  EXPECT_EQ(a.live_objects, 4);
  EXPECT_EQ(a.live_bytes, 400);
}

// A delta as Go's ?seconds= gives it: what was allocated since the baseline,
// and how the live figures moved.
TEST(SubtractWindowBase, LeavesTheDifferences) {
  StackTotals t = stack_totals();
  WindowBase earlier{
      .objects = 4, .bytes = 300, .samples = 2, .stats = {}, .live_objects = 1, .live_bytes = 100};
  earlier.stats.samples = 2;
  earlier.stats.ht_bytes = 300;
  earlier.stats.exact_bytes = 64;
  subtract_window_base(t, earlier);
  EXPECT_EQ(t.alloc_objects, 6);
  EXPECT_EQ(t.alloc_bytes, 700);
  EXPECT_EQ(t.samples, 3u);
  EXPECT_EQ(t.alloc_stats.samples, 3u);
  EXPECT_EQ(t.alloc_stats.ht_bytes, 700);
  EXPECT_EQ(t.alloc_stats.exact_bytes, 0u);
  EXPECT_EQ(t.live_objects, 3);
  EXPECT_EQ(t.live_bytes, 300);
  // The two moments share samples: no variance is claimed for the change.
  EXPECT_EQ(t.live_stats.samples, 0u);
  EXPECT_EQ(t.live_stats.ht_bytes, 0);
}

TEST(SubtractWindowBase, ItsOwnBaselineLeavesNothing) {
  StackTotals t = stack_totals();
  subtract_window_base(t, window_base(t));
  EXPECT_EQ(t.alloc_objects, 0);
  EXPECT_EQ(t.alloc_bytes, 0);
  EXPECT_EQ(t.samples, 0u);
  EXPECT_EQ(t.alloc_stats.samples, 0u);
  EXPECT_EQ(t.live_bytes, 0);
  EXPECT_EQ(t.live_objects, 0);
}

// Allocated figures are counters: a baseline larger than now (taken before
// a reset) gives zero, never a negative count or a wrapped one. Live
// figures are gauges: memory freed in the window is a negative change.
TEST(SubtractWindowBase, CountersNeverNegativeGaugesEitherSign) {
  StackTotals t = stack_totals();
  WindowBase bigger{
      .objects = 100, .bytes = 1e6, .samples = 50, .stats = {}, .live_objects = 9, .live_bytes = 900};
  bigger.stats.samples = 50;
  bigger.stats.ht_bytes = 1e6;
  bigger.stats.exact_bytes = 1000;
  subtract_window_base(t, bigger);
  EXPECT_EQ(t.alloc_objects, 0);
  EXPECT_EQ(t.alloc_bytes, 0);
  EXPECT_EQ(t.samples, 0u);
  EXPECT_EQ(t.alloc_stats.samples, 0u);
  EXPECT_EQ(t.alloc_stats.ht_bytes, 0);
  EXPECT_EQ(t.alloc_stats.exact_bytes, 0u);
  EXPECT_EQ(t.live_bytes, -500);
  EXPECT_EQ(t.live_objects, -5);
}

// --- cgroup_v2_path ---

TEST(CgroupV2Path, TheUnifiedLine) {
  EXPECT_EQ(cgroup_v2_path("0::/system.slice/x.service\n"), "/system.slice/x.service");
  EXPECT_EQ(cgroup_v2_path("0::/\n"), "/");
  // No trailing newline.
  EXPECT_EQ(cgroup_v2_path("0::/a/b"), "/a/b");
}

// Hybrid systems list the v1 hierarchies too; only the "0::" line counts.
TEST(CgroupV2Path, AmongV1Lines) {
  EXPECT_EQ(cgroup_v2_path("12:memory:/foo\n0::/bar\n"), "/bar");
  EXPECT_EQ(cgroup_v2_path("0::/bar\n12:memory:/foo\n"), "/bar");
  EXPECT_EQ(cgroup_v2_path("12:memory:/foo\n1:name=systemd:/x\n0::/user.slice/u.scope\n"),
            "/user.slice/u.scope");
  // A v1 line whose path contains "0::" is not the v2 line.
  EXPECT_EQ(cgroup_v2_path("3:cpu:/10::/x\n0::/y\n"), "/y");
}

TEST(CgroupV2Path, NoneIsEmpty) {
  EXPECT_EQ(cgroup_v2_path(""), "");
  EXPECT_EQ(cgroup_v2_path("12:memory:/foo\n4:cpu,cpuacct:/foo\n"), "");
  EXPECT_EQ(cgroup_v2_path("\n\n"), "");
}

// --- FoldGroups ---

// Ended processes fold into their program's and cgroup's instance; past
// the capacity a new cgroup's go to their program's (no cgroup), never a
// program to "[other]" before twice the capacity: a program's profile must
// not go down. Unit filters find the cgroup's.
TEST(FoldGroups, KeepsProgramsWholePastTheCapacity) {
  FoldGroups g(2);
  const std::string web = "/system.slice/web.service";
  EXPECT_EQ(g.key("web", web), (FoldKey{"web", web}));
  EXPECT_EQ(g.key("web", web), (FoldKey{"web", web}));
  EXPECT_EQ(g.key("db", "/system.slice/db.service"), (FoldKey{"db", "/system.slice/db.service"}));
  EXPECT_EQ(g.key("web", "/system.slice/other.service"), (FoldKey{"web", ""}));  // full: the program's
  EXPECT_EQ(g.key("cron", "/system.slice/cron.service"), (FoldKey{"cron", ""}));
  EXPECT_EQ(g.key("web", web), (FoldKey{"web", web})) << "a cgroup already held stays";
  EXPECT_EQ(g.key("more", ""), (FoldKey{"[other]", ""}));  // twice the capacity
  EXPECT_EQ(g.processes(), 7u);
  EXPECT_EQ(g.unnamed(), 3u);
  EXPECT_EQ(g.size(), 5u);
  EXPECT_TRUE(target_holds({TargetKind::Unit, "web.service"}, {.comm = "web", .ended = true, .folded = true},
                           labels_from_cgroup(web)));
}

}  // namespace
}  // namespace allocscope
