// report's sample filters on a real recording: --focus keeps the stacks with
// a frame that matches, --ignore drops them, --comm keeps a program, each an
// extended regular expression; a bad one is refused with its reason.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

#include "harness.h"

namespace allocscope::test {
namespace {

constexpr int kThreads = 2, kScale = 2;

class ReportFilters : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new std::string(temp_path("report-filters"));
    std::filesystem::create_directories(*dir_);
    RunResult r = run({ALLOCSCOPE_BIN, "record", "-q", "--rate", "1", "-o", profile(), "--", WORKLOAD_BIN,
                       "--threads", std::to_string(kThreads), "--scale-pct", std::to_string(kScale)});
    recorded_ = r.status == 0;
    if (!recorded_) std::fprintf(stderr, "%s", r.err.c_str());
  }
  static void TearDownTestSuite() {
    std::filesystem::remove_all(*dir_);
    delete dir_;
  }
  static std::string profile() { return *dir_ + "/heap.pb.gz"; }

  // report with `filter` into folded stacks.
  static Folded report(const std::vector<std::string>& filter) {
    std::string out = *dir_ + "/filtered.folded";
    std::vector<std::string> argv = {ALLOCSCOPE_BIN, "report", profile(), "--format", "folded", "-o", out};
    argv.insert(argv.end(), filter.begin(), filter.end());
    RunResult r = run(argv);
    EXPECT_EQ(r.status, 0) << r.err;
    Folded f = read_folded(out);
    std::filesystem::remove(out);
    return f;
  }

  static inline std::string* dir_ = nullptr;
  static inline bool recorded_ = false;
};

bool has_frame(const std::vector<std::string>& frames, const std::string& name) {
  for (const std::string& f : frames)
    if (f.find(name) != std::string::npos) return true;
  return false;
}

TEST_F(ReportFilters, FocusKeepsOnlyMatchingStacksWithTheirTruth) {
  REQUIRE_BPF();
  ASSERT_TRUE(recorded_);
  Folded focused = report({"--focus", "site_(calloc|large)$"});
  ASSERT_FALSE(focused.empty());
  for (const auto& [frames, value] : focused)
    EXPECT_TRUE(has_frame(frames, "site_calloc") || has_frame(frames, "site_large")) << frames.back();
  for (const site_spec& s : kSites) {
    double want = std::string(s.function) == "site_calloc" || std::string(s.function) == "site_large"
                      ? site_truth(s, kThreads, kScale).bytes
                      : 0;
    EXPECT_EQ(site_value(focused, s.function, s.allocator), want) << s.function;
  }
}

TEST_F(ReportFilters, IgnoreDropsMatchingStacksAndCommSelectsAProgram) {
  REQUIRE_BPF();
  ASSERT_TRUE(recorded_);
  Folded ignored = report({"--ignore", "^site_malloc"});
  ASSERT_FALSE(ignored.empty());
  for (const auto& [frames, value] : ignored)
    EXPECT_FALSE(has_frame(frames, "site_malloc_")) << frames.back();
  EXPECT_GT(site_value(ignored, "site_calloc", "calloc"), 0);
  EXPECT_FALSE(report({"--comm", "^alloc_sit"}).empty());
}

// Filters that match nothing are said, with a status a script sees, and
// write no empty output.
TEST_F(ReportFilters, FiltersThatMatchNothingSaySoAndFail) {
  REQUIRE_BPF();
  ASSERT_TRUE(recorded_);
  std::string out = *dir_ + "/nothing.txt";
  for (std::vector<std::string> filter : {std::vector<std::string>{"--comm", "^no-such-program$"},
                                          {"--focus", "nomatch"},
                                          {"--pid", "12345"}}) {
    SCOPED_TRACE(filter[0]);
    std::vector<std::string> argv = {ALLOCSCOPE_BIN, "report", profile(), "-o", out};
    argv.insert(argv.end(), filter.begin(), filter.end());
    RunResult r = run(argv);
    EXPECT_EQ(r.status, 1);
    EXPECT_NE(r.err.find("nothing matches " + filter[0]), std::string::npos) << r.err;
    EXPECT_NE(r.err.find(" stacks of " + profile()), std::string::npos) << r.err;
    EXPECT_FALSE(std::filesystem::exists(out));
  }
}

// A recording made with --no-free has no in-use figures: asked for them,
// report says so rather than printing zeros.
TEST_F(ReportFilters, InUseOfARecordingWithoutFreesIsRefused) {
  REQUIRE_BPF();
  std::string nofree = *dir_ + "/nofree.pb.gz";
  RunResult r = run({ALLOCSCOPE_BIN, "record", "-q", "--no-free", "--rate", "1", "-o", nofree, "--",
                     WORKLOAD_BIN, "--scale-pct", "1"});
  ASSERT_EQ(r.status, 0) << r.err;
  r = run({ALLOCSCOPE_BIN, "report", nofree, "--metric", "inuse_space"});
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.err.find("recorded with --no-free"), std::string::npos) << r.err;
  r = run({ALLOCSCOPE_BIN, "report", nofree, "--metric", "alloc_space", "--top", "3"});
  EXPECT_EQ(r.status, 0) << r.err;
}

TEST_F(ReportFilters, ABadExpressionIsRefusedWithItsReason) {
  REQUIRE_BPF();
  ASSERT_TRUE(recorded_);
  RunResult r = run({ALLOCSCOPE_BIN, "report", profile(), "--focus", "(site", "--format", "folded"});
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.err.find("invalid regular expression: missing )"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace allocscope::test
