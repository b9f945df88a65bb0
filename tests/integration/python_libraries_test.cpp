// Python frames of CPython runtimes that live in a library (libpython3.X.so):
// pyenv's interpreters 3.8 to 3.13 (shared builds, as python.org's images
// and conda ship), uWSGI's python3 plugin and a C program embedding
// Debian's libpython3.11, through every route (a launched command, -p, and
// --all for processes running before and started during), against each
// workload's own count. Real BPF.
#include <gtest/gtest.h>
#include <httplib.h>
#include <signal.h>
#include <unistd.h>

#include <fstream>
#include <regex>

#include "harness.h"
#include "host/process.h"
#include "pyenv_interpreters.h"
#include "python_sites.h"

namespace allocscope::test {
namespace {

using Interpreter = PyenvInterpreter;

std::string names(const std::vector<Interpreter>& found) {
  std::string s;
  for (const Interpreter& i : found) s += (s.empty() ? "" : ", ") + i.path;
  return s;
}

// Launched, exact: every large site under its Python callers, to the byte,
// and every workload function at its line; the runtime is told apart from
// the program (libpython3.X.so, read before the command runs).
TEST(PythonLibraries, EveryPyenvInterpreterIsExactUnderItsPythonCallers) {
  REQUIRE_BPF();
  std::vector<Interpreter> found = pyenv_interpreters();
  if (found.empty()) GTEST_SKIP() << "no pyenv interpreter of 3.8 to 3.13 on this machine";
  std::cerr << "[ pyenv    ] " << names(found) << "\n";
  for (const Interpreter& i : found) {
    SCOPED_TRACE(i.path);
    std::string out = temp_path("pyenv.json"), pprof = temp_path("pyenv.pb.gz");
    RunResult r = run({ALLOCSCOPE_BIN, "record", "--rate", "1", "-o", out, "-o", pprof, "--", i.path,
                       PYTHON_SITES_PY, "--scale-pct", "20"});
    ASSERT_EQ(r.status, 0) << r.err;
    EXPECT_NE(r.err.find("python: frames of CPython 3." + std::to_string(i.minor)), std::string::npos)
        << r.err;
    Truths truths = parse_truth(r.out);
    ASSERT_EQ(truths.size(), 4u) << r.out;
    expect_exact(read_recording(out, truths), truths);
    expect_lines(pprof, parse_lines(r.out), PYTHON_SITES_PY, "calloc", false);
    std::remove(out.c_str());
    std::remove(pprof.c_str());
  }
}

// Attached (-p) to running interpreters of every version, sampled: each
// large site within the suite's bound (harness.h, kMaxZ) of its truth.
TEST(PythonLibraries, AttachedPyenvInterpretersHaveTheirFrames) {
  REQUIRE_BPF();
  std::vector<Interpreter> found = pyenv_interpreters();
  if (found.empty()) GTEST_SKIP() << "no pyenv interpreter of 3.8 to 3.13 on this machine";
  for (const Interpreter& i : found) {
    SCOPED_TRACE(i.path);
    expect_attached_interpreter_sampled(i.path);
  }
}

// The whole machine: an interpreter running before the recording (found in
// /proc), the first process to map another version's library during it
// (held until userspace reads the file) and a second one (entered by the
// kernel at its mapping), each with its own frames.
TEST(PythonLibraries, TheWholeMachineWalksLibraryRuntimesStartedAnyTime) {
  REQUIRE_BPF();
  std::vector<Interpreter> found = pyenv_interpreters();
  if (found.size() < 2) GTEST_SKIP() << "fewer than two pyenv interpreters of 3.8 to 3.13 here";
  const Interpreter &old = found.front(), &young = found.back();
  Child before({old.path, PYTHON_SITES_PY, "--wait", "--hold"});
  ASSERT_TRUE(before.wait_for_line("ready", 20000));
  std::string out = temp_path("pyenv-all.json");
  constexpr double kRate = 64 * 1024;
  Child rec({ALLOCSCOPE_BIN, "record", "--all", "--rate", "64KiB", "-o", out});
  ASSERT_TRUE(rec.wait_for_line("recording every process", 60000, true)) << rec.err();
  Child first({young.path, PYTHON_SITES_PY, "--wait", "--hold", "--scale-pct", "50"});
  ASSERT_TRUE(first.wait_for_line("ready", 20000));
  Child second({young.path, PYTHON_SITES_PY, "--wait", "--hold", "--scale-pct", "50"});
  ASSERT_TRUE(second.wait_for_line("ready", 20000));
  std::vector<Child*> all = {&before, &first, &second};
  for (Child* c : all) c->signal(SIGUSR1);
  for (Child* c : all) ASSERT_TRUE(c->wait_for_line("}", 60000));
  rec.signal(SIGINT);
  ASSERT_EQ(rec.wait(), 0) << rec.err();
  for (Child* c : all) c->signal(SIGUSR1);
  for (Child* c : all) {
    EXPECT_EQ(c->wait(), 0);
    SCOPED_TRACE(c == &before ? old.path + ", running before" : young.path + ", started during");
    Truths truths = parse_truth(c->out());
    ASSERT_EQ(truths.size(), 4u) << c->out();
    Recorded r = read_recording(out, truths, kEitherCalloc, uint32_t(c->pid()));
    EXPECT_EQ(r.loop_frames_left, 0u);
    expect_sampled_large_sites(r, truths, kRate);
  }
  std::remove(out.c_str());
}

// A C program linking Debian's libpython3.11 (Py_Initialize), launched,
// exact, every workload function at its line.
TEST(PythonLibraries, AProgramEmbeddingLibpythonIsExact) {
  REQUIRE_BPF();
  std::string out = temp_path("embedded.json"), pprof = temp_path("embedded.pb.gz");
  RunResult r = run({ALLOCSCOPE_BIN, "record", "--rate", "1", "-o", out, "-o", pprof, "--",
                     EMBEDDED_PYTHON_BIN, PYTHON_SITES_PY, "--scale-pct", "20"});
  ASSERT_EQ(r.status, 0) << r.err;
  Truths truths = parse_truth(r.out);
  ASSERT_EQ(truths.size(), 4u) << r.out;
  expect_exact(read_recording(out, truths), truths);
  expect_lines(pprof, parse_lines(r.out), PYTHON_SITES_PY, "calloc", false);
  std::remove(out.c_str());
  std::remove(pprof.c_str());
}

// uWSGI serving wsgi_sites.py through its python3 plugin (libpython3.11),
// a master and two workers forked from it (each inherits the mapping).
class Uwsgi {
 public:
  Uwsgi() : port_(free_port()) {
    child_ = std::make_unique<Child>(std::vector<std::string>{
        "uwsgi", "--plugin", "python3", "--http-socket", "127.0.0.1:" + std::to_string(port_), "--wsgi-file",
        WSGI_SITES_PY, "--master", "--processes", "2", "--disable-logging", "--die-on-term"});
  }
  ~Uwsgi() {
    if (child_) {
      child_->signal(SIGTERM);
      child_->wait(30000);
    }
  }
  bool ready() {
    httplib::Client c("127.0.0.1", port_);
    for (int i = 0; i < 300; ++i, usleep(100000))
      if (auto res = c.Get("/ping"); res && res->status == 200) return true;
    return false;
  }
  // Runs the sites `n` times; the truth summed per worker (by pid).
  std::map<uint32_t, Truths> run_sites(int n) {
    httplib::Client c("127.0.0.1", port_);
    c.set_read_timeout(120);
    std::map<uint32_t, Truths> out;
    for (int i = 0; i < n; ++i) {
      auto res = c.Get("/run");
      if (!res || res->status != 200) continue;
      auto json = nlohmann::json::parse(res->body, nullptr, false);
      if (!json.is_object()) continue;
      Truths& t = out[json["pid"].get<uint32_t>()];
      for (const auto& [name, v] : json.items()) {
        if (name == "pid") continue;
        SiteTruth& s = t[name];
        s.objects += v["objects"].get<double>();
        s.size = v["size"].get<double>();
        s.kept = v["kept"];
      }
    }
    return out;
  }
  pid_t pid() const { return child_->pid(); }

 private:
  int port_;
  std::unique_ptr<Child> child_;
};

void expect_uwsgi_exact(const std::string& out, const std::map<uint32_t, Truths>& workers) {
  size_t objects = 0;
  for (const auto& [pid, truths] : workers) {
    SCOPED_TRACE("worker " + std::to_string(pid));
    Recorded r = read_recording(out, truths, kEitherCalloc, pid);
    expect_exact(r, truths, false, false);
    for (const auto& [name, t] : truths) objects += size_t(t.objects);
  }
  EXPECT_GT(objects, 0u) << "the sites ran";
}

// Attached to the master with its children: the workers forked before.
TEST(PythonLibraries, UwsgiWorkersAttachedAreExact) {
  REQUIRE_BPF();
  Uwsgi server;
  ASSERT_TRUE(server.ready()) << "uWSGI did not answer";
  std::string out = temp_path("uwsgi-attached.json");
  Child rec(
      {ALLOCSCOPE_BIN, "record", "-p", std::to_string(server.pid()), "--children", "--rate", "1", "-o", out});
  ASSERT_TRUE(rec.wait_for_line("recording process", 60000, true)) << rec.err();
  auto workers = server.run_sites(4);
  rec.signal(SIGINT);
  ASSERT_EQ(rec.wait(), 0) << rec.err();
  expect_uwsgi_exact(out, workers);
  std::remove(out.c_str());
}

// Started during --all: the master maps libpython (the kernel enters it),
// the workers inherit it at fork.
TEST(PythonLibraries, UwsgiStartedDuringAWholeMachineRecordingIsExact) {
  REQUIRE_BPF();
  std::string out = temp_path("uwsgi-all.json");
  Child rec({ALLOCSCOPE_BIN, "record", "--all", "--comm", "^uwsgi", "--rate", "1", "-o", out});
  ASSERT_TRUE(rec.wait_for_line("recording every process", 60000, true)) << rec.err();
  Uwsgi server;  // its workers live on past the recording: their kept objects are live
  ASSERT_TRUE(server.ready()) << "uWSGI did not answer";
  auto workers = server.run_sites(4);
  rec.signal(SIGINT);
  ASSERT_EQ(rec.wait(), 0) << rec.err();
  expect_uwsgi_exact(out, workers);
  std::remove(out.c_str());
}

// In process (--preload) for every pyenv interpreter: CPython's own
// allocator, wrapped through the library's PyMem_SetAllocator, counted too,
// every object under its Python callers once.
TEST(PythonLibraries, PreloadCountsEveryPyenvInterpretersOwnAllocatorExactly) {
  REQUIRE_BPF();
  std::vector<Interpreter> found = pyenv_interpreters();
  if (found.empty()) GTEST_SKIP() << "no pyenv interpreter of 3.8 to 3.13 on this machine";
  for (const Interpreter& i : found) {
    SCOPED_TRACE(i.path);
    expect_launched_exact({i.path, PYTHON_SITES_PY, "--scale-pct", "20"}, true);
  }
}

// A runtime allocscope cannot walk is named, with its version and why, in
// the summary, the recording's paths and a counter: never silent.
TEST(PythonLibraries, ARuntimeItCannotWalkIsNamed) {
  REQUIRE_BPF();
  std::vector<Interpreter> old = pyenv_interpreters(6, 7);
  if (old.empty()) GTEST_SKIP() << "no pyenv interpreter of 3.6 or 3.7 on this machine";
  const Interpreter& i = old.back();
  std::string out = temp_path("old-python.json");
  RunResult r = run({ALLOCSCOPE_BIN, "record", "--rate", "1", "-o", out, "--", i.path, "-c",
                     "x = [bytes(3000) for _ in range(100)]"});
  ASSERT_EQ(r.status, 0) << r.err;
  std::string version = "3." + std::to_string(i.minor);
  std::regex said("warning: python: no frames for \\S*libpython" +
                  std::regex_replace(version, std::regex("\\."), "\\.") + "\\S*\\.so\\S* \\(" +
                  std::regex_replace(version, std::regex("\\."), "\\.") + "\\): ");
  EXPECT_TRUE(std::regex_search(r.err, said)) << r.err;
  std::ifstream in(out);
  auto json = nlohmann::json::parse(in, nullptr, false);
  ASSERT_TRUE(json.is_object());
  EXPECT_EQ(json["counters"]["python_programs_refused"], 1);
  EXPECT_NE(json["paths"].value("python_refused", "").find("(" + version + ")"), std::string::npos)
      << json["paths"];
  std::remove(out.c_str());
}

}  // namespace
}  // namespace allocscope::test
