// Stacks as deep as a compiler's through code built as distributions build
// it (deep_cxx.cpp: -O2 -fomit-frame-pointer, rbp used as a general
// register, 71 and 91 template frames): whole at the defaults, never a frame
// outside real code, and exact mode exact.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <regex>

#include "deep_cxx_spec.h"
#include "harness.h"
#include "host/process.h"
#include "output/pprof.h"

namespace allocscope::test {
namespace {

// The recording of deep_cxx run under allocscope with `options`.
Recording record_deep(const std::vector<std::string>& options, long churn, long kept) {
  std::string out = temp_path("deep.pb.gz");
  std::vector<std::string> argv = {ALLOCSCOPE_BIN, "record", "-q", "-o", out};
  argv.insert(argv.end(), options.begin(), options.end());
  for (std::string a : {"--", DEEP_CXX_BIN, "--churn"}) argv.push_back(a);
  argv.push_back(std::to_string(churn));
  argv.push_back("--kept");
  argv.push_back(std::to_string(kept));
  RunResult r = run(argv);
  EXPECT_EQ(r.status, 0) << r.err;
  std::printf("%s", r.out.c_str());
  Recording rec = read_pprof(out);
  std::remove(out.c_str());
  return rec;
}

// A frame outside code: anonymous memory, the heap or stack, nothing at
// all. (A function without a symbol in a library is "libfoo.so+0x...".)
bool garbage(const std::string& f) {
  static const std::regex outside(R"(^\[(unknown|anon|heap|stack)\])");
  return std::regex_search(f, outside);
}

long count_levels(const std::vector<std::string>& frames, int site) {
  std::string tag = ", " + std::to_string(site) + ">::run(";
  return std::count_if(frames.begin(), frames.end(), [&](const std::string& f) {
    return f.starts_with("Level<") && f.find(tag) != std::string::npos;
  });
}

std::string joined(const std::vector<std::string>& v) {
  std::string s;
  for (const auto& f : v) s += "\n    " + f;
  return s;
}

uint64_t counter(const Recording& r, const std::string& name) {
  for (const auto& [n, v] : r.counters)
    if (n == name) return v;
  ADD_FAILURE() << "no counter " << name;
  return 0;
}

TEST(DeepStacks, WholeAtTheDefaultsWithNoFrameOutsideCode) {
  REQUIRE_BPF();
  Recording r = record_deep({}, 1000000, kKeptDefault);
  size_t churn_stacks = 0;
  for (const RecSample& s : r.samples) {
    std::vector<std::string> frames = frame_names(r, s);
    SCOPED_TRACE("stack:" + joined(frames));
    for (const std::string& f : frames) EXPECT_FALSE(garbage(f)) << f;
    EXPECT_EQ(std::count(frames.begin(), frames.end(), "[truncated]"), 0);
    if (std::find(frames.begin(), frames.end(), "deep_churn_site((anonymous namespace)::Ctx&)") ==
        frames.end())
      continue;
    ++churn_stacks;
    EXPECT_EQ(count_levels(frames, 0), kChurnDepth + 1);
    ASSERT_GE(frames.size(), size_t(kChurnDepth + 6));
    EXPECT_EQ(frames[1], "_start");
    EXPECT_NE(std::find(frames.begin(), frames.end(), "main"), frames.end());
  }
  EXPECT_GT(churn_stacks, 0u);
  EXPECT_EQ(counter(r, "stacks_truncated"), 0u);
}

TEST(DeepStacks, FramePointerWalkStopsRatherThanInvents) {
  REQUIRE_BPF();
  // operator new (libstdc++, no frame pointers) and the levels that keep a
  // number in rbp break the frame chain: the walk must end there, marked.
  Recording r = record_deep({"--unwind", "fp", "--rate", "64KiB"}, 300000, kKeptDefault);
  size_t cut = 0;
  for (const RecSample& s : r.samples) {
    std::vector<std::string> frames = frame_names(r, s);
    SCOPED_TRACE("stack:" + joined(frames));
    for (const std::string& f : frames) EXPECT_FALSE(garbage(f)) << f;
    cut += std::count(frames.begin(), frames.end(), "[truncated]") == 1;
    EXPECT_LT(count_levels(frames, 0), kChurnDepth + 1);
  }
  EXPECT_GT(cut, 0u);
}

TEST(DeepStacks, ExactModeCountsEveryCallAtDepth) {
  REQUIRE_BPF();
  // The workload's own pace, untraced (over a million allocator calls a
  // second at the churn site on an idle machine): printed, not asserted, as
  // it is the machine's.
  RunResult untraced = run({DEEP_CXX_BIN, "--churn", "1000000", "--kept", "10"});
  ASSERT_EQ(untraced.status, 0) << untraced.err;
  double rate = 0;
  std::sscanf(untraced.out.c_str(), "churn_calls_per_second %lf", &rate);
  std::printf("untraced: %.0f calls/s\n", rate);

  const long churn = 300000, kept = 20000;
  Recording r = record_deep({"--rate", "1"}, churn, kept);
  double churn_objects = 0, churn_bytes_seen = 0, churn_live = 0, kept_objects = 0, kept_live_bytes = 0;
  for (const RecSample& s : r.samples) {
    std::vector<std::string> frames = frame_names(r, s);
    SCOPED_TRACE("stack:" + joined(frames));
    for (const std::string& f : frames) EXPECT_FALSE(garbage(f)) << f;
    bool churn_site = count_levels(frames, 0) > 0, kept_site = count_levels(frames, 1) > 0;
    if (churn_site) {
      EXPECT_EQ(count_levels(frames, 0), kChurnDepth + 1);
      churn_objects += s.totals.alloc_objects;
      churn_bytes_seen += s.totals.alloc_bytes;
      churn_live += s.totals.live_bytes;
    }
    if (kept_site) {
      EXPECT_EQ(count_levels(frames, 1), kKeptDepth + 1);
      kept_objects += s.totals.live_objects;
      kept_live_bytes += s.totals.live_bytes;
    }
  }
  EXPECT_EQ(churn_objects, double(churn));
  EXPECT_EQ(churn_bytes_seen, double(churn_bytes(churn)));
  EXPECT_EQ(churn_live, 0);
  EXPECT_EQ(kept_objects, double(kept));
  EXPECT_EQ(kept_live_bytes, double(kept * kKeptSize));
  for (const char* c : {"dropped_ringbuf", "dropped_stack_lost", "dropped_exact_full",
                        "dropped_live_map_full", "stacks_truncated"})
    EXPECT_EQ(counter(r, c), 0u) << c;
}

TEST(DeepStacks, ExactModeThatLosesAllocationsSaysSo) {
  REQUIRE_BPF();
  // Room for one stack's totals: the other sites' allocations are lost, and
  // every output must stop calling the recording exact.
  std::string out = temp_path("lossy.json"), table = temp_path("lossy.txt");
  RunResult r = run({ALLOCSCOPE_BIN, "record", "-o", out, "-o", table, "--rate", "1", "--max-stacks", "1",
                     "--", DEEP_CXX_BIN, "--churn", "20000", "--kept", "100"});
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.err.find("not exact"), std::string::npos) << r.err;
  auto doc = nlohmann::json::parse(read_text_file(out).value_or("{}"));
  EXPECT_FALSE(doc["loss"]["exact"].get<bool>());
  EXPECT_GT(doc["loss"]["samples"].get<uint64_t>(), 0u);
  EXPECT_GT(doc["counters"]["dropped_exact_full"].get<uint64_t>(), 0u);
  auto iv = doc["totals"]["alloc_space"]["interval"];
  EXPECT_LT(iv[0].get<double>(), iv[1].get<double>()) << "the interval must show what was lost";
  EXPECT_NE(read_text_file(table).value_or("").find("not exact"), std::string::npos);
  std::remove(out.c_str());
  std::remove(table.c_str());
}

}  // namespace
}  // namespace allocscope::test
