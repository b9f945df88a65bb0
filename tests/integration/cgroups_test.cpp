// Units and containers that live for milliseconds: 250 cgroups, each made,
// run by one process that allocates for about 30 ms, and removed at once by
// the test, while allocscope records the whole machine. Each sample is
// named by the cgroup it was taken in (the kernel's id, its path learnt when
// the cgroup was made), so every one of them is there, with its own bytes,
// under record --all --unit and the agent's ?cgroup= and ?unit=. Real BPF.
#include <gtest/gtest.h>
#include <httplib.h>
#include <signal.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <thread>

#include "harness.h"
#include "host/process.h"
#include "output/pprof.h"

namespace allocscope::test {
namespace {

constexpr int kJobs = 250;
constexpr double kRate = 16 * 1024;

// What one run of the workload allocates at its sites (threads 1, scale 1 %).
double site_bytes_of_one_run() {
  double bytes = 0;
  for (const site_spec& s : kSites) bytes += site_truth(s, 1, 1).bytes;
  return bytes;
}

// The sampling standard deviation of one run's site bytes at kRate.
double site_sigma_of_one_run() {
  double var = 0;
  for (const site_spec& s : kSites) {
    Truth t = site_truth(s, 1, 1);
    double sd = ht_sigma(t.objects, double(s.size), kRate, true);
    var += sd * sd;
  }
  return std::sqrt(var);
}

struct Job {
  std::string path;  // below the hierarchy's root: /allocscope-transient-PID.slice/job-N.service
  pid_t pid = 0;
};

// Runs the workload once in a cgroup of its own, made for it and removed as
// soon as it has exited.
Job run_in_new_cgroup(const std::string& root, const std::string& slice, int n) {
  Job job{slice + "/job-" + std::to_string(n) + ".service", 0};
  std::string dir = root + job.path;
  if (!std::filesystem::create_directory(dir)) return job;
  // Joins before its exec (nothing allocated between fork and exec).
  Child workload({WORKLOAD_BIN, "--threads", "1", "--scale-pct", "1"}, dir);
  if (workload.wait() == 0) job.pid = workload.pid();
  std::filesystem::remove(dir);
  return job;
}

// The workload's site bytes in each process of a JSON recording.
std::map<uint32_t, double> site_bytes_by_pid(const std::string& path) {
  std::map<uint32_t, double> out;
  std::ifstream in(path);
  auto json = nlohmann::json::parse(in, nullptr, false);
  if (!json.is_object()) return out;
  for (const auto& s : json["stacks"]) {
    std::vector<std::string> frames = s["frames"];
    if (std::any_of(frames.begin(), frames.end(),
                    [](const std::string& f) { return f.starts_with("site_"); }))
      out[s["pid"].get<uint32_t>()] += s["alloc_space"]["estimate"].get<double>();
  }
  return out;
}

// The workload's site bytes in a pprof profile.
double site_bytes(const Recording& r) {
  double bytes = 0;
  for (const RecSample& s : r.samples)
    for (uint32_t loc : s.locations) {
      const RecLocation& l = r.locations[loc];
      if (!l.lines.empty() && r.functions[l.lines.back().function].name.starts_with("site_")) {
        bytes += s.totals.alloc_bytes;
        break;
      }
    }
  return bytes;
}

// " site_large 1048576 (1 samples) ...": a profile's site bytes, site by site.
std::string bytes_by_site(const Recording& r) {
  std::map<std::string, std::pair<double, uint64_t>> sites;
  for (const RecSample& s : r.samples)
    for (uint32_t loc : s.locations) {
      const RecLocation& l = r.locations[loc];
      if (l.lines.empty()) continue;
      const std::string& name = r.functions[l.lines.back().function].name;
      if (!name.starts_with("site_")) continue;
      sites[name].first += s.totals.alloc_bytes;
      sites[name].second += s.totals.samples;
      break;
    }
  std::string out;
  for (const auto& [name, v] : sites)
    out +=
        " " + name + " " + std::to_string(uint64_t(v.first)) + " (" + std::to_string(v.second) + " samples)";
  for (const RecSample& s : r.samples) {  // the last sites' stacks, whole
    std::vector<std::string> names = frame_names(r, s);
    bool last = std::any_of(names.begin(), names.end(), [](const std::string& n) {
      return n == "site_large" || n == "site_aligned_alloc";
    });
    if (!last) continue;
    out += "\n  pid " + std::to_string(s.pid) + " samples " + std::to_string(s.totals.samples) + " bytes " +
           std::to_string(uint64_t(s.totals.alloc_bytes)) + ":";
    for (const std::string& n : names) out += " " + n;
  }
  return out;
}

// Allocated bytes per stack (its functions, leaf first) and what it held
// in use, in a pprof profile: what an ended process's fold must keep.
std::map<std::string, std::pair<double, double>> by_stack(const Recording& r) {
  std::map<std::string, std::pair<double, double>> out;
  for (const RecSample& s : r.samples) {
    std::string key;
    for (uint32_t loc : s.locations)
      for (const RecLine& line : r.locations[loc].lines) key += r.functions[line.function].name + ";";
    out[key].first += s.totals.alloc_bytes;
    out[key].second += s.totals.live_bytes;
  }
  return out;
}

// Profiles that a fold changed: by more than rounding, or by a stack.
int changed(const std::map<std::string, std::pair<double, double>>& before,
            const std::map<std::string, std::pair<double, double>>& after) {
  if (before.size() != after.size()) return 1;
  for (const auto& [key, v] : before) {
    auto it = after.find(key);
    if (it == after.end() || std::fabs(it->second.first - v.first) > 1e-9 * v.first + 1e-6 ||
        std::fabs(it->second.second - v.second) > 1e-9 * std::fabs(v.second) + 1e-6)
      return 1;
  }
  return 0;
}

// A process's stacks in a JSON recording, "frames;... estimate" per line:
// what an off job's failure shows.
std::string stacks_of_pid(const std::string& path, uint32_t pid) {
  std::ifstream in(path);
  auto json = nlohmann::json::parse(in, nullptr, false);
  std::string text;
  if (!json.is_object()) return text;
  for (const auto& s : json["stacks"]) {
    if (s["pid"].get<uint32_t>() != pid) continue;
    for (const auto& f : s["frames"]) text += f.get<std::string>() + ";";
    text += " " + std::to_string(s["alloc_space"]["estimate"].get<double>()) + "\n";
  }
  return text;
}

std::optional<Recording> fetch_profile(httplib::Client& client, const std::string& path) {
  auto res = client.Get(path);
  if (!res || res->status != 200) return std::nullopt;
  auto r = decode_pprof(res->body);
  if (!r) return std::nullopt;
  return std::move(*r);
}

class TransientCgroups : public ::testing::Test {
 protected:
  void SetUp() override {
    auto mountinfo = read_text_file("/proc/self/mountinfo");
    root_ = mountinfo ? cgroup2_mount(*mountinfo) : "";
    ASSERT_FALSE(root_.empty()) << "no cgroup v2 hierarchy";
    slice_ = "/allocscope-transient-" + std::to_string(getpid()) + ".slice";
    ASSERT_TRUE(std::filesystem::create_directory(root_ + slice_));
  }
  void TearDown() override {
    if (!root_.empty()) std::filesystem::remove(root_ + slice_);
  }
  // Two at a time, as a busy host starts them (and in half the time).
  std::vector<Job> run_jobs() {
    std::vector<Job> jobs(kJobs);
    auto every_other = [&](int first) {
      for (int n = first; n < kJobs; n += 2) jobs[n] = run_in_new_cgroup(root_, slice_, n);
    };
    std::thread odd(every_other, 1);
    every_other(0);
    odd.join();
    return jobs;
  }
  std::string root_, slice_;
};

// record --all --unit: the slice's jobs are judged by the cgroup their first
// sample was taken in, though it is gone by the time allocscope reads it.
TEST_F(TransientCgroups, EveryShortJobOfAUnitIsRecordedWithItsBytes) {
  REQUIRE_BPF();
  std::string out = temp_path("transient.json");
  std::string unit = slice_.substr(1);
  Child rec({ALLOCSCOPE_BIN, "record", "--all", "--unit", unit, "--rate", "16KiB", "-o", out});
  ASSERT_TRUE(rec.wait_for_line("recording every process", 60000, true)) << rec.err();
  std::vector<Job> jobs = run_jobs();
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  rec.signal(SIGINT);
  ASSERT_EQ(rec.wait(), 0) << rec.err();
  std::map<uint32_t, double> bytes = site_bytes_by_pid(out);
  double truth = site_bytes_of_one_run(), sd = site_sigma_of_one_run();
  int missing = 0, off = 0;
  for (const Job& j : jobs) {
    ASSERT_NE(j.pid, 0) << j.path << ": the job did not run";
    auto it = bytes.find(uint32_t(j.pid));
    if (it == bytes.end()) {
      ++missing;
      continue;
    }
    if (std::fabs(it->second - truth) / sd >= kMaxZ && ++off <= 3)
      ADD_FAILURE() << j.path << " (pid " << j.pid << "): " << it->second << " site bytes, truth " << truth
                    << ", z " << (it->second - truth) / sd << "; its stacks:\n"
                    << stacks_of_pid(out, uint32_t(j.pid));
  }
  std::printf("  %zu jobs recorded of %d, %d off by kMaxZ or more\n", bytes.size(), kJobs, off);
  EXPECT_EQ(missing, 0);
  EXPECT_EQ(off, 0) << "allocscope said:\n"
                    << rec.err().substr(rec.err().size() - std::min<size_t>(rec.err().size(), 3000));
  EXPECT_EQ(bytes.size(), jobs.size()) << "no process outside the unit";
  std::remove(out.c_str());
}

// The agent: each job's cgroup (?cgroup=) and unit (?unit=) profiles hold
// that job alone, with its bytes; the removed cgroups' paths are forgotten
// after their retention (shortened here to 15 s from a minute), and still
// every job is named (its labels were taken at its first samples). Once
// the ended jobs' own stacks are folded into their program's and cgroup's,
// every cumulative profile (each job's cgroup, the program's, the whole
// host's) is what it was before, stack by stack, with no pid left in it,
// and a ?seconds= window that spans the fold shows nothing allocated.
TEST_F(TransientCgroups, TheAgentNamesEveryShortJobsCgroupAndUnit) {
  REQUIRE_BPF();
  int port = free_port();
  constexpr int kRetentionMs = 15000;
  Child agent({ALLOCSCOPE_BIN, "agent", "--listen", "127.0.0.1:" + std::to_string(port), "--rate", "16KiB",
               "--comm", "^alloc_sites$", "--retention", std::to_string(kRetentionMs / 1000) + "s"});
  ASSERT_TRUE(agent.wait_for_line("recording: probes attached", 60000, true)) << agent.err();
  std::vector<Job> jobs = run_jobs();
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  httplib::Client client("127.0.0.1", port);
  client.set_read_timeout(60, 0);
  double truth = site_bytes_of_one_run(), sd = site_sigma_of_one_run();
  int missing = 0, off = 0, unit_off = 0;
  for (const Job& j : jobs) {
    ASSERT_NE(j.pid, 0) << j.path << ": the job did not run";
    auto res = client.Get("/debug/pprof/allocs?cgroup=" + j.path);
    ASSERT_TRUE(res) << j.path;
    if (res->status == 404) {
      ++missing;
      continue;
    }
    ASSERT_EQ(res->status, 200) << j.path << ": " << res->body;
    auto r = decode_pprof(res->body);
    ASSERT_TRUE(r) << r.error();
    if (double got = site_bytes(*r); std::fabs(got - truth) / sd >= kMaxZ && ++off <= 5)
      ADD_FAILURE() << j.path << " (pid " << j.pid << "): " << got << " site bytes, truth " << truth << ", z "
                    << (got - truth) / sd << "; by site:" << bytes_by_site(*r);
    std::string unit = j.path.substr(j.path.rfind('/') + 1);
    auto by_unit = client.Get("/debug/pprof/allocs?unit=" + unit);
    ASSERT_TRUE(by_unit && by_unit->status == 200) << unit;
    auto u = decode_pprof(by_unit->body);
    ASSERT_TRUE(u) << u.error();
    unit_off += site_bytes(*u) != site_bytes(*r);
  }
  std::printf("  %d of %d jobs' cgroups missing, %d off by kMaxZ or more\n", missing, kJobs, off);
  EXPECT_EQ(missing, 0);
  EXPECT_EQ(off, 0) << "the agent said:\n"
                    << agent.err().substr(agent.err().size() - std::min<size_t>(agent.err().size(), 4000));
  EXPECT_EQ(unit_off, 0) << "a job's unit holds what its cgroup holds";
  std::map<std::string, std::map<std::string, std::pair<double, double>>> before;
  for (const std::string path : {"/debug/pprof/allocs?comm=alloc_sites", "/debug/pprof/allocs"}) {
    auto r = fetch_profile(client, path);
    ASSERT_TRUE(r) << path;
    before[path] = by_stack(*r);
  }
  for (size_t n = 0; n < jobs.size(); n += 25) {  // ten of the jobs' own
    std::string path = "/debug/pprof/allocs?cgroup=" + jobs[n].path;
    auto r = fetch_profile(client, path);
    ASSERT_TRUE(r) << path;
    before[path] = by_stack(*r);
  }
  // A window over the fold: nothing is allocated in it.
  std::string window;
  std::thread windowed([&] {
    httplib::Client c("127.0.0.1", port);
    c.set_read_timeout(120, 0);
    auto res =
        c.Get("/debug/pprof/allocs?comm=alloc_sites&seconds=" + std::to_string(kRetentionMs / 1000 + 15));
    if (res && res->status == 200) window = res->body;
  });
  // Ended processes are looked for every 10 s: forgotten within the
  // retention and 10 s of their end.
  std::this_thread::sleep_for(std::chrono::milliseconds(kRetentionMs + 13000));
  int profiles_changed = 0, with_pids = 0;
  for (const auto& [path, stacks] : before) {
    auto r = fetch_profile(client, path);
    ASSERT_TRUE(r) << path << ": gone after the fold";
    profiles_changed += changed(stacks, by_stack(*r));
    for (const RecSample& s : r->samples) with_pids += s.pid != 0;
  }
  windowed.join();
  auto w = decode_pprof(window);
  ASSERT_TRUE(w) << "the window over the fold: " << w.error();
  double in_window = 0;
  for (const RecSample& s : w->samples) in_window += s.totals.alloc_bytes;
  std::printf("  %d of %zu profiles changed by the fold, %d samples with a pid; window: %.0f bytes\n",
              profiles_changed, before.size(), with_pids, in_window);
  EXPECT_EQ(profiles_changed, 0)
      << "a cumulative profile went down or changed when its processes were folded";
  EXPECT_EQ(with_pids, 0) << "a folded stack kept its process's pid";
  EXPECT_EQ(in_window, 0) << "a window over the fold counted what was allocated before it";
  auto metrics = client.Get("/metrics");
  ASSERT_TRUE(metrics && metrics->status == 200);
  double forgotten = metric(metrics->body, "allocscope_recording_events_total{name=\"cgroups_forgotten\"}");
  double kept = metric(metrics->body, "allocscope_agent_table_entries{table=\"cgroup_names\"}");
  // The jobs' stacks fill a twentieth of the stack table: their processes go
  // for their retention's sake, not for room.
  double processes =
      metric(metrics->body, "allocscope_recording_events_total{name=\"agent_processes_forgotten\"}");
  std::printf("  %.0f removed cgroups forgotten, %.0f paths kept, %.0f ended processes forgotten\n",
              forgotten, kept, processes);
  EXPECT_GE(forgotten, kJobs) << "every job's cgroup, removed, is forgotten after its retention";
  EXPECT_LT(kept, kJobs);
  EXPECT_GE(processes, kJobs) << "every job's process, ended, is forgotten after its retention";
  agent.signal(SIGINT);
  EXPECT_EQ(agent.wait(), 0) << agent.err();
}

}  // namespace
}  // namespace allocscope::test
