// A process's identity as the kernel tells it at its first sample: its id in
// its own PID namespace (what a container's tools call it) and when it
// started, in the agent's metrics, service discovery and profiles.
#include <gtest/gtest.h>
#include <httplib.h>
#include <signal.h>
#include <time.h>

#include <chrono>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>

#include "harness.h"
#include "output/pprof.h"

namespace allocscope::test {
namespace {

// The first child of `pid` (unshare's forked child), 0 when none yet.
pid_t child_of(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/task/" + std::to_string(pid) + "/children");
  pid_t child = 0;
  in >> child;
  return child;
}

int64_t parse_rfc3339_utc(const std::string& s) {
  tm t{};
  if (!strptime(s.c_str(), "%Y-%m-%dT%H:%M:%SZ", &t)) return -1;
  return int64_t(timegm(&t));
}

// A program in a PID namespace of its own (it is pid 1 there), still
// running while the agent is asked: /targets, /metrics and its profile name
// it by both ids, and its start time is the moment it was started.
TEST(Identity, AProcessInAPidNamespaceIsNamedByBothIdsAndItsStart) {
  REQUIRE_BPF();
  int port = free_port();
  Child agent({ALLOCSCOPE_BIN, "agent", "--listen", "127.0.0.1:" + std::to_string(port), "--rate", "1",
               "--comm", "^deep_cxx$"});
  ASSERT_TRUE(agent.wait_for_line("recording: probes attached", 60000, true)) << agent.err();
  int64_t started = time(nullptr);
  Child payload({"unshare", "--pid", "--fork", DEEP_CXX_BIN, "--wait"});
  ASSERT_TRUE(payload.wait_for_line("ready", 30000)) << payload.err();
  pid_t host_pid = child_of(payload.pid());
  ASSERT_GT(host_pid, 0);

  httplib::Client client("127.0.0.1", port);
  nlohmann::json labels;
  for (int i = 0; i < 100 && labels.is_null(); ++i) {  // its first samples reach the agent within 10 s
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    auto res = client.Get("/targets");
    ASSERT_TRUE(res && res->status == 200);
    for (const auto& group : nlohmann::json::parse(res->body))
      if (group["labels"].value("pid", "") == std::to_string(host_pid)) labels = group["labels"];
  }
  ASSERT_FALSE(labels.is_null()) << "pid " << host_pid << " never listed in /targets";
  EXPECT_EQ(labels.value("ns_pid", ""), "1") << labels.dump();
  int64_t start = parse_rfc3339_utc(labels.value("start_time", ""));
  EXPECT_GE(start, started - 1) << labels.dump();
  EXPECT_LE(start, started + 10) << labels.dump();

  auto metrics = client.Get("/metrics");
  ASSERT_TRUE(metrics && metrics->status == 200);
  EXPECT_NE(metrics->body.find("pid=\"" + std::to_string(host_pid) + "\",comm=\"deep_cxx\",ns_pid=\"1\""),
            std::string::npos);
  auto profile = client.Get("/debug/pprof/allocs?pid=" + std::to_string(host_pid));
  ASSERT_TRUE(profile && profile->status == 200);
  auto r = decode_pprof(profile->body);
  ASSERT_TRUE(r) << r.error();
  ASSERT_FALSE(r->samples.empty());
  for (const RecSample& s : r->samples) EXPECT_EQ(s.ns_pid, 1u) << "pid " << s.pid;

  kill(host_pid, SIGUSR1);  // deep_cxx --wait goes on, allocates, and ends (unshare with it)
  EXPECT_EQ(payload.wait(), 0) << payload.err();
  agent.signal(SIGTERM);
  EXPECT_EQ(agent.wait(), 0) << agent.err();
}

}  // namespace
}  // namespace allocscope::test
