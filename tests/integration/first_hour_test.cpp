// What a newcomer meets first: outputs checked before anything runs, a
// recording saved elsewhere when its own path fails at the end, files named
// in the summary (pprof by default), a hint when a recording has too few
// samples, and outputs made for the user who ran sudo. Real BPF.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <regex>
#include <set>

#include "../unit/temp_dir.h"
#include "harness.h"

namespace allocscope::test {
namespace {

namespace fs = std::filesystem;

// A path that is a directory, or on a file system that takes no new files:
// refused in one line before the command starts.
TEST(FirstHour, AnOutputThatCannotBeWrittenIsRefusedBeforeTheCommandRuns) {
  REQUIRE_BPF();
  TempDir dir;
  std::string marker = dir.path.string() + "/ran";
  struct Case {
    std::string output, said;
  };
  for (const Case& c :
       {Case{dir.path.string(), "a directory"}, Case{"/sys/allocscope-test.pb.gz", "write /sys/"},
        Case{"/proc/allocscope-test.svg", "write /proc/"}}) {
    SCOPED_TRACE(c.output);
    RunResult r = run({ALLOCSCOPE_BIN, "record", "-o", c.output, "--", "touch", marker});
    EXPECT_EQ(r.status, 1) << r.err;
    EXPECT_NE(r.err.find(c.said), std::string::npos) << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << "one line: " << r.err;
    EXPECT_FALSE(fs::exists(marker)) << "the command ran although its output could not be written";
  }
}

// The output's directory goes away while the command runs: the recording is
// saved in the current directory instead, said, and reads back.
TEST(FirstHour, ARecordingWhosePathFailsAtTheEndIsSavedElsewhere) {
  REQUIRE_BPF();
  TempDir work, gone;
  std::string out = gone.path.string() + "/heap.pb.gz";
  RunResult r =
      run({"sh", "-c",
           "cd \"$0\" && exec \"$1\" record --rate 1 -o \"$2\" -- sh -c \"$3 --scale-pct 1; rmdir $4\"",
           work.path.string(), ALLOCSCOPE_BIN, out, WORKLOAD_BIN, gone.path.string()});
  EXPECT_EQ(r.status, 1) << r.err;
  std::smatch m;
  ASSERT_TRUE(std::regex_search(r.err, m, std::regex(R"(saved in (\./allocscope-\w{6}\.pb\.gz) instead)")))
      << r.err;
  std::string saved = work.path.string() + "/" + m[1].str().substr(2);
  ASSERT_TRUE(fs::is_regular_file(saved)) << saved;
  RunResult report = run({ALLOCSCOPE_BIN, "report", saved, "--top", "3"});
  EXPECT_EQ(report.status, 0) << report.err;
  EXPECT_NE(report.out.find("alloc"), std::string::npos) << report.out;
  fs::remove(saved);
}

// Without -o: allocscope.pb.gz in the current directory, which report
// reads, and an earlier run's kept as its .old; the summary names every
// file it wrote, and so does report.
TEST(FirstHour, TheSummaryNamesTheFilesWrittenAndTheDefaultIsPprof) {
  REQUIRE_BPF();
  TempDir work;
  RunResult r = run({"sh", "-c", "cd \"$0\" && exec \"$1\" record --rate 1 -- \"$2\" --scale-pct 1",
                     work.path.string(), ALLOCSCOPE_BIN, WORKLOAD_BIN});
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.err.find("wrote allocscope.pb.gz"), std::string::npos) << r.err;
  RunResult report = run({ALLOCSCOPE_BIN, "report", work.path.string() + "/allocscope.pb.gz", "--top", "3"});
  EXPECT_EQ(report.status, 0) << report.err;
  // A second run keeps the first's, and says so.
  r = run({"sh", "-c", "cd \"$0\" && exec \"$1\" record --rate 1 -- \"$2\" --scale-pct 1", work.path.string(),
           ALLOCSCOPE_BIN, WORKLOAD_BIN});
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.err.find("the earlier allocscope.pb.gz is now allocscope.pb.gz.old"), std::string::npos)
      << r.err;
  EXPECT_TRUE(fs::is_regular_file(work.path / "allocscope.pb.gz.old"));
  // report says what it wrote, and what a suffix that names no format becomes.
  std::string html = work.path.string() + "/x.html", diff = work.path.string() + "/d.svg";
  report = run({ALLOCSCOPE_BIN, "report", work.path.string() + "/allocscope.pb.gz", "-o", html});
  EXPECT_EQ(report.status, 0) << report.err;
  EXPECT_NE(report.err.find("note: " + html + " is written as folded stacks"), std::string::npos)
      << report.err;
  EXPECT_NE(report.err.find("wrote " + html), std::string::npos) << report.err;
  report = run({ALLOCSCOPE_BIN, "report", "--diff", work.path.string() + "/allocscope.pb.gz.old",
                work.path.string() + "/allocscope.pb.gz", "-o", diff});
  EXPECT_EQ(report.status, 0) << report.err;
  EXPECT_NE(report.err.find("wrote " + diff), std::string::npos) << report.err;
  std::string svg = work.path.string() + "/heap.svg", pb = work.path.string() + "/heap.pb.gz";
  r = run({ALLOCSCOPE_BIN, "record", "--rate", "1", "-o", pb, "-o", svg, "--peak", "--", WORKLOAD_BIN,
           "--scale-pct", "1"});
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.err.find("wrote " + pb + ", " + work.path.string() + "/heap.peak.pb.gz, " + svg),
            std::string::npos)
      << r.err;
  // A run that writes nothing (its command cannot run) leaves the last one
  // in its place, by probes and in process (--no-bpf); the .old before it
  // goes, as a run that writes would replace it.
  for (const char* path : {"--probes", "--no-bpf"}) {
    RunResult failed = run({"sh", "-c", "cd \"$0\" && exec \"$1\" record \"$2\" -- ./no-such-command",
                            work.path.string(), ALLOCSCOPE_BIN, path});
    EXPECT_NE(failed.status, 0) << failed.err;
    EXPECT_TRUE(fs::is_regular_file(work.path / "allocscope.pb.gz")) << path << ": " << failed.err;
  }
}

// Too few samples to say much: said, with what to do. Enough: nothing said.
TEST(FirstHour, ARecordingOfTooFewSamplesSaysSoAndWhatToDo) {
  REQUIRE_BPF();
  TempDir work;
  std::string out = work.path.string() + "/few.pb.gz";
  RunResult r = run({ALLOCSCOPE_BIN, "record", "-o", out, "--", "/bin/true"});
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.err.find("note: only 0 samples at rate 512 KiB"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("--rate 1"), std::string::npos) << r.err;
  r = run({ALLOCSCOPE_BIN, "record", "--rate", "1", "-o", out, "--", WORKLOAD_BIN, "--scale-pct", "1"});
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(r.err.find("note: only"), std::string::npos) << r.err;
}

// Run by root for a sudo user (SUDO_UID, SUDO_GID): the outputs are that
// user's, the fallback too.
TEST(FirstHour, OutputsOfASudoRunBelongToTheUserWhoRanIt) {
  REQUIRE_BPF();
  TempDir work;
  std::string out = work.path.string() + "/mine.pb.gz", svg = work.path.string() + "/mine.svg";
  RunResult r = run({"env", "SUDO_UID=65534", "SUDO_GID=65534", ALLOCSCOPE_BIN, "record", "--rate", "1", "-o",
                     out, "-o", svg, "--", WORKLOAD_BIN, "--scale-pct", "1"});
  ASSERT_EQ(r.status, 0) << r.err;
  for (const std::string& path : {out, svg}) {
    struct stat st;
    ASSERT_EQ(stat(path.c_str(), &st), 0) << path;
    EXPECT_EQ(st.st_uid, 65534u) << path;
    EXPECT_EQ(st.st_gid, 65534u) << path;
  }
}

// A program that leaks while it runs and frees everything at exit: the
// profile written after it ended holds nothing live, and must not hide the
// growth seen before it. --leaks leaves that profile out (and says so).
// At 99.999 % the leak's verdict errs with probability 1e-5; at 2 KiB its p
// is below 1e-15 (Outputs.LeaksFindsTheLeakNotTheChurnOrTheCache).
TEST(FirstHour, LeaksAreFoundInAProgramThatFreesEverythingAtExit) {
  REQUIRE_BPF();
  TempDir dir;
  std::string base = dir.path.string() + "/heap.pb.gz";
  RunResult rec = run({ALLOCSCOPE_BIN, "record", "-q", "--rate", "2KiB", "--interval", "1s", "-o", base, "--",
                       LEAKY_BIN, "--seconds", "5", "--free-at-exit"});
  ASSERT_EQ(rec.status, 0) << rec.err;
  std::vector<std::string> argv = {ALLOCSCOPE_BIN, "report", "--leaks", "--json", "--confidence", "0.99999"};
  for (const auto& e : fs::directory_iterator(dir.path)) argv.push_back(e.path().string());
  ASSERT_GE(argv.size(), 6u + 5) << "interval profiles: " << argv.size() - 6;
  RunResult r = run(argv);
  ASSERT_EQ(r.status, 0) << r.err;
  auto j = nlohmann::json::parse(r.out, nullptr, false);
  ASSERT_FALSE(j.is_discarded()) << r.out;
  EXPECT_TRUE(j["final_at_exit_left_out"].get<bool>()) << r.out;
  std::set<std::string> suspects;
  for (const auto& row : j["rows"])
    if (row["suspect"].get<bool>()) suspects.insert(row["name"]);
  EXPECT_EQ(suspects, std::set<std::string>{"site_leak"}) << r.out;
}

// --top: the top stacks by live and by allocated bytes while it records,
// as plain blocks when stdout is not a terminal; the leak among them.
TEST(FirstHour, TopShowsTheTopStacksWhileItRecords) {
  REQUIRE_BPF();
  TempDir dir;
  std::string out = dir.path.string() + "/top.pb.gz";
  RunResult r = run({ALLOCSCOPE_BIN, "record", "--top-every", "500ms", "--rate", "2KiB", "-o", out, "--",
                     LEAKY_BIN, "--seconds", "3"});
  ASSERT_EQ(r.status, 0) << r.err;
  size_t blocks = 0;
  for (size_t at = r.out.find("allocscope --top: "); at != std::string::npos;
       at = r.out.find("allocscope --top: ", at + 1))
    ++blocks;
  EXPECT_GE(blocks, 2u) << r.out;  // every 500 ms of 3 s: at least two on a loaded machine
  EXPECT_NE(r.out.find("inuse_space: rate 2 KiB"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("alloc_space: rate 2 KiB"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("  site_leak\n"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("\x1b["), std::string::npos) << "no terminal codes into a pipe";
  RunResult refused = run({ALLOCSCOPE_BIN, "record", "--top", "-o", "-", "--", "/bin/true"});
  EXPECT_EQ(refused.status, 2);
  EXPECT_NE(refused.err.find("--top shows its tables on stdout"), std::string::npos) << refused.err;
}

}  // namespace
}  // namespace allocscope::test
