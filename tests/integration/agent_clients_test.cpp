// The always-on agent with real clients: `go tool pprof` and report --leaks
// read its profiles, Prometheus scrapes its metrics; the numbers match the truth.
#include <gtest/gtest.h>
#include <httplib.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <future>
#include <memory>
#include <nlohmann/json.hpp>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include "agent_harness.h"
#include "harness.h"

namespace allocscope::test {
namespace {

// One process in a cgroup of its own, addressed three ways (its pid, its
// program by path prefix, its cgroup): go tool pprof reads each endpoint
// with -raw and -top, and every site matches the truth.
TEST(Agent, GoPprofReadsEachTargetAndItMatchesTruth) {
  REQUIRE_BPF();
  constexpr int kScale = 50;
  std::string root = cgroup_root();
  ASSERT_FALSE(root.empty()) << "no cgroup v2 hierarchy";
  std::string cgroup = "/allocscope-agent-test-" + std::to_string(getpid());
  std::filesystem::create_directory(root + cgroup);
  Child workload({WORKLOAD_BIN, "--threads", "1", "--scale-pct", std::to_string(kScale), "--wait", "--hold"});
  ASSERT_TRUE(workload.wait_for_line("ready", 10000));
  std::ofstream(root + cgroup + "/cgroup.procs") << workload.pid() << "\n";
  Agent agent;
  ASSERT_TRUE(agent.ready()) << agent.child.err();
  workload.signal(SIGUSR1);
  ASSERT_TRUE(workload.wait_for_line("done", 60000));
  std::this_thread::sleep_for(std::chrono::milliseconds(500));  // the last samples reach the agent

  std::string pid = std::to_string(workload.pid());
  for (const std::string& path :
       std::vector<std::string>{"/debug/pprof/heap?pid=" + pid, "/comm/alloc_sites/debug/pprof/allocs",
                                "/debug/pprof/allocs?cgroup=" + cgroup}) {
    RunResult raw = go_pprof("-raw", agent.url(path));
    ASSERT_EQ(raw.status, 0) << path << ": " << raw.err;
    expect_sites_match(parse_raw(raw.out), kScale, path);
    RunResult top = go_pprof("-top", agent.url(path));
    ASSERT_EQ(top.status, 0) << top.err;
    EXPECT_NE(top.out.find("site_malloc_kept"), std::string::npos) << top.out;
  }
  workload.signal(SIGUSR1);
  EXPECT_EQ(workload.wait(), 0);
  agent.child.signal(SIGTERM);
  EXPECT_EQ(agent.child.wait(), 0) << agent.child.err();
  EXPECT_NE(agent.child.err().find("stopped: probes detached"), std::string::npos) << agent.child.err();
  std::filesystem::remove(root + cgroup);
}

// ?seconds=N: the change over the next N seconds, as Go's net/http/pprof
// gives it. One process allocates before the window and holds its blocks
// through it; another allocates inside it and still holds them at its end.
// The delta's alloc_* are the second's allocations, and its inuse_* the
// second's live blocks only: the first's did not change.
TEST(Agent, SecondsGivesTheDeltaOfTheWindow) {
  REQUIRE_BPF();
  constexpr int kScale = 20;
  Agent agent;
  ASSERT_TRUE(agent.ready()) << agent.child.err();
  auto held = [&] {
    return std::make_unique<Child>(std::vector<std::string>{WORKLOAD_BIN, "--threads", "1", "--scale-pct",
                                                            std::to_string(kScale), "--wait", "--hold"});
  };
  auto before = held();
  ASSERT_TRUE(before->wait_for_line("ready", 10000));
  before->signal(SIGUSR1);
  ASSERT_TRUE(before->wait_for_line("done", 60000));
  auto inside = held();
  ASSERT_TRUE(inside->wait_for_line("ready", 10000));
  std::this_thread::sleep_for(std::chrono::milliseconds(500));

  // The request is sent from here, not by go tool pprof, whose start under
  // load can take longer than the wait below: the window must open before
  // the second process allocates. pprof then reads the profile from a file.
  auto delta = std::async(std::launch::async, [&] {
    httplib::Client client("127.0.0.1", agent.port);
    client.set_read_timeout(60);
    return client.Get("/comm/alloc_sites/debug/pprof/heap?seconds=8");
  });
  std::this_thread::sleep_for(std::chrono::seconds(2));
  inside->signal(SIGUSR1);
  ASSERT_TRUE(inside->wait_for_line("done", 5000));
  auto res = delta.get();
  ASSERT_TRUE(res && res->status == 200) << (res ? res->body : httplib::to_string(res.error()));
  std::string file = temp_path("delta.pb.gz");
  std::ofstream(file, std::ios::binary) << res->body;
  RunResult raw = go_pprof("-raw", file);
  std::filesystem::remove(file);
  ASSERT_EQ(raw.status, 0) << raw.err;
  expect_sites_match(parse_raw(raw.out), kScale, "delta");
  for (auto* c : {before.get(), inside.get()}) {
    c->signal(SIGUSR1);
    EXPECT_EQ(c->wait(), 0);
  }
  agent.child.signal(SIGTERM);
  EXPECT_EQ(agent.child.wait(), 0) << agent.child.err();
}

// report --leaks over the agent's /heap profiles (each cumulative since the
// agent began), fetched once a second while leaky runs: the leaking site is
// the only suspect, its true rate inside the interval (each at most 1e-5 by
// chance at kVerdictConfidence). The growth is tested in each half of the
// series against a bound on the variance that includes everything live at
// the half's start: at 64 KiB the leak's p was 0.013 (a miss at 95 % with
// Holm's correction, seen in CI); 2 KiB gives it 32 times the samples.
TEST(Agent, LeaksAreFoundInHeapProfilesFetchedOverTime) {
  REQUIRE_BPF();
  Agent agent({"--comm", "^leaky$", "--rate", "2KiB"});
  ASSERT_TRUE(agent.ready()) << agent.child.err();
  Child leaky({LEAKY_BIN, "--seconds", "7", "--leak", "1000000"});
  std::string dir = temp_path("agent-leaks");
  std::filesystem::create_directories(dir);
  httplib::Client client("127.0.0.1", agent.port);
  std::vector<std::string> argv = {ALLOCSCOPE_BIN, "report",       "--leaks",
                                   "--json",       "--confidence", kVerdictConfidence};
  for (int i = 1; i <= 6; ++i) {
    std::this_thread::sleep_for(std::chrono::seconds(1));
    auto res = client.Get("/comm/leaky/debug/pprof/heap");
    ASSERT_TRUE(res && res->status == 200) << (res ? res->body : "no answer");
    argv.push_back(dir + "/heap" + std::to_string(i) + ".pb.gz");
    std::ofstream(argv.back(), std::ios::binary) << res->body;
  }
  ASSERT_EQ(leaky.wait(), 0);
  std::smatch m;
  std::string out = leaky.out();
  ASSERT_TRUE(std::regex_search(out, m, std::regex(R"(leaked (\d+) bytes in ([0-9.]+) s)"))) << out;
  double truth = std::stod(m[1]) / std::stod(m[2]);
  RunResult r = run(argv);
  ASSERT_EQ(r.status, 0) << r.err;
  auto j = nlohmann::json::parse(r.out, nullptr, false);
  ASSERT_FALSE(j.is_discarded()) << r.out;
  std::vector<std::string> suspects;
  for (const auto& row : j["rows"]) {
    if (!row["suspect"].get<bool>()) continue;
    suspects.push_back(row["name"]);
    if (row["name"] != "site_leak") continue;
    std::printf("  leak %.0f B/s: estimated %.0f B/s [%.0f; %.0f]\n", truth,
                row["growth_per_second"].get<double>(), row["interval"][0].get<double>(),
                row["interval"][1].get<double>());
    EXPECT_LE(row["interval"][0].get<double>(), truth);
    EXPECT_GE(row["interval"][1].get<double>(), truth);
  }
  EXPECT_EQ(suspects, std::vector<std::string>{"site_leak"}) << r.out;
  agent.child.signal(SIGTERM);
  EXPECT_EQ(agent.child.wait(), 0) << agent.child.err();
}

// A real Prometheus finds the workload through /targets (HTTP service
// discovery), scrapes /metrics?pid=N, and its query API returns the
// workload's live bytes within kMaxZ sigma of the truth.
TEST(Agent, PrometheusScrapesLiveBytesThroughDiscovery) {
  REQUIRE_BPF();
  constexpr int kScale = 50;
  Agent agent;
  ASSERT_TRUE(agent.ready()) << agent.child.err();
  Child workload({WORKLOAD_BIN, "--threads", "1", "--scale-pct", std::to_string(kScale), "--wait", "--hold"});
  ASSERT_TRUE(workload.wait_for_line("ready", 10000));
  workload.signal(SIGUSR1);
  ASSERT_TRUE(workload.wait_for_line("done", 60000));

  std::string dir = temp_path("prometheus");
  std::filesystem::create_directories(dir + "/data");
  int prom_port = free_port();
  std::ofstream(dir + "/prometheus.yml")
      << "global:\n  scrape_interval: 1s\n"
         "scrape_configs:\n  - job_name: allocscope\n    http_sd_configs:\n"
         "      - url: "
      << agent.url("/targets") << "\n        refresh_interval: 1s\n";
  Child prometheus({"prometheus", "--config.file=" + dir + "/prometheus.yml",
                    "--storage.tsdb.path=" + dir + "/data",
                    "--web.listen-address=127.0.0.1:" + std::to_string(prom_port)});
  httplib::Client client("127.0.0.1", prom_port);
  std::string query = "allocscope_process_live_bytes{pid=\"" + std::to_string(workload.pid()) + "\"}";
  double live = -1;
  for (int i = 0; i < 120 && live < 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
    auto res = client.Get("/api/v1/query?query=" + httplib::detail::encode_query_param(query));
    if (!res || res->status != 200) continue;
    auto j = nlohmann::json::parse(res->body, nullptr, false);
    if (j.is_discarded() || j["data"]["result"].empty()) continue;
    live = std::stod(j["data"]["result"][0]["value"][1].get<std::string>());
  }
  ASSERT_GE(live, 0) << "Prometheus never had the series; its log:\n" << prometheus.err();
  double truth = 0, var = 0;
  for (const site_spec& s : kSites) {
    Truth t = site_truth(s, 1, kScale);
    truth += t.live_bytes;
    double sd = ht_sigma(t.live_objects, double(s.size), kRate, true);
    var += sd * sd;
  }
  std::printf("  Prometheus: live %.0f, truth %.0f (z %.2f)\n", live, truth, (live - truth) / std::sqrt(var));
  EXPECT_LT(std::fabs(live - truth) / std::sqrt(var), kMaxZ);
  prometheus.signal(SIGTERM);
  prometheus.wait();
  workload.signal(SIGUSR1);
  EXPECT_EQ(workload.wait(), 0);
  agent.child.signal(SIGTERM);
  EXPECT_EQ(agent.child.wait(), 0) << agent.child.err();
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace allocscope::test
