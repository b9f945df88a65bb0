// The agent under test and what its clients read: shared by the agent's
// integration tests.
#pragma once

#include <algorithm>
#include <map>
#include <string>
#include <vector>

#include "harness.h"

namespace allocscope::test {

inline constexpr double kRate = 64 * 1024;

// The agent on a port of its own, recording the workload's processes.
struct Agent {
  explicit Agent(std::vector<std::string> extra = {})
      : port(free_port()), child([&] {
          std::vector<std::string> argv{ALLOCSCOPE_BIN, "agent", "--listen",
                                        "127.0.0.1:" + std::to_string(port)};
          if (extra.empty()) extra = {"--comm", "^alloc_sites$"};
          if (std::find(extra.begin(), extra.end(), "--rate") == extra.end())
            argv.insert(argv.end(), {"--rate", "64KiB"});
          argv.insert(argv.end(), extra.begin(), extra.end());
          return argv;
        }()) {}
  bool ready() { return child.wait_for_line("recording: probes attached", 60000, true); }
  std::string url(const std::string& path) const { return "http://127.0.0.1:" + std::to_string(port) + path; }
  int port;
  Child child;
};

// Per allocation site (the first frame named site_*): the four values of a
// profile as `go tool pprof -raw` prints them.
struct SiteValues {
  double alloc_objects = 0, alloc_bytes = 0, inuse_objects = 0, inuse_bytes = 0;
};
using Sites = std::map<std::string, SiteValues>;

// A profile as `go tool pprof -raw` prints it, per site.
Sites parse_raw(const std::string& raw);

// `go tool pprof` (a real client of Go's net/http/pprof) on one URL.
RunResult go_pprof(const std::string& how, const std::string& url);

// Each site's allocated and in-use bytes within kMaxZ standard deviations of
// the truth for `threads` x `scale` runs of the workload.
void expect_sites_match(const Sites& sites, int scale, const std::string& what, bool check_live = true);

// Where the cgroup v2 hierarchy is mounted ("" if nowhere).
std::string cgroup_root();

}  // namespace allocscope::test
