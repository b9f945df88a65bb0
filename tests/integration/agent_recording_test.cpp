// What the agent records over time: --duty's windows without probes, and
// process churn while it is scraped, its tables and memory bounded.
#include <gtest/gtest.h>
#include <httplib.h>
#include <signal.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <future>
#include <string>
#include <thread>
#include <vector>

#include "agent_harness.h"
#include "harness.h"

namespace allocscope::test {
namespace {

// The value of one of the recording's counters in /metrics.
double recording_counter(httplib::Client& c, const std::string& name) {
  auto res = c.Get("/metrics");
  if (!res || res->status != 200) return -1;
  std::string key = "allocscope_recording_events_total{name=\"" + name + "\"} ";
  size_t at = res->body.find(key);
  return at == std::string::npos ? -1 : std::stod(res->body.substr(at + key.size()));
}

double ns_per_pair(const std::string& bench_out) {
  size_t at = bench_out.find("ns_per_pair ");
  return at == std::string::npos ? -1 : std::stod(bench_out.substr(at + 12));
}

// --duty: between windows no probe is left (an allocation costs what it
// costs untraced, not a trap), in a window every call is probed again, and
// /metrics says which it is.
TEST(Agent, DutyCycleRemovesTheProbesBetweenWindows) {
  REQUIRE_BPF();
  Agent agent({"--comm", "^malloc_bench$", "--duty", "3s/6s"});
  ASSERT_TRUE(agent.ready()) << agent.child.err();
  httplib::Client client("127.0.0.1", agent.port);
  auto wait_for = [&](double paused) {
    for (int i = 0; i < 200; ++i) {
      if (recording_counter(client, "duty_probes_paused") == paused) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    return false;
  };
  std::vector<std::string> bench{MALLOC_BENCH_BIN, "--threads", "1", "--pairs", "300000", "--size", "64"};
  ASSERT_TRUE(wait_for(1));
  RunResult paused = run(bench);
  ASSERT_TRUE(wait_for(0));
  RunResult attached = run(bench);
  ASSERT_EQ(paused.status, 0);
  ASSERT_EQ(attached.status, 0);
  std::printf("  paused %.0f ns a pair, attached %.0f ns a pair\n", ns_per_pair(paused.out),
              ns_per_pair(attached.out));
  EXPECT_LT(ns_per_pair(paused.out), 500) << "a probe was left between windows";
  EXPECT_GT(ns_per_pair(attached.out), 500) << "the window did not probe again";
  EXPECT_GE(recording_counter(client, "duty_windows"), 2);
  EXPECT_EQ(recording_counter(client, "duty_probes_lost"), 0);
  agent.child.signal(SIGTERM);
  EXPECT_EQ(agent.child.wait(), 0) << agent.child.err();
}

// /metrics once the agent has caught up with a finished workload: every run
// seen, and the program's total the same in two answers further apart than
// the window in which answers are shared (a second; the agent reads the
// kernel's events a fraction of a second behind). At most 30 s.
httplib::Result settled_metrics(httplib::Client& client, const std::string& series, int runs) {
  double last = -1;
  for (int i = 0;; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1200));
    auto res = client.Get("/metrics");
    if (!res || res->status != 200 || i == 25) return res;
    double total = metric(res->body, series);
    if (metric(res->body, "allocscope_recording_events_total{name=\"processes\"}") >= runs && total == last)
      return res;
    last = total;
  }
}

// Process churn while the agent is scraped every second: the stacks of
// ended processes are forgotten (the table never fills) with their process
// ids and mappings, the program's allocated counter never goes down and ends
// at the truth of every run (sampled: within the suite's bound; exact: to
// the byte), and the agent's memory stays bounded.
void churn_soak(bool exact, int seconds, int max_stacks) {
  constexpr uint64_t kRssBoundKib =
      256 * 1024;  // measured: 150-190 MiB at its peak, before ended processes are forgotten
  // What one run allocates besides its sites (stdio's buffer, main's array
  // of kept blocks, thread set-up): deterministic, taken from an exact
  // recording of one run.
  std::string one_run = temp_path("one-run.folded");
  RunResult one = run({ALLOCSCOPE_BIN, "record", "--rate", "1", "-q", "-o", one_run, "--", WORKLOAD_BIN,
                       "--threads", "1", "--scale-pct", "1"});
  ASSERT_EQ(one.status, 0) << one.err;
  double other_bytes = 0;
  for (const auto& [frames, value] : read_folded(one_run))
    if (std::none_of(frames.begin(), frames.end(),
                     [](const std::string& f) { return f.starts_with("site_"); }))
      other_bytes += value;
  // And the blocks one run leaves unfreed at its exit (deterministic too):
  // the exact agent's kernel entries to sweep.
  one = run({ALLOCSCOPE_BIN, "record", "--rate", "1", "-q", "--metric", "inuse_objects", "-o", one_run, "--",
             WORKLOAD_BIN, "--threads", "1", "--scale-pct", "1"});
  ASSERT_EQ(one.status, 0) << one.err;
  double left_per_run = 0;
  for (const auto& [frames, value] : read_folded(one_run)) left_per_run += value;
  std::remove(one_run.c_str());
  // A run makes about 9 stacks: ended processes are forgotten once
  // max_stacks / 18 have run.
  std::vector<std::string> args = {"--comm", "^alloc_sites$", "--max-stacks", std::to_string(max_stacks)};
  if (exact) args.insert(args.end(), {"--rate", "1"});
  Agent agent(args);
  ASSERT_TRUE(agent.ready()) << agent.child.err();
  std::string script = "n=0; end=$(($(date +%s) + " + std::to_string(seconds) +
                       ")); while [ $(date +%s) -lt $end ]; do " + WORKLOAD_BIN +
                       " --threads 1 --scale-pct 1 >/dev/null || exit 1; n=$((n+1)); done; echo runs $n";
  auto churn = std::async(std::launch::async, [&] { return run({"/bin/sh", "-c", script}); });
  httplib::Client client("127.0.0.1", agent.port);
  const std::string program = "allocscope_program_allocated_bytes_total{comm=\"alloc_sites\"}";
  double last = 0;
  uint64_t max_rss = 0;
  int scrapes = 0;
  while (churn.wait_for(std::chrono::seconds(1)) != std::future_status::ready) {
    auto res = client.Get("/metrics");
    auto profile = client.Get("/comm/alloc_sites/debug/pprof/allocs");
    ASSERT_TRUE(res && res->status == 200) << (res ? res->body : httplib::to_string(res.error()));
    ASSERT_TRUE(profile && profile->status == 200)
        << (profile ? std::to_string(profile->status) + " " + profile->body
                    : httplib::to_string(profile.error()));
    double now = metric(res->body, program);
    EXPECT_GE(now, last) << "the program's allocated counter went down";
    last = std::max(last, now);
    max_rss = std::max(max_rss, rss_kib(agent.child.pid()));
    ++scrapes;
  }
  RunResult r = churn.get();
  ASSERT_EQ(r.status, 0) << r.err;
  int runs = std::atoi(r.out.c_str() + r.out.find("runs ") + 5);
  auto res = settled_metrics(client, program, runs);
  ASSERT_TRUE(res && res->status == 200);
  double total = metric(res->body, program);
  double truth = runs * other_bytes, var = 0;
  for (const site_spec& s : kSites) {
    Truth t = site_truth(s, 1, 1);
    truth += runs * t.bytes;
    double sd = ht_sigma(runs * t.objects, double(s.size), kRate, true);
    var += sd * sd;
  }
  double forgotten =
      metric(res->body, "allocscope_recording_events_total{name=\"agent_processes_forgotten\"}");
  double table_full =
      metric(res->body, "allocscope_recording_events_total{name=\"dropped_stack_table_full\"}");
  std::printf("  %d runs, %d scrapes, %.0f processes forgotten, agent RSS at most %llu MiB, z %.2f\n", runs,
              scrapes, forgotten, static_cast<unsigned long long>(max_rss / 1024),
              (total - truth) / std::sqrt(var));
  // Samples lost to a full ring buffer (a starved reader on a loaded
  // machine) are counted: each weighed at most the rate or its size.
  double lost = metric(res->body, "allocscope_recording_events_total{name=\"dropped_ringbuf\"}") * kRate +
                metric(res->body, "allocscope_recording_events_total{name=\"dropped_ringbuf_bytes\"}");
  std::printf("  lost to the ring buffer: at most %.0f bytes\n", lost);
  auto table = [&](const char* name) {
    return metric(res->body, std::string("allocscope_agent_table_entries{table=\"") + name + "\"}");
  };
  std::printf(
      "  tables at the end: %.0f stacks, %.0f process ids, %.0f resolved mappings, %.0f binaries open\n",
      table("stacks"), table("process_ids"), table("resolved_mappings"), table("open_binaries"));
  EXPECT_GT(forgotten, 0) << "the table never reached half full: churn too slow for this test";
  EXPECT_EQ(table_full, 0);
  if (exact) {
    EXPECT_EQ(total, truth) << "every run's bytes, those of forgotten processes included";
    // Every block the runs left went from the kernel's live map, no other:
    // the sweep (10 s after the one before, at most) comes after the last run's end.
    const std::string swept_metric = "allocscope_recording_events_total{name=\"exact_live_swept\"}";
    double swept = 0;
    for (int i = 0; i < 150 && swept < runs * left_per_run; ++i) {
      if (i) std::this_thread::sleep_for(std::chrono::milliseconds(100));
      auto now = client.Get("/metrics");
      ASSERT_TRUE(now && now->status == 200);
      swept = metric(now->body, swept_metric);
    }
    EXPECT_EQ(swept, runs * left_per_run) << left_per_run << " blocks a run";
  } else {
    EXPECT_LT((total - truth) / std::sqrt(var), kMaxZ) << total << " vs " << truth;
    EXPECT_LT((truth - total - lost) / std::sqrt(var), kMaxZ) << total << " vs " << truth;
  }
  if (!kSanitized) {
    EXPECT_LT(max_rss, kRssBoundKib);
  }
  // Forgotten processes give back their ids and mappings (each run maps its
  // program and libc at addresses of its own): kept, both would pass `runs`.
  EXPECT_LT(table("process_ids"), runs);
  EXPECT_LT(table("resolved_mappings"), runs);
  agent.child.signal(SIGTERM);
  EXPECT_EQ(agent.child.wait(), 0) << agent.child.err();
}

TEST(Agent, ChurnSoakForgetsEndedProcessesAndStaysBounded) {
  REQUIRE_BPF();
  churn_soak(false, 45, 4096);  // forgetting from about the 230th run (a slow machine runs 400)
}

// Exact mode forgets too: an ended process's totals were read from the
// kernel when it ended, and live on in its program's counters.
TEST(Agent, ExactModeForgetsEndedProcessesToo) {
  REQUIRE_BPF();
  churn_soak(true, 20, 1024);  // forgetting from about the 60th run
}

}  // namespace
}  // namespace allocscope::test
