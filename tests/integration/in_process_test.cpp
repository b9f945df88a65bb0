// The in-process path: `record --preload` (liballocscope-preload.so), its
// frees through the rings, and third-party programs that fire the
// otel_memory probes themselves.
#include <gtest/gtest.h>
#include <signal.h>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "harness.h"
#include "otel_provider_spec.h"

namespace allocscope::test {
namespace {

// Threads, a signal handler that allocates, a fork whose child allocates and
// exits with its own status, every C entry point: the same output and exit
// status as without allocscope, sampled and in exact mode (a probe on every
// call).
TEST(InProcess, TracedProgramBehavesAsUntraced) {
  REQUIRE_BPF();
  RunResult plain = run({PRELOAD_STRESS_BIN});
  ASSERT_EQ(plain.status, 3) << plain.err;
  ASSERT_NE(plain.out.find("digest"), std::string::npos);
  for (const char* rate : {"512KiB", "4KiB", "1"}) {
    std::string out = temp_path("stress.folded");
    RunResult traced = run(
        {ALLOCSCOPE_BIN, "record", "-q", "--preload", "--rate", rate, "-o", out, "--", PRELOAD_STRESS_BIN});
    EXPECT_EQ(traced.status, plain.status) << rate << ": " << traced.err;
    EXPECT_EQ(traced.out, plain.out) << rate;
    Folded f = read_folded(out);
    double work = 0;
    for (const auto& [frames, value] : f)
      for (const std::string& frame : frames)
        if (frame == "work") work += value;
    EXPECT_GT(work, 0) << rate << ": nothing recorded under work()";
    std::remove(out.c_str());
  }
}

// The preload library's sampled calls reach BPF through the fastest site the
// kernel offers: where `allocscope check` finds 10-byte nops rewritten into
// calls (optimized_uprobes), allocscope attaches the allocscope:* twins and
// the target then calls through the kernel's trampoline; elsewhere the
// otel_memory sites, and no trampoline. Either way the program runs as
// untraced and its sites are recorded.
TEST(InProcess, SampledCallsTakeTheKernelsFastestSite) {
  REQUIRE_BPF();
  RunResult check = run({ALLOCSCOPE_BIN, "check", "--json"});
  bool rewritten = nlohmann::json::parse(check.out)["features"]["optimized_uprobes"]["present"] == true;
  Child workload({"/usr/bin/env", std::string("LD_PRELOAD=") + PRELOAD_LIB, "ALLOCSCOPE_RATE=4096",
                  WORKLOAD_BIN, "--threads", "1", "--wait", "--hold"});
  ASSERT_TRUE(workload.wait_for_line("ready", 10000));
  std::string out = temp_path("fastest-site.folded");
  Child rec(
      {ALLOCSCOPE_BIN, "record", "-v", "--rate", "4096", "-o", out, "-p", std::to_string(workload.pid())});
  ASSERT_TRUE(rec.wait_for_line("recording", 60000, true)) << rec.err();
  workload.signal(SIGUSR1);
  ASSERT_TRUE(workload.wait_for_line("done", 30000));
  std::ifstream maps("/proc/" + std::to_string(workload.pid()) + "/maps");
  std::stringstream text;
  text << maps.rdbuf();
  bool trampoline = text.str().find("[uprobes-trampoline]") != std::string::npos;
  rec.signal(SIGINT);
  EXPECT_EQ(rec.wait(), 0) << rec.err();
  workload.signal(SIGUSR1);
  EXPECT_EQ(workload.wait(), 0);
  std::string provider = rewritten ? "(allocscope)" : "(otel_memory)";
  EXPECT_NE(rec.err().find("in-process sampling probes " + provider), std::string::npos) << rec.err();
  EXPECT_EQ(trampoline, rewritten) << text.str();
  EXPECT_GT(site_value(read_folded(out), "site_malloc_kept", "malloc"), 0) << rec.err();
  std::remove(out.c_str());
}

// Sampled, a launched command's processes send the frees of their sampled
// blocks through their rings, not a trap (threads, a signal handler's, a
// forked child's, realloc's): each reaches the profile after its
// allocation and before the next at its address (ring_frees.h). So no free
// is lost, none finds no sample, and no sample is replaced before its free.
// A free the ring cannot take at once (its lock held by a preempted
// writer, a signal handler inside its thread's own write) traps instead,
// and is seen all the same: one in 37,000 at most in 100 runs on an idle
// machine, but a writer preempted with the lock makes every other thread
// trap for its time slice, 5 % of the frees in a CI run busy with other
// work. The rings must carry most of them: that bound is no timing claim.
TEST(InProcess, SampledFreesComeThroughTheRingsInTheirPlace) {
  REQUIRE_BPF();
  std::string out = temp_path("ring-frees.pb.gz");
  RunResult r = run({ALLOCSCOPE_BIN, "record", "-q", "--rate", "4KiB", "-o", out, "--", PRELOAD_STRESS_BIN});
  ASSERT_EQ(r.status, 3) << r.err;
  Recording rec = read_pprof(out);
  std::remove(out.c_str());
  ASSERT_FALSE(reported_losses(rec).any()) << r.err;
  uint64_t frees = counter_of(rec, "ring_frees");
  std::printf("  %llu samples, %llu frees through the rings\n",
              (unsigned long long)counter_of(rec, "samples"), (unsigned long long)frees);
  EXPECT_GT(frees, 1000u);
  EXPECT_LE(counter_of(rec, "frees_seen") - frees, frees) << "frees trapped";
  EXPECT_EQ(counter_of(rec, "dropped_frees"), 0u);
  EXPECT_EQ(counter_of(rec, "frees_unmatched"), 0u);
  EXPECT_EQ(counter_of(rec, "live_replaced"), 0u);
}

// A program on another clock (a time namespace of its own) gets no ring:
// its frees trap into the kernel's probe, as without rings, and are seen
// all the same.
TEST(InProcess, AProgramOnAnotherClockFreesThroughTheKernel) {
  REQUIRE_BPF();
  std::string out = temp_path("other-clock.pb.gz");
  RunResult r = run({ALLOCSCOPE_BIN, "record", "-q", "--rate", "4KiB", "-o", out, "--", "unshare", "--time",
                     "--fork", MALLOC_BENCH_BIN, "--pairs", "300000"});
  ASSERT_EQ(r.status, 0) << r.err;
  Recording rec = read_pprof(out);
  std::remove(out.c_str());
  ASSERT_FALSE(reported_losses(rec).any()) << r.err;
  EXPECT_EQ(counter_of(rec, "rings_other_clock"), 1u);
  uint64_t samples = counter_of(rec, "samples"), seen = counter_of(rec, "frees_seen");
  std::printf("  %llu samples, %llu frees seen, %llu through the rings\n", (unsigned long long)samples,
              (unsigned long long)seen, (unsigned long long)counter_of(rec, "ring_frees"));
  EXPECT_GT(seen, counter_of(rec, "ring_frees") + 1000) << "malloc_bench's frees trapped";
  EXPECT_EQ(counter_of(rec, "frees_unmatched"), 0u);
}

// While the recording runs, each program of the command that samples maps
// a ring for its frees (at --rate 2, at its first allocation); once it ends
// (--duration, the command running on untraced), a program the command
// runs gets none (no listener: it goes on at once).
TEST(InProcess, ProgramsGetRingsOnlyWhileTheRecordingRuns) {
  REQUIRE_BPF();
  std::string out = temp_path("rings-while.pb.gz");
  RunResult r = run({ALLOCSCOPE_BIN, "record", "-q", "--rate", "2", "--duration", "1s", "-o", out, "--",
                     "/bin/sh", "-c", "cat /proc/self/maps; echo ended; sleep 3; cat /proc/self/maps"});
  std::remove(out.c_str());
  ASSERT_EQ(r.status, 0) << r.err;
  size_t ended = r.out.find("ended");
  ASSERT_NE(ended, std::string::npos) << r.out;
  EXPECT_NE(r.out.substr(0, ended).find("allocscope-ring"), std::string::npos) << "no ring while recording";
  EXPECT_EQ(r.out.find("allocscope-ring", ended), std::string::npos) << "a ring after the end";
}

// A program asks for its ring at its first sampled allocation, not at its
// start: at --rate 4GiB neither the shell nor cat (some 300 KB between
// them) samples but with probability 1e-4, and neither maps a ring.
TEST(InProcess, AProgramThatNeverSamplesMapsNoRing) {
  REQUIRE_BPF();
  std::string out = temp_path("rings-none.pb.gz");
  RunResult r = run({ALLOCSCOPE_BIN, "record", "-q", "--rate", "4GiB", "-o", out, "--", "/bin/sh", "-c",
                     "cat /proc/self/maps"});
  std::remove(out.c_str());
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("liballocscope-preload"), std::string::npos) << "the premise: sampled in process";
  EXPECT_EQ(r.out.find("allocscope-ring"), std::string::npos) << r.out;
}

// Each of otel_provider's sites within kMaxZ sigma of its truth.
void expect_provider_sites(const std::string& out, const std::string& log) {
  Folded f = read_folded(out);
  for (int i = 0; i < 3; ++i) {
    std::string site = "otel_site_" + std::to_string(i);
    double truth = double(OTEL_BLOCKS) * double(otel_sizes[i]);
    double estimate = site_value(f, site, "malloc");
    double sigma = ht_sigma(OTEL_BLOCKS, double(otel_sizes[i]), OTEL_RATE, true);
    double z = (estimate - truth) / sigma;
    std::printf("  %s: estimate %.0f, truth %.0f, z %+.2f\n", site.c_str(), estimate, truth, z);
    EXPECT_LT(std::fabs(z), kMaxZ) << site << "\n" << log;
  }
  std::remove(out.c_str());
}

// otel_memory:alloc(ptr, size, weight) from a program of its own (no
// preload library): attached by -p, recorded through the probes alone (not
// also through the C library's uprobes, which would count it twice), each
// site within kMaxZ sigma of the truth.
// Records otel_provider started before allocscope (options name it by -p)
// while it allocates; returns allocscope's stderr, the profile in `out`.
std::string record_waiting_provider(std::vector<std::string> options, const std::string& out) {
  Child provider({OTEL_PROVIDER_BIN, "--wait"});
  EXPECT_TRUE(provider.wait_for_line("ready", 10000));
  std::vector<std::string> argv = {ALLOCSCOPE_BIN, "record", "-o", out, "-p", std::to_string(provider.pid())};
  argv.insert(argv.end(), options.begin(), options.end());
  Child rec(argv);
  EXPECT_TRUE(rec.wait_for_line("recording", 60000, true)) << rec.err();
  provider.signal(SIGUSR1);
  EXPECT_TRUE(provider.wait_for_line("done", 30000));
  rec.signal(SIGINT);
  EXPECT_EQ(rec.wait(), 0) << rec.err();
  provider.signal(SIGUSR1);
  EXPECT_EQ(provider.wait(), 0);
  return rec.err();
}

TEST(InProcess, ThirdPartyProviderIsRecorded) {
  REQUIRE_BPF();
  std::string out = temp_path("otel.folded");
  std::string log = record_waiting_provider({"-v"}, out);
  EXPECT_NE(log.find("in-process sampling probes (otel_memory) in"), std::string::npos) << log;
  expect_provider_sites(out, log);
}

// System-wide (a launched command is followed with system-wide probes;
// --all -p): the C library's probes, which every process meets, leave the
// provider's process to its own probes, so nothing is counted twice.
TEST(InProcess, ThirdPartyProviderIsCountedOnceBySystemWideProbes) {
  REQUIRE_BPF();
  std::string out = temp_path("otel-launched.folded");
  RunResult r = run({ALLOCSCOPE_BIN, "record", "-q", "-o", out, "--", OTEL_PROVIDER_BIN});
  ASSERT_EQ(r.status, 0) << r.err;
  expect_provider_sites(out, r.err);

  std::string log = record_waiting_provider({"--all"}, out);
  expect_provider_sites(out, log);
}

}  // namespace
}  // namespace allocscope::test
