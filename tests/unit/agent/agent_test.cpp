// The agent's pure parts: which processes a request names and the labels a
// cgroup path gives them, --listen, /metrics in Prometheus's text format,
// service discovery and the index page, and the bridge that hands requests
// to the recording's thread. Also the model and host helpers the agent adds.
#include <gtest/gtest.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <future>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "agent/bridge.h"
#include "agent/connection_queue.h"
#include "agent/fold_groups.h"
#include "agent/listen_address.h"
#include "agent/metrics.h"
#include "agent/pages.h"
#include "agent/targets.h"
#include "host/process.h"
#include "model/profile.h"

namespace allocscope {
namespace {

using namespace std::chrono_literals;
using Params = std::multimap<std::string, std::string>;

const std::string kId = "4f2a9c1b7d3e5f60718293a4b5c6d7e8f90112233445566778899aabbccddeef";
const std::string kPodUid = "0b1c2d3e-4f50-6172-8394-a5b6c7d8e9f0";

std::string underscored(std::string s) {
  for (char& c : s)
    if (c == '-') c = '_';
  return s;
}

// --- labels_from_cgroup ---

TEST(LabelsFromCgroup, SystemdServiceIsItsUnit) {
  TargetLabels l = labels_from_cgroup("/system.slice/nginx.service");
  EXPECT_EQ(l.cgroup, "/system.slice/nginx.service");
  EXPECT_EQ(l.unit, "nginx.service");
  EXPECT_EQ(l.container, "");
  EXPECT_EQ(l.pod, "");
}

// Docker's systemd driver puts a container in a scope of its own: the scope
// names the container, not a service.
TEST(LabelsFromCgroup, DockerScopeIsAContainerNotAUnit) {
  TargetLabels l = labels_from_cgroup("/system.slice/docker-" + kId + ".scope");
  EXPECT_EQ(l.container, kId);
  EXPECT_EQ(l.unit, "");
  EXPECT_EQ(l.pod, "");
}

// The systemd driver writes the pod uid with underscores; backends know it
// with dashes.
TEST(LabelsFromCgroup, CriContainerdUnderKubepodsGivesPodAndContainer) {
  std::string path = "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod" +
                     underscored(kPodUid) + ".slice/cri-containerd-" + kId + ".scope";
  TargetLabels l = labels_from_cgroup(path);
  EXPECT_EQ(l.cgroup, path);
  EXPECT_EQ(l.pod, kPodUid);
  EXPECT_EQ(l.container, kId);
  EXPECT_NE(l.unit, "cri-containerd-" + kId + ".scope");
  EXPECT_EQ(l.unit.find(kId), std::string::npos) << l.unit;
}

TEST(LabelsFromCgroup, CgroupfsDriverGivesPodAndBareContainerId) {
  TargetLabels l = labels_from_cgroup("/kubepods/burstable/pod" + kPodUid + "/" + kId);
  EXPECT_EQ(l.pod, kPodUid);
  EXPECT_EQ(l.container, kId);
  EXPECT_EQ(l.unit, "");
}

TEST(LabelsFromCgroup, UserSessionScopeIsItsUnit) {
  TargetLabels l = labels_from_cgroup("/user.slice/user-1000.slice/session-3.scope");
  EXPECT_EQ(l.unit, "session-3.scope");
  EXPECT_EQ(l.container, "");
  EXPECT_EQ(l.pod, "");
}

// The innermost unit names the process, not the slice or manager above it.
TEST(LabelsFromCgroup, InnermostServiceWins) {
  TargetLabels l = labels_from_cgroup("/user.slice/user-1000.slice/user@1000.service/app.slice/foo.service");
  EXPECT_EQ(l.unit, "foo.service");
}

TEST(LabelsFromCgroup, RootHasNoLabels) {
  TargetLabels l = labels_from_cgroup("/");
  EXPECT_EQ(l.cgroup, "/");
  EXPECT_EQ(l.unit, "");
  EXPECT_EQ(l.container, "");
  EXPECT_EQ(l.pod, "");
}

// A 64-character name that is not hex is no container id.
TEST(LabelsFromCgroup, NonHexIdIsNoContainer) {
  std::string not_hex(64, 'z');
  TargetLabels l = labels_from_cgroup("/system.slice/docker-" + not_hex + ".scope");
  EXPECT_EQ(l.container, "");
}

// --- target_holds ---

ProcessInstance instance(uint32_t tgid, std::string comm, bool ended = false) {
  ProcessInstance p;
  p.tgid = tgid;
  p.comm = std::move(comm);
  p.ended = ended;
  return p;
}

TEST(TargetHolds, AllHoldsEveryProcess) {
  EXPECT_TRUE(target_holds({}, instance(1, "a"), {}));
  EXPECT_TRUE(target_holds({}, instance(2, "b", true), labels_from_cgroup("/x.service")));
}

TEST(TargetHolds, PidAndComm) {
  ProcessInstance p = instance(42, "nginx");
  EXPECT_TRUE(target_holds({TargetKind::Pid, "42"}, p, {}));
  EXPECT_FALSE(target_holds({TargetKind::Pid, "4"}, p, {}));
  EXPECT_FALSE(target_holds({TargetKind::Pid, "420"}, p, {}));
  EXPECT_TRUE(target_holds({TargetKind::Comm, "nginx"}, p, {}));
  EXPECT_FALSE(target_holds({TargetKind::Comm, "ngin"}, p, {}));
  EXPECT_FALSE(target_holds({TargetKind::Comm, "nginx2"}, p, {}));
}

// A cgroup holds its own processes and those below it, whole components
// only.
TEST(TargetHolds, CgroupPrefixMatchesWholeComponents) {
  ProcessInstance p = instance(1, "a");
  Target ab{TargetKind::Cgroup, "/a/b"};
  EXPECT_TRUE(target_holds(ab, p, labels_from_cgroup("/a/b")));
  EXPECT_TRUE(target_holds(ab, p, labels_from_cgroup("/a/b/c")));
  EXPECT_FALSE(target_holds(ab, p, labels_from_cgroup("/a/bc")));
  EXPECT_FALSE(target_holds(ab, p, labels_from_cgroup("/a")));
  EXPECT_FALSE(target_holds(ab, p, labels_from_cgroup("/x/a/b")));
  // A trailing slash names the same cgroup.
  Target ab_slash{TargetKind::Cgroup, "/a/b/"};
  EXPECT_TRUE(target_holds(ab_slash, p, labels_from_cgroup("/a/b/c")));
  EXPECT_FALSE(target_holds(ab_slash, p, labels_from_cgroup("/a/bc")));
  // The root holds everything.
  EXPECT_TRUE(target_holds({TargetKind::Cgroup, "/"}, p, labels_from_cgroup("/a/b")));
}

TEST(TargetHolds, UnitAndPodAreExact) {
  ProcessInstance p = instance(1, "nginx");
  TargetLabels service = labels_from_cgroup("/system.slice/nginx.service");
  EXPECT_TRUE(target_holds({TargetKind::Unit, "nginx.service"}, p, service));
  EXPECT_FALSE(target_holds({TargetKind::Unit, "nginx"}, p, service));
  TargetLabels pod = labels_from_cgroup("/kubepods/burstable/pod" + kPodUid + "/" + kId);
  EXPECT_TRUE(target_holds({TargetKind::Pod, kPodUid}, p, pod));
  EXPECT_FALSE(target_holds({TargetKind::Pod, kPodUid.substr(0, 12)}, p, pod));
  EXPECT_FALSE(target_holds({TargetKind::Pod, kPodUid}, p, service));
}

// The short id docker prints (12 characters) names a container; anything
// shorter could name several.
TEST(TargetHolds, ContainerByIdOrAPrefixOfAtLeast12) {
  ProcessInstance p = instance(1, "app");
  TargetLabels l = labels_from_cgroup("/system.slice/docker-" + kId + ".scope");
  EXPECT_TRUE(target_holds({TargetKind::Container, kId}, p, l));
  EXPECT_TRUE(target_holds({TargetKind::Container, kId.substr(0, 12)}, p, l));
  EXPECT_FALSE(target_holds({TargetKind::Container, kId.substr(0, 11)}, p, l));
  EXPECT_FALSE(target_holds({TargetKind::Container, "ffffffffffff"}, p, l));
  EXPECT_FALSE(target_holds({TargetKind::Container, kId}, p, labels_from_cgroup("/system.slice/x.service")));
}

// --- address ---

Addressed addressed(std::string_view path, const Params& params = {}) {
  auto a = address(path, params);
  EXPECT_TRUE(a) << path << ": " << (a ? "" : a.error().message);
  return a ? *a : Addressed{};
}

TEST(Address, NoTargetKeepsThePath) {
  Addressed a = addressed("/debug/pprof/heap", {{"seconds", "30"}});
  EXPECT_EQ(a.target.kind, TargetKind::All);
  EXPECT_EQ(a.path, "/debug/pprof/heap");
}

TEST(Address, PathPrefixes) {
  Addressed pid = addressed("/pid/42/debug/pprof/heap");
  EXPECT_EQ(pid.target.kind, TargetKind::Pid);
  EXPECT_EQ(pid.target.value, "42");
  EXPECT_EQ(pid.path, "/debug/pprof/heap");

  Addressed comm = addressed("/comm/nginx/debug/pprof/allocs");
  EXPECT_EQ(comm.target.kind, TargetKind::Comm);
  EXPECT_EQ(comm.target.value, "nginx");
  EXPECT_EQ(comm.path, "/debug/pprof/allocs");

  Addressed unit = addressed("/unit/nginx.service/metrics");
  EXPECT_EQ(unit.target.kind, TargetKind::Unit);
  EXPECT_EQ(unit.target.value, "nginx.service");
  EXPECT_EQ(unit.path, "/metrics");

  Addressed container = addressed("/container/" + kId.substr(0, 12) + "/debug/pprof/heap");
  EXPECT_EQ(container.target.kind, TargetKind::Container);
  EXPECT_EQ(container.target.value, kId.substr(0, 12));

  Addressed pod = addressed("/pod/" + kPodUid + "/debug/pprof/heap");
  EXPECT_EQ(pod.target.kind, TargetKind::Pod);
  EXPECT_EQ(pod.target.value, kPodUid);
  EXPECT_EQ(pod.path, "/debug/pprof/heap");
}

TEST(Address, PrefixAloneLeavesTheRoot) {
  Addressed a = addressed("/pid/42");
  EXPECT_EQ(a.target.kind, TargetKind::Pid);
  EXPECT_EQ(a.target.value, "42");
  EXPECT_EQ(a.path, "/");
}

// The value is found by position, not by searching for text that may also
// occur in the kind's name or in the rest of the path.
TEST(Address, ValueThatOccursElsewhereStillSplits) {
  Addressed o = addressed("/comm/o/debug/pprof/heap");
  EXPECT_EQ(o.target.kind, TargetKind::Comm);
  EXPECT_EQ(o.target.value, "o");
  EXPECT_EQ(o.path, "/debug/pprof/heap");

  Addressed named_pid = addressed("/comm/pid/debug/pprof/heap");
  EXPECT_EQ(named_pid.target.kind, TargetKind::Comm);
  EXPECT_EQ(named_pid.target.value, "pid");
  EXPECT_EQ(named_pid.path, "/debug/pprof/heap");

  Addressed debug = addressed("/comm/debug/debug/pprof/heap");
  EXPECT_EQ(debug.target.value, "debug");
  EXPECT_EQ(debug.path, "/debug/pprof/heap");
}

// Prometheus turns a discovered target's __param_pid into ?pid=.
TEST(Address, QueryParameters) {
  Addressed pid = addressed("/debug/pprof/heap", {{"pid", "42"}, {"seconds", "10"}});
  EXPECT_EQ(pid.target.kind, TargetKind::Pid);
  EXPECT_EQ(pid.target.value, "42");
  EXPECT_EQ(pid.path, "/debug/pprof/heap");

  Addressed comm = addressed("/metrics", {{"comm", "my prog"}});
  EXPECT_EQ(comm.target.kind, TargetKind::Comm);
  EXPECT_EQ(comm.target.value, "my prog");
  EXPECT_EQ(comm.path, "/metrics");

  Addressed cgroup = addressed("/debug/pprof/heap", {{"cgroup", "/system.slice/nginx.service"}});
  EXPECT_EQ(cgroup.target.kind, TargetKind::Cgroup);
  EXPECT_EQ(cgroup.target.value, "/system.slice/nginx.service");
  EXPECT_EQ(cgroup.path, "/debug/pprof/heap");

  Addressed unit = addressed("/debug/pprof/heap", {{"unit", "a.service"}});
  EXPECT_EQ(unit.target.kind, TargetKind::Unit);
}

TEST(Address, TwoTargetsAreAnError) {
  for (auto [path, params] : std::vector<std::pair<std::string, Params>>{
           {"/pid/1/debug/pprof/heap", {{"comm", "x"}}},
           {"/debug/pprof/heap", {{"pid", "1"}, {"comm", "x"}}},
           {"/debug/pprof/heap", {{"pid", "1"}, {"pid", "2"}}},
           {"/comm/x/debug/pprof/heap", {{"cgroup", "/a"}}},
       }) {
    auto a = address(path, params);
    ASSERT_FALSE(a) << path;
    EXPECT_EQ(a.error().code, EINVAL);
  }
}

TEST(Address, BadPidIsAnError) {
  for (std::string bad : {"abc", "0", "-1", "12x", "", " 1", "+1", "99999999999"}) {
    auto by_query = address("/debug/pprof/heap", {{"pid", bad}});
    EXPECT_FALSE(by_query) << "pid=" << bad;
    if (!by_query) {
      EXPECT_EQ(by_query.error().code, EINVAL);
    }
    auto by_path = address("/pid/" + bad + "/debug/pprof/heap", {});
    EXPECT_FALSE(by_path) << "/pid/" << bad;
  }
}

TEST(Address, EmptyValueIsAnError) {
  EXPECT_FALSE(address("/comm//debug/pprof/heap", {}));
  EXPECT_FALSE(address("/debug/pprof/heap", {{"comm", ""}}));
  EXPECT_FALSE(address("/debug/pprof/heap", {{"cgroup", ""}}));
}

// What address accepts, target_holds finds.
TEST(Address, AddressedPidHoldsItsProcess) {
  Addressed a = addressed("/pid/42/debug/pprof/heap");
  EXPECT_TRUE(target_holds(a.target, instance(42, "x"), {}));
  // A leading zero names the same process.
  auto z = address("/pid/042/debug/pprof/heap", {});
  ASSERT_TRUE(z);
  EXPECT_TRUE(target_holds(z->target, instance(42, "x"), {}));
}

TEST(TargetKindName, NamesMatchThePrefixes) {
  EXPECT_STREQ(target_kind_name(TargetKind::All), "all");
  EXPECT_STREQ(target_kind_name(TargetKind::Pid), "pid");
  EXPECT_STREQ(target_kind_name(TargetKind::Comm), "comm");
  EXPECT_STREQ(target_kind_name(TargetKind::Cgroup), "cgroup");
  EXPECT_STREQ(target_kind_name(TargetKind::Unit), "unit");
  EXPECT_STREQ(target_kind_name(TargetKind::Container), "container");
  EXPECT_STREQ(target_kind_name(TargetKind::Pod), "pod");
}

// --- parse_listen ---

ListenAddress listen_at(std::string_view text) {
  auto a = parse_listen(text);
  EXPECT_TRUE(a) << text << ": " << (a ? "" : a.error().message);
  return a ? *a : ListenAddress{};
}

// Without a host the agent stays on this machine.
TEST(ParseListen, PortAloneIsLoopback) {
  ListenAddress a = listen_at(":6060");
  EXPECT_EQ(a.host, "127.0.0.1");
  EXPECT_EQ(a.port, 6060);
  EXPECT_TRUE(a.loopback());
}

TEST(ParseListen, HostAndPort) {
  ListenAddress any = listen_at("0.0.0.0:80");
  EXPECT_EQ(any.host, "0.0.0.0");
  EXPECT_EQ(any.port, 80);
  EXPECT_FALSE(any.loopback());

  ListenAddress v6 = listen_at("[::1]:6060");
  EXPECT_EQ(v6.host, "::1");
  EXPECT_EQ(v6.port, 6060);
  EXPECT_TRUE(v6.loopback());

  ListenAddress local = listen_at("localhost:1");
  EXPECT_EQ(local.host, "localhost");
  EXPECT_EQ(local.port, 1);
  EXPECT_TRUE(local.loopback());

  EXPECT_EQ(listen_at("10.0.0.1:65535").port, 65535);
}

TEST(ParseListen, LoopbackIsAll127AndOnlyThat) {
  EXPECT_TRUE(listen_at("127.0.0.1:1").loopback());
  EXPECT_TRUE(listen_at("127.1.2.3:1").loopback());
  EXPECT_FALSE(listen_at("128.0.0.1:1").loopback());
  EXPECT_FALSE(listen_at("10.0.0.1:1").loopback());
  EXPECT_FALSE(listen_at("[::]:1").loopback());
  EXPECT_FALSE(listen_at("[fe80::1]:1").loopback());
}

TEST(ParseListen, Errors) {
  for (std::string bad : {"6060", "::1:6060", "host:0", "host:70000", "1.2.3.4:x", "example.com:80",
                          "1.2.3.4:", "1.2.3.4:0", "1.2.3.4:65536", "1.2.3.4:-1", "[::1:6060", "[::1]", ""}) {
    auto a = parse_listen(bad);
    ASSERT_FALSE(a) << bad << " parsed as " << a->host << " port " << a->port;
    EXPECT_EQ(a.error().code, EINVAL);
    EXPECT_NE(a.error().message.find(bad), std::string::npos) << a.error().message;
  }
}

// --- render_metrics ---

struct Series {
  std::string name;
  std::map<std::string, std::string> labels;
  double value = 0;
};

// One sample line of the text format, its label values unescaped.
std::optional<Series> parse_series(const std::string& line) {
  Series s;
  size_t i = 0;
  while (i < line.size() && line[i] != '{' && line[i] != ' ') s.name += line[i++];
  if (i < line.size() && line[i] == '{') {
    ++i;
    while (i < line.size() && line[i] != '}') {
      std::string key;
      while (i < line.size() && line[i] != '=') key += line[i++];
      if (i + 1 >= line.size() || line[i + 1] != '"') return std::nullopt;
      i += 2;
      std::string value;
      for (; i < line.size() && line[i] != '"'; ++i) {
        if (line[i] != '\\') {
          value += line[i];
          continue;
        }
        if (++i == line.size()) return std::nullopt;
        if (line[i] == 'n')
          value += '\n';
        else if (line[i] == '\\' || line[i] == '"')
          value += line[i];
        else
          return std::nullopt;  // no other escapes exist
      }
      if (i == line.size()) return std::nullopt;
      ++i;  // the closing quote
      if (!s.labels.emplace(key, value).second) return std::nullopt;
      if (i < line.size() && line[i] == ',') ++i;
    }
    if (i == line.size()) return std::nullopt;
    ++i;
  }
  if (i >= line.size() || line[i] != ' ') return std::nullopt;
  try {
    size_t used = 0;
    s.value = std::stod(line.substr(i + 1), &used);
    if (i + 1 + used != line.size()) return std::nullopt;
  } catch (...) {
    return std::nullopt;
  }
  return s;
}

std::vector<Series> parse_exposition(const std::string& text) {
  std::vector<Series> out;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    if (line.starts_with("#")) continue;
    auto s = parse_series(line);
    EXPECT_TRUE(s) << "not a sample line: " << line;
    if (s) out.push_back(*s);
  }
  return out;
}

// The series named `name` whose labels are exactly `labels`.
std::optional<double> value_of(const std::vector<Series>& all, const std::string& name,
                               const std::map<std::string, std::string>& labels = {}) {
  for (const Series& s : all)
    if (s.name == name && s.labels == labels) return s.value;
  return std::nullopt;
}

size_t count_named(const std::vector<Series>& all, const std::string& name) {
  size_t n = 0;
  for (const Series& s : all) n += s.name == name;
  return n;
}

// What Prometheus's parser requires of the text: each family's HELP and TYPE
// once, before its samples, its samples together, no series twice.
void expect_well_formed(const std::string& text) {
  ASSERT_FALSE(text.empty());
  EXPECT_EQ(text.back(), '\n');
  std::set<std::string> helped, typed, finished, seen;
  std::string current;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    ASSERT_FALSE(line.empty()) << "an empty line";
    if (line.starts_with("# HELP ") || line.starts_with("# TYPE ")) {
      std::string rest = line.substr(7);
      std::string name = rest.substr(0, rest.find(' '));
      ASSERT_NE(rest.find(' '), std::string::npos) << line;
      auto& set = line[2] == 'H' ? helped : typed;
      EXPECT_TRUE(set.insert(name).second) << "twice: " << line;
      if (line[2] == 'T') {
        std::string type = rest.substr(rest.find(' ') + 1);
        EXPECT_TRUE(type == "gauge" || type == "counter") << line;
        if (type == "counter") {
          EXPECT_TRUE(name.ends_with("_total")) << line;
        }
      }
      continue;
    }
    ASSERT_FALSE(line.starts_with("#")) << line;
    std::string name = line.substr(0, line.find_first_of("{ "));
    EXPECT_TRUE(helped.contains(name)) << "no HELP for " << line;
    EXPECT_TRUE(typed.contains(name)) << "no TYPE for " << line;
    if (name != current) {
      EXPECT_FALSE(finished.contains(name)) << "family split: " << line;
      if (!current.empty()) finished.insert(current);
      current = name;
    }
    auto s = parse_series(line);
    ASSERT_TRUE(s) << line;
    std::string identity = s->name;
    for (const auto& [k, v] : s->labels) identity += "\x01" + k + "=" + v;
    EXPECT_TRUE(seen.insert(identity).second) << "series twice: " << line;
  }
}

ProcessTotals totals(uint32_t tgid, std::string comm, double live_bytes, double alloc_bytes,
                     bool ended = false) {
  ProcessTotals p;
  p.instance = tgid;
  p.process = instance(tgid, std::move(comm), ended);
  p.totals.live_bytes = live_bytes;
  p.totals.live_objects = live_bytes / 100;
  p.totals.alloc_bytes = alloc_bytes;
  p.totals.alloc_objects = alloc_bytes / 100;
  p.totals.samples = 1;
  return p;
}

TEST(RenderMetrics, RunningProcessGetsSeriesWithItsLabels) {
  ProcessTotals nginx = totals(42, "nginx", 1000, 5000);
  TargetLabels service = labels_from_cgroup("/system.slice/nginx.service");
  ProcessTotals app = totals(7, "app", 300, 600);
  TargetLabels pod = labels_from_cgroup("/kubepods/burstable/pod" + kPodUid + "/" + kId);
  MetricsInput in;
  in.processes = {{&nginx, &service}, {&app, &pod}};
  std::string text = render_metrics(in);
  expect_well_formed(text);
  auto all = parse_exposition(text);

  std::map<std::string, std::string> nginx_labels = {
      {"pid", "42"}, {"comm", "nginx"}, {"unit", "nginx.service"}};
  EXPECT_EQ(value_of(all, "allocscope_process_live_bytes", nginx_labels), 1000);
  EXPECT_EQ(value_of(all, "allocscope_process_live_objects", nginx_labels), 10);
  EXPECT_EQ(value_of(all, "allocscope_process_allocated_bytes_total", nginx_labels), 5000);
  EXPECT_EQ(value_of(all, "allocscope_process_allocated_objects_total", nginx_labels), 50);
  EXPECT_EQ(value_of(all, "allocscope_process_live_bytes",
                     {{"pid", "7"}, {"comm", "app"}, {"container", kId}, {"pod", kPodUid}}),
            300);
  EXPECT_EQ(count_named(all, "allocscope_process_live_bytes"), 2u);

  EXPECT_EQ(value_of(all, "allocscope_program_live_bytes", {{"comm", "nginx"}}), 1000);
  EXPECT_EQ(value_of(all, "allocscope_program_allocated_bytes_total", {{"comm", "app"}}), 600);
  EXPECT_EQ(value_of(all, "allocscope_cgroup_live_bytes", {{"cgroup", "/system.slice/nginx.service"}}), 1000);
  EXPECT_EQ(value_of(all, "allocscope_series_omitted"), 0);
}

// Estimates are whole bytes and objects in the exposition: an estimator's
// fraction of a byte (1736990.64) is not the program's.
TEST(RenderMetrics, EstimatesAreWholeNumbers) {
  ProcessTotals p = totals(42, "nginx", 1736990.6437867617, 5000.5);
  TargetLabels none = labels_from_cgroup("/");
  MetricsInput in;
  in.processes = {{&p, &none}};
  std::string text = render_metrics(in);
  expect_well_formed(text);
  EXPECT_NE(text.find("allocscope_process_live_bytes{pid=\"42\",comm=\"nginx\"} 1736991\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("allocscope_process_live_objects{pid=\"42\",comm=\"nginx\"} 17370\n"),
            std::string::npos)
      << text;
  EXPECT_EQ(text.find("1736990.6"), std::string::npos) << text;
}

// An ended process holds no memory: its allocations still count for its
// program and cgroup, its last live estimate does not, and it has no series
// of its own.
TEST(RenderMetrics, EndedProcessCountsAllocationsNotLiveBytes) {
  ProcessTotals running = totals(1, "app", 100, 1000);
  ProcessTotals ended = totals(2, "app", 50, 300, /*ended=*/true);
  TargetLabels l = labels_from_cgroup("/system.slice/app.service");
  MetricsInput in;
  in.processes = {{&running, &l}, {&ended, &l}};
  std::string text = render_metrics(in);
  expect_well_formed(text);
  auto all = parse_exposition(text);

  for (const Series& s : all) EXPECT_NE(s.labels.count("pid") ? s.labels.at("pid") : "", "2") << s.name;
  EXPECT_EQ(count_named(all, "allocscope_process_live_bytes"), 1u);
  EXPECT_EQ(value_of(all, "allocscope_program_live_bytes", {{"comm", "app"}}), 100);
  EXPECT_EQ(value_of(all, "allocscope_program_live_objects", {{"comm", "app"}}), 1);
  EXPECT_EQ(value_of(all, "allocscope_program_allocated_bytes_total", {{"comm", "app"}}), 1300);
  EXPECT_EQ(value_of(all, "allocscope_program_allocated_objects_total", {{"comm", "app"}}), 13);
  EXPECT_EQ(value_of(all, "allocscope_cgroup_live_bytes", {{"cgroup", "/system.slice/app.service"}}), 100);
  EXPECT_EQ(
      value_of(all, "allocscope_cgroup_allocated_bytes_total", {{"cgroup", "/system.slice/app.service"}}),
      1300);
}

// The bound keeps the largest by live bytes at each level and says how many
// it left out.
TEST(RenderMetrics, MaxSeriesKeepsTheLargestAndCountsTheRest) {
  ProcessTotals a = totals(1, "a", 300, 10), b = totals(2, "b", 100, 99999), c = totals(3, "c", 200, 10);
  TargetLabels la = labels_from_cgroup("/a.service"), lb = labels_from_cgroup("/b.service"),
               lc = labels_from_cgroup("/c.service");
  MetricsInput in;
  in.processes = {{&a, &la}, {&b, &lb}, {&c, &lc}};
  in.max_series = 2;
  std::string text = render_metrics(in);
  expect_well_formed(text);
  auto all = parse_exposition(text);

  EXPECT_TRUE(
      value_of(all, "allocscope_process_live_bytes", {{"pid", "1"}, {"comm", "a"}, {"unit", "a.service"}}));
  EXPECT_TRUE(
      value_of(all, "allocscope_process_live_bytes", {{"pid", "3"}, {"comm", "c"}, {"unit", "c.service"}}));
  for (const Series& s : all) {
    EXPECT_FALSE(s.labels.contains("pid") && s.labels.at("pid") == "2") << s.name;
    EXPECT_FALSE(s.labels.contains("comm") && s.labels.at("comm") == "b") << s.name;
    EXPECT_FALSE(s.labels.contains("cgroup") && s.labels.at("cgroup") == "/b.service") << s.name;
  }
  EXPECT_EQ(count_named(all, "allocscope_program_live_bytes"), 2u);
  EXPECT_EQ(count_named(all, "allocscope_cgroup_live_bytes"), 2u);
  EXPECT_EQ(value_of(all, "allocscope_series_omitted"), 3);  // one per level

  in.max_series = 3;
  EXPECT_EQ(value_of(parse_exposition(render_metrics(in)), "allocscope_series_omitted"), 0);
}

// Names are free text: quotes, backslashes and newlines are escaped, and
// the value reads back as it was.
TEST(RenderMetrics, LabelValuesAreEscaped) {
  EXPECT_EQ(escape_label_value("plain"), "plain");
  EXPECT_EQ(escape_label_value("a\"b"), "a\\\"b");
  EXPECT_EQ(escape_label_value("a\\b"), "a\\\\b");
  EXPECT_EQ(escape_label_value("a\nb"), "a\\nb");

  const std::string comm = "a\"b\\c\nd", cgroup = "/x\"y\\z\n.service";
  ProcessTotals p = totals(5, comm, 10, 20);
  TargetLabels l = labels_from_cgroup(cgroup);
  MetricsInput in;
  in.processes = {{&p, &l}};
  in.counters = {{"drops \"ring\"\\\n", 3}};
  std::string text = render_metrics(in);
  EXPECT_NE(text.find("comm=\"a\\\"b\\\\c\\nd\""), std::string::npos) << text;
  expect_well_formed(text);
  auto all = parse_exposition(text);
  EXPECT_EQ(value_of(all, "allocscope_program_live_bytes", {{"comm", comm}}), 10);
  EXPECT_EQ(value_of(all, "allocscope_cgroup_live_bytes", {{"cgroup", cgroup}}), 10);
  EXPECT_EQ(value_of(all, "allocscope_recording_events_total", {{"name", "drops \"ring\"\\\n"}}), 3);
}

TEST(RenderMetrics, CountersAndTheAgentsOwnCost) {
  MetricsInput in;
  in.counters = {{"samples", 7}, {"frees", 123456789012ull}};
  in.self.cpu_seconds = 1.5;
  in.self.resident_bytes = 4096;
  in.self.requests = 9;
  in.self.request_errors = 2;
  in.self.labels_dropped = 1;
  in.self.connection_queue_full = 3;
  in.tables = {{"stacks", 12}, {"process_ids", 5}};
  in.holds = {.count = 3, .p50 = 41000000, .p99 = 180000000, .max = 2500000000};
  std::string text = render_metrics(in);
  expect_well_formed(text);
  EXPECT_EQ(value_of(parse_exposition(text), "allocscope_hold_median_seconds"), 0.041);
  EXPECT_EQ(value_of(parse_exposition(text), "allocscope_hold_p99_seconds"), 0.18);
  EXPECT_EQ(value_of(parse_exposition(text), "allocscope_hold_longest_seconds"), 2.5);
  EXPECT_NE(text.find("allocscope_recording_events_total{name=\"samples\"} 7\n"), std::string::npos) << text;
  auto all = parse_exposition(text);
  EXPECT_EQ(value_of(all, "allocscope_recording_events_total", {{"name", "frees"}}), 123456789012.0);
  EXPECT_EQ(value_of(all, "allocscope_agent_cpu_seconds_total"), 1.5);
  EXPECT_EQ(value_of(all, "allocscope_agent_resident_bytes"), 4096);
  EXPECT_EQ(value_of(all, "allocscope_agent_requests_total"), 9);
  EXPECT_EQ(value_of(all, "allocscope_agent_request_errors_total"), 2);
  EXPECT_EQ(value_of(all, "allocscope_agent_labels_dropped_total"), 1);
  EXPECT_EQ(value_of(all, "allocscope_agent_connection_queue_full_total"), 3);
  EXPECT_EQ(value_of(all, "allocscope_agent_table_entries", {{"table", "stacks"}}), 12);
  EXPECT_EQ(value_of(all, "allocscope_agent_table_entries", {{"table", "process_ids"}}), 5);
  // No processes: the families are still declared, with no series.
  EXPECT_EQ(count_named(all, "allocscope_process_live_bytes"), 0u);
  EXPECT_NE(text.find("# TYPE allocscope_process_live_bytes gauge\n"), std::string::npos);
}

// A comm is the kernel's 15 bytes, cut wherever: it may end inside a UTF-8
// character.
TEST(RenderMetrics, InvalidUtf8InAComm) {
  ProcessTotals p = totals(5, "caf\xc3", 10, 20);
  TargetLabels l = labels_from_cgroup("/");
  MetricsInput in;
  in.processes = {{&p, &l}};
  std::string text;
  ASSERT_NO_THROW(text = render_metrics(in));
  expect_well_formed(text);
  // Prometheus's text parser rejects a label value that is not UTF-8,
  // failing the whole scrape: the stray byte is replaced.
  EXPECT_EQ(text.find('\xc3'), std::string::npos);
  EXPECT_NE(text.find("caf\xEF\xBF\xBD"), std::string::npos);
}

// --- discovery_json, index_html, percent_encode ---

TargetRow row(uint32_t pid, std::string comm, TargetLabels labels = {}) {
  TargetRow r;
  r.pid = pid;
  r.comm = std::move(comm);
  r.labels = std::move(labels);
  r.live_bytes = 2048;
  r.alloc_bytes = 1 << 20;
  return r;
}

TEST(DiscoveryJson, PrometheusHttpSdShape) {
  std::vector<TargetRow> rows = {row(42, "nginx", labels_from_cgroup("/system.slice/nginx.service")),
                                 row(0, "worker")};
  nlohmann::json groups = nlohmann::json::parse(discovery_json(rows, "node1:6060"));
  ASSERT_TRUE(groups.is_array());
  ASSERT_EQ(groups.size(), 2u);
  for (const auto& g : groups) {
    ASSERT_TRUE(g.is_object());
    EXPECT_EQ(g.size(), 2u) << g.dump();
    EXPECT_EQ(g.at("targets"), nlohmann::json::array({"node1:6060"}));
    ASSERT_TRUE(g.at("labels").is_object());
    for (const auto& [key, value] : g.at("labels").items()) EXPECT_TRUE(value.is_string()) << key;
  }

  // A process: scraped as ?pid=42.
  const auto& pid = groups[0].at("labels");
  EXPECT_EQ(pid.at("__param_pid"), "42");
  EXPECT_EQ(pid.at("pid"), "42");
  EXPECT_EQ(pid.at("comm"), "nginx");
  EXPECT_EQ(pid.at("unit"), "nginx.service");
  EXPECT_EQ(pid.at("cgroup"), "/system.slice/nginx.service");
  EXPECT_FALSE(pid.contains("__param_comm"));
  // Empty labels are left out, not sent empty.
  EXPECT_FALSE(pid.contains("container"));
  EXPECT_FALSE(pid.contains("pod"));

  // A program: scraped as ?comm=worker.
  const auto& program = groups[1].at("labels");
  EXPECT_EQ(program.at("__param_comm"), "worker");
  EXPECT_EQ(program.at("comm"), "worker");
  EXPECT_FALSE(program.contains("__param_pid"));
  EXPECT_FALSE(program.contains("pid"));
  EXPECT_FALSE(program.contains("unit"));
  EXPECT_FALSE(program.contains("cgroup"));
}

TEST(DiscoveryJson, ContainerAndPodLabels) {
  TargetLabels l = labels_from_cgroup("/kubepods/burstable/pod" + kPodUid + "/" + kId);
  nlohmann::json groups = nlohmann::json::parse(discovery_json({row(9, "app", l)}, "h:1"));
  const auto& labels = groups.at(0).at("labels");
  EXPECT_EQ(labels.at("container"), kId);
  EXPECT_EQ(labels.at("pod"), kPodUid);
  EXPECT_FALSE(labels.contains("unit"));
}

// A process in a PID namespace of its own: its id there and its start, as
// labels; a host process (ns_pid 0: the same id) and an unknown start have none.
TEST(DiscoveryJson, NamespacePidAndStartTime) {
  TargetRow in_container = row(4242, "app"), host = row(7, "sshd");
  in_container.ns_pid = 1;
  in_container.start_wall_ns = int64_t(1795740000) * 1000000000 + 999999999;  // 2026-11-27T00:40:00Z
  nlohmann::json groups = nlohmann::json::parse(discovery_json({in_container, host}, "h:1"));
  const auto& a = groups.at(0).at("labels");
  EXPECT_EQ(a.at("pid"), "4242");
  EXPECT_EQ(a.at("ns_pid"), "1");
  EXPECT_EQ(a.at("start_time"), "2026-11-27T00:40:00Z");
  const auto& b = groups.at(1).at("labels");
  EXPECT_FALSE(b.contains("ns_pid"));
  EXPECT_FALSE(b.contains("start_time"));
}

TEST(DiscoveryJson, NoRowsIsAnEmptyList) {
  nlohmann::json groups = nlohmann::json::parse(discovery_json({}, "h:1"));
  EXPECT_TRUE(groups.is_array());
  EXPECT_TRUE(groups.empty());
}

// Names are bytes: a comm that is not UTF-8 still gives valid JSON.
TEST(DiscoveryJson, InvalidUtf8DoesNotThrow) {
  std::string text;
  ASSERT_NO_THROW(text = discovery_json({row(0, "ab\xff\xfe"), row(3, "caf\xc3")}, "h:1"));
  nlohmann::json groups;
  ASSERT_NO_THROW(groups = nlohmann::json::parse(text));
  ASSERT_EQ(groups.size(), 2u);
  std::string comm = groups[0].at("labels").at("comm");
  EXPECT_TRUE(comm.starts_with("ab")) << comm;
  EXPECT_NE(comm.find("\xEF\xBF\xBD"), std::string::npos) << "replaced by U+FFFD";
}

TEST(PercentEncode, EveryByteButTheUnreserved) {
  EXPECT_EQ(percent_encode("a b/c"), "a%20b%2Fc");
  EXPECT_EQ(percent_encode("AZaz09-_.~"), "AZaz09-_.~");
  EXPECT_EQ(percent_encode("&=?#%+"), "%26%3D%3F%23%25%2B");
  EXPECT_EQ(percent_encode("\xff\x01"), "%FF%01");
  EXPECT_EQ(percent_encode(""), "");
}

TEST(IndexHtml, EscapesNames) {
  TargetLabels l = labels_from_cgroup("/system.slice/<b>.service");
  std::string h = index_html({row(42, "<script>", l), row(0, "<script>")}, "1.0 <i>");
  EXPECT_EQ(h.find("<script>"), std::string::npos);
  EXPECT_EQ(h.find("<b>"), std::string::npos);
  EXPECT_EQ(h.find("<i>"), std::string::npos);
  EXPECT_NE(h.find("&lt;script&gt;"), std::string::npos);
  EXPECT_TRUE(h.starts_with("<!DOCTYPE html>"));
}

// A program's links carry its name percent-encoded, so a space, slash or
// ampersand does not change the query.
TEST(IndexHtml, LinksEncodeTheTarget) {
  std::string h = index_html({row(0, "a b/c"), row(0, "x&y"), row(42, "nginx")}, "1.0");
  EXPECT_NE(h.find("debug/pprof/heap?comm=a%20b%2Fc\""), std::string::npos) << h;
  EXPECT_NE(h.find("debug/pprof/allocs?comm=a%20b%2Fc\""), std::string::npos) << h;
  EXPECT_NE(h.find("debug/pprof/heap?comm=x%26y\""), std::string::npos) << h;
  EXPECT_EQ(h.find("comm=a b"), std::string::npos);
  EXPECT_NE(h.find("debug/pprof/heap?pid=42\""), std::string::npos) << h;
}

// --- Bridge ---

class FakeView : public LiveView {
 public:
  std::vector<ProcessTotals> processes() override { return {}; }
  const ProcessTable& process_table() const override { return table_; }
  void catch_up() override { ++catch_ups; }
  Baseline baseline(const InstanceSelector&) override { return {}; }
  Recording snapshot(const InstanceSelector&, const Baseline*) override { return {}; }
  std::vector<std::pair<std::string, uint64_t>> counters() override { return {}; }
  std::pair<size_t, size_t> stack_table() const override { return {0, 1}; }
  HoldTimes hold_times() const override { return {}; }
  std::vector<Folded> fold_ended(uint64_t, const FoldGrouping&, uint64_t) override { return {}; }
  std::vector<std::pair<std::string, uint64_t>> table_sizes() const override { return {}; }
  const std::string& cgroup_path(uint64_t) override { return none_; }
  size_t forget_removed_cgroups(uint64_t) override { return 0; }

  int catch_ups = 0;

 private:
  ProcessTable table_;
  std::string none_;
};

constexpr auto kPatience = 10s;

// Polls `done` until true or kPatience has passed.
template <typename F>
bool eventually(F done) {
  auto until = std::chrono::steady_clock::now() + kPatience;
  while (!done()) {
    if (std::chrono::steady_clock::now() > until) return false;
    std::this_thread::sleep_for(1ms);
  }
  return true;
}

// As eventually, ticking the bridge on this thread meanwhile.
template <typename F>
bool eventually_ticking(Bridge& bridge, LiveView& view, F done) {
  return eventually([&] {
    bridge.on_tick(view);
    return done();
  });
}

// Server threads calling Bridge::run, each noting its outcome. Declared
// after what their jobs use; on the way out (a failed assertion too) the
// bridge stops, so no thread is left waiting, and each is joined.
class Servers {
 public:
  explicit Servers(Bridge& bridge) : bridge_(bridge) {}
  ~Servers() {
    bridge_.on_stop();
    for (std::thread& t : threads_) t.join();
  }
  // Starts a thread running `job` through the bridge; returns its index.
  size_t start(Bridge::Job job) {
    size_t i = threads_.size();
    threads_.emplace_back([this, i, job = std::move(job)] {
      outcomes_[i] = bridge_.run(job);
      returned_[i] = true;
    });
    return i;
  }
  bool returned(size_t i) const { return returned_[i]; }
  Bridge::Outcome outcome(size_t i) const { return outcomes_[i]; }

 private:
  static constexpr size_t kMax = 8;
  Bridge& bridge_;
  std::atomic<Bridge::Outcome> outcomes_[kMax] = {};
  std::atomic<bool> returned_[kMax] = {};
  std::vector<std::thread> threads_;
};

TEST(Bridge, JobRunsOnTheTickingThread) {
  Bridge bridge(4);
  FakeView view;
  std::atomic<std::thread::id> ran_on;
  std::atomic<LiveView*> seen = nullptr;
  Servers servers(bridge);
  size_t s = servers.start([&](LiveView& v) {
    ran_on = std::this_thread::get_id();
    seen = &v;
  });
  // Without a tick nothing runs.
  std::this_thread::sleep_for(20ms);
  EXPECT_FALSE(servers.returned(s));
  EXPECT_EQ(seen, nullptr);
  ASSERT_TRUE(eventually_ticking(bridge, view, [&] { return servers.returned(s); }));
  EXPECT_EQ(servers.outcome(s), Bridge::Outcome::Done);
  EXPECT_EQ(ran_on, std::this_thread::get_id());
  EXPECT_EQ(seen, &view);
}

TEST(Bridge, TickHookRunsOnEveryTick) {
  Bridge bridge(1);
  FakeView view;
  int ticks = 0;
  bridge.set_tick([&](LiveView& v) {
    EXPECT_EQ(&v, &view);
    ++ticks;
  });
  bridge.on_tick(view);
  bridge.on_tick(view);
  EXPECT_EQ(ticks, 2);
}

// A request is answered with the events placed before it read: the view
// catches up before the jobs run, and a tick without a job leaves it be.
TEST(Bridge, JobsSeeTheViewCaughtUp) {
  Bridge bridge(4);
  FakeView view;
  bridge.on_tick(view);
  EXPECT_EQ(view.catch_ups, 0);
  std::atomic<int> seen = -1;
  Servers servers(bridge);
  size_t s = servers.start([&](LiveView&) { seen = view.catch_ups; });
  ASSERT_TRUE(eventually_ticking(bridge, view, [&] { return servers.returned(s); }));
  EXPECT_EQ(seen, 1);
  EXPECT_EQ(view.catch_ups, 1);
}

// Two requests, room for one: whichever queues first waits, the other is
// turned away at once, before any tick.
TEST(Bridge, FullQueueIsBusy) {
  Bridge bridge(1);
  FakeView view;
  std::atomic<int> ran = 0;
  Servers servers(bridge);
  size_t a = servers.start([&](LiveView&) { ++ran; });
  size_t b = servers.start([&](LiveView&) { ++ran; });
  ASSERT_TRUE(eventually([&] { return servers.returned(a) || servers.returned(b); }));
  size_t busy = servers.returned(a) ? a : b, waiting = busy == a ? b : a;
  EXPECT_EQ(servers.outcome(busy), Bridge::Outcome::Busy);
  EXPECT_EQ(ran, 0);
  ASSERT_TRUE(eventually_ticking(bridge, view, [&] { return servers.returned(waiting); }));
  EXPECT_EQ(servers.outcome(waiting), Bridge::Outcome::Done);
  EXPECT_EQ(ran, 1);
  // The queue has room again.
  size_t again = servers.start([&](LiveView&) { ++ran; });
  ASSERT_TRUE(eventually_ticking(bridge, view, [&] { return servers.returned(again); }));
  EXPECT_EQ(servers.outcome(again), Bridge::Outcome::Done);
  EXPECT_EQ(ran, 2);
}

TEST(Bridge, NoRoomAtAllIsBusy) {
  Bridge bridge(0);
  bool ran = false;
  EXPECT_EQ(bridge.run([&](LiveView&) { ran = true; }), Bridge::Outcome::Busy);
  EXPECT_FALSE(ran);
}

TEST(Bridge, RunAfterStopIsStopped) {
  Bridge bridge(4);
  FakeView view;
  EXPECT_FALSE(bridge.stopped());
  bridge.on_stop();
  EXPECT_TRUE(bridge.stopped());
  bool ran = false;
  EXPECT_EQ(bridge.run([&](LiveView&) { ran = true; }), Bridge::Outcome::Stopped);
  bridge.on_tick(view);
  EXPECT_FALSE(ran);
}

// A request waiting when the recording ends is released, its job not run.
TEST(Bridge, StopReleasesAWaitingRun) {
  Bridge bridge(1);
  FakeView view;
  std::atomic<bool> ran = false;
  Servers servers(bridge);
  size_t a = servers.start([&](LiveView&) { ran = true; });
  size_t b = servers.start([&](LiveView&) { ran = true; });
  // One returned Busy: the other is queued and waiting.
  ASSERT_TRUE(eventually([&] { return servers.returned(a) || servers.returned(b); }));
  size_t busy = servers.returned(a) ? a : b, waiting = busy == a ? b : a;
  EXPECT_EQ(servers.outcome(busy), Bridge::Outcome::Busy);
  bridge.on_stop();
  ASSERT_TRUE(eventually([&] { return servers.returned(waiting); }));
  EXPECT_EQ(servers.outcome(waiting), Bridge::Outcome::Stopped);
  EXPECT_FALSE(ran);
}

TEST(Bridge, SleepEndsEarlyOnStop) {
  Bridge bridge(1);
  EXPECT_TRUE(bridge.sleep(1ms));
  std::atomic<bool> returned = false, slept = true;
  auto start = std::chrono::steady_clock::now();
  std::thread sleeper([&] {
    slept = bridge.sleep(std::chrono::milliseconds(60s));
    returned = true;
  });
  bridge.on_stop();
  EXPECT_TRUE(eventually([&] { return returned.load(); }));
  sleeper.join();
  EXPECT_FALSE(slept);
  EXPECT_LT(std::chrono::steady_clock::now() - start, 30s);
  // Once stopped, no sleep waits.
  EXPECT_FALSE(bridge.sleep(std::chrono::milliseconds(60s)));
}

// --- ConnectionQueue ---

// At capacity, the accepting thread waits until a connection finishes; the
// wait is counted and nothing is dropped.
TEST(ConnectionQueue, AtCapacityEnqueueWaitsForASlot) {
  std::atomic<uint64_t> full{0};
  std::promise<void> release;
  std::shared_future<void> released = release.get_future().share();
  std::atomic<int> ran{0};
  ConnectionQueue q(1, 2, full);
  auto job = [&] {
    released.wait();
    ++ran;
  };
  q.enqueue(job);
  q.enqueue(job);
  EXPECT_EQ(full, 0u);
  auto third = std::async(std::launch::async, [&] { q.enqueue([&] { ++ran; }); });
  // The wait is counted however late the third thread starts; while the
  // first two are held it cannot have returned.
  EXPECT_TRUE(eventually([&] { return full == 1u; }));
  EXPECT_EQ(third.wait_for(0ms), std::future_status::timeout);
  release.set_value();
  EXPECT_EQ(third.wait_for(std::chrono::seconds(30)), std::future_status::ready);
  q.shutdown();
  EXPECT_EQ(ran, 3);
}

// --- window_base, subtract_window_base ---

StackTotals stack_totals() {
  StackTotals t;
  t.alloc_objects = 10;
  t.alloc_bytes = 1000;
  t.samples = 5;
  t.alloc_stats.samples = 5;
  t.alloc_stats.ht_bytes = 1000;
  t.alloc_stats.exact_bytes = 64;
  t.live_objects = 4;
  t.live_bytes = 400;
  t.live_samples = 2;
  t.live_stats.samples = 2;
  t.live_stats.ht_bytes = 400;
  return t;
}

TEST(WindowBase, TakesTheAllocationSideAndTheLiveFigures) {
  WindowBase a = window_base(stack_totals());
  EXPECT_EQ(a.objects, 10);
  EXPECT_EQ(a.bytes, 1000);
  EXPECT_EQ(a.samples, 5u);
  EXPECT_EQ(a.stats.samples, 5u);
  EXPECT_EQ(a.stats.ht_bytes, 1000);
  EXPECT_EQ(a.stats.exact_bytes, 64u);
  EXPECT_EQ(a.live_objects, 4);
  EXPECT_EQ(a.live_bytes, 400);
}

// A delta as Go's ?seconds= gives it: what was allocated since the baseline,
// and how the live figures moved.
TEST(SubtractWindowBase, LeavesTheDifferences) {
  StackTotals t = stack_totals();
  WindowBase earlier{
      .objects = 4, .bytes = 300, .samples = 2, .stats = {}, .live_objects = 1, .live_bytes = 100};
  earlier.stats.samples = 2;
  earlier.stats.ht_bytes = 300;
  earlier.stats.exact_bytes = 64;
  subtract_window_base(t, earlier);
  EXPECT_EQ(t.alloc_objects, 6);
  EXPECT_EQ(t.alloc_bytes, 700);
  EXPECT_EQ(t.samples, 3u);
  EXPECT_EQ(t.alloc_stats.samples, 3u);
  EXPECT_EQ(t.alloc_stats.ht_bytes, 700);
  EXPECT_EQ(t.alloc_stats.exact_bytes, 0u);
  EXPECT_EQ(t.live_objects, 3);
  EXPECT_EQ(t.live_bytes, 300);
  // The two moments share samples: no variance is claimed for the change.
  EXPECT_EQ(t.live_stats.samples, 0u);
  EXPECT_EQ(t.live_stats.ht_bytes, 0);
}

TEST(SubtractWindowBase, ItsOwnBaselineLeavesNothing) {
  StackTotals t = stack_totals();
  subtract_window_base(t, window_base(t));
  EXPECT_EQ(t.alloc_objects, 0);
  EXPECT_EQ(t.alloc_bytes, 0);
  EXPECT_EQ(t.samples, 0u);
  EXPECT_EQ(t.alloc_stats.samples, 0u);
  EXPECT_EQ(t.live_bytes, 0);
  EXPECT_EQ(t.live_objects, 0);
}

// Allocated figures are counters: a baseline larger than now (taken before
// a reset) gives zero, never a negative count or a wrapped one. Live
// figures are gauges: memory freed in the window is a negative change.
TEST(SubtractWindowBase, CountersNeverNegativeGaugesEitherSign) {
  StackTotals t = stack_totals();
  WindowBase bigger{
      .objects = 100, .bytes = 1e6, .samples = 50, .stats = {}, .live_objects = 9, .live_bytes = 900};
  bigger.stats.samples = 50;
  bigger.stats.ht_bytes = 1e6;
  bigger.stats.exact_bytes = 1000;
  subtract_window_base(t, bigger);
  EXPECT_EQ(t.alloc_objects, 0);
  EXPECT_EQ(t.alloc_bytes, 0);
  EXPECT_EQ(t.samples, 0u);
  EXPECT_EQ(t.alloc_stats.samples, 0u);
  EXPECT_EQ(t.alloc_stats.ht_bytes, 0);
  EXPECT_EQ(t.alloc_stats.exact_bytes, 0u);
  EXPECT_EQ(t.live_bytes, -500);
  EXPECT_EQ(t.live_objects, -5);
}

// --- cgroup_v2_path ---

TEST(CgroupV2Path, TheUnifiedLine) {
  EXPECT_EQ(cgroup_v2_path("0::/system.slice/x.service\n"), "/system.slice/x.service");
  EXPECT_EQ(cgroup_v2_path("0::/\n"), "/");
  // No trailing newline.
  EXPECT_EQ(cgroup_v2_path("0::/a/b"), "/a/b");
}

// Hybrid systems list the v1 hierarchies too; only the "0::" line counts.
TEST(CgroupV2Path, AmongV1Lines) {
  EXPECT_EQ(cgroup_v2_path("12:memory:/foo\n0::/bar\n"), "/bar");
  EXPECT_EQ(cgroup_v2_path("0::/bar\n12:memory:/foo\n"), "/bar");
  EXPECT_EQ(cgroup_v2_path("12:memory:/foo\n1:name=systemd:/x\n0::/user.slice/u.scope\n"),
            "/user.slice/u.scope");
  // A v1 line whose path contains "0::" is not the v2 line.
  EXPECT_EQ(cgroup_v2_path("3:cpu:/10::/x\n0::/y\n"), "/y");
}

TEST(CgroupV2Path, NoneIsEmpty) {
  EXPECT_EQ(cgroup_v2_path(""), "");
  EXPECT_EQ(cgroup_v2_path("12:memory:/foo\n4:cpu,cpuacct:/foo\n"), "");
  EXPECT_EQ(cgroup_v2_path("\n\n"), "");
}

// --- FoldGroups ---

// Ended processes fold into their program's and cgroup's instance; past
// the capacity a new cgroup's go to their program's (no cgroup), never a
// program to "[other]" before twice the capacity: a program's profile must
// not go down. Unit filters find the cgroup's.
TEST(FoldGroups, KeepsProgramsWholePastTheCapacity) {
  FoldGroups g(2);
  const std::string web = "/system.slice/web.service";
  EXPECT_EQ(g.key("web", web), (FoldKey{"web", web}));
  EXPECT_EQ(g.key("web", web), (FoldKey{"web", web}));
  EXPECT_EQ(g.key("db", "/system.slice/db.service"), (FoldKey{"db", "/system.slice/db.service"}));
  EXPECT_EQ(g.key("web", "/system.slice/other.service"), (FoldKey{"web", ""}));  // full: the program's
  EXPECT_EQ(g.key("cron", "/system.slice/cron.service"), (FoldKey{"cron", ""}));
  EXPECT_EQ(g.key("web", web), (FoldKey{"web", web})) << "a cgroup already held stays";
  EXPECT_EQ(g.key("more", ""), (FoldKey{"[other]", ""}));  // twice the capacity
  EXPECT_EQ(g.processes(), 7u);
  EXPECT_EQ(g.unnamed(), 3u);
  EXPECT_EQ(g.size(), 5u);
  EXPECT_TRUE(target_holds({TargetKind::Unit, "web.service"}, {.comm = "web", .ended = true, .folded = true},
                           labels_from_cgroup(web)));
}

}  // namespace
}  // namespace allocscope
