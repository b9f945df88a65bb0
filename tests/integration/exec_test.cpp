// A launched compiler driver (g++) that execs its children (cc1plus, as):
// exact mode loses nothing in any of them, and their stacks are whole.
// cc1plus is a 35 MB program whose unwind table takes a few hundred
// milliseconds to build: the process is held at its first instruction until
// the table is in, so no allocation of its waits in a ring buffer meanwhile.
#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "harness.h"

namespace allocscope::test {
namespace {

namespace fs = std::filesystem;

constexpr const char* kSource = R"(#include <map>
#include <regex>
#include <string>
#include <vector>
#include <algorithm>
#include <iostream>
int main() {
  std::map<std::string, std::vector<int>> m;
  for (int i = 0; i < 100; ++i) m[std::to_string(i)].push_back(i);
  std::vector<std::string> keys;
  for (auto& [k, v] : m) keys.push_back(k);
  std::sort(keys.begin(), keys.end());
  std::cout << keys.size() << "\n";
}
)";

// The compiler proper's command line that `g++ ARGS` would run (its -###
// output), its output file replaced by `out`.
std::vector<std::string> cc1plus_command(const std::vector<std::string>& gxx, const std::string& out) {
  std::vector<std::string> argv = gxx;
  argv.push_back("-###");
  RunResult r = run(argv);
  std::vector<std::string> args;
  std::istringstream lines(r.err);
  for (std::string line; std::getline(lines, line);) {
    if (line.find("/cc1plus ") == std::string::npos) continue;
    // Arguments apart by spaces, those with shell characters in quotes.
    std::istringstream words(line);
    for (std::string w; words >> w;)
      args.push_back(w.size() >= 2 && w.front() == '"' && w.back() == '"' ? w.substr(1, w.size() - 2) : w);
    break;
  }
  for (size_t i = 0; i + 1 < args.size(); ++i)
    if (args[i] == "-o") args[i + 1] = out;
  return args;
}

// Allocations per program (the root frame's name) in an exact recording.
std::map<std::string, double> allocations_by_program(const std::string& pprof) {
  std::string out = temp_path("exec-objects.folded");
  RunResult r =
      run({ALLOCSCOPE_BIN, "report", pprof, "--metric", "alloc_objects", "--format", "folded", "-o", out});
  EXPECT_EQ(r.status, 0) << r.err;
  std::map<std::string, double> by;
  for (const auto& [frames, value] : read_folded(out))
    by[frames[0].substr(0, frames[0].rfind(" ("))] += value;
  std::remove(out.c_str());
  return by;
}

// `options`: more record options.
void expect_driver_loses_nothing(const std::vector<std::string>& options) {
  fs::path dir = temp_path("exec-gxx");
  fs::create_directories(dir);
  std::ofstream(dir / "small.cpp") << kSource;
  std::vector<std::string> gxx = {
      "/usr/bin/g++", "-O1", "-c", (dir / "small.cpp").string(), "-o", (dir / "small.o").string()};
  std::string via_driver = temp_path("exec-driver.pb.gz"), direct = temp_path("exec-direct.pb.gz");
  std::vector<std::string> record = {ALLOCSCOPE_BIN, "record", "--rate", "1", "-o", via_driver};
  record.insert(record.end(), options.begin(), options.end());
  record.push_back("--");
  record.insert(record.end(), gxx.begin(), gxx.end());
  RunResult r = run(record);
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(r.err.find("not exact"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("dropped:"), std::string::npos) << r.err;

  std::vector<std::string> cc1plus = cc1plus_command(gxx, (dir / "small.s").string());
  ASSERT_GT(cc1plus.size(), 2u) << "no cc1plus in g++ -###";
  record = {ALLOCSCOPE_BIN, "record", "--rate", "1", "-o", direct};
  record.insert(record.end(), options.begin(), options.end());
  record.push_back("--");
  record.insert(record.end(), cc1plus.begin(), cc1plus.end());
  RunResult d = run(record);
  ASSERT_EQ(d.status, 0) << d.err;

  std::map<std::string, double> tree = allocations_by_program(via_driver);
  double alone = allocations_by_program(direct)["cc1plus"];
  std::printf("  cc1plus: %.0f allocations under g++, %.0f run alone; g++ %.0f, as %.0f\n", tree["cc1plus"],
              alone, tree["g++"], tree["as"]);
  EXPECT_GT(tree["g++"], 0);
  EXPECT_GT(tree["as"], 0);
  // The same compilation (its temporary file's name aside, which moves a
  // handful of allocations): equal within 0.01 %.
  EXPECT_GT(alone, 10000);
  EXPECT_LT(std::fabs(tree["cc1plus"] - alone), alone * 1e-4);

  // Whole stacks: the assembler's reach its entry (__libc_start_main).
  std::string folded = temp_path("exec-tree.folded");
  ASSERT_EQ(run({ALLOCSCOPE_BIN, "report", via_driver, "--format", "folded", "-o", folded}).status, 0);
  size_t as_stacks = 0, as_whole = 0;
  for (const auto& [frames, value] : read_folded(folded)) {
    if (!frames[0].starts_with("as (")) continue;
    ++as_stacks;
    as_whole += std::find(frames.begin(), frames.end(), "__libc_start_main") != frames.end();
  }
  std::printf("  as: %zu of %zu stacks reach __libc_start_main\n", as_whole, as_stacks);
  EXPECT_GT(as_stacks, 0u);
  EXPECT_GT(as_whole, as_stacks * 9 / 10);
  fs::remove_all(dir);
  for (const std::string& f : {via_driver, direct, folded}) std::remove(f.c_str());
}

// Exact mode probes by default (in process, every call would trap too).
TEST(Exec, ACompilerDriverLosesNothingInTheProgramsItRuns) {
  REQUIRE_BPF();
  if (access("/usr/bin/g++", X_OK) != 0) GTEST_SKIP() << "no g++ (build-essential)";
  expect_driver_loses_nothing({});
}

// A program's unwind table that takes three seconds to build (made slow on
// purpose) while another process of the tree allocates some 80,000 samples
// a second: the table is built off the reading thread, so the ring buffer
// (1 MiB here, a few thousand samples) goes on being drained. Built on the
// reading thread, the buffer would fill within a tenth of a second and lose
// everything sent in the three seconds: most samples (about 85 % idle, and
// over 40 % even with the workload slowed twice by load). What holds at any
// load is asserted: under a tenth lost (a reader that merely fell behind
// once lost 1 %, in the 48th of 50 rounds; none in the 49 others).
TEST(Exec, ASlowTableBuildLosesNothing) {
  REQUIRE_BPF();
  std::string out = temp_path("exec-slow.folded"), pprof = temp_path("exec-slow.pb.gz");
  std::string script =
      std::string(WORKLOAD_BIN) + " --threads 2 --scale-pct 300 & sleep 0.3; /bin/true; wait";
  setenv("ALLOCSCOPE_TEST_SLOW_TABLE", "bin/true:3000", 1);
  RunResult r = run({ALLOCSCOPE_BIN, "record", "-v", "--rate", "4KiB", "--ringbuf-size", "1MiB", "-o", out,
                     "-o", pprof, "--", "/bin/sh", "-c", script});
  unsetenv("ALLOCSCOPE_TEST_SLOW_TABLE");
  ASSERT_EQ(r.status, 0) << r.err;
  Recording rec = read_pprof(pprof);
  std::remove(pprof.c_str());
  double dropped = double(counter_of(rec, "dropped_ringbuf"));
  double sampled = double(counter_of(rec, "samples")) + dropped;
  std::printf("  %.0f of %.0f samples lost to the ring buffer\n", dropped, sampled);
  ASSERT_GT(sampled, 0) << r.err;
  EXPECT_LT(dropped, sampled / 10) << r.err;
  // The slow table was built at all (the test's premise), in 3 s or more.
  std::smatch m;
  std::regex slow(R"(unwind table of \S+: \d+ rows from \S+ \(\d+ unsupported\), (\d+)\.\d ms)");
  double slowest = 0;
  for (auto it = std::sregex_iterator(r.err.begin(), r.err.end(), slow); it != std::sregex_iterator(); ++it)
    slowest = std::max(slowest, std::stod((*it)[1]));
  EXPECT_GE(slowest, 3000) << r.err;
  double recorded = 0;
  for (const auto& [frames, value] : read_folded(out))
    if (frames[0].starts_with("alloc_sites (")) recorded += value;
  EXPECT_GT(recorded, 0);
  std::remove(out.c_str());
}

// An exec event lost to a full ring buffer (the test makes allocscope treat
// every one as lost): the program that replaced the shell is told from it
// by the exec count its stacks carry. Each is under its own name, and the
// workload's sites are exact, none left under the shell (where they all went
// when programs were told apart by exec events alone).
TEST(Exec, AProgramWhoseExecEventWasLostIsToldApartByItsStacks) {
  REQUIRE_BPF();
  constexpr int kScale = 2;
  std::string out = temp_path("exec-lost.folded"), json = temp_path("exec-lost.json");
  setenv("ALLOCSCOPE_TEST_LOSE_EXECS", "1", 1);
  RunResult r =
      run({ALLOCSCOPE_BIN, "record", "--rate", "1", "-o", out, "-o", json, "--", "/bin/sh", "-c",
           "exec " + std::string(WORKLOAD_BIN) + " --threads 1 --scale-pct " + std::to_string(kScale)});
  unsetenv("ALLOCSCOPE_TEST_LOSE_EXECS");
  ASSERT_EQ(r.status, 0) << r.err;
  std::ifstream in(json);
  auto doc = nlohmann::json::parse(in, nullptr, false);
  ASSERT_TRUE(doc.is_object());
  EXPECT_EQ(doc["counters"].value("ended_programs_found_replaced", 0ULL), 1ULL);
  std::map<std::string, Folded> by_program;
  for (const auto& [frames, value] : read_folded(out))
    by_program[frames[0].substr(0, frames[0].rfind(" ("))][frames] = value;
  EXPECT_FALSE(by_program["sh"].empty()) << "the shell allocates before its exec";
  for (const site_spec& s : kSites) {
    double truth = site_truth(s, 1, kScale).bytes;
    EXPECT_EQ(site_value(by_program["alloc_sites"], s.function, s.allocator), truth) << s.function;
    EXPECT_EQ(site_value(by_program["sh"], s.function, s.allocator), 0) << s.function;
  }
  for (const std::string& f : {out, json}) std::remove(f.c_str());
}

}  // namespace
}  // namespace allocscope::test
