// Stacks through code without frame pointers: DWARF unwinding of sampled
// stack snapshots against the kernel's frame-pointer walk.
#include <gtest/gtest.h>
#include <signal.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <random>
#include <regex>

#include "cxx_sites_spec.h"
#include "harness.h"
#include "stats/sampling.h"

namespace allocscope::test {
namespace {

Folded record_folded(const std::vector<std::string>& options, const std::vector<std::string>& command) {
  std::string out = temp_path("unwind.folded");
  std::vector<std::string> argv = {ALLOCSCOPE_BIN, "record", "-q", "-o", out};
  argv.insert(argv.end(), options.begin(), options.end());
  argv.push_back("--");
  argv.insert(argv.end(), command.begin(), command.end());
  RunResult r = run(argv);
  EXPECT_EQ(r.status, 0) << r.err;
  Folded folded = read_folded(out);
  std::remove(out.c_str());
  return folded;
}

bool has_in_order(const std::vector<std::string>& frames, const std::vector<std::string>& chain) {
  auto at = frames.begin();
  for (const std::string& want : chain) {
    at = std::find(at, frames.end(), want);
    if (at == frames.end()) return false;
  }
  return true;
}

struct CxxSite {
  const char* function;
  double size;
  unsigned count;
};
const CxxSite kCxxSites[] = {{"cxx_site_new()", double(kNewSize), kNewCount},
                             {"cxx_site_vector()", double(kVectorElements * sizeof(long)), kVectorCount},
                             {"cxx_site_string()", double(kStringCapacity + 1), kStringCount}};

// Demangled names carry their parameter lists.
std::string with_args(const char* f) {
  std::string s = f;
  return s.substr(0, s.size() - 2) + "(unsigned int)";
}

// -O2 -fomit-frame-pointer C++: in DWARF mode every site's chain up to main
// is there and its estimate within kMaxZ sigma; the frame-pointer walk from
// inside operator new loses the callers (printed, for the record).
TEST(Unwind, DwarfFindsFullChainsWithoutFramePointers) {
  REQUIRE_BPF();
  const unsigned scale = 20;
  std::vector<std::string> cmd = {CXX_SITES_BIN, "--scale-pct", std::to_string(scale)};
  Folded dwarf = record_folded({"--unwind", "dwarf"}, cmd);
  Folded fp = record_folded({"--unwind", "fp"}, cmd);
  for (const CxxSite& site : kCxxSites) {
    std::vector<std::string> chain = {"main", "cxx_level1(unsigned int)", "cxx_level2(unsigned int)",
                                      "cxx_level3(unsigned int)", with_args(site.function)};
    double estimate = 0, fp_found = 0;
    bool chain_found = false;
    for (const auto& [frames, value] : dwarf) {
      if (std::find(frames.begin(), frames.end(), with_args(site.function)) == frames.end()) continue;
      estimate += value;
      chain_found = chain_found || has_in_order(frames, chain);
    }
    for (const auto& [frames, value] : fp)
      if (has_in_order(frames, chain)) fp_found += value;
    double count = double(site.count * scale / 100);
    double truth = count * site.size;
    double z = (estimate - truth) / ht_sigma(count, site.size, double(kDefaultRate), true);
    std::printf("  %-22s dwarf: chain %s, estimate %.0f of %.0f (z %+.2f); fp: %.0f bytes with the chain\n",
                site.function, chain_found ? "complete" : "MISSING", estimate, truth, z, fp_found);
    EXPECT_TRUE(chain_found) << site.function;
    EXPECT_LT(std::fabs(z), kMaxZ) << site.function;
  }
}

// A Debian binary built without frame pointers (sort): DWARF stacks reach
// their root, __libc_start_main or a thread's start_thread (unnamed frames
// as module+0xoffset on the way); the frame-pointer walk mostly stops
// early. Both depths printed.
// Allocations in a signal handler, and in a child forked inside one (as
// PostgreSQL 15's postmaster starts its backends), keep the frames of the
// code the signal interrupted, whichever walks them: the kernel (probes, and
// in-process trials) or allocscope itself (--no-bpf). Exact mode: every byte.
TEST(Unwind, StacksLeadOutOfSignalHandlers) {
  REQUIRE_BPF();
  const double each = 64 * 40000.0;  // SIGNAL_CALLS * SIGNAL_SIZE
  for (const char* path : {"--probes", "--preload", "--no-bpf"}) {
    SCOPED_TRACE(path);
    Folded f = record_folded({path, "--rate", "1"}, {SIGNAL_ALLOCS_BIN});
    double in_handler = 0, in_child = 0;
    for (const auto& [frames, value] : f) {
      if (std::find(frames.begin(), frames.end(), "alloc_in_handler") == frames.end()) continue;
      std::string stack;
      for (const std::string& frame : frames) stack += frame + ";";
      EXPECT_TRUE(has_in_order(
          frames, {"main", "raise_here", "[signal handler called]", "on_signal", "alloc_in_handler"}))
          << stack;
      bool child = std::find(frames.begin(), frames.end(), "alloc_in_forked_child") != frames.end();
      (child ? in_child : in_handler) += value;
    }
    EXPECT_EQ(in_handler, each);
    EXPECT_EQ(in_child, each);
  }
  // A timer's signal that strikes the program's own loop (the pc is where
  // it struck, not a return address); and in a static musl program, whose
  // trampoline no call frame information describes.
  for (const char* bin : {SIGNAL_ALLOCS_BIN, SIGNAL_ALLOCS_MUSL_BIN}) {
    Folded f = record_folded({"--probes", "--rate", "1"}, {bin, "--async"});
    double whole = 0;
    for (const auto& [frames, value] : f)
      if (has_in_order(frames, {"main", "spin_until_signal", "[signal handler called]", "on_signal",
                                "alloc_in_handler"}))
        whole += value;
    EXPECT_EQ(whole, 2 * each) << bin;
  }
}

TEST(Unwind, DebianBinaryWithoutFramePointers) {
  REQUIRE_BPF();
  std::string input = temp_path("sort-input.txt");
  {
    std::ofstream out(input);
    std::mt19937_64 rng(7);
    for (int i = 0; i < 300000; ++i) out << rng() << " line " << i << "\n";
  }
  std::vector<std::string> cmd = {"/usr/bin/sort", "-o", "/dev/null", input};
  auto depth_and_reach = [](const Folded& f) {
    double frames = 0, stacks = 0, reached = 0;
    for (const auto& [stack, value] : f) {
      frames += double(stack.size());
      ++stacks;
      // The main thread's root, or a worker thread's (sort sorts large
      // inputs in threads): either is a whole stack.
      reached += std::find_if(stack.begin(), stack.end(), [](const std::string& f) {
                   return f == "__libc_start_main" || f == "start_thread";
                 }) != stack.end();
    }
    return std::pair{stacks ? frames / stacks : 0, stacks ? reached / stacks : 0};
  };
  auto [dwarf_depth, dwarf_reach] =
      depth_and_reach(record_folded({"--unwind", "dwarf", "--rate", "64KiB"}, cmd));
  auto [fp_depth, fp_reach] = depth_and_reach(record_folded({"--unwind", "fp", "--rate", "64KiB"}, cmd));
  std::remove(input.c_str());
  std::printf("  sort: dwarf %.1f frames per stack, %.0f %% reach their root; fp %.1f frames, %.0f %%\n",
              dwarf_depth, 100 * dwarf_reach, fp_depth, 100 * fp_reach);
  EXPECT_GE(dwarf_reach, 0.9);
  EXPECT_GT(dwarf_depth, fp_depth);
}

// A C workload with debug info whose allocation helper is inlined: the
// helper is a frame of its own, with its file and line (from the marker).
TEST(Unwind, InlinedHelperIsItsOwnFrameWithFileAndLine) {
  REQUIRE_BPF();
  auto line_of = [](const std::string& marker) {
    std::ifstream src(INLINED_SRC);
    std::string text;
    for (int n = 1; std::getline(src, text); ++n)
      if (text.find(marker) != std::string::npos) return n;
    return 0;
  };
  Folded folded = record_folded({"--rate", "1", "--lines"}, {INLINED_BIN});
  std::string helper =
      "make_buffer (" + std::string(INLINED_SRC) + ":" + std::to_string(line_of("MARK_MAKE_BUFFER")) + ")";
  std::string caller =
      "site_inlined (" + std::string(INLINED_SRC) + ":" + std::to_string(line_of("MARK_SITE_INLINED")) + ")";
  double blocks = 0;
  for (const auto& [frames, value] : folded) {
    size_t n = frames.size();
    if (n >= 3 && frames[n - 1] == "malloc" && frames[n - 2] == helper && frames[n - 3] == caller)
      blocks += value;
  }
  EXPECT_EQ(blocks, 100.0 * 4096) << "no ...;" << caller << ";" << helper << ";malloc stack";
}

// zlib, loaded by a process recorded with -p (not held: its tables are
// asked for by the kernel), has an unwind table that takes three seconds to
// build (made slow on purpose) while another process sends some 20,000
// samples a second. The walks through zlib wait for the table off the
// reading thread: nothing is lost, and they are whole once it is in. Built
// on the reading thread, the 1 MiB ring buffer (a quarter of it is enough
// when nothing stalls the reader) overflowed by thousands of samples.
TEST(Unwind, AWalkWaitsForASlowTableWhileTheRingBufferDrains) {
  REQUIRE_BPF();
  Child late({LATE_CODE_BIN});
  Child busy({WORKLOAD_BIN, "--threads", "2", "--scale-pct", "100", "--wait"});
  ASSERT_TRUE(late.wait_for_line("ready", 10000));
  ASSERT_TRUE(busy.wait_for_line("ready", 10000));
  std::string out = temp_path("slow-walk.folded");
  setenv("ALLOCSCOPE_TEST_SLOW_TABLE", "libz:3000", 1);
  // --no-inject: late's zlib, loaded after the recording begins, is probed
  // at its mapping (entered, its slots would wait for a sampled call).
  Child rec({ALLOCSCOPE_BIN, "record", "-v", "--no-inject", "-p",
             std::to_string(late.pid()) + "," + std::to_string(busy.pid()), "--rate", "1KiB",
             "--ringbuf-size", "1MiB", "-o", out});
  unsetenv("ALLOCSCOPE_TEST_SLOW_TABLE");
  ASSERT_TRUE(rec.wait_for_line("recording process", 60000, true)) << rec.err();
  busy.signal(SIGUSR1);
  late.signal(SIGUSR1);
  ASSERT_TRUE(late.wait_for_line("done", 10000));
  EXPECT_EQ(busy.wait(), 0);
  rec.signal(SIGINT);
  ASSERT_EQ(rec.wait(), 0) << rec.err();
  late.signal(SIGUSR1);
  EXPECT_EQ(late.wait(), 0);
  EXPECT_NE(rec.err().find("dropped: ringbuf 0,"), std::string::npos)
      << rec.err();  // -v: every drop, 0 or not
  // The premise: a table took three seconds (files are named by their mapping).
  std::string err = rec.err();
  std::regex built(R"(unwind table of \S+: \d+ rows from \S+ \(\d+ unsupported\), (\d+)\.\d ms)");
  double slowest = 0;
  for (auto it = std::sregex_iterator(err.begin(), err.end(), built); it != std::sregex_iterator(); ++it)
    slowest = std::max(slowest, std::stod((*it)[1].str()));
  EXPECT_GE(slowest, 3000) << err;
  int through_zlib = 0;
  for (const auto& [frames, value] : read_folded(out)) {
    if (std::find(frames.begin(), frames.end(), "deflateInit2_") == frames.end()) continue;
    ++through_zlib;
    EXPECT_TRUE(has_in_order(frames, {"main", "start_deflate", "deflateInit2_"}))
        << "a walk through zlib cut short: " << ::testing::PrintToString(frames);
  }
  EXPECT_GT(through_zlib, 0);
  std::remove(out.c_str());
}

}  // namespace
}  // namespace allocscope::test
