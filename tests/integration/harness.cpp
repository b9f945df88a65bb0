#include "harness.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>

#include "../unit/temp_dir.h"
#include "host/proc_maps.h"
#include "host/process.h"
#include "output/pprof.h"
#include "probe/placement/allocator_probes.h"
#include "stats/sampling.h"

namespace allocscope::test {

const char* allocscope_bin() {
  static const char* const bin = [] {
    const char* other = getenv("ALLOCSCOPE_TEST_BIN");
    return other && *other ? other : ALLOCSCOPE_BUILT_BIN;
  }();
  return bin;
}

std::string bpf_unavailable() {
  if (geteuid() != 0) return "not root";
  if (access("/sys/kernel/btf/vmlinux", R_OK) != 0) return "kernel without BTF";
  return "";
}

namespace {

uint64_t now_ms() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return uint64_t(ts.tv_sec) * 1000 + ts.tv_nsec / 1000000;
}

// In a forked child: joins the cgroup whose cgroup.procs is `procs`, or
// says why not and ends (only async-signal-safe calls here).
void join_cgroup(const char* procs) {
  int fd = open(procs, O_WRONLY | O_CLOEXEC);
  if (fd >= 0 && write(fd, "0", 1) == 1 && close(fd) == 0) return;
  const char why[] = "harness: could not join the cgroup\n";
  (void)!write(2, why, sizeof why - 1);
  _exit(126);
}

}  // namespace

Child::Child(const std::vector<std::string>& argv, const std::string& cgroup) {
  int out[2], err[2];
  if (pipe2(out, O_CLOEXEC) != 0 || pipe2(err, O_CLOEXEC) != 0) abort();
  // Made before the fork: the child allocates nothing in a cgroup it joined
  // (a sample there would be walked through the test binary's code, gone at
  // the exec that follows before its table is built, and cut short).
  std::string procs = cgroup.empty() ? "" : cgroup + "/cgroup.procs";
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t parent = getpid();
  pid_ = fork();
  if (pid_ == 0) {
    // Ends with the test binary, even one killed (a timeout, Ctrl-C): no
    // orphaned recorder keeps its probes, or a workload waits for ever.
    if (prctl(PR_SET_PDEATHSIG, SIGTERM) != 0 || getppid() != parent) _exit(127);
    dup2(out[1], 1);
    dup2(err[1], 2);
    if (!procs.empty()) join_cgroup(procs.c_str());
    execvp(args[0], args.data());
    _exit(127);
  }
  close(out[1]);
  close(err[1]);
  out_fd_ = out[0];
  err_fd_ = err[0];
}

Child::~Child() {
  if (status_ < 0 && pid_ > 0) {
    kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
  }
  close(out_fd_);
  close(err_fd_);
}

bool Child::pump(int timeout_ms) {
  pollfd fds[2] = {{out_fd_, POLLIN, 0}, {err_fd_, POLLIN, 0}};
  if (poll(fds, 2, timeout_ms) <= 0) return false;
  bool got = false;
  char buf[4096];
  for (int i = 0; i < 2; ++i) {
    if (!(fds[i].revents & (POLLIN | POLLHUP))) continue;
    ssize_t n = read(fds[i].fd, buf, sizeof buf);
    if (n > 0) {
      (i == 0 ? out_ : err_).append(buf, size_t(n));
      got = true;
    }
  }
  return got;
}

bool Child::wait_for_line(const std::string& text, int timeout_ms, bool from_stderr) {
  uint64_t deadline = now_ms() + timeout_ms;
  size_t& seen = from_stderr ? err_seen_ : out_seen_;
  for (;;) {
    const std::string& buf = from_stderr ? err_ : out_;
    size_t at = buf.find(text, seen);
    if (at != std::string::npos) {
      size_t nl = buf.find('\n', at);
      seen = nl == std::string::npos ? buf.size() : nl + 1;
      return true;
    }
    uint64_t now = now_ms();
    if (now >= deadline) return false;
    if (!pump(int(deadline - now)) && status_ < 0) {
      int st;
      if (waitpid(pid_, &st, WNOHANG) == pid_) {  // exited: take what is left
        while (pump(0)) {
        }
        status_ = WIFSIGNALED(st) ? 128 + WTERMSIG(st) : WEXITSTATUS(st);
        const std::string& rest = from_stderr ? err_ : out_;
        return rest.find(text, seen) != std::string::npos;
      }
    }
  }
}

void Child::signal(int sig) { kill(pid_, sig); }

int Child::wait(int timeout_ms) {
  if (status_ >= 0) return status_;
  uint64_t deadline = now_ms() + timeout_ms;
  for (;;) {
    int st;
    if (waitpid(pid_, &st, WNOHANG) == pid_) {
      while (pump(0)) {
      }
      status_ = WIFSIGNALED(st) ? 128 + WTERMSIG(st) : WEXITSTATUS(st);
      return status_;
    }
    if (now_ms() >= deadline) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
      status_ = 137;
      return status_;
    }
    pump(50);
  }
}

RunResult run(const std::vector<std::string>& argv, int timeout_ms, const std::string& cgroup) {
  Child c(argv, cgroup);
  int status = c.wait(timeout_ms);
  return {status, c.out(), c.err()};
}

Folded read_folded(const std::string& path) {
  Folded folded;
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) {
    size_t space = line.rfind(' ');
    if (space == std::string::npos) continue;
    std::vector<std::string> frames;
    std::stringstream stack(line.substr(0, space));
    for (std::string f; std::getline(stack, f, ';');) frames.push_back(f);
    folded[frames] += std::stod(line.substr(space + 1));
  }
  return folded;
}

double site_value(const Folded& folded, const std::string& caller, const std::string& allocator) {
  double sum = 0;
  for (const auto& [frames, value] : folded) {
    size_t n = frames.size();
    if (n >= 2 && frames[n - 1] == allocator && frames[n - 2] == caller) sum += value;
  }
  return sum;
}

std::map<std::string, StackTotals> site_totals(const Recording& r) {
  std::map<std::string, StackTotals> sites;
  for (const RecSample& s : r.samples) {
    std::vector<std::string> names = frame_names(r, s);
    for (const site_spec& site : kSites)
      if (names.size() >= 2 && names[names.size() - 2] == site.function && names.back() == site.allocator)
        sites[site.function].merge(s.totals);
  }
  return sites;
}

std::map<std::string, StackTotals> leaf_totals(const Recording& r) {
  std::map<std::string, StackTotals> leaves;
  for (const RecSample& s : r.samples)
    if (std::vector<std::string> names = frame_names(r, s); names.size() >= 2)
      leaves[names[names.size() - 2] + ";" + names.back()].merge(s.totals);
  return leaves;
}

Truth site_truth(const site_spec& site, int threads, int scale_pct) {
  double count = double(site_count(&site, scale_pct)) * threads;
  double kept = double(site_kept(&site, site_count(&site, scale_pct))) * threads;
  double size = double(site.size);
  return {count, count * size, kept, kept * size};
}

double ht_sigma(double count, double size, double rate, bool bytes) {
  double p = sample_probability(uint64_t(size), uint64_t(rate));
  double per = (bytes ? size * size : 1.0) * (1 - p) / p;
  return std::sqrt(count * per);
}

uint64_t counter_of(const Recording& r, const std::string& name) {
  for (const auto& [n, value] : r.counters)
    if (n == name) return value;
  return 0;
}

Losses reported_losses(const Recording& r) {
  Losses l;
  bool counted = std::any_of(r.counters.begin(), r.counters.end(),
                             [](const auto& c) { return c.first == "dropped_ringbuf"; });
  EXPECT_TRUE(counted) << "a recording without its loss counters";
  for (const char* drop :
       {"dropped_ringbuf", "dropped_live_map_full", "dropped_stack_lost", "dropped_stack_table_full"})
    l.samples += counter_of(r, drop);
  l.process_events = counter_of(r, "dropped_process_events") > 0;
  return l;
}

Recording read_pprof(const std::string& path) {
  auto rec = decode_pprof(read_text_file(path).value_or(""));
  EXPECT_TRUE(rec) << path << ": " << (rec ? "" : rec.error().message);
  return rec ? *rec : Recording{};
}

double sites_z(const std::map<std::string, double>& bytes, int threads, int scale_pct, double rate,
               const std::string& what) {
  double estimate = 0, truth = 0, variance = 0;
  for (const site_spec& s : kSites) {
    Truth t = site_truth(s, threads, scale_pct);
    auto it = bytes.find(s.function);
    estimate += it == bytes.end() ? 0 : it->second;
    truth += t.bytes;
    double sigma = ht_sigma(t.objects, double(s.size), rate, true);
    variance += sigma * sigma;
  }
  double z = (estimate - truth) / std::sqrt(variance);
  std::printf("  %-40s alloc_space estimate %.0f, truth %.0f, z %+.2f\n", what.c_str(), estimate, truth, z);
  return z;
}

// The run's own directory under /tmp, made by mkdtemp: no name another user
// could have made first (a symlink we would write through as root). 0755 so
// a workload that drops privileges can still read what it is given.
std::string read_file(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

std::string temp_path(const std::string& name) {
  static const TempDir dir("allocscope-test", 0755);
  return (dir.path / name).string();
}

int free_port() {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a);
  getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  close(fd);
  return ntohs(a.sin_port);
}

uint64_t rss_kib(pid_t pid, const std::string& field) {
  auto status = read_text_file("/proc/" + std::to_string(pid) + "/status");
  if (!status) return 0;
  size_t at = status->find("\n" + field + ":");
  return at == std::string::npos ? 0 : std::strtoull(status->c_str() + at + field.size() + 2, nullptr, 10);
}

pid_t only_child(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/task/" + std::to_string(pid) + "/children");
  pid_t child = 0, more = 0;
  return in >> child && !(in >> more) ? child : 0;
}

std::vector<ProbeSite> allocator_entries(pid_t pid) {
  std::vector<ProbeSite> sites;
  auto maps = read_maps(pid);
  if (!maps) return sites;
  const Mapping* libc = find_c_library(*maps);
  if (!libc) return sites;
  std::string path = mapped_file_path(pid, *libc);
  auto targets = find_allocator_probes(path);
  if (!targets) return sites;
  std::ifstream file(path, std::ios::binary);
  for (const ProbeTarget& t : *targets) {
    for (const Mapping& m : *maps) {
      if (m.executable && m.inode == libc->inode && t.offset >= m.offset &&
          t.offset < m.offset + (m.end - m.start)) {
        char byte = 0;
        file.seekg(std::streamoff(t.offset));
        file.read(&byte, 1);
        sites.push_back({m.start + t.offset - m.offset, uint8_t(byte)});
      }
    }
  }
  return sites;
}

double metric(const std::string& text, const std::string& series) {
  size_t at = text.find("\n" + series + " ");
  return at == std::string::npos ? -1 : std::stod(text.substr(at + series.size() + 2));
}

uint8_t read_code_byte(pid_t pid, uint64_t addr) {
  int fd = open(("/proc/" + std::to_string(pid) + "/mem").c_str(), O_RDONLY | O_CLOEXEC);
  uint8_t byte = 0;
  if (fd >= 0) {
    if (pread(fd, &byte, 1, off_t(addr)) != 1) byte = 0;
    close(fd);
  }
  return byte;
}

}  // namespace allocscope::test
