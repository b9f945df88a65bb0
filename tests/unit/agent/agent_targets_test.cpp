// Which processes a request names (by its path or its query) and what a
// target holds, the labels a cgroup path gives them, and --listen's address.
#include <gtest/gtest.h>

#include <cerrno>
#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "agent/listen_address.h"
#include "agent/targets.h"
#include "agent_fixture.h"

namespace allocscope {
namespace {

using Params = std::multimap<std::string, std::string>;

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

}  // namespace
}  // namespace allocscope
