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
#include <string>
#include <vector>

#include "harness.h"
#include "python_sites.h"

namespace allocscope::test {
namespace {

constexpr const char* kPythons[] = {"python3.14", "python3.15"};

// The sid root with every interpreter above (made once, then cached).
struct SidPythons : PythonRoot {
  SidPythons() : PythonRoot(SID_ROOT_SH, {std::begin(kPythons), std::end(kPythons)}) {}
};

class TodaysPython : public ::testing::TestWithParam<const char*> {};

// Launched, exact: every object of a large site under
// <module>;main;SITE;build;allocate, to the byte, each frame at its line.
TEST_P(TodaysPython, ExactSitesStandUnderTheirPythonCallersAtTheirLines) {
  REQUIRE_BPF();
  SidPythons sid;
  ASSERT_EQ(sid.error(), "");
  std::string out = temp_path("python-today.json"), pprof = temp_path("python-today.pb.gz");
  std::vector<std::string> argv = {ALLOCSCOPE_BIN, "record", "--rate", "1", "-o", out, "-o", pprof, "--"};
  for (const std::string& a : sid.command(GetParam(), {"--scale-pct", "20"})) argv.push_back(a);
  RunResult r = run(argv);
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(r.err.find("no Python frames"), std::string::npos) << r.err;
  Truths truths = parse_truth(r.out);
  ASSERT_EQ(truths.size(), 4u) << r.out;
  expect_exact(read_recording(out, truths), truths);
  expect_lines(pprof, parse_lines(r.out), sid.script(), "calloc", false);
  std::remove(out.c_str());
  std::remove(pprof.c_str());
}

// Attached to a running interpreter (-p), sampled: each large site within
// the suite's bound (harness.h, kMaxZ) of its truth, under its callers.
TEST_P(TodaysPython, SampledSitesOfAnAttachedInterpreter) {
  REQUIRE_BPF();
  SidPythons sid;
  ASSERT_EQ(sid.error(), "");
  expect_attached_interpreter_sampled(sid.command(GetParam(), {"--wait", "--hold"}));
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
