// Aggregation of samples into per-(process, allocator, stack) totals, and the
// live set kept consistent across frees, re-allocations and full tables.
#include "model/profile.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <map>
#include <random>
#include <vector>

#include "allocscope.h"
#include "stats/sampling.h"

namespace allocscope {
namespace {

constexpr size_t kBig = 1 << 20;

void alloc(Profile& p, uint32_t pid, uint16_t fn, uint64_t addr, uint64_t size,
           const std::vector<uint64_t>& ips, bool live_tracked = true) {
  p.on_alloc({.pid = pid, .fn = fn, .addr = addr, .size = size, .live_tracked = live_tracked, .ips = ips});
}

// The stack with exactly this identity, or nullptr.
const StackRecord* find(const Profile& p, uint32_t pid, uint16_t fn, const std::vector<uint64_t>& ips) {
  const StackRecord* found = nullptr;
  for (const StackRecord& s : p.stacks())
    if (s.pid == pid && s.fn == fn && s.ips == ips) {
      EXPECT_EQ(found, nullptr) << "stack interned twice";
      found = &s;
    }
  return found;
}

TEST(Profile, InternsByPidAllocatorAndIps) {
  Profile p(1, kBig, kBig);
  const std::vector<uint64_t> a = {0x401000, 0x402000}, longer = {0x401000, 0x402000, 0x403000};
  alloc(p, 10, AS_FN_MALLOC, 0x1000, 8, a);
  alloc(p, 10, AS_FN_MALLOC, 0x2000, 8, a);  // same stack again
  alloc(p, 11, AS_FN_MALLOC, 0x1000, 8, a);  // same ips in another process
  alloc(p, 10, AS_FN_CALLOC, 0x3000, 8, a);  // same ips, other allocator
  alloc(p, 10, AS_FN_MALLOC, 0x4000, 8, longer);
  alloc(p, 10, AS_FN_MALLOC, 0x5000, 8, {});  // no frames (stack read failed)
  ASSERT_EQ(p.stacks().size(), 5u);
  ASSERT_NE(find(p, 10, AS_FN_MALLOC, a), nullptr);
  EXPECT_EQ(find(p, 10, AS_FN_MALLOC, a)->totals.samples, 2u);
  EXPECT_EQ(find(p, 11, AS_FN_MALLOC, a)->totals.samples, 1u);
  EXPECT_EQ(find(p, 10, AS_FN_CALLOC, a)->totals.samples, 1u);
  EXPECT_EQ(find(p, 10, AS_FN_MALLOC, longer)->totals.samples, 1u);
  EXPECT_EQ(find(p, 10, AS_FN_MALLOC, {})->totals.samples, 1u);
  EXPECT_EQ(p.live_count(), 6u);  // (pid, addr) keys: 0x1000 is live in both 10 and 11
}

TEST(Profile, WeightsFollowUnbias) {
  constexpr uint64_t kRate = 64 << 10;
  Profile p(kRate, kBig, kBig);
  const std::vector<uint64_t> ips = {0x10};
  double objects = 0, bytes = 0;
  uint64_t addr = 0x1000;
  for (uint64_t size : {uint64_t(16), uint64_t(4096), kRate, uint64_t(1) << 20}) {
    alloc(p, 1, AS_FN_MALLOC, addr += 0x100000, size, ips);
    // Horvitz-Thompson, written out independently of sampling.cpp.
    double prob = 1 - std::exp(-double(size) / kRate);
    objects += 1 / prob;
    bytes += size / prob;
  }
  const StackTotals& t = p.stacks().at(0).totals;
  EXPECT_NEAR(t.alloc_objects, objects, objects * 1e-9);
  EXPECT_NEAR(t.alloc_bytes, bytes, bytes * 1e-9);
  EXPECT_DOUBLE_EQ(t.live_objects, t.alloc_objects);
  EXPECT_DOUBLE_EQ(t.live_bytes, t.alloc_bytes);
  EXPECT_EQ(t.samples, 4u);
  EXPECT_EQ(t.live_samples, 4u);
  EXPECT_EQ(p.rate(), kRate);
}

TEST(Profile, FreeRemovesLiveAndKeepsAllocTotals) {
  constexpr uint64_t kRate = 4096;
  Profile p(kRate, kBig, kBig);
  alloc(p, 1, AS_FN_MALLOC, 0xa000, 1000, {0x10});
  alloc(p, 1, AS_FN_MALLOC, 0xb000, 3000, {0x10});
  p.on_free(1, 0xa000);
  const StackTotals& t = p.stacks().at(0).totals;
  Weight kept = unbias(3000, kRate);
  EXPECT_DOUBLE_EQ(t.alloc_bytes, unbias(1000, kRate).bytes + kept.bytes);
  EXPECT_NEAR(t.live_bytes, kept.bytes, 1e-9 * kept.bytes);
  EXPECT_NEAR(t.live_objects, kept.objects, 1e-9 * kept.objects);
  EXPECT_EQ(t.samples, 2u);
  EXPECT_EQ(t.live_samples, 1u);
  EXPECT_EQ(p.live_count(), 1u);
  EXPECT_EQ(p.counters().unmatched_frees, 0u);

  p.on_free(1, 0xa000);  // a second free of the same address matches nothing
  EXPECT_EQ(p.counters().unmatched_frees, 1u);
  EXPECT_EQ(t.live_samples, 1u);
}

// An entered process's live samples taken by the probes: handed over once
// (their addresses, the kernel's to hold no more), still live, freed by the
// frees that then come another way; no longer among the addresses an end of
// the process gives the kernel to delete.
TEST(Profile, LiveSamplesHandedOverStayLiveUntilFreed) {
  Profile p(4096, kBig, kBig);
  alloc(p, 1, AS_FN_MALLOC, 0xa000, 1000, {0x10});
  alloc(p, 1, AS_FN_MALLOC, 0xb000, 3000, {0x10});
  alloc(p, 2, AS_FN_MALLOC, 0xc000, 3000, {0x10});
  std::vector<uint64_t> handed = p.hand_over_live(1);
  std::sort(handed.begin(), handed.end());
  EXPECT_EQ(handed, (std::vector<uint64_t>{0xa000, 0xb000}));
  EXPECT_TRUE(p.hand_over_live(1).empty()) << "handed once";
  EXPECT_EQ(p.live_count(), 3u);
  p.hand_back_live(1, std::vector<uint64_t>{0xb000});  // not taken: the kernel's again
  EXPECT_EQ(p.hand_over_live(1), (std::vector<uint64_t>{0xb000}));
  p.on_free(1, 0xa000);
  EXPECT_EQ(p.live_count(), 2u);
  EXPECT_TRUE(p.drop_process(1).empty()) << "the kernel holds none of process 1's";
  EXPECT_EQ(p.drop_process(2), (std::vector<uint64_t>{0xc000}));
}

// Those the probes took after the hand-over and before the process's mark
// are counted (their frees will pass no probe); not those taken before the
// hand-over (read late) or since, nor those whose frees come another way.
TEST(Profile, LiveSamplesTakenDuringAnEntryAreCounted) {
  Profile p(4096, kBig, kBig);
  auto at = [&](uint64_t addr, uint64_t ts, bool kernel_held) {
    p.on_alloc({.pid = 1,
                .fn = AS_FN_MALLOC,
                .addr = addr,
                .size = 1000,
                .ts_ns = ts,
                .kernel_held = kernel_held,
                .ips = std::vector<uint64_t>{0x10}});
  };
  at(0xa000, 10, true);
  EXPECT_EQ(p.hand_over_live(1), (std::vector<uint64_t>{0xa000}));
  at(0xe000, 12, true);   // taken before the hand-over (at 15), read after it
  at(0xb000, 20, true);   // during the entry
  at(0xf000, 25, true);   // during the entry
  at(0xc000, 30, false);  // the library's, its free through the ring
  at(0xd000, 50, true);   // after the mark
  EXPECT_EQ(p.kernel_held_between(1, 15, 40), 2u);
  EXPECT_EQ(p.live_count(), 6u) << "all stay live";
  EXPECT_EQ(p.kernel_held_between(2, 15, 40), 0u) << "no such process";
}

TEST(Profile, FreeOfUnknownAddressIsCountedNotApplied) {
  Profile p(1, kBig, kBig);
  alloc(p, 1, AS_FN_MALLOC, 0xa000, 100, {0x10});
  p.on_free(1, 0xdead);
  p.on_free(1, 0);
  EXPECT_EQ(p.counters().unmatched_frees, 2u);
  EXPECT_EQ(p.stacks().at(0).totals.live_bytes, 100.0);
  EXPECT_EQ(p.live_count(), 1u);
}

TEST(Profile, FreeFromAnotherProcessDoesNotDeattribute) {
  Profile p(1, kBig, kBig);
  alloc(p, 1, AS_FN_MALLOC, 0xa000, 100, {0x10});
  p.on_free(2, 0xa000);  // same address, different address space
  EXPECT_EQ(p.counters().unmatched_frees, 1u);
  EXPECT_EQ(p.stacks().at(0).totals.live_bytes, 100.0);
  p.on_free(1, 0xa000);
  EXPECT_EQ(p.stacks().at(0).totals.live_bytes, 0.0);
  EXPECT_EQ(p.live_count(), 0u);
}

TEST(Profile, ReallocationBeforeFreeReplacesTheLiveEntry) {
  Profile p(1, kBig, kBig);
  const std::vector<uint64_t> first = {0x10}, second = {0x20};
  alloc(p, 1, AS_FN_MALLOC, 0xa000, 100, first);
  alloc(p, 1, AS_FN_MALLOC, 0xa000, 300, second);  // the free of the first was missed
  EXPECT_EQ(p.counters().replaced_live, 1u);
  EXPECT_EQ(p.live_count(), 1u);
  const StackTotals& t1 = find(p, 1, AS_FN_MALLOC, first)->totals;
  const StackTotals& t2 = find(p, 1, AS_FN_MALLOC, second)->totals;
  EXPECT_EQ(t1.alloc_bytes, 100.0);  // it was allocated, just no longer live
  EXPECT_EQ(t1.live_bytes, 0.0);
  EXPECT_EQ(t1.live_objects, 0.0);
  EXPECT_EQ(t1.live_samples, 0u);
  EXPECT_EQ(t2.live_bytes, 300.0);
  EXPECT_EQ(t2.live_samples, 1u);

  p.on_free(1, 0xa000);  // frees the second, and only once
  EXPECT_EQ(t2.live_bytes, 0.0);
  EXPECT_EQ(t1.live_bytes, 0.0);
  EXPECT_EQ(p.counters().unmatched_frees, 0u);
  EXPECT_EQ(p.live_count(), 0u);
}

TEST(Profile, UntrackedSampleCountsAllocButNotLive) {
  Profile p(1, kBig, kBig);
  alloc(p, 1, AS_FN_MALLOC, 0xa000, 100, {0x10}, /*live_tracked=*/false);
  const StackTotals& t = p.stacks().at(0).totals;
  EXPECT_EQ(t.alloc_bytes, 100.0);
  EXPECT_EQ(t.samples, 1u);
  EXPECT_EQ(t.live_bytes, 0.0);
  EXPECT_EQ(t.live_samples, 0u);
  EXPECT_EQ(p.live_count(), 0u);
  EXPECT_EQ(p.counters().live_full, 0u);  // the kernel's table was full, not ours

  // An untracked sample at a live address still retires the stale entry.
  alloc(p, 1, AS_FN_MALLOC, 0xb000, 50, {0x10});
  alloc(p, 1, AS_FN_MALLOC, 0xb000, 70, {0x10}, /*live_tracked=*/false);
  EXPECT_EQ(p.counters().replaced_live, 1u);
  EXPECT_EQ(t.live_bytes, 0.0);
  EXPECT_EQ(t.alloc_bytes, 220.0);
  EXPECT_EQ(p.live_count(), 0u);
}

TEST(Profile, StackTableCapacity) {
  Profile p(1, 2, kBig);
  alloc(p, 1, AS_FN_MALLOC, 0x1000, 10, {0x10});
  alloc(p, 1, AS_FN_MALLOC, 0x2000, 20, {0x20});
  alloc(p, 1, AS_FN_MALLOC, 0x3000, 30, {0x30});  // third stack: dropped
  alloc(p, 1, AS_FN_MALLOC, 0x4000, 40, {0x10});  // known stack: still counted
  EXPECT_EQ(p.stacks().size(), 2u);
  EXPECT_EQ(p.counters().stacks_full, 1u);
  EXPECT_EQ(find(p, 1, AS_FN_MALLOC, {0x10})->totals.alloc_bytes, 50.0);
  EXPECT_EQ(find(p, 1, AS_FN_MALLOC, {0x30}), nullptr);
  EXPECT_EQ(p.live_count(), 3u);  // the dropped sample is not live either
  p.on_free(1, 0x3000);
  EXPECT_EQ(p.counters().unmatched_frees, 1u);
}

TEST(Profile, LiveTableCapacity) {
  Profile p(1, kBig, 2);
  alloc(p, 1, AS_FN_MALLOC, 0x1000, 10, {0x10});
  alloc(p, 1, AS_FN_MALLOC, 0x2000, 20, {0x10});
  alloc(p, 1, AS_FN_MALLOC, 0x3000, 30, {0x10});  // live table full
  const StackTotals& t = p.stacks().at(0).totals;
  EXPECT_EQ(p.counters().live_full, 1u);
  EXPECT_EQ(p.live_count(), 2u);
  EXPECT_EQ(t.alloc_bytes, 60.0);
  EXPECT_EQ(t.live_bytes, 30.0);
  EXPECT_EQ(t.live_samples, 2u);

  p.on_free(1, 0x1000);  // room again
  alloc(p, 1, AS_FN_MALLOC, 0x4000, 40, {0x10});
  EXPECT_EQ(p.counters().live_full, 1u);
  EXPECT_EQ(t.live_bytes, 60.0);
  // Re-sampling a live address at capacity replaces it rather than failing.
  alloc(p, 1, AS_FN_MALLOC, 0x4000, 45, {0x10});
  EXPECT_EQ(p.counters().live_full, 1u);
  EXPECT_EQ(p.counters().replaced_live, 1u);
  EXPECT_EQ(t.live_bytes, 65.0);
}

// Exact mode on a random alloc/free sequence checked against a plain model:
// every total must be the exact integer.
TEST(Profile, ExactModeMatchesReferenceModel) {
  Profile p(1, kBig, kBig);
  std::mt19937_64 rng(31337);
  struct Live {
    uint64_t size;
    size_t stack;
  };
  std::map<std::pair<uint32_t, uint64_t>, Live> live;  // the model's live set
  std::vector<std::vector<uint64_t>> stacks = {{0x10}, {0x20, 0x10}, {0x30}, {0x40, 0x30, 0x10}};
  std::vector<uint64_t> alloc_bytes(stacks.size() * 2), alloc_count(stacks.size() * 2);
  for (int i = 0; i < 20000; ++i) {
    uint32_t pid = 1 + rng() % 2;
    uint64_t addr = 0x1000 * (1 + rng() % 500);
    if (rng() % 3 == 0) {
      p.on_free(pid, addr);
      live.erase({pid, addr});
      continue;
    }
    size_t s = rng() % stacks.size();
    uint64_t size = 1 + rng() % 100000;
    alloc(p, pid, AS_FN_MALLOC, addr, size, stacks[s]);
    size_t key = s * 2 + (pid - 1);
    alloc_bytes[key] += size;
    alloc_count[key] += 1;
    live[{pid, addr}] = {size, key};
  }
  std::vector<uint64_t> live_bytes(alloc_bytes.size()), live_count(alloc_bytes.size());
  for (const auto& [k, l] : live) {
    live_bytes[l.stack] += l.size;
    live_count[l.stack] += 1;
  }
  EXPECT_EQ(p.live_count(), live.size());
  for (size_t s = 0; s < stacks.size(); ++s)
    for (uint32_t pid : {1u, 2u}) {
      const StackRecord* r = find(p, pid, AS_FN_MALLOC, stacks[s]);
      ASSERT_NE(r, nullptr);
      size_t key = s * 2 + (pid - 1);
      EXPECT_EQ(r->totals.alloc_bytes, double(alloc_bytes[key]));
      EXPECT_EQ(r->totals.alloc_objects, double(alloc_count[key]));
      EXPECT_EQ(r->totals.samples, alloc_count[key]);
      EXPECT_EQ(r->totals.live_bytes, double(live_bytes[key]));
      EXPECT_EQ(r->totals.live_objects, double(live_count[key]));
      EXPECT_EQ(r->totals.live_samples, live_count[key]);
    }
}

// An always-on recording forgets the stacks of ended processes: the others
// keep their totals, their live samples still find their stacks on free,
// serials never repeat, and the room made takes new stacks.
TEST(Profile, ForgetKeepsTheRestWhole) {
  Profile p(1, 3, kBig);
  const std::vector<uint64_t> a = {0x401000}, b = {0x402000}, c = {0x403000};
  alloc(p, 10, AS_FN_MALLOC, 0x1000, 8, a);
  alloc(p, 20, AS_FN_MALLOC, 0x2000, 16, b);
  alloc(p, 20, AS_FN_MALLOC, 0x3000, 32, c);
  uint64_t serial_c = find(p, 20, AS_FN_MALLOC, c)->serial;
  alloc(p, 30, AS_FN_MALLOC, 0x4000, 64, a);  // the table is full
  EXPECT_EQ(find(p, 30, AS_FN_MALLOC, a), nullptr);

  std::vector<uint32_t> remap = p.forget([](const StackRecord& s) { return s.pid == 10; });
  ASSERT_EQ(remap.size(), 3u);
  EXPECT_EQ(remap[0], Profile::kGone);
  EXPECT_EQ(remap[1], 0u);
  EXPECT_EQ(remap[2], 1u);
  EXPECT_EQ(find(p, 10, AS_FN_MALLOC, a), nullptr);
  EXPECT_EQ(p.live_count(), 2u);  // pid 10's live sample went with its stack
  EXPECT_EQ(find(p, 20, AS_FN_MALLOC, c)->serial, serial_c);
  p.on_free(20, 0x3000);
  EXPECT_EQ(find(p, 20, AS_FN_MALLOC, c)->totals.live_bytes, 0);
  EXPECT_EQ(find(p, 20, AS_FN_MALLOC, c)->totals.alloc_bytes, 32);
  EXPECT_EQ(find(p, 20, AS_FN_MALLOC, b)->totals.live_bytes, 16);

  alloc(p, 30, AS_FN_MALLOC, 0x4000, 64, a);  // room again, under a new serial
  const StackRecord* fresh = find(p, 30, AS_FN_MALLOC, a);
  ASSERT_NE(fresh, nullptr);
  EXPECT_GT(fresh->serial, serial_c);
  alloc(p, 20, AS_FN_MALLOC, 0x5000, 16, b);  // the index still finds kept stacks
  EXPECT_EQ(find(p, 20, AS_FN_MALLOC, b)->totals.samples, 2u);
}

// Folding ended processes' stacks into one instance: stacks of the same
// code (the same new addresses) merge, their totals add up exactly; one
// that lands on a stack the instance already holds joins it; the rest keep
// their places in the index, and the stacks made are new serials.
TEST(Profile, FoldMergesTheSameCodeAndKeepsTheTotals) {
  Profile p(1, 8, kBig);
  const std::vector<uint64_t> a1 = {0x7f0001000}, a2 = {0x7f0002000}, kept = {0x401000}, at_base = {0x1000};
  alloc(p, 10, AS_FN_MALLOC, 0x1000, 8, a1);
  alloc(p, 11, AS_FN_MALLOC, 0x2000, 16, a2);  // another run of the same code, elsewhere (ASLR)
  alloc(p, 12, AS_FN_MALLOC, 0x3000, 32, kept);
  alloc(p, 99, AS_FN_MALLOC, 0x4000, 64, at_base);  // the folded instance, folded into before
  p.on_free(10, 0x1000);
  uint64_t before = find(p, 99, AS_FN_MALLOC, at_base)->serial;

  std::vector<std::optional<Profile::FoldTo>> into(4);
  into[0] = Profile::FoldTo{99, at_base};
  into[1] = Profile::FoldTo{99, at_base};
  std::vector<uint32_t> remap = p.fold(into);
  ASSERT_EQ(p.stacks().size(), 2u);
  EXPECT_EQ(remap[0], remap[1]);
  EXPECT_EQ(remap[0], remap[3]) << "folded onto the stack the instance held";
  EXPECT_NE(remap[2], remap[0]);
  const StackRecord* folded = find(p, 99, AS_FN_MALLOC, at_base);
  ASSERT_NE(folded, nullptr);
  EXPECT_EQ(folded->serial, before);
  EXPECT_EQ(folded->totals.alloc_bytes, 8 + 16 + 64);
  EXPECT_EQ(folded->totals.samples, 3u);
  EXPECT_EQ(folded->totals.live_bytes, 16 + 64);
  EXPECT_EQ(find(p, 10, AS_FN_MALLOC, a1), nullptr);
  EXPECT_EQ(find(p, 12, AS_FN_MALLOC, kept)->totals.alloc_bytes, 32);
  p.on_free(12, 0x3000);  // live samples still find their stacks
  EXPECT_EQ(find(p, 12, AS_FN_MALLOC, kept)->totals.live_bytes, 0);
  EXPECT_DOUBLE_EQ(p.live_bytes(), 16 + 64);
  alloc(p, 12, AS_FN_MALLOC, 0x5000, 32, kept);  // the index still finds kept stacks
  EXPECT_EQ(p.stacks().size(), 2u);
}

TEST(Metric, NamesRoundTrip) {
  for (Metric m : {Metric::AllocSpace, Metric::AllocObjects, Metric::InuseSpace, Metric::InuseObjects})
    EXPECT_EQ(parse_metric(metric_name(m)), m) << metric_name(m);
  EXPECT_STREQ(metric_name(Metric::AllocSpace), "alloc_space");
  EXPECT_STREQ(metric_name(Metric::AllocObjects), "alloc_objects");
  EXPECT_STREQ(metric_name(Metric::InuseSpace), "inuse_space");
  EXPECT_STREQ(metric_name(Metric::InuseObjects), "inuse_objects");
  EXPECT_EQ(parse_metric(""), std::nullopt);
  EXPECT_EQ(parse_metric("Alloc_Space"), std::nullopt);
  EXPECT_EQ(parse_metric("alloc_space "), std::nullopt);
  EXPECT_EQ(parse_metric("live_space"), std::nullopt);
}

TEST(Metric, StackTotalsValueSelectsTheField) {
  StackTotals t;
  t.alloc_bytes = 1;
  t.alloc_objects = 2;
  t.live_bytes = 3;
  t.live_objects = 4;
  EXPECT_EQ(t.value(Metric::AllocSpace), 1);
  EXPECT_EQ(t.value(Metric::AllocObjects), 2);
  EXPECT_EQ(t.value(Metric::InuseSpace), 3);
  EXPECT_EQ(t.value(Metric::InuseObjects), 4);
}

}  // namespace
}  // namespace allocscope
