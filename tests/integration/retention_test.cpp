// What the agent keeps of a process that ended: after the retention its
// stacks and its pid are forgotten, while its program stays known.
#include <gtest/gtest.h>
#include <httplib.h>
#include <signal.h>

#include <chrono>
#include <cstdio>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "harness.h"
#include "output/pprof.h"

namespace allocscope::test {
namespace {

const std::string kProgram = "allocscope_program_allocated_bytes_total{comm=\"alloc_sites\"}";
const std::string kForgotten = "allocscope_recording_events_total{name=\"agent_processes_forgotten\"}";

// /metrics polled every half second until `done` holds of it, or `seconds`.
std::string metrics_when(httplib::Client& client, int seconds,
                         const std::function<bool(const std::string&)>& done) {
  for (int i = 0; i < 2 * seconds; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
    auto res = client.Get("/metrics");
    if (res && res->status == 200 && done(res->body)) return res->body;
  }
  return "";
}

// One run of a program, ended and forgotten (--retention 10s, the least).
// Its program's profiles are empty answers, not "no such target": a program
// that runs now and then must not come and go between its runs (a scraper
// would log errors, and a dashboard lose the series). Its allocated counter
// keeps the run's bytes exactly (exact mode); its pid is unknown again.
TEST(Retention, AForgottenProgramStaysKnownButItsPidDoesNot) {
  REQUIRE_BPF();
  // A run allocates the same bytes every time: those of an exact recording
  // (made before the agent starts, which would record it too). Only the
  // program's own: under ASan the launcher's child allocates before its
  // exec, as allocscope, which the agent's run has no part of.
  std::string folded = temp_path("retention-run.folded");
  RunResult truth = run({ALLOCSCOPE_BIN, "record", "--rate", "1", "-q", "-o", folded, "--", WORKLOAD_BIN,
                         "--threads", "1", "--scale-pct", "1"});
  ASSERT_EQ(truth.status, 0) << truth.err;
  double bytes = 0;
  for (const auto& [frames, value] : read_folded(folded))
    if (!frames.empty() && frames.front().starts_with("alloc_sites (")) bytes += value;
  std::remove(folded.c_str());
  int port = free_port();
  Child agent({ALLOCSCOPE_BIN, "agent", "--listen", "127.0.0.1:" + std::to_string(port), "--rate", "1",
               "--retention", "10s", "--comm", "^alloc_sites$"});
  ASSERT_TRUE(agent.wait_for_line("recording: probes attached", 60000, true)) << agent.err();
  Child workload({WORKLOAD_BIN, "--threads", "1", "--scale-pct", "1"});
  const std::string pid = std::to_string(workload.pid());
  ASSERT_EQ(workload.wait(), 0) << workload.err();

  httplib::Client client("127.0.0.1", port);
  client.set_read_timeout(60, 0);
  // Forgotten at the agent's first 10-s tick 10 s after its end: within 21 s.
  std::string body =
      metrics_when(client, 40, [](const std::string& b) { return metric(b, kForgotten) >= 1; });
  ASSERT_FALSE(body.empty()) << "the ended run was never forgotten";
  // What never reached the agent is counted, machine-wide: allocations whose
  // stack was lost to a full ring buffer (a reader starved on a loaded
  // machine, or under ASan) or refused by a full table.
  double lost = 0;
  for (const char* name : {"dropped_ringbuf_bytes", "dropped_stack_lost_bytes",
                           "dropped_stack_table_full_bytes", "dropped_exact_full_bytes"})
    lost += metric(body, std::string("allocscope_recording_events_total{name=\"") + name + "\"}");
  const double counted = metric(body, kProgram);
  std::printf("  run: %.0f bytes; the program's counter: %.0f; counted as lost: %.0f\n", bytes, counted,
              lost);
  EXPECT_LE(counted, bytes) << "the program's counter holds more than the run allocated";
  EXPECT_GE(counted + lost, bytes) << "the program's counter lost the forgotten run's bytes, uncounted";

  for (const std::string path : {"/comm/alloc_sites/debug/pprof/allocs", "/comm/alloc_sites/debug/pprof/heap",
                                 "/debug/pprof/allocs?comm=alloc_sites&seconds=1"}) {
    auto res = client.Get(path);
    ASSERT_TRUE(res) << path << ": " << httplib::to_string(res.error());
    EXPECT_EQ(res->status, 200) << path << ": " << res->body;
    if (res->status != 200) continue;
    auto r = decode_pprof(res->body);
    ASSERT_TRUE(r) << path << ": " << r.error();
    for (const RecSample& s : r->samples)
      EXPECT_NE(std::to_string(s.pid), pid) << path << ": a forgotten stack";
  }
  auto svg = client.Get("/comm/alloc_sites/flamegraph");
  EXPECT_TRUE(svg && svg->status == 200) << (svg ? svg->body : "no answer");
  for (const std::string& path : std::vector<std::string>{"/debug/pprof/allocs?pid=" + pid,
                                                          "/comm/nothing-runs-this/debug/pprof/allocs"}) {
    auto res = client.Get(path);
    EXPECT_TRUE(res && res->status == 404)
        << path << ": " << (res ? std::to_string(res->status) : "no answer");
  }
  agent.signal(SIGTERM);
  EXPECT_EQ(agent.wait(), 0) << agent.err();
}

}  // namespace
}  // namespace allocscope::test
