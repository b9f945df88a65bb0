// How the probes reach the kernel: with uprobe sessions the return program
// runs only for sampled calls; with classic uretprobes it runs for all.
#include <gtest/gtest.h>
#include <signal.h>

#include <algorithm>
#include <regex>

#include "harness.h"
#include "probe/features/kernel_features.h"
#include "probe/session/bpf_session.h"

namespace allocscope::test {
namespace {

constexpr long kPairs = 200000;

struct KernelCounters {
  long samples = -1, returns = -1;
};

// Runs malloc_bench under `allocscope record -v -p --no-inject` (its
// allocator probed, not entered) and reads the counters.
KernelCounters record_bench(const std::vector<std::string>& options) {
  Child bench({MALLOC_BENCH_BIN, "--pairs", std::to_string(kPairs), "--wait"});
  EXPECT_TRUE(bench.wait_for_line("ready", 10000));
  std::vector<std::string> argv = {
      ALLOCSCOPE_BIN, "record", "-v", "--no-inject", "-p", std::to_string(bench.pid()), "-o", "/dev/null"};
  argv.insert(argv.end(), options.begin(), options.end());
  Child recorder(argv);
  EXPECT_TRUE(recorder.wait_for_line("recording process", 20000, true)) << recorder.err();
  bench.signal(SIGUSR1);
  EXPECT_EQ(bench.wait(), 0);
  EXPECT_EQ(recorder.wait(60000), 0) << recorder.err();
  std::smatch m;
  KernelCounters k;
  if (std::regex_search(recorder.err(), m, std::regex(R"(samples=(\d+) .* returns=(\d+))"))) {
    k.samples = std::stol(m[1]);
    k.returns = std::stol(m[2]);
  }
  return k;
}

TEST(Probes, SessionRunsTheReturnProgramOnlyForSampledCalls) {
  REQUIRE_BPF();
  if (!kernel_features().has(Feature::UprobeSession))
    GTEST_SKIP() << "kernel without uprobe sessions (6.13+)";
  KernelCounters k = record_bench({"--probe-mode", "session"});
  std::printf("  session: %ld samples, %ld return-program runs, %ld malloc calls\n", k.samples, k.returns,
              kPairs);
  ASSERT_GT(k.samples, 100);
  // Every sampled call's return is seen; beyond those, only the few calls of
  // entry points that may nest (calloc, realloc, ...) made by thread start-up.
  EXPECT_GE(k.returns, k.samples);
  EXPECT_LE(k.returns, k.samples + 200);
}

TEST(Probes, ClassicRunsTheReturnProgramForEveryCall) {
  REQUIRE_BPF();
  KernelCounters k = record_bench({"--probe-mode", "classic"});
  std::printf("  classic: %ld samples, %ld return-program runs, %ld malloc calls\n", k.samples, k.returns,
              kPairs);
  ASSERT_GT(k.samples, 100);
  EXPECT_GE(k.returns, kPairs);
}

// Where the kernel has no uprobe sessions (forced on kernels that have them),
// --probe-mode session is refused before anything is loaded, in one line
// that names what is missing and what to do; auto falls back to classic
// probes and records.
TEST(Probes, SessionModeIsRefusedInOneLineWithoutSessions) {
  REQUIRE_BPF();
  std::vector<std::string> argv{ALLOCSCOPE_BIN,
                                "record",
                                "--force-fallback",
                                "uprobe_session",
                                "--probe-mode",
                                "session",
                                "-o",
                                temp_path("refused.folded"),
                                "--",
                                WORKLOAD_BIN,
                                "--scale-pct",
                                "1"};
  RunResult refused = run(argv);
  EXPECT_EQ(refused.status, 1) << refused.err;
  EXPECT_EQ(std::count(refused.err.begin(), refused.err.end(), '\n'), 1) << refused.err;
  for (const char* words : {"uprobe sessions", "6.13", "--probe-mode auto or classic"})
    EXPECT_NE(refused.err.find(words), std::string::npos) << words << " in: " << refused.err;
  EXPECT_EQ(refused.out, "") << "the workload ran";

  *std::find(argv.begin(), argv.end(), "session") = "auto";
  argv.insert(std::find(argv.begin(), argv.end(), "record") + 1, {"-v", "--probes"});
  RunResult fallback = run(argv);
  EXPECT_EQ(fallback.status, 0) << fallback.err;
  EXPECT_NE(fallback.err.find("classic probes in"), std::string::npos) << fallback.err;
  EXPECT_NE(fallback.out.find("live blocks"), std::string::npos) << fallback.out;
}

TEST(Probes, NullProbesRecordNothing) {
  REQUIRE_BPF();
  KernelCounters k = record_bench({"--null-probes"});
  EXPECT_EQ(k.samples, 0);
  EXPECT_EQ(k.returns, 0);
}

}  // namespace
}  // namespace allocscope::test
