// The record the preload library writes at a sampled trial when there is
// no BPF (preload/trial_record.h): its registers and stack copy, unwound in
// userspace with the kernel walk's step and this process's own tables,
// reach every frame glibc's backtrace reaches, return address for return
// address.
#include "abi/preload/trial_record.h"

#include <gtest/gtest.h>
#include <pthread.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "host/proc_maps.h"
#include "host/process.h"
#include "memory_ring.h"
#include "self_rows.h"
#include "symbols/stack_walk.h"
#include "symbols/symbolizer.h"

extern "C" {
struct trial_chain {  // as in trial_chain.c
  as_ring_header* ring;
  uint64_t stack_end;
  void* backtrace[128];
  int depth;
  int written;
};
int trial_chain_outer(trial_chain* c, int n);
}

namespace allocscope {
namespace {

struct Trial {
  as_trial_alloc head{};
  std::vector<uint8_t> stack;
};

std::vector<Trial> read_trials(as_ring_header* h) {
  std::vector<Trial> out;
  uint32_t len = 0, tgid = 0, busy = 0;
  while (const void* p = as_ring_peek(h, &len, &tgid, &busy)) {
    Trial t;
    EXPECT_GE(len, sizeof t.head);
    std::memcpy(&t.head, p, sizeof t.head);
    EXPECT_EQ(len, sizeof t.head + t.head.walk.len);
    const auto* b = static_cast<const uint8_t*>(p) + sizeof t.head;
    t.stack.assign(b, b + t.head.walk.len);
    out.push_back(std::move(t));
    as_ring_release(h);
  }
  return out;
}

struct Result {
  std::vector<uint64_t> walked, backtrace;
  int stop = AS_STOP_NONE;
  uint32_t copied = 0;
};

// Runs the chain on this thread, whose stack ends at stack_end, and walks
// what it wrote.
Result walk_a_trial(uint64_t stack_end) {
  MemoryRing ring(1 << 17);
  trial_chain c{};
  c.ring = ring.h;
  c.stack_end = stack_end;
  trial_chain_outer(&c, 2);
  EXPECT_EQ(c.written, 1);
  std::vector<Trial> trials = read_trials(ring.h);
  Result r;
  if (trials.size() != 1) {
    ADD_FAILURE() << trials.size() << " records";
    return r;
  }
  const as_deferred_walk& w = trials[0].head.walk;
  auto maps = read_maps(getpid());
  EXPECT_TRUE(maps.has_value());
  SelfRows rows(*maps);
  StackCopy mem(w.sp, trials[0].stack);
  r.walked.push_back(w.ip);
  r.stop = continue_walk({w.ip, w.sp, w.bp, 0, 0}, w.stack_end, rows, mem, r.walked, true);
  r.copied = w.len;
  for (int i = 0; i < c.depth; ++i) r.backtrace.push_back(uint64_t(uintptr_t(c.backtrace[i])));
  return r;
}

// Frame 0 differs by design (where the capture ran, where backtrace was
// called); every caller's return address must be the same.
void expect_same_callers(const Result& r) {
  std::vector<std::string> n = function_names(r.walked);
  std::string all;
  for (const auto& s : n) all += "\n  " + s;
  SCOPED_TRACE("walked:" + all);
  ASSERT_GE(n.size(), 4u);
  EXPECT_EQ(n[0], "trial_chain_inner");
  EXPECT_EQ(n[1], "trial_chain_middle");
  EXPECT_EQ(n[2], "trial_chain_outer");
  EXPECT_EQ(r.stop, AS_STOP_COMPLETE);
  // backtrace's own frames come first (one more where a sanitizer wraps it).
  auto at = std::find(r.backtrace.begin(), r.backtrace.end(), r.walked[1]);
  ASSERT_NE(at, r.backtrace.end()) << "the middle function's return address";
  std::vector<uint64_t> theirs(at, r.backtrace.end()), ours(r.walked.begin() + 1, r.walked.end());
  EXPECT_EQ(ours, theirs);
}

uint64_t main_stack_end() {
  auto maps = read_maps(getpid());
  const Mapping* m = maps ? find_mapping(*maps, uint64_t(uintptr_t(__builtin_frame_address(0)))) : nullptr;
  return m ? m->end : 0;
}

TEST(TrialRecord, ItsStackWalksAsFarAsGlibcsBacktrace) {
  Result r = walk_a_trial(main_stack_end());
  expect_same_callers(r);
}

TEST(TrialRecord, AThreadsStackEndsWhereItsAttributesSay) {
  Result r;
  std::thread t([&] {
    pthread_attr_t a;
    ASSERT_EQ(pthread_getattr_np(pthread_self(), &a), 0);
    void* base = nullptr;
    size_t size = 0;
    pthread_attr_getstack(&a, &base, &size);
    pthread_attr_destroy(&a);
    r = walk_a_trial(uint64_t(uintptr_t(base)) + size);
  });
  t.join();
  expect_same_callers(r);
}

TEST(TrialRecord, TheCopyEndsAtTheStacksEndAndAtMost32KiB) {
  EXPECT_EQ(as_trial_stack_len(0x10000, 0x10000), 0u);
  EXPECT_EQ(as_trial_stack_len(0x10000, 0x8000), 0u);
  EXPECT_EQ(as_trial_stack_len(0x10000, 0x10000 + 100), 96u);
  EXPECT_EQ(as_trial_stack_len(0x10000, 0x10000 + (1 << 20)), uint32_t(AS_DEFER_STACK_BYTES));
}

TEST(TrialRecord, ARingWithoutRoomCountsTheTrialLost) {
  MemoryRing ring(4096);  // a record must fit in half the ring: a 32 KiB copy cannot
  trial_chain c{};
  c.ring = ring.h;
  c.stack_end = main_stack_end();
  trial_chain_outer(&c, 2);
  EXPECT_EQ(c.written, 0);
  EXPECT_EQ(ring.h->lost, 1u);
  EXPECT_TRUE(as_trial_write_free(ring.h, 7, 8, 0x1000));
  uint32_t len = 0, tgid = 0, busy = 0;
  const auto* f = static_cast<const as_trial_free*>(as_ring_peek(ring.h, &len, &tgid, &busy));
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(len, sizeof *f);
  EXPECT_EQ(f->kind, uint32_t(AS_TRIAL_FREE));
  EXPECT_EQ(f->addr, 0x1000u);
  EXPECT_EQ(tgid, 7u);
}

}  // namespace
}  // namespace allocscope
