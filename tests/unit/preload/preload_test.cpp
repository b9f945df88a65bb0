// The in-process sampler's parts that run without a kernel: its set of
// sampled blocks, its entry codes, the environment that loads it, and the
// notes by which allocscope recognizes it.
#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <memory>
#include <set>
#include <thread>
#include <vector>

#include "abi/preload/entry_codes.h"
#include "host/preload_library.h"
#include "preload/allocator_apis.h"
#include "preload/sampled_set.h"
#include "probe/placement/allocator_entries.h"
#include "probe/placement/usdt_notes.h"
#include "stats/sampling.h"

namespace allocscope {
namespace {

TEST(SampledSet, RemembersWhatWasInsertedAndForgetsItOnce) {
  auto set = std::make_unique<as_sampled_set>();
  std::vector<uint64_t> addrs;
  for (uint64_t i = 1; i <= 10000; ++i) addrs.push_back(0x7f0000000000ULL + i * 48);
  for (uint64_t a : addrs) ASSERT_TRUE(as_set_insert(set.get(), a));
  for (uint64_t a : addrs) EXPECT_FALSE(as_set_remove(set.get(), a + 16)) << "never inserted";
  for (uint64_t a : addrs) EXPECT_TRUE(as_set_remove(set.get(), a));
  for (uint64_t a : addrs) EXPECT_FALSE(as_set_remove(set.get(), a)) << "removed twice";
  for (uint32_t b = 0; b < AS_SET_BUCKETS; ++b) ASSERT_EQ(set->counts[b], 0) << "bucket " << b;
}

TEST(SampledSet, AFullBucketRefusesAndSaysSo) {
  auto set = std::make_unique<as_sampled_set>();
  // Addresses of one bucket: more than it holds.
  std::vector<uint64_t> same;
  uint32_t bucket = as_set_bucket(0x1000);
  for (uint64_t a = 0x1000; same.size() < AS_SET_WAYS + 3; a += 16)
    if (as_set_bucket(a) == bucket) same.push_back(a);
  int refused = 0;
  for (uint64_t a : same) refused += !as_set_insert(set.get(), a);
  EXPECT_EQ(refused, 3);
  EXPECT_EQ(set->counts[bucket], AS_SET_WAYS);
  EXPECT_FALSE(as_set_remove(set.get(), same.back())) << "a refused address is not there";
  EXPECT_TRUE(as_set_remove(set.get(), same.front()));
  EXPECT_TRUE(as_set_insert(set.get(), same.back())) << "room again after a removal";
}

// Threads inserting and removing their own addresses at once, while others
// look up addresses never inserted: nothing lost, nothing invented.
TEST(SampledSet, ConcurrentThreadsLoseNothing) {
  auto set = std::make_unique<as_sampled_set>();
  std::atomic<int> errors{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&, t] {
      for (int round = 0; round < 50; ++round) {
        std::vector<uint64_t> mine;
        for (uint64_t i = 0; i < 2000; ++i) {
          uint64_t a = (uint64_t(t + 1) << 40) + (round * 2000 + i) * 64;
          if (as_set_insert(set.get(), a)) mine.push_back(a);
        }
        if (as_set_remove(set.get(), (uint64_t(t + 1) << 40) + 8)) errors++;
        for (uint64_t a : mine)
          if (!as_set_remove(set.get(), a)) errors++;
      }
    });
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(errors.load(), 0);
  for (uint32_t b = 0; b < AS_SET_BUCKETS; ++b) ASSERT_EQ(set->counts[b], 0) << "bucket " << b;
}

TEST(PreloadEntryCodes, AreTheAllocatorTablesCodes) {
  struct {
    const char* symbol;
    int code;
  } codes[] = {
      {"_Znwm", AS_CODE_NEW},
      {"_Znam", AS_CODE_NEW_ARRAY},
      {"_ZnwmRKSt9nothrow_t", AS_CODE_NEW_NOTHROW},
      {"_ZnamRKSt9nothrow_t", AS_CODE_NEW_ARRAY_NOTHROW},
      {"_ZnwmSt11align_val_t", AS_CODE_NEW_ALIGNED},
      {"_ZnamSt11align_val_t", AS_CODE_NEW_ARRAY_ALIGNED},
      {"_ZnwmSt11align_val_tRKSt9nothrow_t", AS_CODE_NEW_ALIGNED_NOTHROW},
      {"_ZnamSt11align_val_tRKSt9nothrow_t", AS_CODE_NEW_ARRAY_ALIGNED_NOTHROW},
      {"PyMem_Malloc", AS_CODE_PYMEM_MALLOC},
      {"PyMem_Calloc", AS_CODE_PYMEM_CALLOC},
      {"PyMem_Realloc", AS_CODE_PYMEM_REALLOC},
      {"PyObject_Malloc", AS_CODE_PYOBJ_MALLOC},
      {"PyObject_Calloc", AS_CODE_PYOBJ_CALLOC},
      {"PyObject_Realloc", AS_CODE_PYOBJ_REALLOC},
      {"new", AS_CODE_JAVA_NEW},
  };
  for (const auto& c : codes) {
    const AllocatorEntry* e = allocator_entry(c.symbol);
    ASSERT_NE(e, nullptr) << c.symbol;
    EXPECT_EQ(entry_code(*e), c.code) << c.symbol;
  }
  EXPECT_EQ(entry_name(AS_CODE_NEW), "operator new(unsigned long)");
  EXPECT_EQ(entry_name(AS_CODE_PYOBJ_CALLOC), "PyObject_Calloc");
  EXPECT_FALSE(allocator_entry("PyObject_Malloc")->probed) << "named for in-process samples, never probed";
}

// The allocators' own entry points an injection's slots point at the
// library report the codes of allocscope's table, as their probes would.
TEST(PreloadEntryCodes, OfTheAllocatorsOwnEntryPointsAreTheTablesCodes) {
  size_t n = 0;
#define CHECK_API(name, index, kind, shape)                         \
  {                                                                 \
    const AllocatorEntry* e = allocator_entry(#name);               \
    ASSERT_NE(e, nullptr) << #name;                                 \
    EXPECT_EQ(entry_code(*e), AS_ENTRY_CODE(index, kind)) << #name; \
    EXPECT_TRUE(e->probed) << #name;                                \
    ++n;                                                            \
  }
  AS_ALLOCATOR_APIS(CHECK_API)
#undef CHECK_API
  EXPECT_EQ(n, 70u);
}

TEST(PreloadEnvironment, PutsTheLibraryFirstAndSetsTheRate) {
  // An outer recording's socket is not inherited: the library would write there.
  auto env = preload_environment({"PATH=/bin", "LD_PRELOAD=libjemalloc.so.2", "ALLOCSCOPE_RATE=7",
                                  "ALLOCSCOPE_SOCKET=/tmp/a/rings", "ALLOCSCOPE_FREES_SOCKET=/tmp/b/rings"},
                                 "/x/lib.so", 65536);
  std::set<std::string> got(env.begin(), env.end());
  EXPECT_EQ(got, (std::set<std::string>{"PATH=/bin", "LD_PRELOAD=/x/lib.so:libjemalloc.so.2",
                                        "ALLOCSCOPE_RATE=65536"}));
  env = preload_environment({"HOME=/root"}, "/x/lib.so", 1);
  got = {env.begin(), env.end()};
  EXPECT_EQ(got, (std::set<std::string>{"HOME=/root", "LD_PRELOAD=/x/lib.so", "ALLOCSCOPE_RATE=1"}));
}

TEST(InProcessProbes, TheLibraryHasThemTheCLibraryDoesNot) {
  auto lib = has_in_process_probes(PRELOAD_LIB);
  ASSERT_TRUE(lib) << lib.error().message;
  EXPECT_TRUE(*lib);
  auto provider = has_in_process_probes(OTEL_PROVIDER_BIN);
  ASSERT_TRUE(provider) << provider.error().message;
  EXPECT_TRUE(*provider);
  auto libc = has_in_process_probes("/lib/x86_64-linux-gnu/libc.so.6");
  ASSERT_TRUE(libc) << libc.error().message;
  EXPECT_FALSE(*libc);
  auto text = has_in_process_probes("/etc/passwd");
  ASSERT_FALSE(text);
  EXPECT_EQ(text.error().cause, Cause::NotElf);
}

// A weight-only sample is counted when its weight is the session rate's,
// and given the mean offset of the sampled byte.
TEST(WeightOnlySamples, CountedOnlyAtTheSessionsRate) {
  for (uint64_t size : {1ULL, 64ULL, 100000ULL, 10000000ULL}) {
    uint64_t weight = uint64_t(std::llround(double(size) / sample_probability(size, 524288)));
    EXPECT_TRUE(weight_fits_rate(size, weight, 524288)) << size;
    EXPECT_EQ(weight_fits_rate(size, weight, 600000), size >= 10000000) << size << ": another rate";
  }
  EXPECT_FALSE(weight_fits_rate(100, 50, 524288)) << "lighter than its size";
  EXPECT_EQ(expected_offset(64, 524288), 31u);
  uint64_t big = expected_offset(10 << 20, 524288);
  EXPECT_NEAR(double(big), 524288.0, 1.0) << "a large block: the mean of the exponential";
}

}  // namespace
}  // namespace allocscope
