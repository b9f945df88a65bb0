// A program that calls its allocator's own entry points (jemalloc's
// mallocx, tcmalloc's tc_malloc, mimalloc's mi_malloc and their resizes and
// sized frees), entered by record -p: the entry takes the probes' int3s out
// of those functions too, so the library must take their slots, or the
// program's allocations vanish. Each site's allocated and in-use bytes are
// the truth's.
#include <gtest/gtest.h>
#include <signal.h>

#include <cmath>
#include <filesystem>
#include <ostream>
#include <string>

#include "harness.h"

namespace allocscope::test {
namespace {

constexpr long kCount = 20000;
constexpr double kRate = 64 * 1024;

struct ApiSite {
  const char* function;
  double size, objects, live_objects;
  bool resizes;
};

// allocator_apis.c's sites at "done": api_small's blocks all resized away,
// every other grown block freed, every kept one live.
constexpr ApiSite kApiSites[] = {
    {"api_small", 100, kCount, 0, false},
    {"api_grow", 4000, kCount, kCount / 2, true},
    {"api_kept", 1000, kCount, kCount, false},
};

struct Allocator {
  const char *name, *allocates, *resizes;  // the program's, and the entry points it calls
};

void PrintTo(const Allocator& a, std::ostream* os) { *os << a.name; }

class AllocatorApis : public ::testing::TestWithParam<Allocator> {};

// 6 checks an allocator at 1.8e-7 each (harness.h): under 3.3e-6 a run for
// the three (and 3 checks each in the launched test: 1.6e-6).
TEST_P(AllocatorApis, AreSampledInAnEnteredProcess) {
  REQUIRE_BPF();
  const Allocator& a = GetParam();
  std::string bin = std::string(ALLOCATOR_APIS_DIR) + "/allocator_apis_" + a.name;
  Child target({bin, std::to_string(kCount)});
  ASSERT_TRUE(target.wait_for_line("ready", 10000));
  std::string out = temp_path("apis.pb.gz");
  Child recorder(
      {ALLOCSCOPE_BIN, "record", "-v", "-p", std::to_string(target.pid()), "--rate", "64KiB", "-o", out});
  ASSERT_TRUE(recorder.wait_for_line("recording process", 30000, true)) << recorder.err();
  target.signal(SIGUSR1);
  ASSERT_TRUE(target.wait_for_line("done", 60000));
  recorder.signal(SIGINT);
  ASSERT_EQ(recorder.wait(60000), 0) << recorder.err();
  EXPECT_NE(recorder.err().find("sampling: in process (1 process entered)"), std::string::npos)
      << recorder.err();
  target.signal(SIGUSR1);
  EXPECT_EQ(target.wait(), 0);
  Recording rec = read_pprof(out);
  std::filesystem::remove(out);
  auto sites = leaf_totals(rec);
  for (const ApiSite& s : kApiSites) {
    // Each named by the entry point it called, as its probe names it.
    const StackTotals& got = sites[std::string(s.function) + ";" + (s.resizes ? a.resizes : a.allocates)];
    double bytes = s.objects * s.size, live = s.live_objects * s.size;
    double sd = ht_sigma(s.objects, s.size, kRate, true) + 1;
    EXPECT_LT(std::fabs(got.alloc_bytes - bytes) / sd, kMaxZ)
        << s.function << " alloc " << got.alloc_bytes << " truth " << bytes;
    double live_sd = ht_sigma(s.live_objects, s.size, kRate, true) + 1;
    EXPECT_LT(std::fabs(got.live_bytes - live) / live_sd, kMaxZ)
        << s.function << " live " << got.live_bytes << " truth " << live;
  }
}

// Launched, the library preloaded: the same entry points' slots are taken
// at its start (the allocator's file is left to in-process sampling, its
// probes deferred). At the end every block was freed, by a sized free.
TEST_P(AllocatorApis, AreSampledInALaunchedProgram) {
  REQUIRE_BPF();
  const Allocator& a = GetParam();
  std::string bin = std::string(ALLOCATOR_APIS_DIR) + "/allocator_apis_" + a.name;
  std::string out = temp_path("launched-apis.pb.gz");
  RunResult r = run({ALLOCSCOPE_BIN, "record", "-v", "--rate", "64KiB", "-o", out, "--", bin,
                     std::to_string(kCount), "now"});
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.err.find("sampling: in process"), std::string::npos) << r.err;
  Recording rec = read_pprof(out);
  std::filesystem::remove(out);
  auto sites = leaf_totals(rec);
  for (const ApiSite& s : kApiSites) {
    const StackTotals& got = sites[std::string(s.function) + ";" + (s.resizes ? a.resizes : a.allocates)];
    double bytes = s.objects * s.size;
    double sd = ht_sigma(s.objects, s.size, kRate, true) + 1;
    EXPECT_LT(std::fabs(got.alloc_bytes - bytes) / sd, kMaxZ)
        << s.function << " alloc " << got.alloc_bytes << " truth " << bytes;
    EXPECT_NEAR(got.live_bytes, 0, 1) << s.function << ": every block was freed";
  }
}

INSTANTIATE_TEST_SUITE_P(Inject, AllocatorApis,
                         ::testing::Values(Allocator{"jemalloc", "mallocx", "rallocx"},
                                           Allocator{"tcmalloc", "tc_malloc", "tc_realloc"},
                                           Allocator{"mimalloc", "mi_malloc", "mi_realloc"}),
                         [](const auto& info) { return std::string(info.param.name); });

}  // namespace
}  // namespace allocscope::test
