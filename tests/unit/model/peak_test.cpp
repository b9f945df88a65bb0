// The in-use profile at the peak: what the undo journal (or the copy it
// turns into once long) gives back equals a copy taken at every new high.
#include "model/peak.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "model/profile.h"
#include "splitmix.h"

namespace allocscope {
namespace {

// Every stack's live side, and the total, after each event: the reference.
struct Reference {
  double best = -1;
  uint64_t best_ts = 0;
  std::vector<LiveSide> at_best;

  void observe(const Profile& p, uint64_t ts) {
    double total = 0;
    for (const StackRecord& s : p.stacks()) total += s.totals.live_bytes;
    if (total <= best) return;
    best = total;
    best_ts = ts;
    at_best.clear();
    for (const StackRecord& s : p.stacks()) at_best.push_back(live_side(s.totals));
  }
};

void expect_same(const std::vector<LiveSide>& got, const std::vector<LiveSide>& want) {
  ASSERT_GE(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    LiveSide w = i < want.size() ? want[i] : LiveSide{};
    EXPECT_EQ(got[i].samples, w.samples) << "stack " << i;
    EXPECT_NEAR(got[i].bytes, w.bytes, 1e-6 * (1 + w.bytes)) << "stack " << i;
    EXPECT_NEAR(got[i].objects, w.objects, 1e-6 * (1 + w.objects)) << "stack " << i;
    EXPECT_EQ(got[i].stats.u_bytes, w.stats.u_bytes) << "stack " << i;
  }
}

// A heap that rises to `rise` blocks, then does `churn` random steps with a
// pull downwards (so the peak is early and the journal outgrows its bound,
// or late and stays short), over `sites` stacks of two processes.
void simulate(uint64_t seed, int rise, int churn, double free_bias, uint32_t sites) {
  Rng rng{seed};
  Profile p(4096, 1 << 16, 1 << 20);
  p.keep_peak();
  Reference ref;
  std::vector<std::pair<uint32_t, uint64_t>> live;  // pid, address
  uint64_t next_addr = 0x1000, ts = 1;
  auto alloc = [&] {
    uint32_t pid = 1 + uint32_t(rng.below(2));
    std::vector<uint64_t> ips = {0x400000 + rng.below(sites)};
    uint64_t size = 1 + rng.below(20000), addr = next_addr += 0x10000;
    p.on_alloc({.pid = pid,
                .fn = 0,
                .addr = addr,
                .size = size,
                .offset = rng.below(size),
                .ts_ns = ++ts,
                .ips = ips});
    live.push_back({pid, addr});
  };
  for (int i = 0; i < rise; ++i) {
    alloc();
    ref.observe(p, ts);
  }
  for (int i = 0; i < churn; ++i) {
    if (!live.empty() && rng.uniform() < free_bias) {
      size_t k = rng.below(live.size());
      p.on_free(live[k].first, live[k].second, ++ts);
      live[k] = live.back();
      live.pop_back();
    } else {
      alloc();
    }
    ref.observe(p, ts);
  }
  ASSERT_TRUE(p.peak().seen());
  EXPECT_NEAR(p.peak().bytes(), ref.best, 1e-6 * ref.best);
  EXPECT_EQ(p.peak().ts_ns(), ref.best_ts);
  expect_same(p.live_at_peak(), ref.at_best);
  EXPECT_LE(p.peak().journal_size(), std::max<size_t>(4096, p.stacks().size()));
}

TEST(Peak, EarlyPeakLongAfterIsCopiedOnceTheJournalIsFull) { simulate(1, 3000, 20000, 0.7, 50); }
TEST(Peak, LatePeakKeepsAShortJournal) { simulate(2, 100, 5000, 0.45, 200); }
TEST(Peak, ManySeedsAgreeWithACopyAtEveryHigh) {
  for (uint64_t seed = 10; seed < 30; ++seed) simulate(seed, 200 + int(seed) * 10, 3000, 0.5, 30);
}

// A process that ends drops what it held: after the peak, the peak keeps it.
TEST(Peak, KeepsWhatAnEndedProcessHeld) {
  Profile p(1, 16, 1024);
  p.keep_peak();
  std::vector<uint64_t> a = {0x401000}, b = {0x402000};
  p.on_alloc({.pid = 1, .fn = 0, .addr = 0x10, .size = 1000, .ts_ns = 5, .ips = a});
  p.on_alloc({.pid = 2, .fn = 0, .addr = 0x20, .size = 300, .ts_ns = 6, .ips = b});
  p.drop_process(1);
  p.on_alloc({.pid = 2, .fn = 0, .addr = 0x30, .size = 300, .ts_ns = 7, .ips = b});
  EXPECT_EQ(p.live_bytes(), 600);
  EXPECT_EQ(p.peak().bytes(), 1300);
  EXPECT_EQ(p.peak().ts_ns(), 6u);
  std::vector<LiveSide> at = p.live_at_peak();
  ASSERT_EQ(at.size(), 2u);
  EXPECT_EQ(at[0].bytes, 1000);
  EXPECT_EQ(at[1].bytes, 300);
  // Each process's own high point: 1 held 1000 at 5; 2 reached 600 at 7.
  EXPECT_EQ(p.process_peaks().at(1).peak, 1000);
  EXPECT_EQ(p.process_peaks().at(1).peak_ns, 5u);
  EXPECT_EQ(p.process_peaks().at(1).live, 0);
  EXPECT_EQ(p.process_peaks().at(2).peak, 600);
  EXPECT_EQ(p.process_peaks().at(2).peak_ns, 7u);
}

ExactDelta counted(uint64_t allocs, uint64_t alloc_bytes, uint64_t frees = 0, uint64_t free_bytes = 0) {
  ExactDelta d;
  d.allocs = allocs;
  d.alloc_bytes = alloc_bytes;
  d.frees = frees;
  d.free_bytes = free_bytes;
  return d;
}

// Exact mode: the kernel's totals arrive per stack; a step ends at settle.
TEST(Peak, ExactModeSettlesAfterEachBatch) {
  Profile p(1, 16, 1024);
  p.keep_peak();
  std::vector<uint64_t> a = {0x401000}, b = {0x402000};
  uint32_t sa = *p.intern(1, 0, a), sb = *p.intern(1, 0, b);
  p.add_exact(sa, counted(10, 5000));
  p.settle_peak(100);
  // One batch: a frees 4000 and b allocates 3500; mid-batch the total
  // passed 8500, which was never a state the kernel's totals described.
  p.add_exact(sb, counted(7, 3500));
  p.add_exact(sa, counted(0, 0, 8, 4000));
  p.settle_peak(200);
  EXPECT_EQ(p.peak().bytes(), 5000);
  EXPECT_EQ(p.peak().ts_ns(), 100u);
  std::vector<LiveSide> at = p.live_at_peak();
  EXPECT_EQ(at[sa].bytes, 5000);
  EXPECT_EQ(at[sb].bytes, 0);
  p.add_exact(sb, counted(2, 1000));
  p.settle_peak(300);
  EXPECT_EQ(p.peak().bytes(), 5500);
  EXPECT_EQ(p.peak().ts_ns(), 300u);
}

// Forgetting stacks renumbers them: the peak starts again from what is live.
TEST(Peak, ForgetStartsAgain) {
  Profile p(1, 16, 1024);
  p.keep_peak();
  std::vector<uint64_t> a = {0x401000}, b = {0x402000};
  p.on_alloc({.pid = 1, .fn = 0, .addr = 0x10, .size = 1000, .ts_ns = 5, .ips = a});
  p.on_alloc({.pid = 2, .fn = 0, .addr = 0x20, .size = 300, .ts_ns = 6, .ips = b});
  p.forget([](const StackRecord& s) { return s.pid == 1; });
  EXPECT_EQ(p.live_bytes(), 300);
  EXPECT_FALSE(p.peak().seen());
  p.on_alloc({.pid = 2, .fn = 0, .addr = 0x30, .size = 100, .ts_ns = 7, .ips = b});
  EXPECT_EQ(p.peak().bytes(), 400);
  EXPECT_EQ(p.live_at_peak().at(0).bytes, 400);
}

}  // namespace
}  // namespace allocscope
