#include "agent/targets.h"

#include <array>
#include <cctype>
#include <cerrno>
#include <charconv>
#include <vector>

#include "base/utf8.h"
#include "host/process.h"

namespace allocscope {
namespace {

bool is_hex(std::string_view s) {
  for (char c : s)
    if (!std::isxdigit(static_cast<unsigned char>(c))) return false;
  return !s.empty();
}

// A container id inside one component: "docker-<64 hex>.scope",
// "cri-containerd-<id>.scope", "crio-<id>.scope", "libpod-<id>.scope", or
// the bare id (cgroupfs drivers: /docker/<id>, /kubepods/.../<id>).
std::string container_in(std::string_view part) {
  if (part.ends_with(".scope")) part.remove_suffix(6);
  size_t dash = part.rfind('-');
  std::string_view id = dash == std::string_view::npos ? part : part.substr(dash + 1);
  return id.size() == 64 && is_hex(id) ? std::string(id) : std::string();
}

// "kubepods-burstable-pod<uid with _>.slice" (systemd driver) or
// "pod<uid>" (cgroupfs driver).
std::string pod_in(std::string_view part) {
  if (part.ends_with(".slice")) part.remove_suffix(6);
  size_t at = part.rfind("pod");
  if (at == std::string_view::npos || (at != 0 && part[at - 1] != '-')) return "";
  std::string uid(part.substr(at + 3));
  for (char& c : uid)
    if (c == '_') c = '-';
  return uid.size() == 36 ? uid : "";
}

bool parse_pid(std::string_view s, uint32_t& pid) {
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), pid);
  return ec == std::errc() && end == s.data() + s.size() && pid > 0;
}

constexpr std::array<std::pair<TargetKind, const char*>, 6> kNames{{{TargetKind::Pid, "pid"},
                                                                    {TargetKind::Comm, "comm"},
                                                                    {TargetKind::Cgroup, "cgroup"},
                                                                    {TargetKind::Unit, "unit"},
                                                                    {TargetKind::Container, "container"},
                                                                    {TargetKind::Pod, "pod"}}};

std::optional<TargetKind> kind_named(std::string_view name) {
  for (auto [kind, n] : kNames)
    if (name == n) return kind;
  return std::nullopt;
}

}  // namespace

const char* target_kind_name(TargetKind k) {
  for (auto [kind, n] : kNames)
    if (kind == k) return n;
  return "all";
}

TargetLabels labels_from_cgroup(std::string_view cgroup_path) {
  TargetLabels l;
  l.cgroup = std::string(cgroup_path);
  for (std::string_view part : path_components(cgroup_path)) {
    // The innermost unit names the service: a .service, or a .scope that is
    // not a container's.
    std::string id = container_in(part);
    if (!id.empty()) l.container = id;
    if (std::string pod = pod_in(part); !pod.empty()) l.pod = pod;
    if (id.empty() && (part.ends_with(".service") || part.ends_with(".scope"))) l.unit = std::string(part);
  }
  return l;
}

bool target_holds(const Target& t, const ProcessInstance& p, const TargetLabels& labels) {
  switch (t.kind) {
    case TargetKind::All:
      return true;
    case TargetKind::Pid:
      return std::to_string(p.tgid) == t.value;
    case TargetKind::Comm:  // discovery gives names repaired to UTF-8
      return p.comm == t.value || valid_utf8(p.comm) == t.value;
    case TargetKind::Cgroup: {
      std::string_view c = labels.cgroup, want = t.value;
      while (want.size() > 1 && want.back() == '/') want.remove_suffix(1);
      return c.starts_with(want) && (c.size() == want.size() || want == "/" || c[want.size()] == '/');
    }
    case TargetKind::Unit:
      return labels.unit == t.value;
    case TargetKind::Container:
      return !labels.container.empty() && labels.container.starts_with(t.value) && t.value.size() >= 12;
    case TargetKind::Pod:
      return labels.pod == t.value;
  }
  return false;
}

Result<Addressed> address(std::string_view path, const std::multimap<std::string, std::string>& params) {
  Addressed a;
  a.path = std::string(path);
  int named = 0;
  // Path prefix: /KIND/VALUE/rest (a cgroup path has slashes: query only).
  if (path.starts_with('/')) {
    std::string_view rest = path.substr(1);
    size_t slash = rest.find('/');
    auto kind = kind_named(rest.substr(0, slash));
    if (kind && *kind != TargetKind::Cgroup && slash != std::string_view::npos) {
      rest.remove_prefix(slash + 1);
      size_t end = rest.find('/');
      a.target = {*kind, std::string(rest.substr(0, end))};
      a.path = end == std::string_view::npos ? "/" : std::string(rest.substr(end));
      ++named;
    }
  }
  for (const auto& [key, value] : params) {
    auto kind = kind_named(key);
    if (!kind) continue;
    a.target = {*kind, value};
    ++named;
  }
  if (named > 1)
    return fail("name one target (pid, comm, unit, container, pod or cgroup), not several", EINVAL);
  if (a.target.kind != TargetKind::All && a.target.value.empty())
    return fail(std::string("empty ") + target_kind_name(a.target.kind), EINVAL);
  uint32_t pid = 0;
  if (a.target.kind == TargetKind::Pid) {
    if (!parse_pid(a.target.value, pid)) return fail("not a process id: " + a.target.value, EINVAL);
    a.target.value = std::to_string(pid);  // "042" is process 42
  }
  return a;
}

}  // namespace allocscope
