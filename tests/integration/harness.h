// Shared pieces of the integration tests: child processes, folded output,
// the workload's exact truth, and reading a live process's code bytes.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "model/recording.h"
#include "workload_spec.h"

namespace allocscope::test {

// The allocscope under test: this tree's, or ALLOCSCOPE_TEST_BIN's (the
// sanitizers' stage runs these tests against its own build).
const char* allocscope_bin();
#define ALLOCSCOPE_BIN ::allocscope::test::allocscope_bin()

// Skips (or, with ALLOCSCOPE_REQUIRE_BPF set, fails) when BPF cannot be loaded.
#define REQUIRE_BPF()                                                                          \
  do {                                                                                         \
    if (std::string why = ::allocscope::test::bpf_unavailable(); !why.empty()) {               \
      if (getenv("ALLOCSCOPE_REQUIRE_BPF")) FAIL() << "BPF required but unavailable: " << why; \
      GTEST_SKIP() << why;                                                                     \
    }                                                                                          \
  } while (0)
std::string bpf_unavailable();

// A child process with its stdout and stderr in pipes.
class Child {
 public:
  // `cgroup`: a cgroup v2 directory the child joins before it runs argv (as
  // a container runtime's payload does), none when empty.
  explicit Child(const std::vector<std::string>& argv, const std::string& cgroup = "");
  ~Child();
  Child(const Child&) = delete;

  pid_t pid() const { return pid_; }
  // Reads stdout (or stderr) until a line containing `text` or the timeout.
  bool wait_for_line(const std::string& text, int timeout_ms, bool from_stderr = false);
  void signal(int sig);
  // Waits for exit (killing after timeout_ms); returns the shell-style status.
  int wait(int timeout_ms = 300000);
  const std::string& out() const { return out_; }
  const std::string& err() const { return err_; }

 private:
  bool pump(int timeout_ms);
  pid_t pid_ = -1;
  int out_fd_ = -1, err_fd_ = -1;
  std::string out_, err_;
  size_t out_seen_ = 0, err_seen_ = 0;
  int status_ = -1;
};

// Runs argv to completion: {status, stdout, stderr}.
struct RunResult {
  int status;
  std::string out, err;
};
RunResult run(const std::vector<std::string>& argv, int timeout_ms = 300000, const std::string& cgroup = "");

// Folded file -> frame list (root first) -> value.
using Folded = std::map<std::vector<std::string>, double>;
Folded read_folded(const std::string& path);
// Sum of the lines whose innermost frames are `caller;allocator`.
double site_value(const Folded& folded, const std::string& caller, const std::string& allocator);

// Each alloc_sites site's totals in a recording: its stacks whose leaf is
// the site's allocator (as the spec names it) called by the site.
std::map<std::string, StackTotals> site_totals(const Recording& r);
// Any program's: the totals of the stacks by their two innermost frames,
// "caller;allocator".
std::map<std::string, StackTotals> leaf_totals(const Recording& r);

// Exact truth and the sampling standard deviation of one site's estimate.
struct Truth {
  double objects, bytes;            // allocated during the run
  double live_objects, live_bytes;  // still allocated at exit
};
Truth site_truth(const site_spec& site, int threads, int scale_pct);
// Standard deviation of a Horvitz-Thompson estimate of `count` allocations
// of `size` bytes at rate R (bytes or objects).
double ht_sigma(double count, double size, double rate, bool bytes);
// How many of those standard deviations a sampled estimate may be off before
// a test calls it wrong. The estimates checked rest on 15 to 200 samples,
// where the tail is Poisson's, not the normal's: beyond 6 sigma has
// probability below 1.8e-7 a check (at 5 sigma it was up to 7.3e-6), and a
// CI run makes about 300 such checks, kernel matrix included: under 6e-5 a
// run. A bias of a few percent still fails it at these sample counts.
inline constexpr double kMaxZ = 6;
// The confidence of report --leaks and --diff in tests: a verdict or an
// interval wrong by chance with probability 1e-5 (the default 95 % erred
// one run in twenty).
inline constexpr const char* kVerdictConfidence = "0.99999";
// Samples a recording says it lost (the sum of its summary's "drops:"
// figures), and whether it says process events were lost.
struct Losses {
  uint64_t samples = 0;
  bool process_events = false;
  bool any() const { return samples > 0 || process_events; }
};
// What a recording counted as lost (its counters, which its summary tells):
// samples dropped for a full ring buffer or table, or whose stack never
// came; process events lost.
Losses reported_losses(const Recording& r);
// A recording's counter by name (its JSON's "counters"); 0 when absent.
uint64_t counter_of(const Recording& r, const std::string& name);
// A pprof file, decoded (a failure is a test failure, and an empty Recording).
Recording read_pprof(const std::string& path);
// The estimate of alloc_space summed over every workload site (`bytes` of
// each, by site function) against the truth of `threads` threads at
// `scale_pct`: how many standard deviations it is off at `rate`.
double sites_z(const std::map<std::string, double>& bytes, int threads, int scale_pct, double rate,
               const std::string& what);

std::string temp_path(const std::string& name);
// A file's text, whole ("" when it cannot be read).
std::string read_file(const std::string& path);
// A loopback port nobody listens on now (the kernel's choice).
int free_port();

// A series' value in Prometheus text (the agent's /metrics), -1 when absent.
double metric(const std::string& text, const std::string& series);

// The process's resident memory (VmRSS, or another field of its status:
// RssAnon, its own memory without the files and BPF maps it maps), KiB; 0
// when gone.
uint64_t rss_kib(pid_t pid, const std::string& field = "VmRSS");
// The one child of `pid` (a command run by unshare --fork), or 0.
pid_t only_child(pid_t pid);
// Under ASan (the sanitizer build) resident memory holds shadow memory and
// the allocator's quarantine: memory bounds are the normal build's to check.
#ifdef ALLOCSCOPE_SANITIZED
inline constexpr bool kSanitized = true;
#else
inline constexpr bool kSanitized = false;
#endif

// Address of the entry of allocator `fn` in process `pid`'s C library, and
// the byte the library file has there (what the code holds without a probe).
struct ProbeSite {
  uint64_t addr;
  uint8_t file_byte;
};
std::vector<ProbeSite> allocator_entries(pid_t pid);
uint8_t read_code_byte(pid_t pid, uint64_t addr);

// The packages of the one Debian sid root the tests make (sid_root.sh), the
// runtimes the newest distributions ship: one list, so that a fresh machine
// makes one root (40 s each here), whichever tests it runs.
inline const std::vector<std::string> kSidPackages = {"python3.14", "python3.15", "libpython3.14",
                                                      "libpython3.15", "openjdk-25-jre-headless"};

}  // namespace allocscope::test
