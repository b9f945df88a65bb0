// What the Python tests share: the sites workloads' truth (python_sites.py,
// wsgi_sites.py) and a recording's figures for them, checked exactly or
// within the suite's bound.
#pragma once

#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace allocscope::test {

struct SiteTruth {
  double objects = 0, size = 0;
  bool kept = false;
};
using Truths = std::map<std::string, SiteTruth>;

// The workload's last line: per site, objects, bytes each, kept.
Truths parse_truth(const std::string& out);
// The workload's last line: the line each of its functions allocates from.
std::map<std::string, int64_t> parse_lines(const std::string& out);
// In the samples ending in `leaf`, every Python frame of the workload's
// functions names `file` and the line it allocates from.
void expect_lines(const std::string& pprof, const std::map<std::string, int64_t>& lines,
                  const std::string& file, const std::string& leaf, bool all_sizes);

struct SiteTotals {
  double alloc_objects = 0, alloc_bytes = 0, inuse_objects = 0, inuse_bytes = 0;
  size_t stacks = 0;
};

// Per site, the stacks (root first) that end in `leaf` with the site's
// Python calls in them: <site>;build;allocate.
struct Recorded {
  std::map<std::string, SiteTotals> sites;
  size_t c_library_callocs = 0;  // site stacks that end in the C library's calloc
  size_t loop_frames_left = 0;   // stacks with Python frames that still show the evaluation loop
  size_t under_main = 0, python_stacks = 0;
};
// `leaf` kEitherCalloc: both, as in a process entered while it ran (its
// objects reach the C library's calloc until CPython's allocators are
// wrapped, then are counted at PyObject_Calloc).
inline constexpr const char* kEitherCalloc = "calloc|PyObject_Calloc";
Recorded read_recording(const std::string& path, const Truths& truths, const std::string& leaf = "calloc",
                        uint32_t pid = 0);

// Exact mode: every object counted under its Python callers, to the byte
// (objects of up to 512 bytes only with `all_sizes`); with `under_main`,
// every site stack under <module>;main.
void expect_exact(const Recorded& r, const Truths& truths, bool all_sizes = false, bool under_main = true);
// The large sites (every site: `all_sizes`) within the suite's bound of
// their truth, sampled at `rate`.
void expect_sampled_large_sites(const Recorded& r, const Truths& truths, double rate, bool all_sizes = false);

// Launched in exact mode (--rate 1), `command` (the workload, with
// --scale-pct 20) runs to its end: every large site (`preload`: every site,
// counted at PyObject_Calloc, none at the C library's calloc) to the byte
// under its Python callers; with a `script`, each function's frame at its
// line. Returns allocscope's stderr.
std::string expect_launched_exact(const std::vector<std::string>& command, bool preload,
                                  const std::string& script = "");

// The allocation profile the agent at `port` serves, as `report` writes it
// in JSON: its path, or "" after a failure.
std::string agent_allocs_json(int port);

// Attached (-p, 64 KiB) to `python` running python_sites.py: each large
// site within the suite's bound of its truth, no evaluation-loop frame left.
void expect_attached_interpreter_sampled(const std::string& python);
// ... running `command` (the workload with --wait --hold); `forked`: the
// interpreter is the command's one child (PythonRoot::in_container).
void expect_attached_interpreter_sampled(const std::vector<std::string>& command, bool forked = false);

// A Debian root with interpreters, made once by `make` (a script given the
// cache, ~/.cache/allocscope, then `packages`) and kept there, with
// python_sites.py copied into it; removed again at the end.
class PythonRoot {
 public:
  explicit PythonRoot(const std::string& make, const std::vector<std::string>& packages = {});
  ~PythonRoot();
  PythonRoot(const PythonRoot&) = delete;
  PythonRoot& operator=(const PythonRoot&) = delete;
  const std::string& error() const { return error_; }
  const std::string& root() const { return root_; }
  // The script's path as the interpreter sees it (its frames name it so).
  const std::string& script() const { return script_; }
  // /usr/bin/`python` running the workload with `args`, in root `in` (this root by default).
  std::vector<std::string> command(const std::string& python, const std::vector<std::string>& args,
                                   const std::string& in = "") const;
  // ... as a container runs it: in PID and mount namespaces of its own, its
  // own /proc mounted in the root, the interpreter the command's one child.
  std::vector<std::string> in_container(const std::string& python,
                                        const std::vector<std::string>& args) const;

 private:
  std::string error_, root_, script_;
};

}  // namespace allocscope::test
