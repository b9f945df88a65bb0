// Runtimes with a garbage-collected heap. The JVM's is sampled by the JVM
// itself through allocscope's JVMTI agent: each Java site of a workload with
// a known truth (its own ThreadMXBean counts) stands within the suite's
// bound of it (harness.h, kMaxZ: 6 sigma, a false failure under 1.8e-7 a
// check; 4 checks a test, 5 such tests), allocated and in use after its
// last collection, under its Java callers at its line, launched and attached
// (-p, --all), in a container. V8's is not read yet: a recording says so in one line. Either
// program runs as it would untraced.
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "../unit/temp_dir.h"
#include "harness.h"

namespace allocscope::test {
namespace {

// What Alloc.java says it allocated: each site's bytes (ThreadMXBean), one
// array's size, and how many arrays it kept through its collection.
struct JavaTruth {
  double site_bytes = 0, site_objects = 0, array = 0, kept = 0;
};

JavaTruth java_truth(const std::string& out) {
  JavaTruth t;
  std::istringstream in(out);
  std::string word;
  while (in >> word) {
    if (word == "site_bytes") in >> t.site_bytes;
    if (word == "site_objects") in >> t.site_objects;
    if (word == "array") in >> t.array;
    if (word == "kept") in >> t.kept;
  }
  return t;
}

// A recording's totals of the stacks through Alloc.outer then `site`, the
// line `site`'s frame was at for most of its bytes (0 if none), and the
// bytes the JVM put at other lines of it.
struct JavaSite;
JavaSite java_site(const Recording& r, const std::string& site, uint32_t pid = 0);

struct JavaSite {
  double alloc_bytes = 0, live_bytes = 0;
  int64_t line = 0;
  double other_lines_bytes = 0;
  bool under_main = true;  // every such stack is main;outer;site...
  std::string stacks;      // each stack's frames from the site in, with its bytes (for messages)
};

// Of process `pid`'s samples only, unless 0.
JavaSite java_site(const Recording& r, const std::string& site, uint32_t pid) {
  JavaSite out;
  std::map<int64_t, double> line_bytes;
  auto frame = [&](uint32_t location, int64_t* line) {
    const RecLocation& l = r.locations[location];
    if (l.lines.empty()) return std::string();
    if (line) *line = l.lines.back().line;
    return r.functions[l.lines.back().function].name;
  };
  for (const RecSample& s : r.samples) {
    if (pid && s.pid != pid) continue;
    for (size_t i = 1; i + 1 < s.locations.size(); ++i) {
      int64_t line = 0;
      if (frame(s.locations[i], &line) != "Alloc." + site ||
          frame(s.locations[i + 1], nullptr) != "Alloc.outer")
        continue;
      out.alloc_bytes += s.totals.alloc_bytes;
      out.live_bytes += s.totals.live_bytes;
      if (i == 1) line_bytes[line] += s.totals.alloc_bytes;
      out.under_main &= i + 2 < s.locations.size() && frame(s.locations[i + 2], nullptr) == "Alloc.main";
      for (size_t j = i + 1; j-- > 0;) {
        int64_t at = 0;
        std::string name = frame(s.locations[j], &at);
        out.stacks += name + ":" + std::to_string(at) + (j ? ";" : "");
      }
      out.stacks += " alloc " + std::to_string(s.totals.alloc_bytes) + " live " +
                    std::to_string(s.totals.live_bytes) + "\n";
      break;
    }
  }
  double most = 0;
  for (const auto& [line, bytes] : line_bytes) {
    if (bytes > most) most = bytes, out.line = line;
  }
  for (const auto& [line, bytes] : line_bytes) {
    if (line != out.line) out.other_lines_bytes += bytes;
  }
  return out;
}

// The line of Alloc.java that holds `text`.
int64_t source_line(const std::string& text) {
  std::ifstream in(JAVA_ALLOC_SOURCE);
  std::string line;
  for (int64_t n = 1; std::getline(in, line); ++n)
    if (line.find(text) != std::string::npos) return n;
  return 0;
}

std::vector<std::string> java_alloc(const std::string& count, const std::string& bytes) {
  return {"java", "-cp", JAVA_CLASSES_DIR, "Alloc", count, bytes};
}

// Each site's bytes allocated and in use within the suite's bound of the
// JVM's own count at `rate`, its frame at its line under main;outer.
// `at_exit`: in use is what the JVM held at its exit (a recording of its
// own; a whole-machine one keeps nothing of an ended process).
void expect_java_sites(const Recording& rec, const JavaTruth& truth, double rate, uint32_t pid = 0,
                       bool at_exit = true) {
  JavaSite bytes = java_site(rec, "site_bytes", pid);
  double sigma = ht_sigma(truth.site_bytes / truth.array, truth.array, rate, true);
  EXPECT_LT(std::abs(bytes.alloc_bytes - truth.site_bytes) / sigma, kMaxZ)
      << bytes.alloc_bytes << " sampled, " << truth.site_bytes << " allocated";
  double kept = at_exit ? truth.kept * truth.array : 0;
  EXPECT_LE(std::abs(bytes.live_bytes - kept) / ht_sigma(truth.kept, truth.array, rate, true), kMaxZ)
      << bytes.live_bytes << " in use, " << kept << " kept";
  EXPECT_EQ(bytes.line, source_line("byte[] b = new byte[bytes];")) << bytes.stacks;
  EXPECT_LE(bytes.other_lines_bytes, 0.001 * bytes.alloc_bytes) << bytes.stacks;
  EXPECT_TRUE(bytes.under_main);

  JavaSite objects = java_site(rec, "site_objects", pid);
  double node = 40;  // a Node's bytes with its header (compressed class pointers)
  sigma = ht_sigma(truth.site_objects / node, node, rate, true);
  EXPECT_LT(std::abs(objects.alloc_bytes - truth.site_objects) / sigma, kMaxZ)
      << objects.alloc_bytes << " sampled, " << truth.site_objects << " allocated";
  // None kept: every sampled one's death is seen, but for the odd object
  // the JVM itself still held at its last collection (1 or 2 samples in
  // some runs of 3,900, found live by the JVM's own tag map at its end).
  EXPECT_LE(objects.live_bytes, 0.001 * objects.alloc_bytes) << objects.stacks;
  // The JVM names the line of a sampled allocation's frame. Once in CI it
  // named the loop's line (36) for one sample of 3,900, likely a Node C2 had
  // removed (escape analysis) and made again where the compiled loop
  // deoptimized. Such samples are a few at most: 0.1 % is 4 of them.
  EXPECT_EQ(objects.line, source_line("Node n = new Node();")) << objects.stacks;
  EXPECT_LE(objects.other_lines_bytes, 0.001 * objects.alloc_bytes) << objects.stacks;
  EXPECT_TRUE(objects.under_main);
}

// Arrays of 2,000 bytes: before JDK 25 the JVM oversamples objects it
// allocates outside a thread's buffer (JDK-8356372), 1.2 % for arrays of 10 KB
// on OpenJDK 17 here; these stay inside.
TEST(ManagedHeaps, ALaunchedJvmsJavaSitesAreSampledByTheJvmAtTheirLines) {
  REQUIRE_BPF();
  std::string pprof = temp_path("java.pb.gz");
  std::vector<std::string> argv = {ALLOCSCOPE_BIN, "record", "--rate", "16KiB", "-o", pprof, "--"};
  for (const std::string& a : java_alloc("100000", "2000")) argv.push_back(a);
  RunResult r = run(argv);
  ASSERT_EQ(r.status, 0) << r.err;
  JavaTruth truth = java_truth(r.out);
  ASSERT_EQ(truth.kept, 25000) << r.out;
  EXPECT_NE(r.err.find("allocscope: java: the Java heap of 1 process(es) sampled by the JVM"),
            std::string::npos)
      << r.err;
  EXPECT_EQ(r.err.find("note: jvm:"), std::string::npos) << r.err;
  Recording rec = read_pprof(pprof);
  std::remove(pprof.c_str());
  expect_java_sites(rec, truth, 16384);
}

// Runs `command` (Alloc.java waiting for its go file, `go` as this side
// names it), records it with `record_args` ("PID" names it) at 16 KiB once
// it is ready, lets it go `settle_us` later and once it is `age_us` old (a
// JVM before JDK 21 is reached 5 s after its start: jvm_attach.c), and
// checks its sites (`at_exit`: in use as held at its exit). `forked`: the
// JVM is the command's one child (unshare --fork), not the command itself.
void expect_attached_jvm(const std::vector<std::string>& command, const std::string& go,
                         std::vector<std::string> record_args, useconds_t settle_us, bool at_exit,
                         std::chrono::microseconds age = std::chrono::microseconds(6500000),
                         bool forked = false) {
  auto born = std::chrono::steady_clock::now();
  Child jvm(command);
  ASSERT_TRUE(jvm.wait_for_line("ready", 60000)) << jvm.err();
  pid_t pid = forked ? only_child(jvm.pid()) : jvm.pid();
  ASSERT_GT(pid, 0) << "no JVM under " << jvm.pid();
  std::string pprof = temp_path("java-attached.pb.gz");
  std::vector<std::string> argv = {ALLOCSCOPE_BIN, "record", "--rate", "16KiB", "-o", pprof};
  for (const std::string& a : record_args) argv.push_back(a == "PID" ? std::to_string(pid) : a);
  Child rec(argv);
  ASSERT_TRUE(rec.wait_for_line("recording", 120000, true)) << rec.err();
  usleep(settle_us);
  std::this_thread::sleep_until(born + age);
  { std::ofstream(go).put('\n'); }
  EXPECT_EQ(jvm.wait(), 0) << jvm.err();
  if (!at_exit) rec.signal(SIGINT);  // a whole-machine recording goes on
  ASSERT_EQ(rec.wait(), 0) << rec.err();
  std::remove(go.c_str());
  EXPECT_EQ(jvm.err(), "") << "nothing of allocscope's in the JVM's stderr, no agent warning";
  EXPECT_NE(rec.err().find("allocscope: java: the Java heap of "), std::string::npos) << rec.err();
  JavaTruth truth = java_truth(jvm.out());
  ASSERT_EQ(truth.kept, 25000) << jvm.out();
  Recording r = read_pprof(pprof);
  std::remove(pprof.c_str());
  expect_java_sites(r, truth, 16384, uint32_t(pid), at_exit);
}

// A JVM found running (-p): the library is injected into it, and the agent,
// started on a thread of its own, samples from then on. The workload waits
// until a second after allocscope says it records (the agent's thread
// reaches the JVM in milliseconds), then allocates; it runs to its end as
// it would untraced.
TEST(ManagedHeaps, ARunningJvmIsSampledOnceAttached) {
  REQUIRE_BPF();
  std::string go = temp_path("java-go");
  std::vector<std::string> command = java_alloc("100000", "2000");
  command.push_back(go);
  expect_attached_jvm(command, go, {"-p", "PID"}, 1000000, true);
}

// A whole-machine recording (--all, as the agent records) enters a JVM it
// finds running, whose native allocations would never make it busy: its
// agent samples it from then on (entered at the next quarter second's look:
// it is let go 3 s after). Its samples alone are compared (other tests'
// JVMs may run beside it); it holds nothing once ended.
TEST(ManagedHeaps, AWholeMachineRecordingEntersARunningJvm) {
  REQUIRE_BPF();
  std::string go = temp_path("java-go-all");
  std::vector<std::string> command = java_alloc("100000", "2000");
  command.push_back(go);
  expect_attached_jvm(command, go, {"--all"}, 3000000, false);
}

// Debian's newest JVM (sid's OpenJDK 25), in a sid root made once per
// machine (sid_root.sh), run as a container runs it: through chroot, in PID
// and mount namespaces of its own (its /proc its own), attached with -p by
// its pid out here: its library reaches it through the root (its own pid
// in there is 1 or 2), its sites stand within the bound, and JDK 21's warning
// about agents loaded into a running JVM is not printed (the library is not
// loaded as an agent).
TEST(ManagedHeaps, SidsJvmInARootIsSampledOnceAttached) {
  REQUIRE_BPF();
  const char* home = getenv("HOME");
  std::vector<std::string> make = {SID_ROOT_SH, std::string(home ? home : "/root") + "/.cache/allocscope"};
  make.insert(make.end(), kSidPackages.begin(), kSidPackages.end());
  RunResult made = run(make, 900000);  // its first making takes a minute or so
  ASSERT_EQ(made.status, 0) << made.err;
  std::string root = made.out.substr(0, made.out.find('\n'));
  std::string dir = "/tmp/allocscope-java-" + std::to_string(getpid());
  std::filesystem::create_directories(root + dir);
  for (const auto& f : std::filesystem::directory_iterator(JAVA_CLASSES_DIR))
    std::filesystem::copy_file(f.path(), root + dir + "/" + f.path().filename().string(),
                               std::filesystem::copy_options::overwrite_existing);
  expect_attached_jvm({"unshare", "--pid", "--fork", "--mount", "--propagation", "private", "sh", "-c",
                       "mount -t proc proc \"$0/proc\" && exec chroot \"$0\" "
                       "/usr/lib/jvm/java-25-openjdk-amd64/bin/java -cp \"$1\" Alloc 100000 2000 \"$1/go\"",
                       root, dir},
                      root + dir + "/go", {"-p", "PID"}, 1000000, true, std::chrono::microseconds(0), true);
  std::filesystem::remove_all(root + dir);
}

// At the default rate the program's output is its untraced output (its
// figures vary a little from run to run with the JIT: their form is
// compared, and stderr byte for byte), and its one large site is right.
TEST(ManagedHeaps, AJvmAtTheDefaultRateRunsAsUntracedAndIsRight) {
  REQUIRE_BPF();
  RunResult plain = run(java_alloc("100000", "2000"));
  ASSERT_EQ(plain.status, 0) << plain.err;
  std::string pprof = temp_path("java-default.pb.gz");
  std::vector<std::string> argv = {ALLOCSCOPE_BIN, "record", "-q", "-o", pprof, "--"};
  for (const std::string& a : java_alloc("100000", "2000")) argv.push_back(a);
  RunResult r = run(argv);
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(r.err, plain.err) << "nothing of allocscope's in the JVM's stderr";
  EXPECT_EQ(java_truth(r.out).kept, java_truth(plain.out).kept);
  EXPECT_EQ(std::count(r.out.begin(), r.out.end(), '\n'), 1) << r.out;
  JavaTruth truth = java_truth(r.out);
  Recording rec = read_pprof(pprof);
  std::remove(pprof.c_str());
  JavaSite bytes = java_site(rec, "site_bytes");
  double sigma = ht_sigma(truth.site_bytes / truth.array, truth.array, 512 * 1024, true);
  EXPECT_LT(std::abs(bytes.alloc_bytes - truth.site_bytes) / sigma, kMaxZ)
      << bytes.alloc_bytes << " sampled, " << truth.site_bytes << " allocated";
}

TEST(ManagedHeaps, ANodeIsSaidToHaveItsJavaScriptHeapUnread) {
  REQUIRE_BPF();
  TempDir dir;
  std::string out = dir.path.string() + "/node.folded";
  RunResult r = run({ALLOCSCOPE_BIN, "record", "-o", out, "--", "node", "-e",
                     "const a = []; for (let i = 0; i < 200000; i++) a.push({i, s: 'x' + i});"
                     "console.log('made ' + a.length)"});
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(r.out, "made 200000\n");
  EXPECT_NE(r.err.find("note: v8: V8's garbage-collected heap of 1 process(es) (node "), std::string::npos)
      << r.err;
  EXPECT_EQ(r.err.find("note: jvm:"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace allocscope::test
