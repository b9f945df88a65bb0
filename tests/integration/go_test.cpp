// Go programs: their heap sampled through their runtime's own sampling (the
// rate set where memory profiling is linked out) or, in exact mode, at
// runtime.mallocgc (entry probes; frames unwound by Go's own function
// table either way), each known site's allocated bytes
// against the truth (sampled within kMaxZ standard deviations, exact mode
// equal), stripped or not; Debian's gofmt (static, stripped) and go (cgo)
// named as Go in the summary and counters; -p on a running Go program. Real
// BPF.
#include <gtest/gtest.h>
#include <httplib.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "harness.h"
#include "output/pprof.h"

namespace allocscope::test {
namespace {

constexpr const char* kGofmt = "/usr/lib/go/bin/gofmt";  // static, stripped
constexpr const char* kGo = "/usr/lib/go/bin/go";        // cgo: the C library is probed

// What `go version FILE` says built it ("go1.19.8").
std::string go_release(const std::string& path) {
  RunResult r = run({kGo, "version", path});
  size_t at = r.out.find(": ");
  return at == std::string::npos ? "" : r.out.substr(at + 2, r.out.find_first_of(" \n", at + 2) - at - 2);
}

nlohmann::json counters_of(const std::string& path) {
  std::ifstream in(path);
  auto json = nlohmann::json::parse(in, nullptr, false);
  return json.is_object() ? json["counters"] : nlohmann::json();
}

// The workload's own account: per site function, its calls and size.
struct GoSite {
  std::string function;
  double calls = 0, size = 0;
};
std::vector<GoSite> go_sites_said(const std::string& out) {
  std::vector<GoSite> sites;
  std::istringstream in(out);
  GoSite s;
  while (in >> s.function && s.function != "done" && in >> s.calls >> s.size) sites.push_back(s);
  return sites;
}

// Whether a stack ends at a site through main.main and main.outer.
bool at_site(const std::vector<std::string>& frames, const std::string& function) {
  std::vector<std::string> tail = {"main.main", "main.outer", function, "runtime.makeslice",
                                   "runtime.mallocgc"};
  return frames.size() >= tail.size() && std::equal(tail.begin(), tail.end(), frames.end() - tail.size());
}

// The bytes recorded at a site.
double go_site_bytes(const Folded& folded, const std::string& function) {
  double sum = 0;
  for (const auto& [frames, value] : folded)
    if (at_site(frames, function)) sum += value;
  return sum;
}

// A Go workload (go_sites, go_small) as each Go builds it: bookworm's (1.19)
// and the newest Debian release's (1.24), each also stripped, and sid's
// 1.26 and 1.27 (fetched by ./dev.sh), 1.27 also stripped and a stripped
// PIE; "" when it was not built.
std::string go_program(const std::string& name, const std::string& build) {
  static const std::map<std::string, std::string> kSuffix = {{"Debian12", ""},
                                                             {"Debian12Stripped", "_stripped"},
                                                             {"Debian13", "_newer"},
                                                             {"Debian13Stripped", "_newer_stripped"},
                                                             {"Sid126", "_go1.26"},
                                                             {"Sid127", "_go1.27"},
                                                             {"Sid127Stripped", "_go1.27_stripped"},
                                                             {"Sid127Pie", "_go1.27_pie"}};
  std::string path = std::string(GO_PROGRAMS_DIR) + "/" + name + kSuffix.at(build);
  return access(path.c_str(), X_OK) == 0 ? path : "";
}

class GoSites : public ::testing::TestWithParam<const char*> {};

// The stacks through a site function that go_site_bytes did not count (a
// frame missing or added around it), one a line: what an exact miss shows.
std::string stacks_elsewhere(const Folded& folded, const std::string& function) {
  std::string out;
  for (const auto& [frames, value] : folded) {
    if (at_site(frames, function) || std::find(frames.begin(), frames.end(), function) == frames.end())
      continue;
    for (const std::string& f : frames) out += f + ";";
    out += " " + std::to_string(value) + "\n";
  }
  return out.empty() ? "no stack through " + function + " elsewhere\n" : out;
}

// A Go workload (go_sites or go_small) recorded at Go's rate or in exact
// mode (--rate 1): each site's bytes, counted by `at_site_of`, against its
// own account, sampled within kMaxZ standard deviations (four checks a
// build, each wrong by chance with probability below 1.8e-7), exact equal.
// Sampled, the program's runtime is given the rate at its exec (memory
// profiling is linked out of both) and its sampling read; exact mode
// counts every call.
void expect_go_sites(const std::string& binary, bool exact, const std::vector<std::string>& args,
                     bool (*at_site_of)(const std::vector<std::string>&, const std::string&)) {
  SCOPED_TRACE(binary + (exact ? " exact" : " sampled"));
  std::string folded = temp_path("go-sites.folded"), json = temp_path("go-sites.json");
  std::vector<std::string> argv = {ALLOCSCOPE_BIN, "record", "-o", folded, "-o", json, "--", binary};
  argv.insert(argv.end(), args.begin(), args.end());
  if (exact) argv.insert(argv.begin() + 2, {"--rate", "1"});
  RunResult r = run(argv);
  ASSERT_EQ(r.status, 0) << r.err;
  std::vector<GoSite> sites = go_sites_said(r.out);
  ASSERT_EQ(sites.size(), 4u) << r.out;
  Folded f = read_folded(folded);
  for (const GoSite& s : sites) {
    double truth = s.calls * s.size, got = 0;
    for (const auto& [frames, value] : f)
      if (at_site_of(frames, s.function)) got += value;
    if (exact)
      EXPECT_EQ(got, truth) << s.function << "\n"
                            << stacks_elsewhere(f, s.function) << r.err;  // the summary: drops, counters
    else
      EXPECT_LE(std::abs(got - truth), kMaxZ * ht_sigma(s.calls, s.size, 512 * 1024, true))
          << s.function << ": " << got << " of " << truth << "\n"
          << stacks_elsewhere(f, s.function);
  }
  EXPECT_NE(
      r.err.find(exact ? "note: 1 Go program(s) ran, their heap sampled at runtime.mallocgc"
                       : "note: 1 Go program(s) ran, their heap read from their runtime's own sampling"),
      std::string::npos)
      << r.err;
  EXPECT_EQ(counters_of(json)[exact ? "go_programs_sampled" : "go_programs_profiled"], 1);
  EXPECT_EQ(counters_of(json)["go_programs"], 0);
  std::remove(folded.c_str());
  std::remove(json.c_str());
}

TEST_P(GoSites, AllocatedBytesAgreeWithTheTruth) {
  REQUIRE_BPF();
  std::string binary = go_program("go_sites", GetParam());
  ASSERT_FALSE(binary.empty()) << "go_sites was not built by " << GetParam()
                               << "'s Go: configure with -DALLOCSCOPE_NEWER_GO and -DALLOCSCOPE_MORE_GOS "
                                  "(./dev.sh does)";
  for (bool exact : {false, true}) expect_go_sites(binary, exact, {}, at_site);
}

INSTANTIATE_TEST_SUITE_P(Go, GoSites,
                         ::testing::Values("Debian12", "Debian12Stripped", "Debian13", "Debian13Stripped",
                                           "Sid126", "Sid127Stripped"),
                         [](const auto& info) { return std::string(info.param); });

// Whether a stack ends at a site of go_small's: main.outer, the site, then
// the allocation (the leaf runtime.mallocgc; through runtime.makeslice for a
// slice, and runtime.newobject for new(T) before Go 1.27).
bool at_small_site(const std::vector<std::string>& frames, const std::string& function) {
  for (const std::vector<std::string>& tail :
       {std::vector<std::string>{"main.outer", function, "runtime.mallocgc"},
        std::vector<std::string>{"main.outer", function, "runtime.newobject", "runtime.mallocgc"},
        std::vector<std::string>{"main.outer", function, "runtime.makeslice", "runtime.mallocgc"}})
    if (frames.size() >= tail.size() && std::equal(tail.begin(), tail.end(), frames.end() - tail.size()))
      return true;
  return false;
}

class GoSmall : public ::testing::TestWithParam<const char*> {};

// Small objects: Go 1.27's compiler allocates them through the runtime's
// allocators specialized by size (new(T) directly; make through mallocgc's
// table), which sample for the runtime themselves: each site's allocated
// bytes read from the runtime's sampling (a tiny site's blocks hold two of
// its objects, the same bytes), and in exact mode every call probed, those
// of mallocgc's table once. Go 1.19 and 1.26 have no such allocators.
TEST_P(GoSmall, EverySitesBytesAgreeWithTheTruth) {
  REQUIRE_BPF();
  std::string binary = go_program("go_small", GetParam());
  ASSERT_FALSE(binary.empty()) << "go_small was not built by " << GetParam()
                               << "'s Go: configure with -DALLOCSCOPE_MORE_GOS (./dev.sh does)";
  for (bool exact : {false, true})
    expect_go_sites(binary, exact, {exact ? "100000" : "4000000"}, at_small_site);
}

INSTANTIATE_TEST_SUITE_P(Go, GoSmall, ::testing::Values("Debian12", "Sid126", "Sid127", "Sid127Pie"),
                         [](const auto& info) { return std::string(info.param); });

// --all: a Go program started while the whole machine is recorded is held
// at its exec until its allocator is probed: exact from its first call.
TEST(Go, AProgramStartedDuringAllIsExactFromItsStart) {
  REQUIRE_BPF();
  std::string folded = temp_path("go-all.folded");
  // "go_sites_stripp": a process's name is its program's first 15 bytes.
  Child recorder({ALLOCSCOPE_BIN, "record", "--all", "--comm", "^go_sites", "--rate", "1", "-o", folded});
  ASSERT_TRUE(recorder.wait_for_line("recording every process", 60000, true)) << recorder.err();
  RunResult r = run({GO_SITES_STRIPPED_BIN, "100000"});
  ASSERT_EQ(r.status, 0) << r.err;
  recorder.signal(SIGINT);
  ASSERT_EQ(recorder.wait(60000), 0) << recorder.err();
  std::vector<GoSite> sites = go_sites_said(r.out);
  ASSERT_EQ(sites.size(), 4u) << r.out;
  Folded f = read_folded(folded);
  for (const GoSite& s : sites) EXPECT_EQ(go_site_bytes(f, s.function), s.calls * s.size) << s.function;
  std::remove(folded.c_str());
}

// A program run by several processes is one Go program in the summary, and
// each process is given the rate at its exec (memory profiling linked out):
// every site reads twice its truth, within kMaxZ standard deviations (four
// checks, each wrong by chance with probability below 1.8e-7), where a
// second run not given it would read once.
TEST(Go, AProgramRunTwiceIsCountedOnce) {
  REQUIRE_BPF();
  std::string out = temp_path("go-twice.json"), folded = temp_path("go-twice.folded");
  std::string twice = std::string(GO_SITES_BIN) + " && " + GO_SITES_BIN;
  RunResult r = run({ALLOCSCOPE_BIN, "record", "-o", out, "-o", folded, "--", "/bin/sh", "-c", twice});
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.err.find("note: 1 Go program(s) ran"), std::string::npos) << r.err;
  EXPECT_EQ(counters_of(out)["go_programs_profiled"], 1);
  std::vector<GoSite> sites = go_sites_said(r.out);
  ASSERT_EQ(sites.size(), 4u) << r.out;  // the first run's lines
  Folded f = read_folded(folded);
  for (const GoSite& s : sites) {
    double truth = 2 * s.calls * s.size, got = go_site_bytes(f, s.function);
    EXPECT_LE(std::abs(got - truth), kMaxZ * ht_sigma(2 * s.calls, s.size, 512 * 1024, true))
        << s.function << ": " << got << " of " << truth << "\n"
        << r.err;
  }
  std::remove(out.c_str());
  std::remove(folded.c_str());
}

// --no-go-heap leaves mallocgc unprobed, and says so.
TEST(Go, NoGoHeapLeavesItUnprobed) {
  REQUIRE_BPF();
  std::string out = temp_path("no-go.json");
  RunResult r = run({ALLOCSCOPE_BIN, "record", "--no-go-heap", "-o", out, "--", GO_SITES_BIN, "1000"});
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.err.find("heap was not sampled (Go allocates from its own heap, runtime.mallocgc; --no-go-heap "
                       "left it unprobed)"),
            std::string::npos)
      << r.err;
  EXPECT_EQ(counters_of(out)["samples"], 0);
  EXPECT_EQ(counters_of(out)["go_programs"], 1);
  std::remove(out.c_str());
}

TEST(Go, ALaunchedGoProgramIsNamedAsGoNotAsStripped) {
  REQUIRE_BPF();
  std::string release = go_release(kGofmt);
  ASSERT_TRUE(release.starts_with("go1.")) << release;
  for (const char* program : {kGofmt, kGo}) {
    SCOPED_TRACE(program);
    std::string out = temp_path("go.json");
    RunResult r = run({ALLOCSCOPE_BIN, "record", "-o", out, "--", program, "help"});
    EXPECT_EQ(r.status, std::string(program) == kGofmt ? 2 : 0) << r.err;  // gofmt: no such file "help"
    // Memory profiling is linked out of both: their runtimes are given the rate.
    EXPECT_NE(r.err.find("note: 1 Go program(s) ran, their heap read from their runtime's own sampling"),
              std::string::npos)
        << r.err;
    EXPECT_NE(r.err.find(std::string(program) + " (" + release + ")"), std::string::npos) << r.err;
    EXPECT_EQ(r.err.find("static program(s) ran with no allocator"), std::string::npos) << r.err;
    EXPECT_EQ(counters_of(out)["go_programs_profiled"], 1);
    std::remove(out.c_str());
  }
}

// A stripped cgo program's Go frames, above its C allocations, are named
// from Go's own function table.
TEST(Go, AStrippedProgramsGoFramesAreNamed) {
  REQUIRE_BPF();
  std::string out = temp_path("go.folded");
  RunResult r = run({ALLOCSCOPE_BIN, "record", "--rate", "1", "-q", "-o", out, "--", kGo, "version"});
  ASSERT_EQ(r.status, 0) << r.err;
  size_t go_frames = 0, unnamed = 0;
  for (const auto& [frames, value] : read_folded(out))
    for (const std::string& f : frames) {
      go_frames += f.starts_with("runtime.");
      unnamed += f.starts_with("go+0x");
    }
  EXPECT_GT(go_frames, 0u) << r.err;
  EXPECT_EQ(unnamed, 0u);
  std::remove(out.c_str());
}

// -p on a running Go program without cgo: gofmt, blocked opening a FIFO,
// formats what is written to it once allocscope is attached.
TEST(Go, AttachingToARunningGoProgramSamplesItsHeap) {
  REQUIRE_BPF();
  std::string fifo = temp_path("gofmt.fifo"), out = temp_path("gofmt.folded");
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  Child gofmt({kGofmt, fifo});
  usleep(300000);  // exec'd, waiting in open
  Child recorder({ALLOCSCOPE_BIN, "record", "--rate", "1", "-p", std::to_string(gofmt.pid()), "-o", out});
  ASSERT_TRUE(recorder.wait_for_line("recording", 30000, true)) << recorder.err();
  {
    std::ofstream source(fifo);
    for (int i = 0; i < 200; ++i)
      source << "package main\nfunc f" << i << "() { var x = []int{1, 2, 3}; _ = x }\n";
  }
  EXPECT_EQ(gofmt.wait(), 2) << gofmt.err();  // gofmt: one package clause too many
  EXPECT_EQ(recorder.wait(60000), 0) << recorder.err();
  size_t parser = 0;
  for (const auto& [frames, value] : read_folded(out))
    parser += frames.back() == "runtime.mallocgc" &&
              std::any_of(frames.begin(), frames.end(),
                          [](const std::string& f) { return f.starts_with("go/parser."); });
  EXPECT_GT(parser, 0u) << recorder.err();
  std::remove(fifo.c_str());
  std::remove(out.c_str());
}

// A real Go service from Debian under the agent: Prometheus (stripped,
// cgo, links runtime/pprof: its heap read from its runtime's sampling)
// scraping itself. Its allocations' stacks are named whole (Go's table,
// inlined calls expanded), its Go code's at the top; its heap in use is
// there (about 13 MiB at 512 KiB: some 26 samples expected, so that none
// under its own frames has a chance below 1e-9); the agent's memory stays
// bounded.
TEST(Go, AServiceUnderTheAgentHasItsStacksNamed) {
  REQUIRE_BPF();
  int port = free_port(), prom_port = free_port();
  Child agent(
      {ALLOCSCOPE_BIN, "agent", "--listen", "127.0.0.1:" + std::to_string(port), "--comm", "^prometheus$"});
  ASSERT_TRUE(agent.wait_for_line("recording: probes attached", 60000, true)) << agent.err();
  std::string dir = temp_path("go-service");
  std::filesystem::create_directories(dir + "/data");
  std::ofstream(dir + "/prometheus.yml")
      << "global:\n  scrape_interval: 1s\nscrape_configs:\n  - job_name: self\n"
         "    static_configs:\n      - targets: ['127.0.0.1:"
      << prom_port << "']\n";
  Child prometheus({"prometheus", "--config.file=" + dir + "/prometheus.yml",
                    "--storage.tsdb.path=" + dir + "/data",
                    "--web.listen-address=127.0.0.1:" + std::to_string(prom_port)});
  usleep(8000000);  // start-up, then a few scrapes of itself
  std::string profile = temp_path("go-service.pb.gz");
  httplib::Client client("127.0.0.1", port);
  auto res = client.Get("/debug/pprof/allocs?pid=" + std::to_string(prometheus.pid()));
  ASSERT_TRUE(res && res->status == 200) << (res ? res->body : httplib::to_string(res.error()));
  std::ofstream(profile, std::ios::binary) << res->body;
  RunResult traces = run({"env", "HOME=" + dir, "go", "tool", "pprof", "-traces", profile}, 120000);
  ASSERT_EQ(traces.status, 0) << traces.err;
  size_t samples = 0, unnamed = 0, service = 0, inlined = 0;
  std::istringstream in(traces.out);
  for (std::string line; std::getline(in, line);) {
    samples += line.starts_with("-----------+");  // between samples (the allocator's frames are dropped)
    unnamed += line.find("prometheus+0x") != std::string::npos;
    service += line.find("github.com/prometheus/") != std::string::npos;
    inlined += line.find("(inline)") != std::string::npos;
  }
  EXPECT_GT(samples, 5u) << traces.out;
  EXPECT_EQ(unnamed, 0u) << traces.out;
  EXPECT_GT(service, 0u) << traces.out;
  EXPECT_GT(inlined, 0u) << traces.out;
  auto heap = client.Get("/debug/pprof/heap?pid=" + std::to_string(prometheus.pid()));
  ASSERT_TRUE(heap && heap->status == 200) << (heap ? heap->body : httplib::to_string(heap.error()));
  auto rec = decode_pprof(heap->body);
  ASSERT_TRUE(rec) << rec.error().message;
  double live = 0, own_live = 0;
  for (const RecSample& s : rec->samples) {
    std::vector<std::string> names = frame_names(*rec, s);
    live += s.totals.live_bytes;
    if (std::any_of(names.begin(), names.end(),
                    [](const std::string& n) { return n.starts_with("github.com/prometheus/"); }))
      own_live += s.totals.live_bytes;
  }
  EXPECT_GT(live, 1 << 20);
  EXPECT_GT(own_live, 0);
  if (!kSanitized) {
    EXPECT_LT(rss_kib(agent.pid()), 256u * 1024) << "the agent's resident memory";
  }
  prometheus.signal(SIGTERM);
  prometheus.wait();
  agent.signal(SIGTERM);
  EXPECT_EQ(agent.wait(), 0) << agent.err();
  std::filesystem::remove_all(dir);
  std::remove(profile.c_str());
}

}  // namespace
}  // namespace allocscope::test
