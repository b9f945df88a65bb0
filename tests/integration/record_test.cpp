// allocscope record against the alloc_sites workload, with real BPF.
#include <gtest/gtest.h>
#include <signal.h>

#include <cmath>
#include <cstdio>

#include "harness.h"
#include "stats/sampling.h"

namespace allocscope::test {
namespace {

constexpr int kThreads = 2;

std::vector<std::string> workload(int scale_pct, std::vector<std::string> extra = {}) {
  std::vector<std::string> argv = {WORKLOAD_BIN, "--threads", std::to_string(kThreads), "--scale-pct",
                                   std::to_string(scale_pct)};
  argv.insert(argv.end(), extra.begin(), extra.end());
  return argv;
}

// Records the workload launched by allocscope; returns the folded output.
Folded record_command(const std::vector<std::string>& options, int scale_pct, RunResult* result = nullptr) {
  std::string out = temp_path("record.folded");
  std::vector<std::string> argv = {ALLOCSCOPE_BIN, "record", "-q", "-o", out};
  argv.insert(argv.end(), options.begin(), options.end());
  argv.push_back("--");
  for (const std::string& a : workload(scale_pct)) argv.push_back(a);
  RunResult r = run(argv);
  EXPECT_EQ(r.status, 0) << r.err;
  Folded folded = read_folded(out);
  std::remove(out.c_str());
  if (result) *result = r;
  return folded;
}

double truth_of(const Truth& t, const std::string& metric) {
  if (metric == "alloc_space") return t.bytes;
  if (metric == "alloc_objects") return t.objects;
  if (metric == "inuse_space") return t.live_bytes;
  return t.live_objects;
}

// --rate 1: every allocation is recorded, so every site's totals are exact.
class ExactMode : public ::testing::TestWithParam<std::string> {};

void expect_exact(const std::string& metric, std::vector<std::string> options) {
  const int scale = 2;
  options.insert(options.end(), {"--rate", "1", "--metric", metric});
  Folded folded = record_command(options, scale);
  ASSERT_FALSE(folded.empty());
  for (const site_spec& s : kSites) {
    double truth = truth_of(site_truth(s, kThreads, scale), metric);
    EXPECT_EQ(site_value(folded, s.function, s.allocator), truth) << s.function << " " << metric;
  }
}

TEST_P(ExactMode, EverySiteEqualsTruth) {
  REQUIRE_BPF();
  expect_exact(GetParam(), {});
}

// The same through the in-process sampler (liballocscope-preload.so).
TEST_P(ExactMode, EverySiteEqualsTruthInProcess) {
  REQUIRE_BPF();
  expect_exact(GetParam(), {"--preload"});
}

INSTANTIATE_TEST_SUITE_P(Metrics, ExactMode,
                         ::testing::Values("alloc_space", "alloc_objects", "inuse_space", "inuse_objects"));

// Default rate: every site's estimate is within kMaxZ standard deviations of
// the truth (Horvitz-Thompson variance over the site's allocations).
class DefaultRate : public ::testing::TestWithParam<std::string> {};

void expect_unbiased(const std::string& metric, std::vector<std::string> options) {
  const int scale = 50;
  const bool live = metric.starts_with("inuse");
  const bool bytes = metric.ends_with("space");
  options.insert(options.end(), {"--metric", metric});
  Folded folded = record_command(options, scale);
  double samples_expected = 0;
  for (const site_spec& s : kSites) {
    Truth t = site_truth(s, kThreads, scale);
    double count = live ? t.live_objects : t.objects;
    double truth = truth_of(t, metric);
    double estimate = site_value(folded, s.function, s.allocator);
    samples_expected += count * sample_probability(s.size, kDefaultRate);
    if (count == 0) {  // a site that frees everything holds nothing live
      EXPECT_EQ(estimate, 0) << s.function << " " << metric;
      continue;
    }
    double sigma = ht_sigma(count, double(s.size), double(kDefaultRate), bytes);
    double z = (estimate - truth) / sigma;
    std::printf("  %-20s %-14s truth %14.0f estimate %14.0f z %+.2f\n", s.function, metric.c_str(), truth,
                estimate, z);
    EXPECT_LT(std::fabs(z), kMaxZ) << s.function << " " << metric << " truth " << truth << " estimate "
                                   << estimate;
  }
  EXPECT_GT(samples_expected, 200) << "the workload is too small for a statistical check";
}

TEST_P(DefaultRate, EverySiteIsUnbiased) {
  REQUIRE_BPF();
  expect_unbiased(GetParam(), {});
}

TEST_P(DefaultRate, EverySiteIsUnbiasedInProcess) {
  REQUIRE_BPF();
  expect_unbiased(GetParam(), {"--preload"});
}

INSTANTIATE_TEST_SUITE_P(Metrics, DefaultRate, ::testing::Values("alloc_space", "inuse_space"));

TEST(Record, StacksStartAtTheDirectCaller) {
  REQUIRE_BPF();
  Folded folded = record_command({"--rate", "1"}, 1);
  for (const site_spec& s : kSites) {
    bool found = false;
    for (const auto& [frames, value] : folded) {
      size_t n = frames.size();
      if (n >= 4 && frames[n - 1] == s.allocator && frames[n - 2] == s.function) {
        found = true;
        EXPECT_EQ(frames[n - 3], "run_sites") << s.function;
        EXPECT_TRUE(frames[0].starts_with("alloc_sites (")) << frames[0];
      }
    }
    EXPECT_TRUE(found) << s.function << " missing as the direct caller of " << s.allocator;
  }
}

TEST(Record, TracedCommandPrintsAndExitsAsUntraced) {
  REQUIRE_BPF();
  std::vector<std::string> argv = workload(5, {"--exit-code", "3"});
  RunResult untraced = run(argv);
  std::string out = temp_path("traced.folded");
  std::vector<std::string> traced_argv = {ALLOCSCOPE_BIN, "record", "-o", out, "--"};
  traced_argv.insert(traced_argv.end(), argv.begin(), argv.end());
  RunResult traced = run(traced_argv);
  EXPECT_EQ(untraced.status, 3);
  EXPECT_EQ(traced.status, untraced.status) << traced.err;
  EXPECT_EQ(traced.out, untraced.out);
  EXPECT_NE(traced.err.find("samples"), std::string::npos) << traced.err;
  std::remove(out.c_str());
}

// -p: attach to a workload started before allocscope. While recording, the
// probes are planted in the target only; after allocscope stops, none is left.
TEST(Record, AttachToRunningProcessLeavesNoProbeBehind) {
  REQUIRE_BPF();
  const int scale = 2;
  Child target(workload(scale, {"--wait", "--hold"}));
  Child bystander(workload(scale, {"--wait"}));  // same library, not traced
  ASSERT_TRUE(target.wait_for_line("ready", 10000));
  ASSERT_TRUE(bystander.wait_for_line("ready", 10000));
  std::vector<ProbeSite> entries = allocator_entries(target.pid());
  std::vector<ProbeSite> bystander_entries = allocator_entries(bystander.pid());
  ASSERT_GE(entries.size(), 9u);
  ASSERT_EQ(entries.size(), bystander_entries.size());
  for (const ProbeSite& e : entries)
    ASSERT_EQ(read_code_byte(target.pid(), e.addr), e.file_byte) << "probe planted before attach";

  std::string out = temp_path("attach.folded");
  Child recorder({ALLOCSCOPE_BIN, "record", "-p", std::to_string(target.pid()), "--rate", "1", "-o", out});
  ASSERT_TRUE(recorder.wait_for_line("recording process", 20000, true)) << recorder.err();
  for (const ProbeSite& e : entries)
    EXPECT_EQ(read_code_byte(target.pid(), e.addr), 0xCC) << "no breakpoint in the target";
  for (const ProbeSite& e : bystander_entries)
    EXPECT_EQ(read_code_byte(bystander.pid(), e.addr), e.file_byte) << "an untraced process pays for probes";

  target.signal(SIGUSR1);
  ASSERT_TRUE(target.wait_for_line("done", 60000));
  recorder.signal(SIGINT);
  EXPECT_EQ(recorder.wait(60000), 0) << recorder.err();
  for (const ProbeSite& e : entries)
    EXPECT_EQ(read_code_byte(target.pid(), e.addr), e.file_byte) << "a probe was left behind";

  Folded folded = read_folded(out);
  std::remove(out.c_str());
  for (const site_spec& s : kSites) {
    Truth t = site_truth(s, kThreads, scale);
    EXPECT_EQ(site_value(folded, s.function, s.allocator), t.bytes) << s.function;
  }
  target.signal(SIGUSR1);
  EXPECT_EQ(target.wait(), 0);
  bystander.signal(SIGUSR1);
  EXPECT_EQ(bystander.wait(), 0);
}

// -p ends by itself when the target exits; inuse then shows what it held.
TEST(Record, AttachEndsWhenTargetExits) {
  REQUIRE_BPF();
  const int scale = 2;
  Child target(workload(scale, {"--wait"}));
  ASSERT_TRUE(target.wait_for_line("ready", 10000));
  std::string out = temp_path("exit.folded");
  Child recorder({ALLOCSCOPE_BIN, "record", "-p", std::to_string(target.pid()), "--rate", "1", "--metric",
                  "inuse_space", "-o", out});
  ASSERT_TRUE(recorder.wait_for_line("recording process", 20000, true)) << recorder.err();
  target.signal(SIGUSR1);
  EXPECT_EQ(target.wait(), 0);
  EXPECT_EQ(recorder.wait(60000), 0) << recorder.err();
  Folded folded = read_folded(out);
  std::remove(out.c_str());
  for (const site_spec& s : kSites)
    EXPECT_EQ(site_value(folded, s.function, s.allocator), site_truth(s, kThreads, scale).live_bytes)
        << s.function;
}

// Ctrl-C while a command runs: the output is still complete, and the signal
// reaches the command.
TEST(Record, InterruptWritesCompleteOutput) {
  REQUIRE_BPF();
  std::string out = temp_path("sigint.folded");
  Child recorder({ALLOCSCOPE_BIN, "record", "--rate", "1", "-o", out, "--", WORKLOAD_BIN, "--threads", "2",
                  "--scale-pct", "2", "--hold"});
  ASSERT_TRUE(recorder.wait_for_line("done", 60000)) << recorder.err();
  recorder.signal(SIGINT);
  int status = recorder.wait(60000);
  EXPECT_EQ(status, 128 + SIGINT) << recorder.err();  // the command's own status: killed by SIGINT
  Folded folded = read_folded(out);
  std::remove(out.c_str());
  for (const site_spec& s : kSites)
    EXPECT_EQ(site_value(folded, s.function, s.allocator), site_truth(s, kThreads, 2).bytes) << s.function;
}

}  // namespace
}  // namespace allocscope::test

namespace allocscope::test {
namespace {

// -p with several processes: one recording, each process its own root frame,
// each exact; recording ends when the last one exits.
TEST(Record, SeveralProcessesInOneRecording) {
  REQUIRE_BPF();
  const int scale = 1;
  Child a(workload(scale, {"--wait"})), b(workload(scale, {"--wait"}));
  ASSERT_TRUE(a.wait_for_line("ready", 10000));
  ASSERT_TRUE(b.wait_for_line("ready", 10000));
  std::string out = temp_path("two.folded");
  Child recorder({ALLOCSCOPE_BIN, "record", "-p", std::to_string(a.pid()) + "," + std::to_string(b.pid()),
                  "--rate", "1", "-o", out});
  ASSERT_TRUE(recorder.wait_for_line("recording processes", 20000, true)) << recorder.err();
  a.signal(SIGUSR1);
  b.signal(SIGUSR1);
  EXPECT_EQ(a.wait(), 0);
  EXPECT_EQ(b.wait(), 0);
  EXPECT_EQ(recorder.wait(60000), 0) << recorder.err();
  Folded folded = read_folded(out);
  std::remove(out.c_str());
  for (pid_t pid : {a.pid(), b.pid()}) {
    Folded mine;
    for (const auto& [frames, value] : folded)
      if (frames[0] == "alloc_sites (" + std::to_string(pid) + ")") mine[frames] = value;
    for (const site_spec& s : kSites)
      EXPECT_EQ(site_value(mine, s.function, s.allocator), site_truth(s, kThreads, scale).bytes)
          << s.function << " in " << pid;
  }
}

}  // namespace
}  // namespace allocscope::test
