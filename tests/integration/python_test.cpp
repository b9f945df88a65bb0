// Python frames in the stacks of CPython programs (Debian 12's 3.11 here,
// Debian 13's 3.13 in a trixie root), against the workload's own count of
// what each Python function allocated. Real BPF.
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <set>

#include "harness.h"
#include "host/process.h"
#include "output/pprof.h"
#include "pyenv_interpreters.h"
#include "python_sites.h"

namespace allocscope::test {
namespace {

TEST(Python, ExactSitesStandUnderTheirPythonCallers) {
  REQUIRE_BPF();
  std::string out = temp_path("python311.json"), pprof = temp_path("python311.pb.gz");
  RunResult r = run({ALLOCSCOPE_BIN, "record", "--rate", "1", "-o", out, "-o", pprof, "--",
                     "/usr/bin/python3.11", PYTHON_SITES_PY, "--scale-pct", "20"});
  ASSERT_EQ(r.status, 0) << r.err;
  Truths truths = parse_truth(r.out);
  ASSERT_EQ(truths.size(), 4u) << r.out;
  expect_exact(read_recording(out, truths), truths);
  expect_lines(pprof, parse_lines(r.out), PYTHON_SITES_PY, "calloc", false);
  std::remove(out.c_str());
  std::remove(pprof.c_str());
}

// A process's state letter (/proc/PID/stat): 'T' stopped, 'Z' ended; 0 gone.
char process_state(pid_t pid) {
  std::string stat = read_text_file("/proc/" + std::to_string(pid) + "/stat").value_or("");
  size_t at = stat.rfind(')');
  return at == std::string::npos || at + 2 >= stat.size() ? 0 : stat[at + 2];
}

// A short Python process ends while allocscope reads nothing (stopped, as a
// reader far behind would be): the kernel holds it at _exit until the
// reader reaches that point, so the code objects its stacks name are read
// from its memory before it goes, and every site keeps its Python frames.
TEST(Python, AProcessEndingBeforeItsStacksAreReadKeepsItsFrames) {
  REQUIRE_BPF();
  std::string out = temp_path("python-exit.json");
  Child rec({ALLOCSCOPE_BIN, "record", "--rate", "1", "-o", out, "--", "/usr/bin/python3.11", PYTHON_SITES_PY,
             "--scale-pct", "20", "--wait"});
  ASSERT_TRUE(rec.wait_for_line("recording process", 60000, true)) << rec.err();
  pid_t python = pid_t(std::stol(rec.err().substr(rec.err().find("recording process") + 18)));
  ASSERT_TRUE(rec.wait_for_line("ready", 60000));
  rec.signal(SIGSTOP);
  kill(python, SIGUSR1);
  char state = 0;  // runs its sites, then stops at _exit (held) or ends
  for (int i = 0; i < 600 && state != 'T' && state != 'Z' && state != 'X'; ++i) {
    usleep(50000);
    state = process_state(python);
  }
  rec.signal(SIGCONT);
  EXPECT_EQ(state, 'T') << "held at _exit while the reader was stopped";
  ASSERT_EQ(rec.wait(), 0) << rec.err();
  Truths truths = parse_truth(rec.out());
  ASSERT_EQ(truths.size(), 4u) << rec.out();
  expect_exact(read_recording(out, truths), truths);
  std::remove(out.c_str());
}

// Attached to a running interpreter, sampled: each large site within the
// suite's bound (harness.h, kMaxZ) of its truth.
TEST(Python, SampledSitesOfAnAttachedInterpreter) {
  REQUIRE_BPF();
  expect_attached_interpreter_sampled("/usr/bin/python3.11");
}

// Debian 13's python3.13 in a trixie root (made once, then cached).
struct TrixiePython : PythonRoot {
  TrixiePython() : PythonRoot(PYTHON_ROOT_SH) {}
  std::vector<std::string> command(const std::vector<std::string>& args, const std::string& in = "") const {
    return PythonRoot::command("python3.13", args, in);
  }
};

// The whole machine (--all): an interpreter running before the recording
// began and one started during it each have their own Python frames, beside
// a native program; Debian 13's 3.13 too, in its root.
TEST(Python, EveryInterpreterOfTheMachineHasItsFrames) {
  REQUIRE_BPF();
  TrixiePython trixie;
  ASSERT_EQ(trixie.error(), "");
  Child before({"/usr/bin/python3.11", PYTHON_SITES_PY, "--wait", "--hold"});
  ASSERT_TRUE(before.wait_for_line("ready", 20000));
  std::string out = temp_path("python-all.json");
  constexpr double kRate = 64 * 1024;
  Child rec({ALLOCSCOPE_BIN, "record", "--all", "--rate", "64KiB", "-o", out});
  ASSERT_TRUE(rec.wait_for_line("recording every process", 60000, true)) << rec.err();
  Child after({"/usr/bin/python3.11", PYTHON_SITES_PY, "--wait", "--hold", "--scale-pct", "50"});
  Child debian13(trixie.command({"--wait", "--hold", "--scale-pct", "50"}));
  Child native({WORKLOAD_BIN, "--threads", "1", "--scale-pct", "20"});
  ASSERT_TRUE(after.wait_for_line("ready", 20000));
  ASSERT_TRUE(debian13.wait_for_line("ready", 20000));
  std::vector<Child*> interpreters = {&before, &after, &debian13};
  for (Child* c : interpreters) c->signal(SIGUSR1);
  for (Child* c : interpreters) ASSERT_TRUE(c->wait_for_line("}", 60000));
  EXPECT_EQ(native.wait(), 0);
  rec.signal(SIGINT);
  ASSERT_EQ(rec.wait(), 0) << rec.err();
  for (Child* c : interpreters) c->signal(SIGUSR1);
  for (Child* c : interpreters) {
    EXPECT_EQ(c->wait(), 0);
    SCOPED_TRACE(c == &before ? "running before" : c == &after ? "started during" : "3.13, started during");
    Truths truths = parse_truth(c->out());
    ASSERT_EQ(truths.size(), 4u) << c->out();
    Recorded r = read_recording(out, truths, kEitherCalloc, uint32_t(c->pid()));
    EXPECT_EQ(r.loop_frames_left, 0u);
    expect_sampled_large_sites(r, truths, kRate);
  }
  std::remove(out.c_str());
}

// Through the agent: Python processes' profiles (3.11, 3.13 in its root,
// and two of the newest pyenv interpreter's, whose runtime is a library:
// the first held at its mapping, the second entered by the kernel) fetched
// as a scraper does, each large site under its Python callers within the
// suite's bound.
TEST(Python, TheAgentServesPythonFrames) {
  REQUIRE_BPF();
  TrixiePython trixie;
  ASSERT_EQ(trixie.error(), "");
  int port = free_port();
  constexpr double kRate = 64 * 1024;
  Child agent({ALLOCSCOPE_BIN, "agent", "--listen", "127.0.0.1:" + std::to_string(port), "--rate", "64KiB",
               "--comm", "^python3"});
  ASSERT_TRUE(agent.wait_for_line("recording: probes attached", 60000, true)) << agent.err();
  Child debian12({"/usr/bin/python3.11", PYTHON_SITES_PY, "--wait", "--hold"});
  Child debian13(trixie.command({"--wait", "--hold"}));
  std::vector<Child*> interpreters = {&debian12, &debian13};
  for (Child* c : interpreters) ASSERT_TRUE(c->wait_for_line("ready", 20000));
  std::vector<std::unique_ptr<Child>> pyenv;
  if (auto found = pyenv_interpreters(); !found.empty())
    for (int i = 0; i < 2; ++i) {
      pyenv.push_back(std::make_unique<Child>(
          std::vector<std::string>{found.back().path, PYTHON_SITES_PY, "--wait", "--hold"}));
      interpreters.push_back(pyenv.back().get());
      ASSERT_TRUE(pyenv.back()->wait_for_line("ready", 20000));  // the second maps a library already read
    }
  for (Child* c : interpreters) c->signal(SIGUSR1);
  for (Child* c : interpreters) ASSERT_TRUE(c->wait_for_line("}", 60000));
  std::string out = agent_allocs_json(port);
  ASSERT_FALSE(out.empty());
  for (Child* c : interpreters) c->signal(SIGUSR1);
  for (Child* c : interpreters) EXPECT_EQ(c->wait(), 0);
  agent.signal(SIGINT);
  EXPECT_EQ(agent.wait(), 0) << agent.err();
  for (Child* c : interpreters) {
    SCOPED_TRACE(c == &debian12 ? "3.11" : c == &debian13 ? "3.13" : "pyenv, " + std::to_string(c->pid()));
    Truths truths = parse_truth(c->out());
    ASSERT_EQ(truths.size(), 4u) << c->out();
    Recorded r = read_recording(out, truths, kEitherCalloc, uint32_t(c->pid()));
    EXPECT_EQ(r.loop_frames_left, 0u);
    expect_sampled_large_sites(r, truths, kRate);
  }
  std::remove(out.c_str());
}

// tracemalloc started between two entries: the first wraps CPython's
// allocators, tracemalloc wraps ours, the detach leaves ours beneath it,
// and the second entry must not wrap tracemalloc's (ours would then call
// tracemalloc with our ctx, and the program would crash). The interpreter
// runs to its end as untraced, and ours, beneath tracemalloc, counts the
// small objects of the second recording within the suite's bound.
TEST(Python, TracemallocStartedBetweenTwoEntriesHarmsNothing) {
  REQUIRE_BPF();
  Child w({"/usr/bin/python3.11", TRACEMALLOC_BETWEEN_PY});
  ASSERT_TRUE(w.wait_for_line("ready", 20000));
  auto enter = [&](const std::string& out) {
    auto rec = std::make_unique<Child>(std::vector<std::string>{
        ALLOCSCOPE_BIN, "record", "-p", std::to_string(w.pid()), "--rate", "64KiB", "-o", out});
    EXPECT_TRUE(rec->wait_for_line("recording process", 60000, true)) << rec->err();
    return rec;
  };
  std::string first = temp_path("tracemalloc-first.json"), second = temp_path("tracemalloc-second.json");
  auto rec = enter(first);
  w.signal(SIGUSR1);
  ASSERT_TRUE(w.wait_for_line("tracing", 20000));
  rec->signal(SIGINT);
  ASSERT_EQ(rec->wait(), 0) << rec->err();
  rec = enter(second);
  w.signal(SIGUSR1);
  ASSERT_TRUE(w.wait_for_line("made", 60000)) << w.err();
  rec->signal(SIGINT);
  ASSERT_EQ(rec->wait(), 0) << rec->err();
  w.signal(SIGUSR1);
  EXPECT_EQ(w.wait(), 0) << w.err();
  EXPECT_EQ(w.err(), "");
  EXPECT_NE(w.out().find("done"), std::string::npos) << w.out();
  double count = 0, size = 0;
  std::sscanf(w.out().c_str() + w.out().find("made"), "made %lf %lf", &count, &size);
  ASSERT_GT(count * size, 0) << w.out();
  std::ifstream in(second);
  auto json = nlohmann::json::parse(in, nullptr, false);
  ASSERT_TRUE(json.is_object());
  double counted = 0;
  for (const auto& s : json["stacks"]) {
    std::vector<std::string> frames = s["frames"];
    if (frames.back() == "PyObject_Calloc" &&
        std::find(frames.begin(), frames.end(), "small_objects") != frames.end())
      counted += s["alloc_space"]["estimate"].get<double>();
  }
  EXPECT_LT(std::fabs(counted - count * size) / ht_sigma(count, size, 64 * 1024, true), kMaxZ)
      << counted << " of " << count * size;
  std::remove(first.c_str());
  std::remove(second.c_str());
}

// In process (--preload): CPython's own allocator counted too, every
// object under its Python callers once (its domain's calls into the C
// library are not counted again).
TEST(Python, PreloadCountsCPythonsOwnAllocatorExactly) {
  REQUIRE_BPF();
  expect_launched_exact({"/usr/bin/python3.11", PYTHON_SITES_PY, "--scale-pct", "20"}, true, PYTHON_SITES_PY);
}

// ... and sampled: each site within the suite's bound of its truth.
TEST(Python, PreloadSamplesEverySizeUnbiased) {
  REQUIRE_BPF();
  std::string out = temp_path("python-preload-sampled.json");
  constexpr double kRate = 16 * 1024;
  RunResult r = run({ALLOCSCOPE_BIN, "record", "--preload", "--rate", "16KiB", "-o", out, "--",
                     "/usr/bin/python3.11", PYTHON_SITES_PY});
  ASSERT_EQ(r.status, 0) << r.err;
  Truths truths = parse_truth(r.out);
  ASSERT_EQ(truths.size(), 4u) << r.out;
  Recorded rec = read_recording(out, truths, "PyObject_Calloc");
  EXPECT_EQ(rec.c_library_callocs, 0u);
  expect_sampled_large_sites(rec, truths, kRate, true);
  std::remove(out.c_str());
}

// Debian 13's python3.13, whose layout comes from its own table of offsets,
// run in a trixie root: through the C library's allocator, and in process
// (the preload library put in the root at the path it has here).
TEST(Python, ExactSitesOfDebian13sInterpreter) {
  REQUIRE_BPF();
  namespace fs = std::filesystem;
  TrixiePython trixie;
  ASSERT_EQ(trixie.error(), "");
  const std::string& root = trixie.root();
  const std::string& script = trixie.script();
  fs::path lib = root + PRELOAD_LIB;
  fs::create_directories(lib.parent_path());
  fs::copy_file(PRELOAD_LIB, lib, fs::copy_options::overwrite_existing);
  // A container's root is often an overlay: its executable (the overlay's
  // file) and its mappings (the file below) then differ in device.
  std::string overlay = temp_path("python-overlay");
  for (const char* d : {"/upper", "/work", "/merged"}) fs::create_directories(overlay + d);
  RunResult mounted =
      run({"mount", "-t", "overlay", "overlay", "-o",
           "lowerdir=" + root + ",upperdir=" + overlay + "/upper,workdir=" + overlay + "/work",
           overlay + "/merged"});
  ASSERT_EQ(mounted.status, 0) << mounted.err;
  enum Route { kProbes, kInProcess, kOverlay };
  for (Route route : {kProbes, kInProcess, kOverlay}) {
    bool preload = route == kInProcess;
    SCOPED_TRACE(route == kProbes ? "through the C library" : preload ? "in process" : "in an overlay root");
    std::string out = temp_path("python313.json"), pprof = temp_path("python313.pb.gz");
    std::vector<std::string> argv = {ALLOCSCOPE_BIN, "record", "--rate", "1", "-o", out, "-o", pprof};
    if (preload) argv.push_back("--preload");
    argv.push_back("--");
    for (std::string a : trixie.command({"--scale-pct", "20"}, route == kOverlay ? overlay + "/merged" : ""))
      argv.push_back(a);
    RunResult r = run(argv);
    ASSERT_EQ(r.status, 0) << r.err;
    Truths truths = parse_truth(r.out);
    ASSERT_EQ(truths.size(), 4u) << r.out;
    Recorded rec = read_recording(out, truths, preload ? "PyObject_Calloc" : "calloc");
    expect_exact(rec, truths, preload);
    if (preload) {
      EXPECT_EQ(rec.c_library_callocs, 0u);
    }
    expect_lines(pprof, parse_lines(r.out), script, preload ? "PyObject_Calloc" : "calloc", preload);
    std::remove(out.c_str());
    std::remove(pprof.c_str());
  }
  EXPECT_EQ(run({"umount", overlay + "/merged"}).status, 0);
  fs::remove_all(overlay);
  fs::remove(lib);
}

}  // namespace
}  // namespace allocscope::test
