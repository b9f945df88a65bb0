// What a recording keeps of a process that ended: in the agent, after the
// retention its stacks and its pid are forgotten, while its program stays
// known; a process whose exit event was lost ends all the same.
#include <gtest/gtest.h>
#include <httplib.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "harness.h"
#include "output/pprof.h"
#include "workload_spec.h"

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

// A process whose samples were read but whose exit event was lost (the
// ring buffer full) would hold its live bytes for good. Here the reader is
// stopped, as one far behind would be, while short runs fill the buffer;
// then a program that allocated and kept memory exits, its exit event with
// no room. Found gone in /proc, it ends as its exit would have ended it:
// nothing of it is in use at the end, and the recording says what it did.
// The held program and the runs' file are read and probed while the reader
// runs (dash's builtins do the rest): nothing waits for a table meanwhile.
// Both premises hold by construction (the program's samples are in the
// buffer before it stops; 150 runs, about 600 KiB of records, overflow its
// 256 KiB): 40 runs beside two CPU hogs all held them.
TEST(Retention, AProcessWhoseExitWasLostEndsWhenFoundGone) {
  REQUIRE_BPF();
  std::string go = temp_path("lost-exit.go"), json = temp_path("lost-exit.json");
  ASSERT_EQ(mkfifo(go.c_str(), 0600), 0) << go;
  std::string forker = FORKER_BIN;
  std::string script = forker + " >/dev/null; " + WORKLOAD_BIN +
                       " --threads 1 --scale-pct 1 --hold & echo pid $!; read line < " + go +
                       "; i=0; while [ $i -lt 150 ]; do " + forker +
                       " >/dev/null; i=$((i + 1)); done; echo flooded; wait";
  Child rec({ALLOCSCOPE_BIN, "record", "--rate", "16KiB", "--ringbuf-size", "256KiB", "-o", json, "--",
             "/bin/sh", "-c", script});
  ASSERT_TRUE(rec.wait_for_line("done", 60000)) << rec.out() << rec.err();
  const size_t at = rec.out().find("pid ");
  ASSERT_NE(at, std::string::npos) << rec.out();
  const pid_t held = pid_t(std::stol(rec.out().substr(at + 4)));
  rec.signal(SIGSTOP);
  std::ofstream(go) << "go\n";
  bool flooded = rec.wait_for_line("flooded", 60000);
  kill(held, SIGUSR1);
  for (int i = 0; i < 600 && kill(held, 0) == 0; ++i) usleep(50000);  // ends, and the shell reaps it
  rec.signal(SIGCONT);
  ASSERT_TRUE(flooded) << rec.out();
  ASSERT_EQ(rec.wait(), 0) << rec.err();

  std::ifstream in(json);
  auto doc = nlohmann::json::parse(in, nullptr, false);
  ASSERT_TRUE(doc.is_object());
  double allocated = 0, in_use = 0;
  for (const auto& st : doc["stacks"]) {
    if (st["pid"].get<pid_t>() != held) continue;
    allocated += st["alloc_space"]["estimate"].get<double>();
    in_use += st["inuse_space"]["estimate"].get<double>();
  }
  const unsigned long long lost = doc["counters"].value("dropped_process_events", 0ULL),
                           found_gone = doc["counters"].value("ended_processes_found_gone", 0ULL);
  std::printf(
      "  held program: %.0f bytes allocated, %.0f in use; process events lost %llu, found gone %llu\n",
      allocated, in_use, lost, found_gone);
  ASSERT_GT(lost, 0u) << "the premise: 150 runs overflow the buffer, and the exit after them finds no room";
  ASSERT_GT(allocated, 0) << "the premise: the held program's samples were read";
  EXPECT_EQ(in_use, 0) << "an ended process still holds live bytes";
  EXPECT_GE(found_gone, 1u);
  EXPECT_NE(rec.err().find("were found gone and ended"), std::string::npos) << rec.err();
  std::remove(go.c_str());
  std::remove(json.c_str());
}

// Events the ring buffer still holds when the command ends are all read,
// however late: the second run of the workload allocates while allocscope
// is stopped, and when it goes on (its deadlines long past, so the sink
// cuts each pass short) the command has ended. At --rate 2 every
// allocation of 48 bytes or more is sampled (1 - e^-24) at its own size:
// each site comes out at twice one run's truth within 0.01 % unless samples
// are lost (chance alone would need thousands of unsampled calls).
TEST(Retention, EventsLeftAtTheEndAreAllRead) {
  REQUIRE_BPF();
  std::string go = temp_path("late-events.go"), folded = temp_path("late-events.folded");
  ASSERT_EQ(mkfifo(go.c_str(), 0600), 0) << go;
  std::string run = std::string(WORKLOAD_BIN) + " --threads 1 --scale-pct 3 >/dev/null";
  std::string script = run + "; echo first; read line < " + go + "; " + run + "; echo second";
  Child rec({ALLOCSCOPE_BIN, "record", "--rate", "2", "--ringbuf-size", "32MiB", "-o", folded, "--",
             "/bin/sh", "-c", script});
  ASSERT_TRUE(rec.wait_for_line("first", 60000)) << rec.out() << rec.err();
  rec.signal(SIGSTOP);
  std::ofstream(go) << "go\n";
  bool second = rec.wait_for_line("second", 60000);
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));  // past the loop's deadline
  rec.signal(SIGCONT);
  ASSERT_TRUE(second) << rec.out();
  ASSERT_EQ(rec.wait(), 0) << rec.err();
  EXPECT_EQ(rec.err().find("dropped:"), std::string::npos) << rec.err();
  std::map<std::string, double> bytes;
  for (const auto& [frames, value] : read_folded(folded))
    for (const std::string& f : frames)
      if (f.starts_with("site_")) bytes[f.substr(0, f.find(' '))] += value;
  for (const site_spec& s : kSites) {
    double truth = 2 * site_truth(s, 1, 3).bytes;
    EXPECT_NEAR(bytes[s.function], truth, 1e-4 * truth) << s.function;
  }
  std::remove(go.c_str());
  std::remove(folded.c_str());
}

}  // namespace
}  // namespace allocscope::test
