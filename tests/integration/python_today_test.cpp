// Python frames of the interpreters the newest distributions ship: sid's
// CPython 3.14 and 3.15, in a sid root made once per machine
// (sid_root.sh), against the workload's own count of what each Python
// function allocated and the line it allocates from. Launched (exact) and
// attached (sampled). Real BPF.
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "harness.h"
#include "python_sites.h"

namespace allocscope::test {
namespace {

constexpr const char* kPythons[] = {"python3.14", "python3.15"};

// The sid root, with every interpreter above and its shared library, the
// runtime embedders load (made once, then cached).
struct SidPythons : PythonRoot {
  SidPythons() : PythonRoot(SID_ROOT_SH, kSidPackages) {}
};

class TodaysPython : public ::testing::TestWithParam<const char*> {};

// Launched, exact: every object of a large site under
// <module>;main;SITE;build;allocate, to the byte, each frame at its line.
TEST_P(TodaysPython, ExactSitesStandUnderTheirPythonCallersAtTheirLines) {
  REQUIRE_BPF();
  SidPythons sid;
  ASSERT_EQ(sid.error(), "");
  std::string err =
      expect_launched_exact(sid.command(GetParam(), {"--scale-pct", "20"}), false, sid.script());
  EXPECT_EQ(err.find("no Python frames"), std::string::npos) << err;
}

// Attached to a running interpreter in a container (-p), sampled: each
// site within the suite's bound (harness.h, kMaxZ) of its truth, under its
// callers, small objects too (CPython's allocators wrapped once entered).
TEST_P(TodaysPython, SampledSitesOfAnAttachedInterpreter) {
  REQUIRE_BPF();
  SidPythons sid;
  ASSERT_EQ(sid.error(), "");
  expect_attached_interpreter_sampled(sid.in_container(GetParam(), {"--wait", "--hold"}), true);
}

// A program that loads the shared runtime (sid's libpython3.X.so.1.0, what
// embedders use) with dlopen and runs the workload: launched, exact, every
// large site under its Python callers at its lines, the version named.
TEST_P(TodaysPython, AProgramLoadingTheSharedRuntimeIsExact) {
  REQUIRE_BPF();
  namespace fs = std::filesystem;
  SidPythons sid;
  ASSERT_EQ(sid.error(), "");
  std::string version = std::string(GetParam()).substr(std::string("python").size());
  std::string embed = "/tmp/allocscope-embed-" + std::to_string(getpid());
  fs::copy_file(EMBEDDED_PYTHON_DL_BIN, sid.root() + embed, fs::copy_options::overwrite_existing);
  std::string err = expect_launched_exact(
      {"chroot", sid.root(), embed, "/usr/lib/x86_64-linux-gnu/libpython" + version + ".so.1.0", sid.script(),
       "--scale-pct", "20"},
      false, sid.script());
  fs::remove(sid.root() + embed);
  EXPECT_NE(err.find("python: frames of CPython " + version), std::string::npos) << err;
}

// In process (--preload, the library put in the root at the path it has
// here): CPython's own allocator counted too, every object under its
// Python callers once, to the byte.
TEST_P(TodaysPython, PreloadCountsCPythonsOwnAllocatorExactly) {
  REQUIRE_BPF();
  namespace fs = std::filesystem;
  SidPythons sid;
  ASSERT_EQ(sid.error(), "");
  fs::path lib = sid.root() + PRELOAD_LIB;
  fs::create_directories(lib.parent_path());
  fs::copy_file(PRELOAD_LIB, lib, fs::copy_options::overwrite_existing);
  expect_launched_exact(sid.command(GetParam(), {"--scale-pct", "20"}), true);
  fs::remove(lib);
}

// Both interpreters, each in a container, running the workload with
// --wait --hold: their pids as seen out here, their sites run and ended on
// demand, and each one's large sites checked in a recording.
class ContainedPythons {
 public:
  void start(const SidPythons& sid, const std::vector<std::string>& args) {
    for (const char* python : kPythons) {
      pythons_.push_back(std::make_unique<Child>(sid.in_container(python, args)));
      ASSERT_TRUE(pythons_.back()->wait_for_line("ready", 20000));
      pids_.push_back(only_child(pythons_.back()->pid()));
      ASSERT_GT(pids_.back(), 0);
    }
  }
  void run_sites() {
    for (pid_t pid : pids_) ::kill(pid, SIGUSR1);
    for (auto& c : pythons_) ASSERT_TRUE(c->wait_for_line("}", 60000));
  }
  void end() {
    for (pid_t pid : pids_) ::kill(pid, SIGUSR1);
    for (auto& c : pythons_) EXPECT_EQ(c->wait(), 0);
    for (auto& c : pythons_) EXPECT_EQ(c->err(), "");
  }
  // Each large site within the suite's bound of its truth, at `rate`, at
  // either leaf (before an entry or after).
  void expect_large_sites(const std::string& recording, double rate) const {
    for (size_t i = 0; i < pythons_.size(); ++i) {
      SCOPED_TRACE(kPythons[i]);
      Truths truths = parse_truth(pythons_[i]->out());
      ASSERT_EQ(truths.size(), 4u) << pythons_[i]->out();
      Recorded r = read_recording(recording, truths, kEitherCalloc, uint32_t(pids_[i]));
      EXPECT_EQ(r.loop_frames_left, 0u);
      expect_sampled_large_sites(r, truths, rate);
    }
  }

 private:
  std::vector<std::unique_ptr<Child>> pythons_;
  std::vector<pid_t> pids_;
};

// The whole machine (--all): both interpreters, each in a container, found
// as they start; busy, each is entered while it runs (its small objects
// counted from then on only: not checked). Each large site within the
// suite's bound of its truth under its callers, whether counted at the C
// library's calloc (before the entry) or at PyObject_Calloc (after).
TEST(TodaysPythonEverywhere, TheWholeMachineHasTheirFrames) {
  REQUIRE_BPF();
  SidPythons sid;
  ASSERT_EQ(sid.error(), "");
  std::string out = temp_path("python-today-all.json");
  Child rec({ALLOCSCOPE_BIN, "record", "--all", "--rate", "64KiB", "-o", out});
  ASSERT_TRUE(rec.wait_for_line("recording every process", 60000, true)) << rec.err();
  ContainedPythons pythons;
  ASSERT_NO_FATAL_FAILURE(pythons.start(sid, {"--wait", "--hold", "--scale-pct", "50"}));
  ASSERT_NO_FATAL_FAILURE(pythons.run_sites());
  rec.signal(SIGINT);
  ASSERT_EQ(rec.wait(), 0) << rec.err();
  pythons.end();
  pythons.expect_large_sites(out, 64 * 1024);
  std::remove(out.c_str());
}

// Through the agent: both interpreters, each in a container, served as a
// scraper fetches them; each large site under its Python callers within
// the suite's bound.
TEST(TodaysPythonEverywhere, TheAgentServesTheirFrames) {
  REQUIRE_BPF();
  SidPythons sid;
  ASSERT_EQ(sid.error(), "");
  int port = free_port();
  Child agent({ALLOCSCOPE_BIN, "agent", "--listen", "127.0.0.1:" + std::to_string(port), "--rate", "64KiB",
               "--comm", "^python3"});
  ASSERT_TRUE(agent.wait_for_line("recording: probes attached", 60000, true)) << agent.err();
  ContainedPythons pythons;
  ASSERT_NO_FATAL_FAILURE(pythons.start(sid, {"--wait", "--hold"}));
  ASSERT_NO_FATAL_FAILURE(pythons.run_sites());
  std::string out = agent_allocs_json(port);
  ASSERT_FALSE(out.empty());
  pythons.end();
  agent.signal(SIGINT);
  EXPECT_EQ(agent.wait(), 0) << agent.err();
  pythons.expect_large_sites(out, 64 * 1024);
  std::remove(out.c_str());
}

// A launched command that enters another root (chroot ROOT python3.14):
// the preload library's path does not resolve there, so the library takes
// itself out of the environment at the chroot, and the loader in the root
// says nothing. Its output is its untraced output, at every mode: sampled
// (in process, then probed in the root), with --preload (in process only:
// not recorded there), exact.
TEST(TodaysPythonInARoot, AChrootedInterpreterPrintsWhatItPrintsUntraced) {
  REQUIRE_BPF();
  SidPythons sid;
  ASSERT_EQ(sid.error(), "");
  std::vector<std::string> command = sid.command("python3.14", {"--scale-pct", "5"});
  RunResult plain = run(command);
  ASSERT_EQ(plain.status, 0) << plain.err;
  for (std::vector<std::string> mode :
       {std::vector<std::string>{}, {"--preload"}, {"--rate", "1"}, {"--rate", "4KiB"}}) {
    std::string out = temp_path("chrooted.folded");
    std::vector<std::string> argv = {ALLOCSCOPE_BIN, "record", "-q", "-o", out};
    argv.insert(argv.end(), mode.begin(), mode.end());
    argv.push_back("--");
    argv.insert(argv.end(), command.begin(), command.end());
    RunResult traced = run(argv);
    std::string named = mode.empty() ? "the default" : mode[0];
    EXPECT_EQ(traced.status, plain.status) << named << ": " << traced.err;
    EXPECT_EQ(traced.out, plain.out) << named;
    EXPECT_EQ(traced.err, plain.err) << named << ": nothing of allocscope's in the program's stderr";
    // --preload records only the processes that load the library (in-process.md).
    if (named != "--preload") {
      EXPECT_NE(read_file(out).find("large_kept"), std::string::npos) << named << ": its sites recorded";
    }
    std::remove(out.c_str());
  }
}

INSTANTIATE_TEST_SUITE_P(Python, TodaysPython, ::testing::ValuesIn(kPythons), [](const auto& info) {
  std::string name = info.param;
  return "Python" + name.substr(std::string("python").size(), 1) + name.substr(name.find('.') + 1);
});

}  // namespace
}  // namespace allocscope::test
