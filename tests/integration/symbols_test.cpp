// Symbolization that survives what processes do to their code: libraries
// loaded with dlopen and JIT code after recording began, binaries deleted or
// replaced on disk while they run; debug files from a debuginfod server.
// Real BPF.
#include <gtest/gtest.h>
#include <httplib.h>
#include <signal.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>

#include "harness.h"

namespace allocscope::test {
namespace {

// Lines whose allocator's direct caller is `caller`.
double caller_value(const Folded& f, const std::string& caller) {
  double v = 0;
  for (const auto& [frames, value] : f)
    if (frames.size() >= 2 && frames[frames.size() - 2] == caller) v += value;
  return v;
}

bool has_frame(const Folded& f, const std::string& name) {
  for (const auto& [frames, value] : f)
    for (const std::string& frame : frames)
      if (frame == name) return true;
  return false;
}

// With frame pointers only, nothing but the kernel's record of the mappings
// and the /proc maps read while the process lives name the new code.
class CodeLoadedAfterAttach : public ::testing::TestWithParam<std::string> {};

TEST_P(CodeLoadedAfterAttach, IsNamed) {
  REQUIRE_BPF();
  Child w({LATE_CODE_BIN});
  ASSERT_TRUE(w.wait_for_line("ready", 10000));
  std::string out = temp_path("late.folded");
  Child rec({ALLOCSCOPE_BIN, "record", "-p", std::to_string(w.pid()), "--rate", "1", "--unwind", GetParam(),
             "-o", out});
  ASSERT_TRUE(rec.wait_for_line("recording process", 60000, true)) << rec.err();
  w.signal(SIGUSR1);
  ASSERT_TRUE(w.wait_for_line("done", 10000));
  rec.signal(SIGINT);
  ASSERT_EQ(rec.wait(), 0) << rec.err();
  w.signal(SIGUSR1);
  EXPECT_EQ(w.wait(), 0);
  Folded f = read_folded(out);
  std::string all;
  for (const auto& [frames, value] : f) {
    for (const std::string& frame : frames) all += frame + ";";
    all += " " + std::to_string(value) + "\n";
  }
  SCOPED_TRACE(all);
  // JIT code: named from /tmp/perf-PID.map, exact counts in exact mode.
  EXPECT_EQ(caller_value(f, "jit_stub"), 10 * 5000);
  // zlib, dlopen'ed after attach: its exported entry points name the frames.
  EXPECT_TRUE(has_frame(f, "deflateInit2_"));
  std::remove(out.c_str());
}

INSTANTIATE_TEST_SUITE_P(Symbols, CodeLoadedAfterAttach, ::testing::Values("dwarf", "fp"));

// Blocks of 64 KiB recorded at --rate 256KiB into folded stacks `out`: the
// bytes under a frame that contains `frame` are at least their truth less
// the suite's bound (the function's other allocations only add); `said`
// (the recording's stderr) and the other large stacks explain a failure.
void expect_bytes_under(const std::string& out, const std::string& frame, double truth,
                        const std::string& said) {
  double named = 0;
  std::string others;
  for (const auto& [frames, value] : read_folded(out)) {
    bool in_it = std::any_of(frames.begin(), frames.end(),
                             [&](const std::string& f) { return f.find(frame) != std::string::npos; });
    named += in_it ? value : 0;
    if (!in_it && value > 0.01 * truth) {
      for (const std::string& f : frames) others += f + ";";
      others += " " + std::to_string(value) + "\n";
    }
  }
  constexpr double kSize = 65536, kRate = 256 * 1024;
  double sd = ht_sigma(truth / kSize, kSize, kRate, true);
  std::printf("  %.0f bytes under %s, truth %.0f\n", named, frame.c_str(), truth);
  EXPECT_GT(named, truth - kMaxZ * sd) << named << " of " << truth << " under " << frame << "; others:\n"
                                       << others << said;
}

// A node in a container: it writes its perf map under its own /tmp (a
// directory of the test's, bound there in a mount namespace of its own),
// named by its pid in its PID namespace (1); allocscope reads it through
// the process's root. The builtins V8 compiled into node's file (no CFI)
// are walked by frame pointers into the JIT code. The buffers' bytes stand
// under the named JavaScript function: at least their truth less the
// suite's bound (the function's other allocations, V8's own, only add).
TEST(Symbols, JitFramesOfANodeInAContainerAreNamed) {
  REQUIRE_BPF();
  namespace fs = std::filesystem;
  std::string tmp = temp_path("node-tmp");
  fs::create_directories(tmp);
  fs::copy_file(NODE_SITES_JS, tmp + "/node_sites.js", fs::copy_options::overwrite_existing);
  Child c({"unshare", "--pid", "--fork", "--kill-child", "--mount", "--propagation", "private", "sh", "-c",
           "mount --bind \"$0\" /tmp && exec node --perf-basic-prof /tmp/node_sites.js", tmp});
  ASSERT_TRUE(c.wait_for_line("ready", 30000)) << c.err();
  pid_t node = only_child(c.pid());
  ASSERT_GT(node, 0);
  EXPECT_TRUE(fs::exists(tmp + "/perf-1.map")) << "node names its map by its own pid";
  std::string out = temp_path("node.folded");
  Child rec({ALLOCSCOPE_BIN, "record", "-p", std::to_string(node), "--rate", "256KiB", "-o", out});
  ASSERT_TRUE(rec.wait_for_line("recording process", 60000, true)) << rec.err();
  ::kill(node, SIGUSR2);
  ASSERT_TRUE(c.wait_for_line("done", 60000)) << c.err();
  rec.signal(SIGINT);
  ASSERT_EQ(rec.wait(), 0) << rec.err();
  ::kill(node, SIGUSR2);
  EXPECT_EQ(c.wait(), 0);
  double truth = std::strtod(c.out().substr(c.out().find("done ") + 5).c_str(), nullptr);
  ASSERT_GT(truth, 0) << c.out();
  expect_bytes_under(out, "allocateBuffers /tmp/node_sites.js", truth, rec.err());
  fs::remove_all(tmp);
  std::remove(out.c_str());
}

// A JVM names its compiled code in a perf map when asked (jcmd PID
// Compiler.perfmap, JDK 17 and later, writes /tmp/perf-PID.map); with frame
// pointers kept in that code the walk runs through it, and the compiled
// frames are named by the map: the direct buffers' bytes stand under
// DirectSites.directSite (at least their truth less the suite's bound; the
// JVM's other mallocs from there only add). The map is written again at the
// end: code the JIT compiled meanwhile is in it.
TEST(Symbols, JitFramesOfAJvmAreNamedFromItsPerfMap) {
  REQUIRE_BPF();
  namespace fs = std::filesystem;
  std::string dir = temp_path("jvm-perfmap");
  fs::create_directories(dir);
  Child jvm({"java", "-XX:+PreserveFramePointer", "-XX:TieredStopAtLevel=1", "-Xbatch", "-cp",
             JAVA_CLASSES_DIR, "DirectSites", dir + "/go", dir + "/quit"});
  ASSERT_TRUE(jvm.wait_for_line("ready", 60000)) << jvm.err();
  std::string pid = std::to_string(jvm.pid()), map = "/tmp/perf-" + pid + ".map";
  struct RemovedAtEnd {  // the JVM's map, written in the host's /tmp, goes whatever fails
    std::string path;
    ~RemovedAtEnd() { std::remove(path.c_str()); }
  } map_guard{map};
  auto write_map = [&] {
    RunResult r = run({"jcmd", pid, "Compiler.perfmap"});
    EXPECT_EQ(r.status, 0) << r.out << r.err;
  };
  write_map();
  ASSERT_TRUE(fs::exists(map)) << "jcmd wrote no perf map";
  std::string out = temp_path("jvm.folded");
  Child rec({ALLOCSCOPE_BIN, "record", "-p", pid, "--rate", "256KiB", "-o", out});
  ASSERT_TRUE(rec.wait_for_line("recording process", 60000, true)) << rec.err();
  std::ofstream(dir + "/go").close();
  ASSERT_TRUE(jvm.wait_for_line("done", 60000)) << jvm.err();
  write_map();
  rec.signal(SIGINT);
  ASSERT_EQ(rec.wait(), 0) << rec.err();
  std::ofstream(dir + "/quit").close();
  EXPECT_EQ(jvm.wait(30000), 0) << jvm.err();
  double truth = std::strtod(jvm.out().substr(jvm.out().find("done ") + 5).c_str(), nullptr);
  ASSERT_GT(truth, 0) << jvm.out();
  expect_bytes_under(out, "DirectSites.directSite(int, int)", truth, rec.err());
  fs::remove_all(dir);
  std::remove(out.c_str());
}

// The binary is deleted and another file put at its path while it runs:
// frames are still named from the file the process maps.
TEST(Symbols, DeletedAndReplacedBinaryIsNamed) {
  REQUIRE_BPF();
  namespace fs = std::filesystem;
  fs::path bin = temp_path("replaced-workload");
  fs::copy_file(WORKLOAD_BIN, bin, fs::copy_options::overwrite_existing);
  constexpr int kScale = 20;
  Child w({bin.string(), "--threads", "1", "--scale-pct", std::to_string(kScale), "--wait", "--hold"});
  ASSERT_TRUE(w.wait_for_line("ready", 10000));
  fs::remove(bin);
  fs::copy_file("/bin/true", bin);
  std::string out = temp_path("replaced.folded");
  Child rec({ALLOCSCOPE_BIN, "record", "-p", std::to_string(w.pid()), "--rate", "64KiB", "-o", out});
  ASSERT_TRUE(rec.wait_for_line("recording process", 60000, true)) << rec.err();
  w.signal(SIGUSR1);
  ASSERT_TRUE(w.wait_for_line("done", 60000));
  rec.signal(SIGINT);
  ASSERT_EQ(rec.wait(), 0) << rec.err();
  w.signal(SIGUSR1);
  w.wait();
  Folded f = read_folded(out);
  double estimate = 0, truth = 0, variance = 0;
  for (const site_spec& s : kSites) {
    Truth t = site_truth(s, 1, kScale);
    estimate += site_value(f, s.function, s.allocator);
    truth += t.bytes;
    variance += std::pow(ht_sigma(t.objects, double(s.size), 64 * 1024, true), 2);
  }
  double z = (estimate - truth) / std::sqrt(variance);
  std::printf("  replaced binary: estimate %.0f, truth %.0f, z %.2f\n", estimate, truth, z);
  EXPECT_LT(std::fabs(z), kMaxZ);
  fs::remove(bin);
  std::remove(out.c_str());
}

// A binary that exists only in another mount namespace (a private tmpfs, as
// in a container) is named through the process, not through a path.
TEST(Symbols, BinaryInAnotherMountNamespaceIsNamed) {
  REQUIRE_BPF();
  std::string dir = temp_path("mntns");
  std::filesystem::create_directories(dir);
  std::string script = "mount -t tmpfs none " + dir + " && cp " + WORKLOAD_BIN + " " + dir +
                       "/hidden_workload && exec " + dir +
                       "/hidden_workload --threads 1 --scale-pct 5 --wait";
  Child w({"unshare", "-m", "--propagation", "private", "/bin/sh", "-c", script});
  ASSERT_TRUE(w.wait_for_line("ready", 10000)) << w.err();
  ASSERT_FALSE(std::filesystem::exists(dir + "/hidden_workload")) << "the tmpfs should be private";
  std::string out = temp_path("mntns.folded");
  Child rec({ALLOCSCOPE_BIN, "record", "-p", std::to_string(w.pid()), "--rate", "64KiB", "-o", out});
  ASSERT_TRUE(rec.wait_for_line("recording process", 60000, true)) << rec.err();
  w.signal(SIGUSR1);
  EXPECT_EQ(w.wait(), 0);
  EXPECT_EQ(rec.wait(), 0) << rec.err();
  Folded f = read_folded(out);
  EXPECT_GT(site_value(f, "site_malloc_small", "malloc"), 0);
  EXPECT_GT(site_value(f, "site_large", "malloc"), 0);
  for (const auto& [frames, value] : f)
    for (const std::string& frame : frames) EXPECT_FALSE(frame.starts_with("hidden_workload+0x")) << frame;
  std::filesystem::remove_all(dir);
  std::remove(out.c_str());
}

// A debuginfod server (elfutils' protocol: GET /buildid/ID/debuginfo) that
// has one debug file, for one build id, and counts what it served.
class DebuginfodServer {
 public:
  DebuginfodServer(std::string build_id, std::string debug_file)
      : build_id_(std::move(build_id)), file_(read_file(debug_file)) {
    server_.Get(R"(/buildid/([0-9a-f]+)/debuginfo)",
                [this](const httplib::Request& req, httplib::Response& res) {
                  if (req.matches[1] != build_id_) {
                    res.status = 404;
                    return;
                  }
                  ++served_;
                  res.set_content(file_, "application/octet-stream");
                });
    port_ = server_.bind_to_any_port("127.0.0.1");
    thread_ = std::thread([this] { server_.listen_after_bind(); });
  }
  ~DebuginfodServer() {
    server_.stop();
    thread_.join();
  }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }
  int served() const { return served_; }

 private:
  std::string build_id_, file_;
  httplib::Server server_;
  int port_ = 0;
  std::atomic<int> served_{0};
  std::thread thread_;
};

// The hex build id readelf prints for `path`, "" when none.
std::string build_id_of(const std::string& path) {
  RunResult r = run({"readelf", "-n", path});
  size_t at = r.out.find("Build ID: ");
  if (at == std::string::npos) return "";
  at += 10;
  return r.out.substr(at, r.out.find_first_not_of("0123456789abcdef", at) - at);
}

// A program stripped of its symbols, whose debug file only a debuginfod
// server has (as a distribution's binaries are): with DEBUGINFOD_URLS set, as
// elfutils' tools take it, its frames are named from the server's file;
// without, they are not (the test's premise).
TEST(Symbols, AStrippedProgramIsNamedThroughDebuginfod) {
  REQUIRE_BPF();
  std::string dir = temp_path("debuginfod");
  std::filesystem::create_directories(dir);
  std::string program = dir + "/alloc_sites", debug = dir + "/alloc_sites.debug";
  ASSERT_EQ(run({"objcopy", "--only-keep-debug", WORKLOAD_BIN, debug}).status, 0);
  ASSERT_EQ(run({"objcopy", "--strip-all", WORKLOAD_BIN, program}).status, 0);
  std::string id = build_id_of(program);
  ASSERT_EQ(id.size(), 40u) << "no build id in " << program;
  DebuginfodServer server(id, debug);
  auto record = [&](const std::string& urls, const std::string& out) {
    RunResult r =
        run({"env", "DEBUGINFOD_URLS=" + urls, "DEBUGINFOD_CACHE_PATH=" + dir + "/cache", ALLOCSCOPE_BIN,
             "record", "-q", "--rate", "64KiB", "-o", out, "--", program, "--scale-pct", "5"});
    EXPECT_EQ(r.status, 0) << r.err;
    return read_folded(out);
  };
  Folded without = record("", dir + "/without.folded");
  EXPECT_FALSE(has_frame(without, "site_malloc_small")) << "the program was not stripped";
  EXPECT_EQ(server.served(), 0);
  Folded with = record(server.url(), dir + "/with.folded");
  EXPECT_EQ(server.served(), 1);
  for (const char* site : {"site_malloc_small", "site_calloc", "site_realloc", "main"})
    EXPECT_TRUE(has_frame(with, site)) << site << " is not named";
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace allocscope::test
