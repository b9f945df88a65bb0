// How a recording ends: every stop signal writes complete outputs, and a
// recorder killed outright (SIGKILL, no cleanup at all) leaves no probe in
// its target, which runs on and exits as it would have.
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <set>
#include <sstream>
#include <thread>

#include "harness.h"
#include "host/process.h"
#include "output/pprof.h"

namespace allocscope::test {
namespace {

std::string slurp(const std::string& path) { return read_text_file(path).value_or(""); }

// The ids of the BPF programs loaded on the machine whose name is one of
// allocscope's allocator probes (bpftool prints "ID: TYPE  name NAME ...").
std::set<int> allocscope_programs() {
  RunResult r = run({"bpftool", "prog", "show"});
  std::set<int> ids;
  std::istringstream lines(r.out);
  for (std::string line; std::getline(lines, line);)
    for (const char* name : {" name alloc_session ", " name malloc_session ", " name free_multi ",
                             " name usdt_alloc ", " name usdt_free ", " name malloc_enter "})
      if (line.find(name) != std::string::npos) ids.insert(std::atoi(line.c_str()));
  return ids;
}

// Whether the programs loaded since `before` (another allocscope may run
// beside the test) are gone within the limit.
bool gone_within(const std::set<int>& before, std::chrono::seconds limit) {
  auto end = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < end) {
    std::set<int> now = allocscope_programs();
    if (std::all_of(now.begin(), now.end(), [&](int id) { return before.contains(id); })) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return false;
}

// Waits until programs not in `before` are loaded.
void wait_for_new_programs(const std::set<int>& before) {
  for (int i = 0; i < 400; ++i) {
    std::set<int> now = allocscope_programs();
    if (std::any_of(now.begin(), now.end(), [&](int id) { return !before.contains(id); })) return;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
}

class StopSignal : public ::testing::TestWithParam<int> {};

// SIGINT, SIGTERM, SIGHUP: allocscope detaches, and the pprof, folded and
// SVG outputs are whole and hold the workload's samples.
TEST_P(StopSignal, WritesCompleteOutputs) {
  REQUIRE_BPF();
  Child target({WORKLOAD_BIN, "--threads", "2", "--scale-pct", "20", "--wait"});
  ASSERT_TRUE(target.wait_for_line("ready", 10000));
  std::string dir = temp_path("signal-outputs");
  std::filesystem::create_directories(dir);
  std::set<int> before = allocscope_programs();
  Child rec({ALLOCSCOPE_BIN, "record", "-q", "-p", std::to_string(target.pid()), "-o", dir + "/heap.pb.gz",
             "-o", dir + "/heap.folded", "-o", dir + "/heap.svg"});
  // -q prints nothing: wait for the probes by their programs.
  wait_for_new_programs(before);
  std::this_thread::sleep_for(std::chrono::milliseconds(500));  // programs load before links attach
  target.signal(SIGUSR1);
  EXPECT_EQ(target.wait(), 0);
  rec.signal(GetParam());
  ASSERT_EQ(rec.wait(), 0) << strsignal(GetParam()) << ": " << rec.err();
  auto pprof = decode_pprof(slurp(dir + "/heap.pb.gz"));
  ASSERT_TRUE(pprof) << pprof.error().message;
  EXPECT_FALSE(pprof->samples.empty());
  Folded folded = read_folded(dir + "/heap.folded");
  EXPECT_GT(site_value(folded, "site_malloc_small", "malloc"), 0);
  std::string svg = slurp(dir + "/heap.svg");
  EXPECT_NE(svg.rfind("</svg>"), std::string::npos) << "flame graph cut short";
  EXPECT_TRUE(gone_within(before, std::chrono::seconds(5))) << "probes left behind";
  std::filesystem::remove_all(dir);
}

INSTANTIATE_TEST_SUITE_P(Signals, StopSignal, ::testing::Values(SIGINT, SIGTERM, SIGHUP),
                         [](const auto& info) { return std::string(sigabbrev_np(info.param)); });

// Ctrl-C before the recording began (here in a pause the tests' build makes
// where BPF would load): one line says so, nothing is written, the earlier
// default output is back in its place, the command never ran, and the
// status is the shell's for SIGINT, not a death by it.
TEST(Signals, InterruptedBeforeTheRecordingBeganWritesNothing) {
  REQUIRE_BPF();
  std::string dir = temp_path("interrupted-early");
  std::filesystem::create_directories(dir);
  std::string marker = dir + "/ran";
  {
    std::FILE* f = std::fopen((dir + "/allocscope.pb.gz").c_str(), "w");
    ASSERT_TRUE(f);
    std::fputs("earlier", f);
    std::fclose(f);
  }
  Child rec({"env", "ALLOCSCOPE_TEST_PAUSE_BEFORE_RECORDING=1500", "sh", "-c",
             "cd " + dir + " && exec " + ALLOCSCOPE_BIN + " record -- touch " + marker});
  ASSERT_TRUE(rec.wait_for_line("is now allocscope.pb.gz.old", 30000, true)) << rec.err();
  rec.signal(SIGINT);
  EXPECT_EQ(rec.wait(), 128 + SIGINT) << rec.err();
  EXPECT_NE(rec.err().find("interrupted (SIGINT) before the recording began: nothing was written"),
            std::string::npos)
      << rec.err();
  EXPECT_EQ(slurp(dir + "/allocscope.pb.gz"), "earlier");
  EXPECT_FALSE(std::filesystem::exists(dir + "/allocscope.pb.gz.old"));
  EXPECT_FALSE(std::filesystem::exists(marker)) << "the command ran";
  std::filesystem::remove_all(dir);
}

// A launched command that goes on after the SIGINT passed to it (a REPL
// does): allocscope says it waits for it, then returns its status.
TEST(Signals, ACommandThatOutlivesCtrlCIsWaitedForAndSaidSo) {
  REQUIRE_BPF();
  std::string out = temp_path("outlives.folded");
  Child rec(
      {ALLOCSCOPE_BIN, "record", "-o", out, "--", "sh", "-c", "trap '' INT; echo ready; sleep 10; exit 7"});
  ASSERT_TRUE(rec.wait_for_line("ready", 30000)) << rec.err();
  rec.signal(SIGINT);
  EXPECT_EQ(rec.wait(), 7) << rec.err();
  EXPECT_NE(rec.err().find("runs on after SIGINT, and allocscope waits for it to exit"), std::string::npos)
      << rec.err();
  EXPECT_TRUE(std::filesystem::exists(out));
  std::remove(out.c_str());
}

// SIGKILL: no handler runs, yet the kernel drops every probe with the
// recorder's last descriptor; the target, traced by uprobes (-p) or by its
// in-process probes (--preload, launched), then finishes as untraced.
TEST(Signals, KilledRecorderLeavesNoProbe) {
  REQUIRE_BPF();
  Child target({WORKLOAD_BIN, "--threads", "2", "--scale-pct", "20", "--wait"});
  ASSERT_TRUE(target.wait_for_line("ready", 10000));
  std::set<int> before = allocscope_programs();
  Child rec({ALLOCSCOPE_BIN, "record", "-p", std::to_string(target.pid()), "-o", temp_path("killed.folded")});
  ASSERT_TRUE(rec.wait_for_line("recording", 60000, true)) << rec.err();
  rec.signal(SIGKILL);
  rec.wait();
  EXPECT_TRUE(gone_within(before, std::chrono::seconds(5))) << "uprobes left behind";
  target.signal(SIGUSR1);
  EXPECT_EQ(target.wait(), 0) << "the target was harmed";

  Child launched({ALLOCSCOPE_BIN, "record", "--preload", "-o", temp_path("killed-preload.folded"), "--",
                  WORKLOAD_BIN, "--threads", "2", "--scale-pct", "20", "--wait"});
  ASSERT_TRUE(launched.wait_for_line("ready", 60000))
      << "allocscope ended first, status " << launched.wait(1000) << ": " << launched.err();
  std::string children = slurp("/proc/" + std::to_string(launched.pid()) + "/task/" +
                               std::to_string(launched.pid()) + "/children");
  pid_t workload = 0;  // allocscope has another child: its hold guard
  std::istringstream child_pids(children);
  for (pid_t pid; child_pids >> pid;)
    if (read_comm(pid) == "alloc_sites") workload = pid;
  ASSERT_GT(workload, 0) << "no launched child among " << children;
  launched.signal(SIGKILL);
  launched.wait();
  EXPECT_TRUE(gone_within(before, std::chrono::seconds(5))) << "USDT probes left behind";
  kill(workload, SIGUSR1);
  // Reparented, so not ours to reap; it still writes to our pipe, and its
  // last line says it ran to its end.
  EXPECT_TRUE(launched.wait_for_line("live blocks", 30000)) << "the launched workload did not finish";
}

// A target confined by a seccomp allow-list (Docker's default profile's
// shape: what is not listed fails with EPERM) runs unharmed while traced,
// in each probe mode and in process, and is sampled: the probes need no
// system call from it.
class Confined : public ::testing::TestWithParam<std::string> {};

TEST_P(Confined, SeccompAllowListedTargetRunsUnharmedAndIsSampled) {
  REQUIRE_BPF();
  constexpr double kRate = 64 * 1024, kCalls = 20000;
  RunResult plain = run({SECCOMP_SITES_BIN});
  ASSERT_EQ(plain.status, 0) << plain.err;
  ASSERT_NE(plain.out.find("filter on"), std::string::npos) << plain.out;
  std::string out = temp_path("seccomp.folded");
  std::vector<std::string> argv{ALLOCSCOPE_BIN, "record", "-q", "--rate", "64KiB", "-o", out};
  if (GetParam() == "preload")
    argv.push_back("--preload");
  else
    argv.insert(argv.end(), {"--probe-mode", GetParam()});
  argv.insert(argv.end(), {"--", SECCOMP_SITES_BIN});
  RunResult traced = run(argv);
  EXPECT_EQ(traced.status, 0) << traced.err;
  EXPECT_EQ(traced.out, plain.out) << traced.err;
  double bytes = 0;
  for (const auto& [frames, value] : read_folded(out))
    if (std::any_of(frames.begin(), frames.end(), [](const std::string& f) { return f == "churn"; }))
      bytes += value;
  // malloc, calloc, realloc's result and posix_memalign of 1000 bytes, and
  // the malloc of 500 that realloc grows, kCalls times each.
  double truth = kCalls * (4 * 1000 + 500);
  double sd = std::sqrt(4 * std::pow(ht_sigma(kCalls, 1000, kRate, true), 2) +
                        std::pow(ht_sigma(kCalls, 500, kRate, true), 2));
  EXPECT_LT(std::fabs(bytes - truth) / sd, kMaxZ) << bytes << " vs " << truth << "\n" << traced.err;
  std::remove(out.c_str());
}

// auto: uprobe sessions where the kernel has them.
INSTANTIATE_TEST_SUITE_P(Modes, Confined, ::testing::Values("classic", "auto", "preload"));

}  // namespace
}  // namespace allocscope::test
