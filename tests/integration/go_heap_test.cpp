// Go programs whose runtime samples its own heap (they link runtime/pprof):
// allocscope takes those samples and their frees (runtime.mProf_Malloc,
// runtime.freeSpecial), so each known site's bytes allocated and in use are
// checked against the truth, and against the program's own heap profile
// written at the same moment; which way each program's heap was read is
// said and counted. Go 1.19 and 1.24, stripped or not, PIE; 1.25, 1.26 and
// 1.27. Real BPF.
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "harness.h"
#include "output/pprof.h"

namespace allocscope::test {
namespace {

std::vector<std::string> go_heap_binaries() {
  std::string older = GO_HEAP_BIN;
  std::vector<std::string> binaries = {older, older + "_stripped", older + "_pie"};
  if (std::string newer = NEWER_GO_HEAP_BIN; !newer.empty())
    binaries.insert(binaries.end(), {newer, newer + "_stripped", newer + "_pie"});
  else
    ADD_FAILURE()
        << "go_heap was not built with a newer Go: configure with -DALLOCSCOPE_NEWER_GO (./dev.sh does)";
  // 1.25 (trixie's backports), sid's 1.26 and 1.27 (1.27's stripped as a PIE).
  for (const char* more : {"_go1.25", "_go1.26", "_go1.27", "_go1.27_pie"}) {
    std::string path = older + more;
    if (access(path.c_str(), X_OK) == 0)
      binaries.push_back(path);
    else
      ADD_FAILURE() << path << " was not built: configure with -DALLOCSCOPE_MORE_GOS (./dev.sh does)";
  }
  return binaries;
}

// The workload's account: per site function, its calls, size and kept blocks.
struct HeapSite {
  std::string function;
  double calls = 0, size = 0, kept = 0;
};
std::vector<HeapSite> heap_sites_said(const std::string& out) {
  std::vector<HeapSite> sites;
  std::istringstream in(out);
  HeapSite s;
  while (in >> s.function && s.function != "done" && in >> s.calls >> s.size >> s.kept) sites.push_back(s);
  return sites;
}

// A site's own blocks in a profile: the stacks through main.outer and the
// site whose next frame is the allocation (allocscope's: runtime.makeslice;
// Go's own profile ends at the site).
StackTotals site_totals(const Recording& r, const std::string& function) {
  StackTotals sum;
  for (const RecSample& s : r.samples) {
    std::vector<std::string> names = frame_names(r, s);
    for (size_t i = 1; i < names.size(); ++i)
      if (names[i] == function && names[i - 1] == "main.outer" &&
          (i + 1 == names.size() || names[i + 1] == "runtime.makeslice"))
        sum.merge(s.totals);
  }
  return sum;
}

// The blocks whose stacks pass through `function`.
StackTotals through(const Recording& r, const std::string& function) {
  StackTotals sum;
  for (const RecSample& s : r.samples) {
    std::vector<std::string> names = frame_names(r, s);
    if (std::find(names.begin(), names.end(), function) != names.end()) sum.merge(s.totals);
  }
  return sum;
}

Recording read_pprof(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  auto r = decode_pprof(bytes);
  EXPECT_TRUE(r) << path << ": " << (r ? "" : r.error().message);
  return r ? *r : Recording{};
}

nlohmann::json counters_in(const std::string& path) {
  std::ifstream in(path);
  auto json = nlohmann::json::parse(in, nullptr, false);
  return json.is_object() ? json["counters"] : nlohmann::json();
}

struct Recorded {
  RunResult run;
  std::vector<HeapSite> sites;
  Recording ours, theirs;
  nlohmann::json counters;
};

Recorded record_go_heap(const std::string& binary, const std::vector<std::string>& options = {}) {
  std::string pprof = temp_path("go-heap.pb.gz"), json = temp_path("go-heap.json"),
              own = temp_path("go-heap-own.pb.gz");
  std::vector<std::string> argv = {ALLOCSCOPE_BIN, "record", "-o", pprof, "-o", json};
  argv.insert(argv.end(), options.begin(), options.end());
  argv.insert(argv.end(), {"--", binary, "200000", own});
  Recorded r{run(argv), {}, {}, {}, {}};
  EXPECT_EQ(r.run.status, 0) << r.run.err;
  r.sites = heap_sites_said(r.run.out);
  EXPECT_EQ(r.sites.size(), 4u) << r.run.out;
  r.ours = read_pprof(pprof);
  r.theirs = read_pprof(own);
  r.counters = counters_in(json);
  for (const std::string& f : {pprof, json, own}) std::remove(f.c_str());
  return r;
}

// Each site's bytes allocated and in use (after the program's last
// collection) within kMaxZ standard deviations of the truth: eight checks
// a binary (80 in all: under 1.5e-5 a run), each wrong by chance with probability below 1.8e-7.
TEST(GoHeap, EverySitesBytesInUseAgreeWithTheTruth) {
  REQUIRE_BPF();
  for (const std::string& binary : go_heap_binaries()) {
    SCOPED_TRACE(binary);
    Recorded r = record_go_heap(binary);
    for (const HeapSite& s : r.sites) {
      StackTotals t = site_totals(r.ours, s.function);
      double alloc = s.calls * s.size, inuse = s.kept * s.size;
      EXPECT_LE(std::abs(t.alloc_bytes - alloc), kMaxZ * ht_sigma(s.calls, s.size, 512 * 1024, true))
          << s.function << ": allocated " << t.alloc_bytes << " of " << alloc;
      EXPECT_LE(std::abs(t.live_bytes - inuse), kMaxZ * ht_sigma(s.kept, s.size, 512 * 1024, true))
          << s.function << ": in use " << t.live_bytes << " of " << inuse;
    }
    EXPECT_NE(r.run.err.find("note: 1 Go program(s) ran, their heap read from their runtime's own sampling"),
              std::string::npos)
        << r.run.err;
    EXPECT_EQ(r.counters["go_programs_profiled"], 1);
    EXPECT_EQ(r.counters["go_programs_sampled"], 0);
    EXPECT_EQ(r.counters["go_samples_other_rate"], 0);
  }
}

// The program's own heap profile, written after its last collection, holds
// the very samples allocscope took (the runtime's), weighted alike: each
// site's figures agree but for rounding (a deterministic check: no chance
// in it), the allocation counts too, and the samples of the runtime's start.
TEST(GoHeap, AgreesWithTheProgramsOwnHeapProfile) {
  REQUIRE_BPF();
  for (const std::string& binary : go_heap_binaries()) {
    SCOPED_TRACE(binary);
    Recorded r = record_go_heap(binary);
    for (const HeapSite& s : r.sites) {
      StackTotals ours = site_totals(r.ours, s.function), theirs = site_totals(r.theirs, s.function);
      EXPECT_GT(theirs.alloc_bytes, 0) << s.function;
      for (auto [a, b, what] : {std::tuple{ours.alloc_bytes, theirs.alloc_bytes, "alloc_space"},
                                {ours.live_bytes, theirs.live_bytes, "inuse_space"},
                                {ours.alloc_objects, theirs.alloc_objects, "alloc_objects"},
                                {ours.live_objects, theirs.live_objects, "inuse_objects"}})
        EXPECT_LE(std::abs(a - b), 0.001 * b + 2)
            << s.function << " " << what << ": " << a << " vs Go's " << b;
    }
    // The runtime's first allocations (its m being made) are sampled by
    // Go 1.24 and dropped without a record: none taken, as in Go's own.
    StackTotals ours = through(r.ours, "runtime.schedinit"), theirs = through(r.theirs, "runtime.schedinit");
    EXPECT_LE(std::abs(ours.alloc_objects - theirs.alloc_objects), 0.001 * theirs.alloc_objects + 2)
        << "the runtime's start: " << ours.alloc_objects << " vs Go's " << theirs.alloc_objects;
  }
}

// --all: a Go program started while the whole machine is recorded is held
// at its exec until its probes are in: every block its runtime samples is
// taken, so its sites agree with its own heap profile as a launched one's
// do (a stripped PIE: its load bias found by the probe).
TEST(GoHeap, AProgramStartedDuringAllAgreesWithItsOwnProfile) {
  REQUIRE_BPF();
  std::string pprof = temp_path("go-heap-all.pb.gz"), own = temp_path("go-heap-all-own.pb.gz");
  // A name of its own: the other tests' go_heap processes may run meanwhile.
  std::string binary = temp_path("gh_all_pie");
  std::filesystem::copy_file(std::string(GO_HEAP_BIN) + "_pie", binary,
                             std::filesystem::copy_options::overwrite_existing);
  Child recorder({ALLOCSCOPE_BIN, "record", "--all", "--comm", "^gh_all_pie$", "-o", pprof});
  ASSERT_TRUE(recorder.wait_for_line("recording every process", 60000, true)) << recorder.err();
  // Still running when the recording ends: its blocks are still in use.
  Child program({binary, "200000", own, "wait"});
  ASSERT_TRUE(program.wait_for_line("done", 60000)) << program.err();
  recorder.signal(SIGINT);
  ASSERT_EQ(recorder.wait(60000), 0) << recorder.err();
  program.signal(SIGTERM);
  ASSERT_EQ(program.wait(60000), 0) << program.err();
  RunResult r{0, program.out(), program.err()};
  std::vector<HeapSite> sites = heap_sites_said(r.out);
  ASSERT_EQ(sites.size(), 4u) << r.out;
  Recording ours = read_pprof(pprof), theirs = read_pprof(own);
  for (const HeapSite& s : sites) {
    StackTotals o = site_totals(ours, s.function), t = site_totals(theirs, s.function);
    EXPECT_LE(std::abs(o.live_bytes - t.live_bytes), 0.001 * t.live_bytes + 2) << s.function;
    EXPECT_LE(std::abs(o.alloc_bytes - t.alloc_bytes), 0.001 * t.alloc_bytes + 2) << s.function;
  }
  // Named among the programs read that way (the machine may run other Go
  // programs meanwhile, a build's compilers for one).
  std::string err = recorder.err(), said = "their heap read from their runtime's own sampling";
  size_t note = err.find(said);
  ASSERT_NE(note, std::string::npos) << err;
  EXPECT_NE(err.substr(note, err.find('\n', note) - note).find(binary + " (go1."), std::string::npos) << err;
  for (const std::string& f : {pprof, own, binary}) std::remove(f.c_str());
}

// Where the runtime's samples cannot serve, mallocgc's calls do (allocated
// bytes only), and the summary says why: memory profiling linked out
// (go_sites, its rate left alone with --no-inject), another rate, or asked for.
TEST(GoHeap, EachProgramsWayIsSaidWithItsReason) {
  REQUIRE_BPF();
  struct Case {
    std::string binary;
    std::vector<std::string> options;
    std::string why;
  };
  for (const Case& c : {Case{GO_SITES_BIN, {"--no-inject"}, "memory profiling linked out"},
                        Case{GO_HEAP_BIN, {"--rate", "64K"}, "--rate is not Go's MemProfileRate"},
                        Case{GO_HEAP_BIN, {"--go-heap-calls"}, "--go-heap-calls"}}) {
    SCOPED_TRACE(c.binary + " " + c.why);
    std::string json = temp_path("go-way.json");
    std::vector<std::string> argv = {ALLOCSCOPE_BIN, "record", "-o", json};
    argv.insert(argv.end(), c.options.begin(), c.options.end());
    argv.insert(argv.end(), {"--", c.binary, "1000"});
    RunResult r = run(argv);
    ASSERT_EQ(r.status, 0) << r.err;
    EXPECT_NE(r.err.find("their heap sampled at runtime.mallocgc: allocated bytes and objects only"),
              std::string::npos)
        << r.err;
    EXPECT_NE(r.err.find(c.why), std::string::npos) << r.err;
    EXPECT_EQ(counters_in(json)["go_programs_sampled"], 1);
    EXPECT_EQ(counters_in(json)["go_programs_profiled"], 0);
    std::remove(json.c_str());
  }
}

// A program whose rate is not the session's has its runtime's samples
// counted out, and said so: Go 1.24 samples once more on each P when its
// rate changes (here to 0, by GODEBUG), and that sample shows the new rate.
TEST(GoHeap, ARateTheProgramSetsIsCountedOutAndSaid) {
  REQUIRE_BPF();
  std::string newer = NEWER_GO_HEAP_BIN;
  ASSERT_FALSE(newer.empty()) << "configure with -DALLOCSCOPE_NEWER_GO (./dev.sh does)";
  std::string json = temp_path("go-rate.json");
  RunResult r =
      run({"env", "GODEBUG=memprofilerate=0", ALLOCSCOPE_BIN, "record", "-o", json, "--", newer, "20000"});
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.err.find("sampled at a MemProfileRate their program set"), std::string::npos) << r.err;
  EXPECT_GT(counters_in(json)["go_samples_other_rate"], 0);
  std::remove(json.c_str());
}

// --no-go-heap leaves the runtime's sampling unprobed as well.
TEST(GoHeap, NoGoHeapLeavesTheRuntimesSamplingUnprobed) {
  REQUIRE_BPF();
  std::string json = temp_path("go-off.json");
  RunResult r = run({ALLOCSCOPE_BIN, "record", "--no-go-heap", "-o", json, "--", GO_HEAP_BIN, "1000"});
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(counters_in(json)["samples"], 0);
  EXPECT_EQ(counters_in(json)["go_programs"], 1);
  EXPECT_EQ(counters_in(json)["go_programs_profiled"], 0);
  std::remove(json.c_str());
}

}  // namespace
}  // namespace allocscope::test
