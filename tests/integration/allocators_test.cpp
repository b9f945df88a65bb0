// Allocators other than the C library's: Debian's jemalloc, tcmalloc and
// mimalloc preloaded, and malloc linked into the executable (glibc -static,
// musl -static, jemalloc's static library). Each allocation is counted once,
// exactly at --rate 1 and within kMaxZ sigma at the default rate, in every mode.
#include <gtest/gtest.h>
#include <signal.h>
#include <stdlib.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>

#include "cxx_sites_spec.h"
#include "harness.h"
#include "host/process.h"
#include "output/pprof.h"
#include "stats/sampling.h"
#include "workload_spec.h"

namespace allocscope::test {
namespace {

constexpr int kThreads = 2;
constexpr const char* kLibDir = "/usr/lib/x86_64-linux-gnu/";

struct Preload {
  const char* name;
  const char* file;
};
constexpr Preload kPreloads[] = {{"jemalloc", "libjemalloc.so.2"},
                                 {"tcmalloc", "libtcmalloc_minimal.so.4"},
                                 {"mimalloc", "libmimalloc.so.2"}};

std::string preload_path(const Preload& p) {
  std::string path = std::string(kLibDir) + p.file;
  EXPECT_TRUE(std::filesystem::exists(path)) << path << " is missing: dev.sh installs it";
  return path;
}

Recording decode_file(const std::string& out) {
  Recording rec = read_pprof(out);
  std::filesystem::remove(out);
  return rec;
}

// allocscope record OPTIONS -- alloc_sites, with `preload` (if any) in the
// environment the command inherits.
Recording record_launched(const std::vector<std::string>& options, const std::string& preload,
                          const std::string& workload, int scale) {
  std::string out = temp_path("allocators.pb.gz");
  std::vector<std::string> argv = {ALLOCSCOPE_BIN, "record", "-q", "-o", out};
  argv.insert(argv.end(), options.begin(), options.end());
  argv.insert(argv.end(),
              {"--", workload, "--threads", std::to_string(kThreads), "--scale-pct", std::to_string(scale)});
  if (!preload.empty()) setenv("LD_PRELOAD", preload.c_str(), 1);
  RunResult r = run(argv);
  unsetenv("LD_PRELOAD");
  EXPECT_EQ(r.status, 0) << r.err;
  return decode_file(out);
}

// allocscope record -p PID OPTIONS on alloc_sites started (preloaded) before it.
Recording record_attached(const std::vector<std::string>& options, const std::string& preload, int scale) {
  std::vector<std::string> cmd = {WORKLOAD_BIN,  "--threads",           std::to_string(kThreads),
                                  "--scale-pct", std::to_string(scale), "--wait"};
  if (!preload.empty()) cmd.insert(cmd.begin(), {"env", "LD_PRELOAD=" + preload});
  Child target(cmd);
  EXPECT_TRUE(target.wait_for_line("ready", 10000));
  std::string out = temp_path("allocators-p.pb.gz");
  std::vector<std::string> argv = {ALLOCSCOPE_BIN, "record", "-p", std::to_string(target.pid()), "-o", out};
  argv.insert(argv.end(), options.begin(), options.end());
  Child recorder(argv);
  EXPECT_TRUE(recorder.wait_for_line("recording", 30000, true)) << recorder.err();
  target.signal(SIGUSR1);
  EXPECT_EQ(target.wait(), 0);
  EXPECT_EQ(recorder.wait(60000), 0) << recorder.err();
  return decode_file(out);
}

// Exact mode: every site's allocated and still-live bytes and objects.
void expect_exact(const Recording& r, int scale, const std::string& what) {
  auto sites = site_totals(r);
  for (const site_spec& s : kSites) {
    Truth t = site_truth(s, kThreads, scale);
    const StackTotals& st = sites[s.function];
    EXPECT_EQ(st.alloc_bytes, t.bytes) << what << ": " << s.function;
    EXPECT_EQ(st.alloc_objects, t.objects) << what << ": " << s.function;
    EXPECT_EQ(st.live_bytes, t.live_bytes) << what << ": " << s.function << " at exit";
  }
}

// Sampled: the sum over sites, in standard deviations of the estimate.
void expect_unbiased(const Recording& r, int scale, const std::string& what) {
  std::map<std::string, double> bytes;
  for (const auto& [site, totals] : site_totals(r)) bytes[site] = totals.alloc_bytes;
  EXPECT_LT(std::fabs(sites_z(bytes, kThreads, scale, double(kDefaultRate), what)), kMaxZ) << what;
}

TEST(Allocators, PreloadedAllocatorsCountEachAllocationOnceInEveryMode) {
  REQUIRE_BPF();
  const int scale = 5;
  for (const Preload& p : kPreloads) {
    std::string lib = preload_path(p);
    expect_exact(record_launched({"--rate", "1"}, lib, WORKLOAD_BIN, scale), scale,
                 std::string(p.name) + " -- CMD");
    expect_exact(record_attached({"--rate", "1"}, lib, scale), scale, std::string(p.name) + " -p");
    expect_exact(record_attached({"--rate", "1", "--all"}, lib, scale), scale,
                 std::string(p.name) + " --all -p");
    expect_unbiased(record_launched({}, lib, WORKLOAD_BIN, 40), 40, std::string(p.name) + " -- CMD, 512 KiB");
  }
}

// `-- env LD_PRELOAD=lib prog`, the way a preload is often written: the
// preload is probed before the program runs, so a short run is exact too.
TEST(Allocators, PreloadSetInsideTheCommandIsProbedBeforeItRuns) {
  REQUIRE_BPF();
  const int scale = 2;
  for (const Preload& p : kPreloads) {
    std::string out = temp_path("env-preload.pb.gz");
    RunResult r = run({ALLOCSCOPE_BIN, "record", "-q", "--rate", "1", "-o", out, "--", "env",
                       std::string("LD_PRELOAD=") + p.file, WORKLOAD_BIN, "--threads",
                       std::to_string(kThreads), "--scale-pct", std::to_string(scale)});
    EXPECT_EQ(r.status, 0) << r.err;
    expect_exact(decode_file(out), scale, std::string(p.name) + " -- env LD_PRELOAD=" + p.file);
  }
}

TEST(Allocators, MallocLinkedIntoTheExecutable) {
  REQUIRE_BPF();
  const int scale = 5;
  for (auto [name, bin] :
       {std::pair{"glibc -static", WORKLOAD_STATIC_BIN}, std::pair{"musl -static", WORKLOAD_MUSL_BIN},
        std::pair{"jemalloc_pic.a", WORKLOAD_JEMALLOC_BIN}}) {
    expect_exact(record_launched({"--rate", "1"}, "", bin, scale), scale, std::string(name) + " -- CMD");
    expect_unbiased(record_launched({}, "", bin, 40), 40, std::string(name) + " -- CMD, 512 KiB");
  }
}

// tcmalloc defines operator new and delete itself: C++ allocations are
// probed there, named as the operator, and counted once although tcmalloc's
// operator new and malloc share code.
void expect_tcmalloc_operators_at_the_leaf(const std::vector<std::string>& options) {
  const unsigned scale = 10;
  struct Site {
    const char* function;
    double size;
    unsigned count;
  };
  const Site sites[] = {
      {"cxx_site_new(unsigned int)", double(kNewSize), kNewCount},
      {"cxx_site_vector(unsigned int)", double(kVectorElements * sizeof(long)), kVectorCount},
      {"cxx_site_string(unsigned int)", double(kStringCapacity + 1), kStringCount}};
  std::string out = temp_path("tcmalloc-cxx.folded");
  setenv("LD_PRELOAD", preload_path(kPreloads[1]).c_str(), 1);
  std::vector<std::string> argv = {ALLOCSCOPE_BIN, "record", "-q", "--rate", "1", "-o", out};
  argv.insert(argv.end(), options.begin(), options.end());
  argv.insert(argv.end(), {"--", CXX_SITES_BIN, "--scale-pct", std::to_string(scale)});
  RunResult r = run(argv);
  unsetenv("LD_PRELOAD");
  ASSERT_EQ(r.status, 0) << r.err;
  Folded folded = read_folded(out);
  std::filesystem::remove(out);
  for (const Site& s : sites) {
    double as_new = 0, other = 0;
    for (const auto& [frames, value] : folded) {
      if (std::find(frames.begin(), frames.end(), s.function) == frames.end()) continue;
      // new and new[] are one function in tcmalloc (its uprobe is named by the
      // first); the preload library names the one the program called.
      (frames.back().starts_with("operator new") ? as_new : other) += value;
    }
    EXPECT_EQ(as_new, s.size * (s.count * scale / 100)) << s.function;
    EXPECT_EQ(other, 0) << s.function << ": counted under another entry point too";
  }
}

TEST(Allocators, CxxOperatorsOfTcmallocAreTheLeaf) {
  REQUIRE_BPF();
  expect_tcmalloc_operators_at_the_leaf({});
}

// In process: the preload library counts tcmalloc's own operator new, which
// calls no malloc it could see, once.
TEST(Allocators, CxxOperatorsOfTcmallocAreTheLeafInProcess) {
  REQUIRE_BPF();
  expect_tcmalloc_operators_at_the_leaf({"--preload"});
}

// The preload library forwards to whichever allocator is preloaded after
// it: every allocation counted once, exactly and sampled.
TEST(Allocators, InProcessSamplingOnEveryAllocator) {
  REQUIRE_BPF();
  for (const Preload& p : kPreloads) {
    std::string lib = preload_path(p);
    expect_exact(record_launched({"--rate", "1", "--preload"}, lib, WORKLOAD_BIN, 5), 5,
                 std::string(p.name) + " --preload");
    expect_unbiased(record_launched({"--preload"}, lib, WORKLOAD_BIN, 40), 40,
                    std::string(p.name) + " --preload, 512 KiB");
  }
}

}  // namespace
}  // namespace allocscope::test
