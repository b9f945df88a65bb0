// `record -- CMD` at its defaults: the command samples in process (the
// preload library) wherever it loads the library, and the processes of its
// tree that do not (a static program, an environment cleared of LD_PRELOAD)
// are probed, process by process, each counted once.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <regex>

#include "harness.h"
#include "host/process.h"
#include "output/pprof.h"
#include "stats/sampling.h"
#include "workload_spec.h"

namespace allocscope::test {
namespace {

constexpr int kThreads = 2;

// Per program (the root frame's name without its pid), each site's totals.
using SiteTotals = std::map<std::string, StackTotals>;
std::map<std::string, SiteTotals> totals_by_program(const std::string& pprof) {
  Recording rec = read_pprof(pprof);
  std::map<std::string, SiteTotals> by;
  for (const RecSample& s : rec.samples) {
    std::vector<std::string> names = frame_names(rec, s);
    if (names.size() < 3) continue;
    std::string program = names[0].substr(0, names[0].rfind(" ("));
    for (const site_spec& site : kSites)
      if (names[names.size() - 2] == site.function && names.back() == site.allocator)
        by[program][site.function].merge(s.totals);
  }
  return by;
}

// "in process (N processes), allocator probes (M processes)" -> {N, M}.
std::pair<int, int> sampling_counts(const std::string& summary) {
  std::smatch m;
  std::regex line(R"(sampling: in process \((\d+) process(?:es)?\)(?:, allocator probes \((\d+) process)?)");
  if (!std::regex_search(summary, m, line)) return {-1, -1};
  return {std::stoi(m[1]), m[2].matched ? std::stoi(m[2]) : 0};
}

std::vector<std::string> workload(const char* bin, int scale) {
  return {bin, "--threads", std::to_string(kThreads), "--scale-pct", std::to_string(scale)};
}

// The obvious command: no allocator probe traps (the kernel saw no return
// of one), and the estimate is within kMaxZ sigma of the truth.
TEST(Launch, ACommandSamplesInProcessByDefault) {
  REQUIRE_BPF();
  const int scale = 40;
  std::string out = temp_path("launch-default.pb.gz");
  std::vector<std::string> argv = {ALLOCSCOPE_BIN, "record", "-v", "-o", out, "--"};
  for (const std::string& a : workload(WORKLOAD_BIN, scale)) argv.push_back(a);
  RunResult r = run(argv);
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(sampling_counts(r.err), std::make_pair(1, 0)) << r.err;
  EXPECT_NE(r.err.find(" returns=0 "), std::string::npos) << "an allocator probe fired\n" << r.err;
  auto by = totals_by_program(out);
  std::map<std::string, double> bytes;
  for (const auto& [site, totals] : by["alloc_sites"]) bytes[site] = totals.alloc_bytes;
  EXPECT_LT(std::fabs(sites_z(bytes, kThreads, scale, double(kDefaultRate), "in process")), kMaxZ);
  std::filesystem::remove(out);
}

// A shell runs the workload three ways: loading the library, as a static
// program, and with LD_PRELOAD removed from its environment. At --rate 2
// every allocation (48 bytes or more) is sampled with probability
// 1 - e^-24 and weighs its own size: each run's sites come out at the truth
// within 0.01 % unless a process is lost or counted twice (chance alone
// would need thousands of unsampled calls, at 3e-11 each). The summary
// counts the processes of each path.
TEST(Launch, ATreeIsSampledProcessByProcess) {
  REQUIRE_BPF();
  const int scale = 3;
  std::string args = " --threads " + std::to_string(kThreads) + " --scale-pct " + std::to_string(scale);
  std::string script = std::string(WORKLOAD_BIN) + args + " && " + WORKLOAD_STATIC_BIN + args +
                       " && env -u LD_PRELOAD " + WORKLOAD_BIN + args;
  std::string out = temp_path("launch-tree.pb.gz");
  RunResult r =
      run({ALLOCSCOPE_BIN, "record", "-v", "--rate", "2", "-o", out, "--", "/bin/sh", "-c", script});
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.err.find("dropped: ringbuf 0, live-map-full 0, stack-lost 0, stack-table-full 0"),
            std::string::npos)
      << r.err;
  auto [in_process, probed] = sampling_counts(r.err);
  EXPECT_GE(in_process, 2) << r.err;  // the shell, the first run
  EXPECT_GE(probed, 2) << r.err;      // the static run, the run without LD_PRELOAD
  EXPECT_NE(r.err.find("does not sample in process"), std::string::npos) << r.err;

  auto by = totals_by_program(out);
  auto near = [](double estimate, double truth) { return std::fabs(estimate - truth) <= 1e-4 * truth; };
  for (const site_spec& s : kSites) {
    Truth t = site_truth(s, kThreads, scale);
    // Two runs of alloc_sites; comm keeps 15 characters of the static one's name.
    const StackTotals& dynamic = by["alloc_sites"][s.function];
    const StackTotals& fixed = by["alloc_sites_sta"][s.function];
    EXPECT_PRED2(near, dynamic.alloc_objects, 2 * t.objects) << s.function;
    EXPECT_PRED2(near, dynamic.alloc_bytes, 2 * t.bytes) << s.function;
    EXPECT_PRED2(near, fixed.alloc_objects, t.objects) << s.function;
    EXPECT_PRED2(near, fixed.alloc_bytes, t.bytes) << s.function;
  }
  std::filesystem::remove(out);
}

// Exact mode: every call traps either way, and probes cost less.
TEST(Launch, ExactModeProbes) {
  REQUIRE_BPF();
  std::vector<std::string> argv = {
      ALLOCSCOPE_BIN, "record", "-v", "--rate", "1", "-o", temp_path("launch-exact.folded"), "--"};
  for (const std::string& a : workload(WORKLOAD_BIN, 1)) argv.push_back(a);
  RunResult r = run(argv);
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.err.find("sampling: allocator probes (exact mode)"), std::string::npos) << r.err;
}

// Exact mode keeps a kernel entry for every block; a child that ended
// leaves its unfreed ones, and the kernel's sweep (sweep_live, here before
// the outputs read the live blocks' ages) deletes those: as many as an
// exact recording of one run counts in use at its end, give or take the
// shell's forked copy (a block or so before its exec). Deleting the shell's
// own entries too would add some 40.
TEST(Launch, ExactModeSweepsWhatAnEndedChildLeft) {
  REQUIRE_BPF();
  const std::string one = temp_path("sweep-one.folded"), json = temp_path("sweep.json");
  const std::string run_args = " --threads 1 --scale-pct 1";
  RunResult r = run({ALLOCSCOPE_BIN, "record", "--rate", "1", "-q", "--metric", "inuse_objects", "-o", one,
                     "--", WORKLOAD_BIN, "--threads", "1", "--scale-pct", "1"});
  ASSERT_EQ(r.status, 0) << r.err;
  double left = 0;
  for (const auto& [frames, value] : read_folded(one)) left += value;
  ASSERT_GT(left, 0) << "the premise: a run leaves blocks unfreed at its exit";
  r = run({ALLOCSCOPE_BIN, "record", "--rate", "1", "-q", "-o", json, "--", "/bin/sh", "-c",
           std::string(WORKLOAD_BIN) + run_args + " >/dev/null; true"});
  ASSERT_EQ(r.status, 0) << r.err;
  std::ifstream in(json);
  auto doc = nlohmann::json::parse(in, nullptr, false);
  ASSERT_TRUE(doc.is_object());
  EXPECT_EQ(doc["counters"].value("dropped_live_map_full", 0.0), 0);
  double swept = doc["counters"].value("exact_live_swept", 0.0);
  EXPECT_GE(swept, left);
  EXPECT_LE(swept, left + 8);
  std::filesystem::remove(one);
  std::filesystem::remove(json);
}

// --probes: the allocator probes alone, as before in-process sampling.
// su, runuser and sudo stop themselves when their child stops, until they
// are continued: a hold of the child (each new file it maps, from its exec
// on) must not leave them stopped for ever. Output and status as untraced.
TEST(Launch, ACommandUnderRunuserRunsThroughItsHolds) {
  REQUIRE_BPF();
  ASSERT_EQ(access("/usr/sbin/runuser", X_OK), 0) << "runuser (util-linux) is missing";
  std::vector<std::string> command = {"/usr/sbin/runuser",   "-u", "nobody", "--", "/bin/sh", "-c",
                                      "echo relayed; exit 3"};
  std::string out = temp_path("relay.folded");
  std::vector<std::string> argv = {ALLOCSCOPE_BIN, "record", "-v", "-o", out, "--"};  // -v: the holds line
  argv.insert(argv.end(), command.begin(), command.end());
  RunResult r = run(argv, 120000);
  EXPECT_EQ(r.status, 3) << r.err;
  EXPECT_EQ(r.out, "relayed\n");
  EXPECT_NE(r.err.find("held for a file not seen before"), std::string::npos) << r.err;
  std::remove(out.c_str());
}

TEST(Launch, ProbesCanBeChosen) {
  REQUIRE_BPF();
  const int scale = 3;
  std::string out = temp_path("launch-probes.pb.gz");
  std::vector<std::string> argv = {ALLOCSCOPE_BIN, "record", "-v", "--probes", "--rate", "1",
                                   "-o",           out,      "--"};
  for (const std::string& a : workload(WORKLOAD_BIN, scale)) argv.push_back(a);
  RunResult r = run(argv);
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.err.find("sampling: allocator probes"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find(" returns=0 "), std::string::npos) << r.err;
  SiteTotals sites = totals_by_program(out)["alloc_sites"];
  for (const site_spec& s : kSites)
    EXPECT_EQ(sites[s.function].alloc_bytes, site_truth(s, kThreads, scale).bytes) << s.function;
  std::filesystem::remove(out);
}

}  // namespace
}  // namespace allocscope::test
