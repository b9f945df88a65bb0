#include "python_sites.h"

#include <gtest/gtest.h>
#include <httplib.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <set>
#include <sstream>

#include "harness.h"
#include "host/process.h"
#include "output/pprof.h"

namespace allocscope::test {
namespace {

// The workload's truth: its last line that is a JSON object (the
// allocators' lines of --hold come after it).
nlohmann::json last_line(const std::string& out) {
  std::istringstream in(out);
  std::string line, json;
  while (std::getline(in, line))
    if (line.starts_with("{")) json = line;
  return nlohmann::json::parse(json, nullptr, false);
}

// The rest of the line of `out` that begins with `prefix`; empty if none.
std::string line_after(const std::string& out, const std::string& prefix) {
  size_t at = out.find(prefix);
  if (at == std::string::npos) return "";
  at += prefix.size();
  return out.substr(at, out.find('\n', at) - at);
}

bool has_run(const std::vector<std::string>& frames, const std::vector<std::string>& run) {
  return std::search(frames.begin(), frames.end(), run.begin(), run.end()) != frames.end();
}

}  // namespace

Truths parse_truth(const std::string& out) {
  Truths t;
  auto json = last_line(out);
  if (!json.is_object()) return t;
  for (const auto& [name, v] : json.items())
    if (name != "lines") t[name] = {v["objects"].get<double>(), v["size"].get<double>(), v["kept"]};
  return t;
}

// The workload's last line: the line each of its functions allocates from.
std::map<std::string, int64_t> parse_lines(const std::string& out) {
  std::map<std::string, int64_t> lines;
  auto json = last_line(out);
  if (json.is_object() && json.contains("lines"))
    for (const auto& [name, line] : json["lines"].items()) lines[name] = line.get<int64_t>();
  return lines;
}

// In the samples of the bytes objects (leaf `leaf`), every Python frame of
// the workload's functions names the workload's file and the line that
// function allocates them from.
// Through the C library (all_sizes false) the small sites need not be seen.
void expect_lines(const std::string& pprof, const std::map<std::string, int64_t>& lines,
                  const std::string& file, const std::string& leaf, bool all_sizes) {
  Recording rec = read_pprof(pprof);
  auto name = [&](const RecLine& l) { return rec.functions[l.function].name; };
  std::set<std::string> seen;
  size_t wrong = 0;
  for (const RecSample& s : rec.samples) {
    if (s.locations.empty() || name(rec.locations[s.locations[0]].lines.at(0)) != leaf) continue;
    for (uint32_t at : s.locations)
      for (const RecLine& l : rec.locations[at].lines) {
        auto it = lines.find(name(l));
        if (it == lines.end()) continue;
        seen.insert(it->first);
        const std::string& in = rec.functions[l.function].filename;
        if ((l.line != it->second || in != file) && ++wrong <= 5)
          ADD_FAILURE() << it->first << " at " << in << ":" << l.line << ", not line " << it->second;
      }
  }
  // The small sites may still reach the C library now and then: pymalloc
  // callocs a radix-tree node (3.10+) when a new arena lands in a fresh
  // 256 MiB range. They need not be seen then, but every other function must.
  for (const auto& [function, line] : lines) {
    if (all_sizes || !function.starts_with("small_")) {
      EXPECT_TRUE(seen.contains(function)) << function << " never seen under " << leaf;
    }
  }
  EXPECT_EQ(wrong, 0u);
}

Recorded read_recording(const std::string& path, const Truths& truths, const std::string& leaf,
                        uint32_t pid) {
  Recorded r;
  std::ifstream in(path);
  auto json = nlohmann::json::parse(in, nullptr, false);
  if (!json.is_object()) return r;
  // The workloads' Python functions: before 3.11 the interpreter's own C
  // calls stand between two of them (call_function and the like).
  std::set<std::string> python = {"<module>", "main", "build", "allocate", "application", "run_sites"};
  for (const auto& [name, truth] : truths) python.insert(name);
  for (const auto& s : json["stacks"]) {
    std::vector<std::string> frames = s["frames"], calls;
    if (pid && s["pid"].get<uint32_t>() != pid) continue;
    std::copy_if(frames.begin(), frames.end(), std::back_inserter(calls),
                 [&](const std::string& f) { return python.contains(f); });
    if (!has_run(calls, {"build", "allocate"})) continue;
    ++r.python_stacks;
    r.under_main += has_run(calls, {"<module>", "main"});
    for (const std::string& f : frames) r.loop_frames_left += f.rfind("_PyEval_EvalFrameDefault", 0) == 0;
    r.c_library_callocs += frames.back() == "calloc";
    bool either = leaf == kEitherCalloc && (frames.back() == "calloc" || frames.back() == "PyObject_Calloc");
    if (frames.back() != leaf && !either) continue;
    for (const auto& [name, truth] : truths) {
      if (!has_run(calls, {name, "build", "allocate"})) continue;
      SiteTotals& t = r.sites[name];
      t.alloc_objects += s["alloc_objects"]["estimate"].get<double>();
      t.alloc_bytes += s["alloc_space"]["estimate"].get<double>();
      t.inuse_objects += s["inuse_objects"]["estimate"].get<double>();
      t.inuse_bytes += s["inuse_space"]["estimate"].get<double>();
      ++t.stacks;
    }
  }
  return r;
}

// Exact mode: every object counted under its Python callers, to the byte.
// Through the C library's allocator only the large ones: the small ones
// come from CPython's own (`all_sizes`: the preload library counts it).
void expect_exact(const Recorded& r, const Truths& truths, bool all_sizes, bool under_main) {
  EXPECT_EQ(r.loop_frames_left, 0u) << "every evaluation-loop frame gives way to its Python frames";
  if (under_main) {
    EXPECT_EQ(r.under_main, r.python_stacks) << "every site under <module>;main";
  }
  for (const auto& [name, t] : truths) {
    if (t.size <= 512 && !all_sizes) continue;
    SCOPED_TRACE(name);
    auto it = r.sites.find(name);
    ASSERT_NE(it, r.sites.end());
    EXPECT_EQ(it->second.alloc_objects, t.objects);
    EXPECT_EQ(it->second.alloc_bytes, t.objects * t.size);
    EXPECT_EQ(it->second.inuse_objects, t.kept ? t.objects : 0);
    EXPECT_EQ(it->second.inuse_bytes, t.kept ? t.objects * t.size : 0);
  }
}

// The large sites of one process (every site: `all_sizes`) within the
// suite's bound (harness.h, kMaxZ) of their truth, sampled at `rate`.
void expect_sampled_large_sites(const Recorded& r, const Truths& truths, double rate, bool all_sizes) {
  for (const auto& [name, t] : truths) {
    if (t.size <= 512 && !all_sizes) continue;
    SCOPED_TRACE(name);
    auto it = r.sites.find(name);
    ASSERT_NE(it, r.sites.end());
    double sd = ht_sigma(t.objects, t.size, rate, true);
    EXPECT_LT(std::fabs(it->second.alloc_bytes - t.objects * t.size) / sd, kMaxZ) << it->second.alloc_bytes;
    double live = t.kept ? t.objects * t.size : 0;
    EXPECT_LT(std::fabs(it->second.inuse_bytes - live) / sd, kMaxZ) << it->second.inuse_bytes;
  }
}

std::string expect_launched_exact(const std::vector<std::string>& command, bool preload,
                                  const std::string& script) {
  std::string out = temp_path("python-exact.json"), pprof = temp_path("python-exact.pb.gz");
  std::vector<std::string> argv = {ALLOCSCOPE_BIN, "record", "--rate", "1", "-o", out, "-o", pprof};
  if (preload) argv.push_back("--preload");
  argv.push_back("--");
  argv.insert(argv.end(), command.begin(), command.end());
  RunResult r = run(argv);
  EXPECT_EQ(r.status, 0) << r.err;
  Truths truths = parse_truth(r.out);
  EXPECT_EQ(truths.size(), 4u) << r.out;
  std::string leaf = preload ? "PyObject_Calloc" : "calloc";
  Recorded rec = read_recording(out, truths, leaf);
  expect_exact(rec, truths, preload);
  if (preload) {
    EXPECT_EQ(rec.c_library_callocs, 0u);
  }
  if (!script.empty()) expect_lines(pprof, parse_lines(r.out), script, leaf, preload);
  std::remove(out.c_str());
  std::remove(pprof.c_str());
  return r.err;
}

std::string agent_allocs_json(int port) {
  httplib::Client client("127.0.0.1", port);
  client.set_read_timeout(60);
  auto res = client.Get("/debug/pprof/allocs");
  EXPECT_TRUE(res && res->status == 200) << (res ? res->body : "no answer");
  if (!res || res->status != 200) return "";
  std::string pprof = temp_path("python-agent.pb.gz"), out = temp_path("python-agent.json");
  std::ofstream(pprof, std::ios::binary) << res->body;
  RunResult report = run({ALLOCSCOPE_BIN, "report", pprof, "-o", out});
  std::remove(pprof.c_str());
  EXPECT_EQ(report.status, 0) << report.err;
  return report.status == 0 ? out : "";
}

void expect_attached_interpreter_sampled(const std::string& python) {
  expect_attached_interpreter_sampled(std::vector<std::string>{python, PYTHON_SITES_PY, "--wait", "--hold"});
}

void expect_attached_interpreter_sampled(const std::vector<std::string>& command, bool forked) {
  constexpr double kRate = 64 * 1024;
  // The workload waits for the entered library's thread to wrap CPython's
  // allocators (once it holds the GIL, which the workload's sigwait leaves
  // free: milliseconds) before its sites, and to give them back after.
  std::vector<std::string> argv = command;
  argv.insert(argv.end(), {"--await-wrapped", "--await-given-back"});
  Child w(argv);
  ASSERT_TRUE(w.wait_for_line("ready", 20000));
  pid_t python = forked ? only_child(w.pid()) : w.pid();
  ASSERT_GT(python, 0) << "no interpreter under " << w.pid();
  auto go_on = [&] { ::kill(python, SIGUSR1); };
  std::string out = temp_path("python-attached.json");
  Child rec({ALLOCSCOPE_BIN, "record", "-p", std::to_string(python), "--rate", "64KiB", "-o", out});
  ASSERT_TRUE(rec.wait_for_line("recording process", 60000, true)) << rec.err();
  go_on();
  ASSERT_TRUE(w.wait_for_line("}", 60000));
  rec.signal(SIGINT);
  ASSERT_EQ(rec.wait(), 0) << rec.err();
  go_on();
  EXPECT_EQ(w.wait(), 0);
  EXPECT_EQ(w.err(), "") << "nothing of allocscope's in the interpreter's stderr";
  Truths truths = parse_truth(w.out());
  ASSERT_EQ(truths.size(), 4u) << w.out();
  Recorded r = read_recording(out, truths, "PyObject_Calloc");
  EXPECT_EQ(r.loop_frames_left, 0u);
  EXPECT_EQ(r.c_library_callocs, 0u) << "a domain's calls into the C library are its own, not counted again";
  expect_sampled_large_sites(r, truths, kRate, true);
  EXPECT_EQ(rec.err().find("small objects"), std::string::npos) << rec.err();
  std::string before = line_after(w.out(), "allocators before "),
              after = line_after(w.out(), "allocators after ");
  EXPECT_FALSE(before.empty()) << w.out();
  EXPECT_EQ(before, after) << "CPython's allocators given back at the detach";
  std::remove(out.c_str());
}

PythonRoot::PythonRoot(const std::string& make, const std::vector<std::string>& packages) {
  const char* home = getenv("HOME");
  std::vector<std::string> argv = {make, std::string(home ? home : "/root") + "/.cache/allocscope"};
  argv.insert(argv.end(), packages.begin(), packages.end());
  RunResult made = run(argv, 900000);  // its first making takes a minute or two
  error_ = made.status == 0 ? "" : made.err;
  root_ = made.out.substr(0, made.out.find('\n'));
  if (!error_.empty()) return;
  script_ = "/tmp/allocscope-python-sites-" + std::to_string(getpid()) + ".py";
  std::filesystem::copy_file(PYTHON_SITES_PY, root_ + script_,
                             std::filesystem::copy_options::overwrite_existing);
}

std::vector<std::string> PythonRoot::in_container(const std::string& python,
                                                  const std::vector<std::string>& args) const {
  std::vector<std::string> argv = {"unshare", "--pid",
                                   "--fork",  "--kill-child",
                                   "--mount", "--propagation",
                                   "private", "sh",
                                   "-c",      "mount -t proc proc \"$0/proc\" && exec chroot \"$0\" \"$@\"",
                                   root_,     "/usr/bin/" + python,
                                   script_};
  argv.insert(argv.end(), args.begin(), args.end());
  return argv;
}

PythonRoot::~PythonRoot() {
  if (!script_.empty()) std::filesystem::remove(root_ + script_);
}

std::vector<std::string> PythonRoot::command(const std::string& python, const std::vector<std::string>& args,
                                             const std::string& in) const {
  std::vector<std::string> argv = {"chroot", in.empty() ? root_ : in, "/usr/bin/" + python, script_};
  argv.insert(argv.end(), args.begin(), args.end());
  return argv;
}

}  // namespace allocscope::test
