// A recording without BPF, from a real program to the profile: alloc_sites
// runs with the preload library, its trials come through PreloadChannel,
// PreloadEvents turns them into the kernel's events, and EventSink walks
// their stacks in userspace with TableLoader's tables (no kernel holds
// them). Every site's allocated and live bytes and objects are checked
// against the program's exact truth at rate 1.
#include "record/events/preload_events.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstddef>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "abi/preload/entry_codes.h"
#include "abi/preload/trial_record.h"
#include "base/clocks.h"
#include "fake_sink_hooks.h"
#include "host/preload_channel.h"
#include "model/profile.h"
#include "preload/ring_channel.h"
#include "preload_child.h"
#include "probe/tables/table_host.h"
#include "probe/tables/table_loader.h"
#include "record/events/event_sink.h"
#include "record/events/session_hooks.h"
#include "symbols/symbolizer.h"
#include "workload_spec.h"

namespace allocscope {
namespace {

std::vector<uint8_t> alloc_record(uint64_t rate, uint32_t len) {
  as_trial_alloc t{};
  t.kind = AS_TRIAL_ALLOC;
  t.tid = 12;
  t.addr = 0x5000;
  t.size = 100;
  t.rate = rate;
  t.code = AS_FN_CALLOC | AS_USDT_UNTRACKED;
  t.walk.ip = 0x401000;
  t.walk.sp = 0x7ff000;
  t.walk.skip = 2;
  t.walk.len = len;
  std::vector<uint8_t> out(sizeof t + len, 0xab);
  std::memcpy(out.data(), &t, sizeof t);
  return out;
}

PreloadEvents::ProcessFacts fixed_facts(pid_t) { return {"worker", 42}; }

TEST(PreloadEvents, ATrialIsAStackToWalkThenItsSample) {
  PreloadEvents events(512 * 1024, fixed_facts);
  std::vector<Event> out;
  auto keep = [&](Event e) { out.push_back(std::move(e)); };
  events.translate(7, 3, alloc_record(512 * 1024, 64), keep);
  ASSERT_EQ(out.size(), 2u);
  const auto* s = std::get_if<StackEvent>(&out[0]);
  ASSERT_NE(s, nullptr);
  EXPECT_EQ(s->tgid, 7u);
  EXPECT_EQ(s->fn, AS_FN_CALLOC);
  EXPECT_EQ(s->stop, AS_STOP_NO_TABLE);
  EXPECT_EQ(s->ips, std::vector<uint64_t>{0x401000u});
  EXPECT_EQ(s->exec_id, 3u);
  EXPECT_EQ(s->start_ns, 42u);
  EXPECT_EQ(s->comm, "worker");
  ASSERT_TRUE(s->walk.has_value());
  EXPECT_EQ(s->walk->skip, 2u);
  EXPECT_EQ(s->walk->len, 64u);
  ASSERT_EQ(s->walk_stack.size(), 64u);
  EXPECT_EQ(s->walk_stack.back(), 0xab);
  const auto* a = std::get_if<AllocEvent>(&out[1]);
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(a->stack, s->id);
  EXPECT_EQ(a->addr, 0x5000u);
  EXPECT_EQ(a->flags, AS_EVF_LIVE_DROPPED) << "its own set was full: no free will follow";
  EXPECT_EQ(a->tid, 12u);

  out.clear();
  events.translate(7, 3, alloc_record(4096, 0), keep);  // another rate
  std::vector<uint8_t> cut = alloc_record(512 * 1024, 64);
  cut.resize(cut.size() - 8);  // says more stack than it has
  events.translate(7, 3, cut, keep);
  events.translate(7, 3, std::vector<uint8_t>(3, 0), keep);
  EXPECT_TRUE(out.empty());
  EXPECT_EQ(events.other_rate(), 1u);
  EXPECT_EQ(events.malformed(), 2u);
}

// The parts a recorder without BPF would hold, in the order they are made.
struct Parts {
  Profile profile{1, 1 << 16, 1 << 20};
  Symbolizer symbolizer;
  UserspaceTableHost host;
  TableLoader tables{host, 1 << 26, false};
  FakeVerdicts verdicts;
  FakeKernel kernel;
  FakeLibraries libraries;
  SessionUnwind unwind{tables, symbolizer, true};
  EventSink sink{profile, symbolizer, {verdicts, kernel, libraries, unwind}, 1 << 16};
  PreloadEvents events{1};
  Parts() {
    sink.exact_as_samples();
    sink.one_shot_stacks_from(PreloadEvents::kFirstStack);
  }
};

TEST(PreloadEvents, ARecordingWithoutBpfGivesEverySiteItsTruth) {
  auto channel = PreloadChannel::open(uint64_t(1) << 27);
  ASSERT_TRUE(channel.has_value()) << channel.error();
  Parts parts;
  int out = -1;
  pid_t pid = start_alloc_sites_with_preload(channel->socket_path(), out);
  auto feed = [&](const PreloadChannel::RingId& ring, uint32_t tgid, std::span<const uint8_t> record) {
    parts.events.translate(tgid, ring.number, record, [&](Event e) { parts.sink.take(std::move(e)); });
  };
  std::string said;
  while (said.find("done\n") == std::string::npos) {
    pollfd fds[2] = {{channel->fd(), POLLIN, 0}, {out, POLLIN, 0}};
    if (poll(fds, 2, 1) < 0) break;
    channel->accept_waiting();
    channel->drain(feed);
    parts.sink.retry_waiting(monotonic_ns(), parts.unwind.tables_built());
    if (fds[1].revents) {
      char buf[256];
      ssize_t n = read(out, buf, sizeof buf);
      if (n <= 0) break;
      said.append(buf, size_t(n));
    }
  }
  channel->drain(feed);
  parts.tables.wait_for_builds(20000);
  parts.sink.release_all_waiting();

  // The site of each stack: its first frame (the sampler's own are left out).
  std::map<std::string, StackTotals> by_site;
  for (const StackRecord& s : parts.profile.stacks()) {
    ASSERT_FALSE(s.ips.empty());
    std::vector<uint32_t> maps = parts.symbolizer.resolve(pid, std::span(s.ips).first(1));
    by_site[parts.symbolizer.describe(maps[0], s.ips[0]).function].merge(s.totals);
  }
  kill(pid, SIGUSR1);
  int status = 0;
  waitpid(pid, &status, 0);
  close(out);
  EXPECT_EQ(channel->counts().lost, 0u);
  EXPECT_EQ(parts.events.malformed(), 0u);
  EXPECT_EQ(parts.sink.stacks_truncated(), 0u);
  EXPECT_EQ(parts.sink.stacks_held(), 0u) << "every trial's stack forgotten once its sample is in";
  EXPECT_GT(parts.sink.stacks_seen(), 10000u);
  for (const site_spec& s : kSites) {
    SCOPED_TRACE(s.function);
    uint32_t n = site_count(&s, 1);
    const StackTotals& t = by_site[s.function];
    EXPECT_EQ(t.alloc_objects, 2.0 * n);
    EXPECT_EQ(t.alloc_bytes, 2.0 * n * double(s.size));
    EXPECT_EQ(t.live_objects, 2.0 * site_kept(&s, n));
    EXPECT_EQ(t.live_bytes, 2.0 * site_kept(&s, n) * double(s.size));
  }
}

}  // namespace
}  // namespace allocscope
