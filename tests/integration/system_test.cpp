// Whole-machine and process-tree recording, with real BPF: short-lived
// processes, a private copy of the C library, fork and exec, filters, churn.
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <thread>

#include "forker_spec.h"
#include "harness.h"
#include "host/process.h"
#include "output/pprof.h"

namespace allocscope::test {
namespace {

// "comm (pid)" -> pid; 0 for a root without one.
uint32_t root_pid(const std::string& root) {
  size_t open = root.rfind(" (");
  return open == std::string::npos ? 0 : uint32_t(std::strtoul(root.c_str() + open + 2, nullptr, 10));
}

// Sum over the stacks of the processes `keep` selects that end in
// `function;allocator`.
template <typename Keep>
double value_of(const Folded& f, const std::string& function, const std::string& allocator, Keep keep) {
  double v = 0;
  for (const auto& [frames, value] : f) {
    size_t n = frames.size();
    if (n >= 2 && frames[n - 2] == function && frames[n - 1] == allocator && keep(root_pid(frames[0])))
      v += value;
  }
  return v;
}

Folded report_folded(const std::string& pprof, const std::string& metric) {
  std::string out = temp_path("report-" + metric + ".folded");
  RunResult r = run({ALLOCSCOPE_BIN, "report", pprof, "--metric", metric, "--format", "folded", "-o", out});
  EXPECT_EQ(r.status, 0) << r.err;
  Folded f = read_folded(out);
  std::remove(out.c_str());
  return f;
}

struct Estimate {
  double value = 0, truth = 0, sigma2 = 0;
  void add_site(const site_spec& s, double est, double truth_bytes, double truth_objects, double rate) {
    value += est;
    truth += truth_bytes;
    double sd = ht_sigma(truth_objects, double(s.size), rate, true);
    sigma2 += sd * sd;
  }
  double z() const {
    return sigma2 > 0 ? (value - truth) / std::sqrt(sigma2) : (value == truth ? 0 : INFINITY);
  }
};

// While --all records, 300 short-lived processes run the workload beside a
// long-lived one: every short one is symbolized although it is gone before
// the dump, their total is estimated without bias, and, having exited, they
// hold nothing in use, while the long-lived one still does.
TEST(AllProcesses, ShortLivedProcessesAreSymbolizedCountedAndReleased) {
  REQUIRE_BPF();
  constexpr int kRuns = 300, kScale = 1, kLongScale = 20;
  constexpr double kRate = 64 * 1024;
  std::string pprof = temp_path("all.pb.gz");
  Child long_lived(
      {WORKLOAD_BIN, "--threads", "1", "--scale-pct", std::to_string(kLongScale), "--wait", "--hold"});
  ASSERT_TRUE(long_lived.wait_for_line("ready", 10000));
  Child rec({ALLOCSCOPE_BIN, "record", "--all", "--rate", "64KiB", "-o", pprof});
  ASSERT_TRUE(rec.wait_for_line("recording every process", 60000, true)) << rec.err();
  long_lived.signal(SIGUSR1);
  std::string script = "for i in $(seq " + std::to_string(kRuns) + "); do " + WORKLOAD_BIN +
                       " --threads 1 --scale-pct " + std::to_string(kScale) + " >/dev/null || exit 1; done";
  auto started = std::chrono::steady_clock::now();
  RunResult runs = run({"/bin/sh", "-c", script});
  double each_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - started).count() / kRuns;
  ASSERT_EQ(runs.status, 0) << runs.err;
  ASSERT_TRUE(long_lived.wait_for_line("done", 60000));
  rec.signal(SIGINT);
  ASSERT_EQ(rec.wait(), 0) << rec.err();
  long_lived.signal(SIGUSR1);
  long_lived.wait();

  uint32_t long_pid = uint32_t(long_lived.pid());
  Folded alloc = report_folded(pprof, "alloc_space");
  std::set<uint32_t> short_pids;
  int unnamed = 0;
  std::string example;
  for (const auto& [frames, value] : alloc) {
    if (!frames[0].starts_with("alloc_sites (") || root_pid(frames[0]) == long_pid) continue;
    short_pids.insert(root_pid(frames[0]));
    for (const std::string& f : frames)
      if (f.starts_with("alloc_sites+0x") || f == "[unknown]") {
        ++unnamed;
        for (const std::string& g : frames) example += g + ";";
      }
  }
  std::printf("  %zu short-lived processes sampled (%.1f ms each), %d unnamed frames\n", short_pids.size(),
              each_ms, unnamed);
  // What holds at any load: every process is in the profile, or the
  // recording says it lost samples (a reader starved on a loaded machine
  // once missed 12 of 300); a loss never goes unsaid.
  Losses lost = reported_losses(read_pprof(pprof));
  if (!lost.any()) {
    EXPECT_EQ(short_pids.size(), size_t(kRuns)) << rec.err();
  }
  EXPECT_EQ(unnamed, 0) << example;

  auto is_short = [&](uint32_t pid) { return short_pids.contains(pid); };
  Estimate total;
  for (const site_spec& s : kSites) {
    Truth t = site_truth(s, 1, kScale);
    total.add_site(s, value_of(alloc, s.function, s.allocator, is_short), kRuns * t.bytes, kRuns * t.objects,
                   kRate);
  }
  std::printf("  short-lived alloc_space: estimate %.0f, truth %.0f, z %.2f\n", total.value, total.truth,
              total.z());
  EXPECT_LT(lost.any() ? total.z() : std::fabs(total.z()), kMaxZ);  // what was lost can only lower it

  Folded inuse = report_folded(pprof, "inuse_space");
  double short_inuse = 0;
  Estimate long_inuse;
  for (const auto& [frames, value] : inuse)
    if (is_short(root_pid(frames[0]))) short_inuse += value;
  for (const site_spec& s : kSites) {
    Truth t = site_truth(s, 1, kLongScale);
    long_inuse.add_site(s,
                        value_of(inuse, s.function, s.allocator, [&](uint32_t p) { return p == long_pid; }),
                        t.live_bytes, t.live_objects, kRate);
  }
  std::printf("  inuse: short-lived %.0f B; long-lived estimate %.0f, truth %.0f, z %.2f\n", short_inuse,
              long_inuse.value, long_inuse.truth, long_inuse.z());
  EXPECT_EQ(short_inuse, 0);
  EXPECT_LT(std::fabs(long_inuse.z()), kMaxZ);
  std::remove(pprof.c_str());
}

// A private copy of the C library and its loader: a second allocator file
// that exists whatever else the machine runs.
std::filesystem::path private_libc_copy(const std::string& name) {
  namespace fs = std::filesystem;
  fs::path dir = temp_path(name);
  fs::create_directories(dir);
  fs::copy_file(fs::canonical("/lib/x86_64-linux-gnu/libc.so.6"), dir / "libc.so.6",
                fs::copy_options::overwrite_existing);
  fs::copy_file(fs::canonical("/lib64/ld-linux-x86-64.so.2"), dir / "ld-linux-x86-64.so.2",
                fs::copy_options::overwrite_existing);
  fs::permissions(dir / "ld-linux-x86-64.so.2", fs::perms::owner_all, fs::perm_options::add);
  return dir;
}

// A program run through its own copy of the dynamic loader and C library
// (another file, as in a container) after recording began is found at its
// mmap and sampled. Not entered (--no-inject): under a guest's emulation it
// runs long enough to be busy, and an entry made while its worker thread
// allocates loses what that thread allocates between the mark and the
// library's start (a whole site there; about a millisecond's on hardware).
TEST(AllProcesses, PrivateCopyOfTheCLibraryIsSampled) {
  REQUIRE_BPF();
  std::filesystem::path dir = private_libc_copy("libc-copy");
  std::string folded_path = temp_path("copy.folded");
  Child rec({ALLOCSCOPE_BIN, "record", "--all", "--no-inject", "-v", "--rate", "64KiB", "-o", folded_path});
  ASSERT_TRUE(rec.wait_for_line("recording every process", 60000, true)) << rec.err();
  constexpr int kScale = 20;
  Child w({(dir / "ld-linux-x86-64.so.2").string(), "--library-path", dir.string(), WORKLOAD_BIN, "--threads",
           "1", "--scale-pct", std::to_string(kScale), "--wait"});
  ASSERT_TRUE(w.wait_for_line("ready", 10000));
  auto maps = read_text_file("/proc/" + std::to_string(w.pid()) + "/maps");
  ASSERT_TRUE(maps && maps->find((dir / "libc.so.6").string()) != std::string::npos) << "not using the copy";
  EXPECT_TRUE(rec.wait_for_line("a new allocator", 10000, true)) << rec.err();
  size_t gap = rec.err().find("a new allocator");
  if (gap != std::string::npos)
    std::printf("  %s\n", rec.err().substr(gap, rec.err().find('\n', gap) - gap).c_str());
  w.signal(SIGUSR1);
  EXPECT_EQ(w.wait(), 0);
  rec.signal(SIGINT);
  ASSERT_EQ(rec.wait(), 0) << rec.err();
  // The copy's loader, a file not seen before, held its process: how long is said.
  EXPECT_NE(
      rec.err().find("process(es) held for a file not seen before (stopped until it was examined): median "),
      std::string::npos)
      << rec.err();

  Folded f = read_folded(folded_path);
  Estimate total;
  for (const site_spec& s : kSites) {
    Truth t = site_truth(s, 1, kScale);
    total.add_site(s,
                   value_of(f, s.function, s.allocator, [&](uint32_t p) { return p == uint32_t(w.pid()); }),
                   t.bytes, t.objects, 64 * 1024);
  }
  std::printf("  copy of libc: estimate %.0f, truth %.0f, z %.2f\n", total.value, total.truth, total.z());
  EXPECT_GT(total.value, 0);
  EXPECT_LT(std::fabs(total.z()), kMaxZ) << rec.err();
  std::filesystem::remove_all(dir);
  std::remove(folded_path.c_str());
}

// A forked child frees its copies of the parent's sampled addresses: the
// parent keeps them live. The child is followed (-- CMD follows
// descendants) and, having exited, holds nothing live. Exact mode: exact
// figures.
TEST(Children, ForkedChildNeverFreesTheParentsSamples) {
  REQUIRE_BPF();
  std::string pprof = temp_path("fork.pb.gz");
  RunResult r = run({ALLOCSCOPE_BIN, "record", "-q", "--rate", "1", "-o", pprof, "--", FORKER_BIN});
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("child exited 0"), std::string::npos) << r.out;
  auto any = [](uint32_t) { return true; };
  Folded alloc = report_folded(pprof, "alloc_space"), inuse = report_folded(pprof, "inuse_space");
  EXPECT_EQ(value_of(alloc, "parent_keep", "malloc", any), FORKER_KEPT * FORKER_KEPT_SIZE);
  EXPECT_EQ(value_of(inuse, "parent_keep", "malloc", any), FORKER_KEPT * FORKER_KEPT_SIZE);
  EXPECT_EQ(value_of(alloc, "child_keep", "malloc", any), FORKER_CHILD * FORKER_CHILD_SIZE);
  EXPECT_EQ(value_of(inuse, "child_keep", "malloc", any), 0);
  std::set<uint32_t> parent, child;
  for (const auto& [frames, v] : alloc)
    (std::find(frames.begin(), frames.end(), "child_keep") != frames.end() ? child : parent)
        .insert(root_pid(frames[0]));
  EXPECT_EQ(child.size(), 1u);
  EXPECT_FALSE(parent.contains(*child.begin())) << "the child's samples are under their own pid";
  std::remove(pprof.c_str());
}

// A shell script that runs the real program twice: both runs are followed
// from their first allocation (exact mode counts every one), and the
// script's exit status comes back; --no-children sees only the shell.
TEST(Children, ProgramsAShellRunsAreFollowedFromTheStart) {
  REQUIRE_BPF();
  std::string out = temp_path("tree.folded");
  std::string script = std::string(WORKLOAD_BIN) + " --threads 1 --scale-pct 1 >/dev/null; " + WORKLOAD_BIN +
                       " --threads 1 --scale-pct 1 >/dev/null; exit 3";
  for (bool follow : {true, false}) {
    SCOPED_TRACE(follow ? "children" : "no children");
    RunResult r = run({ALLOCSCOPE_BIN, "record", "-q", "--rate", "1", follow ? "--children" : "--no-children",
                       "-o", out, "--", "/bin/sh", "-c", script});
    EXPECT_EQ(r.status, 3) << r.err;
    Folded f = read_folded(out);
    std::set<uint32_t> pids;
    for (const auto& [frames, v] : f)
      if (frames[0].starts_with("alloc_sites (")) pids.insert(root_pid(frames[0]));
    EXPECT_EQ(pids.size(), follow ? 2u : 0u);
    for (const site_spec& s : kSites) {
      Truth t = site_truth(s, 1, 1);
      EXPECT_EQ(value_of(f, s.function, s.allocator, [](uint32_t) { return true; }), follow ? 2 * t.bytes : 0)
          << s.function;
    }
  }
  std::remove(out.c_str());
}

// -p SHELL --children: the program the shell already runs is followed as
// well as anything it starts later; exact mode counts every allocation.
TEST(Children, AttachedProcessTreeIsFollowed) {
  REQUIRE_BPF();
  std::string script = std::string(WORKLOAD_BIN) + " --threads 1 --scale-pct 1 --wait; " + WORKLOAD_BIN +
                       " --threads 1 --scale-pct 1 >/dev/null";
  Child shell({"/bin/sh", "-c", script});
  ASSERT_TRUE(shell.wait_for_line("ready", 10000));
  auto children = read_text_file("/proc/" + std::to_string(shell.pid()) + "/task/" +
                                 std::to_string(shell.pid()) + "/children");
  ASSERT_TRUE(children.has_value());
  pid_t waiting = pid_t(std::atoi(children->c_str()));
  ASSERT_GT(waiting, 0);
  std::string out = temp_path("attached-tree.folded");
  Child rec(
      {ALLOCSCOPE_BIN, "record", "-p", std::to_string(shell.pid()), "--children", "--rate", "1", "-o", out});
  ASSERT_TRUE(rec.wait_for_line("recording process", 60000, true)) << rec.err();
  kill(waiting, SIGUSR1);
  EXPECT_EQ(shell.wait(), 0);
  EXPECT_EQ(rec.wait(), 0) << rec.err();  // stops when the shell exits
  Folded f = read_folded(out);
  std::set<uint32_t> pids;
  for (const auto& [frames, v] : f)
    if (frames[0].starts_with("alloc_sites (")) pids.insert(root_pid(frames[0]));
  EXPECT_EQ(pids.size(), 2u);
  EXPECT_TRUE(pids.contains(uint32_t(waiting)));
  for (const site_spec& s : kSites)
    EXPECT_EQ(value_of(f, s.function, s.allocator, [](uint32_t) { return true; }),
              2 * site_truth(s, 1, 1).bytes)
        << s.function;
  std::remove(out.c_str());
}

// --comm keeps only the processes it names; --per-process=false merges
// them under their name.
TEST(AllProcesses, CommFilterAndMergedProcesses) {
  REQUIRE_BPF();
  std::string out = temp_path("comm.folded");
  Child rec({ALLOCSCOPE_BIN, "record", "--all", "--comm", "^alloc_sites$", "--per-process=false", "--rate",
             "16KiB", "-o", out});
  ASSERT_TRUE(rec.wait_for_line("recording every process", 60000, true)) << rec.err();
  std::string script = "for i in 1 2 3 4; do " + std::string(WORKLOAD_BIN) +
                       " --threads 1 --scale-pct 2 >/dev/null; ls / >/dev/null; done";
  ASSERT_EQ(run({"/bin/sh", "-c", script}).status, 0);
  rec.signal(SIGINT);
  ASSERT_EQ(rec.wait(), 0) << rec.err();
  Folded f = read_folded(out);
  ASSERT_FALSE(f.empty());
  std::set<std::string> roots;
  for (const auto& [frames, v] : f) roots.insert(frames[0]);
  EXPECT_EQ(roots, std::set<std::string>{"alloc_sites"});
  std::remove(out.c_str());
}

// --cgroup: the kernel samples only processes inside that cgroup.
TEST(AllProcesses, CgroupFilterKeepsOnlyItsProcesses) {
  REQUIRE_BPF();
  auto mountinfo = read_text_file("/proc/self/mountinfo");
  std::string root = mountinfo ? cgroup2_mount(*mountinfo) : "";
  ASSERT_FALSE(root.empty()) << "no cgroup v2 hierarchy";
  std::string name = "allocscope-test-" + std::to_string(getpid());
  std::filesystem::create_directory(root + "/" + name);
  Child inside({WORKLOAD_BIN, "--threads", "1", "--scale-pct", "2", "--wait"});
  Child outside({WORKLOAD_BIN, "--threads", "1", "--scale-pct", "2", "--wait"});
  ASSERT_TRUE(inside.wait_for_line("ready", 10000) && outside.wait_for_line("ready", 10000));
  std::ofstream(root + "/" + name + "/cgroup.procs") << inside.pid() << "\n";
  std::string out = temp_path("cgroup.folded");
  Child rec({ALLOCSCOPE_BIN, "record", "--all", "--cgroup", name, "--rate", "16KiB", "-o", out});
  ASSERT_TRUE(rec.wait_for_line("recording every process", 60000, true)) << rec.err();
  inside.signal(SIGUSR1);
  outside.signal(SIGUSR1);
  EXPECT_EQ(inside.wait(), 0);
  EXPECT_EQ(outside.wait(), 0);
  rec.signal(SIGINT);
  EXPECT_EQ(rec.wait(), 0) << rec.err();
  std::filesystem::remove(root + "/" + name);
  Folded f = read_folded(out);
  std::set<std::string> roots;
  for (const auto& [frames, v] : f) roots.insert(frames[0]);
  EXPECT_EQ(roots, std::set<std::string>{"alloc_sites (" + std::to_string(inside.pid()) + ")"});
  std::remove(out.c_str());
}

// --unit: processes are judged by their cgroup's name, so a unit that
// restarts (its cgroup removed and made again, with a new id) is still
// followed, and a process outside it never is.
TEST(AllProcesses, UnitFilterFollowsTheUnitAcrossRestarts) {
  REQUIRE_BPF();
  auto mountinfo = read_text_file("/proc/self/mountinfo");
  std::string root = mountinfo ? cgroup2_mount(*mountinfo) : "";
  ASSERT_FALSE(root.empty()) << "no cgroup v2 hierarchy";
  std::string unit = "allocscope-test-" + std::to_string(getpid()) + ".service";
  std::string dir = root + "/" + unit;
  std::string out = temp_path("unit.folded");
  Child rec({ALLOCSCOPE_BIN, "record", "--all", "--unit", unit, "--rate", "16KiB", "-o", out});
  ASSERT_TRUE(rec.wait_for_line("recording every process", 60000, true)) << rec.err();
  // The workload joins the unit's cgroup before it runs: its first sample
  // already finds it there.
  auto in_unit = [&] {
    return std::vector<std::string>{"/bin/sh", "-c",
                                    "echo $$ > " + dir + "/cgroup.procs && exec " +
                                        std::string(WORKLOAD_BIN) + " --threads 1 --scale-pct 2"};
  };
  std::vector<int> inside;
  for (int start = 0; start < 2; ++start) {  // the unit, then the unit restarted
    std::filesystem::create_directory(dir);
    Child worker(in_unit());
    Child outside({WORKLOAD_BIN, "--threads", "1", "--scale-pct", "2"});
    inside.push_back(worker.pid());
    EXPECT_EQ(worker.wait(), 0);
    EXPECT_EQ(outside.wait(), 0);
    // allocscope names a sample's cgroup when it reads the sample, which
    // may be a few hundred milliseconds later on a loaded machine: a
    // cgroup removed before that cannot be named (docs/containers.md).
    std::this_thread::sleep_for(std::chrono::milliseconds(1000));
    std::filesystem::remove(dir);
  }
  rec.signal(SIGINT);
  EXPECT_EQ(rec.wait(), 0) << rec.err();
  // Every process recorded ran in the unit: the workloads, and the shell
  // before its exec if it sampled after joining the cgroup.
  std::set<std::string> roots;
  for (const auto& [frames, v] : read_folded(out)) roots.insert(frames[0]);
  for (int pid : inside) EXPECT_TRUE(roots.contains("alloc_sites (" + std::to_string(pid) + ")")) << pid;
  for (const std::string& root : roots)
    EXPECT_TRUE(std::any_of(inside.begin(), inside.end(),
                            [&](int pid) { return root.ends_with(" (" + std::to_string(pid) + ")"); }))
        << root << " ran outside the unit";
  std::remove(out.c_str());
}

// record --all of the workload's processes at `rate` with a live table of
// `max_live` entries (each process's default share: a quarter), writing `out`.
Child record_workloads_with_live_table(const std::string& rate, uint64_t max_live, const std::string& out) {
  return Child({ALLOCSCOPE_BIN, "record", "--all", "--comm", "^alloc_sites$", "--rate", rate, "--max-live",
                std::to_string(max_live), "-o", out});
}

// --all: no process may hold more than a quarter of the live table (the
// default share of --max-live-per-process). A process that keeps thousands
// of sampled blocks is cut at its share, and the cut is counted; a small
// process beside it still has every live sample tracked.
TEST(AllProcesses, OneProcessCannotFillTheLiveTable) {
  REQUIRE_BPF();
  constexpr uint64_t kMaxLive = 2000, kShare = kMaxLive / 4;
  std::string out = temp_path("share.pb.gz");
  Child rec = record_workloads_with_live_table("16KiB", kMaxLive, out);
  ASSERT_TRUE(rec.wait_for_line("recording every process", 60000, true)) << rec.err();
  Child big({WORKLOAD_BIN, "--threads", "1", "--wait", "--hold"});
  Child small({WORKLOAD_BIN, "--threads", "1", "--scale-pct", "2", "--wait", "--hold"});
  ASSERT_TRUE(big.wait_for_line("ready", 10000) && small.wait_for_line("ready", 10000));
  for (Child* c : {&big, &small}) {
    c->signal(SIGUSR1);
    ASSERT_TRUE(c->wait_for_line("done", 60000));
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  rec.signal(SIGINT);
  EXPECT_EQ(rec.wait(), 0) << rec.err();
  for (Child* c : {&big, &small}) {
    c->signal(SIGUSR1);
    EXPECT_EQ(c->wait(), 0);
  }
  Recording r = read_pprof(out);
  std::map<uint32_t, uint64_t> live;
  for (const RecSample& s : r.samples) live[s.pid] += s.totals.live_samples;
  std::map<std::string, uint64_t> counters(r.counters.begin(), r.counters.end());
  std::printf("  live samples: big %llu, small %llu; refused by the share %llu\n",
              (unsigned long long)live[uint32_t(big.pid())], (unsigned long long)live[uint32_t(small.pid())],
              (unsigned long long)counters["dropped_live_share"]);
  EXPECT_EQ(live[uint32_t(big.pid())], kShare);
  EXPECT_GT(counters["dropped_live_share"], 1000u) << "the big process keeps about 5,000 sampled blocks";
  EXPECT_GE(counters["dropped_live_map_full"], counters["dropped_live_share"]);
  EXPECT_GT(live[uint32_t(small.pid())], 10u);
  EXPECT_LT(live[uint32_t(small.pid())], kShare);
  EXPECT_NE(rec.err().find("share of the live table"), std::string::npos) << rec.err();
  std::remove(out.c_str());
}

// The share holds exactly when the threads of a process, on every CPU,
// race for its last entries: sampled at 256 bytes, nearly every allocation
// of eight threads asks for one once the share is full. (Sampled, not exact:
// exact mode's in-use figures count what the kernel could not track as live.)
TEST(AllProcesses, ThreadsRacingForTheLastEntriesNeverPassTheShare) {
  REQUIRE_BPF();
  constexpr uint64_t kMaxLive = 4000, kShare = kMaxLive / 4;
  std::string out = temp_path("share-race.pb.gz");
  Child rec = record_workloads_with_live_table("256", kMaxLive, out);
  ASSERT_TRUE(rec.wait_for_line("recording every process", 60000, true)) << rec.err();
  Child racing({WORKLOAD_BIN, "--threads", "8", "--scale-pct", "5", "--wait", "--hold"});
  ASSERT_TRUE(racing.wait_for_line("ready", 10000));
  racing.signal(SIGUSR1);
  ASSERT_TRUE(racing.wait_for_line("done", 120000));
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  rec.signal(SIGINT);
  EXPECT_EQ(rec.wait(), 0) << rec.err();
  racing.signal(SIGUSR1);
  EXPECT_EQ(racing.wait(), 0);
  auto r = decode_pprof(read_text_file(out).value_or(""));
  ASSERT_TRUE(r) << r.error();
  uint64_t live = 0;
  for (const RecSample& s : r->samples)
    if (s.pid == uint32_t(racing.pid())) live += s.totals.live_samples;
  std::map<std::string, uint64_t> counters(r->counters.begin(), r->counters.end());
  std::printf("  live entries %llu of a share of %llu; refused by the share %llu\n", (unsigned long long)live,
              (unsigned long long)kShare, (unsigned long long)counters["dropped_live_share"]);
  // Never more; a few fewer when the workload's last acts freed tracked blocks.
  EXPECT_LE(live, kShare);
  EXPECT_GT(live, kShare * 9 / 10) << "the share was filled";
  EXPECT_GT(counters["dropped_live_share"], 10 * kShare) << "the threads kept asking once it was full";
  std::remove(out.c_str());
}

// Any user can bring new allocator files under --all (copies of libc): the
// number probed is bounded, and what the bound keeps out is counted and said.
TEST(AllProcesses, AllocatorFilesProbedAreBoundedAndCounted) {
  REQUIRE_BPF();
  // Two allocator files mapped whatever else runs: the system's libc (this
  // test) and a private copy mapped by a waiting workload.
  std::filesystem::path dir = private_libc_copy("libc-bounded");
  Child w({(dir / "ld-linux-x86-64.so.2").string(), "--library-path", dir.string(), WORKLOAD_BIN, "--threads",
           "1", "--scale-pct", "1", "--wait"});
  ASSERT_TRUE(w.wait_for_line("ready", 10000));
  std::string out = temp_path("bounded.folded");
  RunResult r = run({ALLOCSCOPE_BIN, "record", "--all", "--max-allocator-files", "1", "-d", "1s", "-o", out});
  w.signal(SIGUSR1);
  EXPECT_EQ(w.wait(), 0);
  EXPECT_EQ(r.status, 0) << r.err;
  std::filesystem::remove_all(dir);
  EXPECT_NE(r.err.find("recording every process (1 allocator file)"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("raise --max-allocator-files"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("file(s) could not be examined or probed"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("(over --max-allocator-files)"), std::string::npos) << r.err;
  std::remove(out.c_str());
}

}  // namespace
}  // namespace allocscope::test
