// The always-on agent with real clients: `go tool pprof` reads its profiles
// over HTTP and a real Prometheus scrapes its metrics through its service
// discovery; the numbers match the workload's exact truth.
#include <gtest/gtest.h>
#include <httplib.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <future>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <regex>
#include <sstream>
#include <thread>

#include "agent_harness.h"
#include "harness.h"
#include "host/process.h"
#include "output/pprof.h"

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

// Bad requests get clean HTTP errors, a flood of concurrent scrapes gets
// answers (profiles, or 503/429 when too many wait), and the agent serves on.
TEST(Agent, BadRequestsAndFloodsGetCleanErrors) {
  REQUIRE_BPF();
  Agent agent;
  ASSERT_TRUE(agent.ready()) << agent.child.err();
  httplib::Client client("127.0.0.1", agent.port);
  client.set_read_timeout(60, 0);
  struct Case {
    std::string path;
    int status;
  };
  for (const Case& c : std::vector<Case>{{"/debug/pprof/heap?pid=999999999", 404},
                                         {"/debug/pprof/heap?pid=abc", 400},
                                         {"/debug/pprof/heap?pid=1&comm=x", 400},
                                         {"/debug/pprof/allocs?seconds=100000", 400},
                                         {"/debug/pprof/allocs?seconds=-1", 400},
                                         {"/debug/pprof/allocs?seconds=0", 400},
                                         {"/comm/nothing-runs-this/debug/pprof/heap", 404},
                                         {"/flamegraph?metric=bogus", 400},
                                         {"/targets?level=bogus", 400},
                                         {"/no/such/endpoint", 404},
                                         {"/debug/pprof/heap", 200},
                                         {"/metrics", 200},
                                         {"/targets", 200},
                                         {"/", 200}}) {
    auto res = client.Get(c.path);
    ASSERT_TRUE(res) << c.path;
    EXPECT_EQ(res->status, c.status) << c.path << ": " << res->body;
  }
  auto post = client.Post("/metrics", std::string(1 << 20, 'x'), "text/plain");
  ASSERT_TRUE(post);
  EXPECT_GE(post->status, 400);

  // 40 clients at once, a few of them asking for 1-second deltas.
  std::vector<std::future<int>> answers;
  for (int i = 0; i < 40; ++i)
    answers.push_back(std::async(std::launch::async, [&, i] {
      httplib::Client c("127.0.0.1", agent.port);
      c.set_read_timeout(60, 0);
      auto r = c.Get(i % 8 == 0 ? "/debug/pprof/allocs?seconds=1" : i % 2 ? "/metrics" : "/debug/pprof/heap");
      return r ? r->status : -1;
    }));
  int ok = 0;
  for (auto& a : answers) {
    int status = a.get();
    EXPECT_TRUE(status == 200 || status == 503 || status == 429) << status;
    ok += status == 200;
  }
  EXPECT_GT(ok, 0);

  // 68 connections that send nothing: past 64 the agent stops accepting,
  // counts it, and serves again once they are gone. The last ones wait in
  // the kernel's listen backlog (SOMAXCONN).
  std::vector<int> idle;
  for (int i = 0; i < 68; ++i) {
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(uint16_t(agent.port));
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ASSERT_EQ(connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a), 0) << strerror(errno);
    idle.push_back(fd);
  }
  // Time for the accepting thread to take 64 of them and wait for the 65th
  // (1 s was once not enough on a loaded machine).
  std::this_thread::sleep_for(std::chrono::seconds(3));
  for (int fd : idle) close(fd);
  auto after = client.Get("/metrics");
  ASSERT_TRUE(after);
  EXPECT_EQ(after->status, 200);
  EXPECT_NE(after->body.find("allocscope_agent_requests_total"), std::string::npos);
  const std::string full = "\nallocscope_agent_connection_queue_full_total ";
  size_t at = after->body.find(full);
  ASSERT_NE(at, std::string::npos);
  EXPECT_GE(std::stod(after->body.substr(at + full.size())), 1)
      << "the accepting thread waits for the 65th connection, and each one after while none is free";
  agent.child.signal(SIGTERM);
  EXPECT_EQ(agent.child.wait(), 0) << agent.child.err();
}

// A loopback connection to the agent, or -1.
int connect_to(int port) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(uint16_t(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (fd >= 0 && connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0) return fd;
  if (fd >= 0) close(fd);
  return -1;
}

// A client that sends its request a byte a second: seconds until the agent
// closed the connection (-1: it could not connect; 60: never closed).
double slow_client_lifetime(int port) {
  auto start = std::chrono::steady_clock::now();
  int fd = connect_to(port);
  if (fd < 0) return -1;
  const std::string request = "GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\nUser-Agent: slow\r\n\r\n";
  double lived = 60;
  for (size_t i = 0; i < 60; ++i) {
    char c;
    ssize_t got = recv(fd, &c, 1, MSG_DONTWAIT);
    bool closed = got == 0 || (got < 0 && errno != EAGAIN) ||
                  send(fd, &request[i % request.size()], 1, MSG_NOSIGNAL) < 0;
    if (closed) {
      lived = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      break;
    }
    std::this_thread::sleep_for(std::chrono::seconds(1));
  }
  close(fd);
  return lived;
}

// Many scrapers at once, and slow clients among them: every connection is
// served, every answer complete (a profile that decodes, metrics to their
// last line), and a client that sends a byte a second is cut off after the
// request deadline (5 s) instead of holding a worker.
TEST(Agent, SixtyFourScrapersAndEightSlowClientsAreAllServed) {
  REQUIRE_BPF();
  Agent agent;
  ASSERT_TRUE(agent.ready()) << agent.child.err();
  Child w({WORKLOAD_BIN, "--threads", "1", "--scale-pct", "10"});
  EXPECT_EQ(w.wait(), 0);
  std::vector<std::future<double>> slow;
  for (int i = 0; i < 8; ++i)
    slow.push_back(std::async(std::launch::async, [&] { return slow_client_lifetime(agent.port); }));
  std::this_thread::sleep_for(std::chrono::milliseconds(500));  // the slow ones take the workers first
  struct Answer {
    std::string error;
    double seconds = 0;
  };
  std::vector<std::future<Answer>> answers;
  for (int i = 0; i < 64; ++i)
    answers.push_back(std::async(std::launch::async, [&, i] {
      std::string path = i % 2 ? "/metrics" : "/debug/pprof/allocs";
      httplib::Client c("127.0.0.1", agent.port);
      c.set_connection_timeout(60, 0);
      c.set_read_timeout(60, 0);
      auto start = std::chrono::steady_clock::now();
      auto r = c.Get(path);
      Answer a{"", std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count()};
      if (!r)
        a.error = path + ": " + httplib::to_string(r.error());
      else if (r->status != 200)
        a.error = path + ": HTTP " + std::to_string(r->status) + " " + r->body;
      else if (i % 2 && r->body.find("\nallocscope_agent_request_timeouts_total ") == std::string::npos)
        a.error = "/metrics: cut short";
      else if (i % 2 == 0 && !decode_pprof(r->body))
        a.error = "/debug/pprof/allocs: not a whole profile (" + std::to_string(r->body.size()) + " bytes)";
      return a;
    }));
  std::vector<double> latencies;
  for (auto& f : answers) {
    Answer a = f.get();
    EXPECT_EQ(a.error, "");
    latencies.push_back(a.seconds);
  }
  std::sort(latencies.begin(), latencies.end());
  std::printf("  64 scrapers beside 8 slow clients: latency p50 %.3f s, p99 %.3f s, max %.3f s\n",
              latencies[latencies.size() / 2], latencies[latencies.size() * 99 / 100], latencies.back());
  for (auto& f : slow) {
    double lived = f.get();
    EXPECT_GE(lived, 4.0) << "cut before its request deadline";
    EXPECT_LT(lived, 20.0) << "a slow client held its connection";
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(1100));  // past the window of shared answers
  auto after = httplib::Client("127.0.0.1", agent.port).Get("/metrics");
  ASSERT_TRUE(after);
  const std::string timeouts = "\nallocscope_agent_request_timeouts_total ";
  size_t at = after->body.find(timeouts);
  ASSERT_NE(at, std::string::npos);
  EXPECT_GE(std::stod(after->body.substr(at + timeouts.size())), 8);
  const std::string shared = "\nallocscope_agent_responses_shared_total ";
  at = after->body.find(shared);
  ASSERT_NE(at, std::string::npos);
  EXPECT_GT(std::stod(after->body.substr(at + shared.size())), 0)
      << "32 clients asked for each answer at once";
  agent.child.signal(SIGTERM);
  EXPECT_EQ(agent.child.wait(), 0) << agent.child.err();
}

// Errors before recording are said at once and end the agent: a process
// that does not exist, a port already served, a bad address.
TEST(Agent, StartupErrorsAreClearAndQuick) {
  REQUIRE_BPF();
  RunResult bad_pid =
      run({ALLOCSCOPE_BIN, "agent", "-p", "999999999", "--listen", ":" + std::to_string(free_port())}, 60000);
  EXPECT_EQ(bad_pid.status, 1);
  EXPECT_NE(bad_pid.err.find("no such process: 999999999"), std::string::npos) << bad_pid.err;
  Agent agent;
  ASSERT_TRUE(agent.ready()) << agent.child.err();
  RunResult taken =
      run({ALLOCSCOPE_BIN, "agent", "--listen", "127.0.0.1:" + std::to_string(agent.port)}, 60000);
  EXPECT_EQ(taken.status, 1);
  EXPECT_NE(taken.err.find("address in use"), std::string::npos) << taken.err;
  RunResult address = run({ALLOCSCOPE_BIN, "agent", "--listen", "example.com:80"}, 60000);
  EXPECT_EQ(address.status, 2);
  EXPECT_NE(address.err.find("the host is an IP address"), std::string::npos) << address.err;
  agent.child.signal(SIGTERM);
  EXPECT_EQ(agent.child.wait(), 0) << agent.child.err();
}

// With a token file, a request without the token (or with another) is
// refused; a non-loopback address without one is warned about, and the
// start line says processes may be stopped while a new file is probed.
TEST(Agent, TokenIsRequiredWhenGivenAndOpenAddressesAreWarnedAbout) {
  REQUIRE_BPF();
  std::string token = temp_path("token");
  std::ofstream(token) << "s3cret-token\n";
  Agent agent({"--comm", "^alloc_sites$", "--token-file", token});
  ASSERT_TRUE(agent.ready()) << agent.child.err();
  httplib::Client client("127.0.0.1", agent.port);
  auto none = client.Get("/metrics");
  ASSERT_TRUE(none);
  EXPECT_EQ(none->status, 401);
  auto wrong = client.Get("/metrics", {{"Authorization", "Bearer s3cret-tokem"}});
  ASSERT_TRUE(wrong);
  EXPECT_EQ(wrong->status, 401);
  auto right = client.Get("/metrics", {{"Authorization", "Bearer s3cret-token"}});
  ASSERT_TRUE(right);
  EXPECT_EQ(right->status, 200);
  agent.child.signal(SIGTERM);
  EXPECT_EQ(agent.child.wait(), 0);
  std::remove(token.c_str());

  int port = free_port();
  Child open(
      {ALLOCSCOPE_BIN, "agent", "--listen", "0.0.0.0:" + std::to_string(port), "--comm", "^alloc_sites$"});
  ASSERT_TRUE(open.wait_for_line("recording: probes attached", 60000, true)) << open.err();
  EXPECT_NE(open.err().find("without --token-file"), std::string::npos) << open.err();
  // Its start line says that processes may be stopped, as record --all's does.
  EXPECT_NE(open.err().find("recording: probes attached; a process that maps an allocator file not seen "
                            "before is stopped for milliseconds"),
            std::string::npos)
      << open.err();
  open.signal(SIGTERM);
  EXPECT_EQ(open.wait(), 0);
}

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
