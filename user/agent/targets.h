// Which processes a request asks for, and the labels that name a process
// to profiling backends (its systemd unit, container, Kubernetes pod), read
// from its cgroup path. Pure logic.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>

#include "base/result.h"
#include "model/process_table.h"

namespace allocscope {

struct TargetLabels {
  std::string cgroup;     // the cgroup v2 path, "/system.slice/nginx.service"
  std::string unit;       // "nginx.service", "" when not in a unit
  std::string container;  // 64-hex id (docker, containerd, cri-o, podman), ""
  std::string pod;        // Kubernetes pod uid, ""
};
TargetLabels labels_from_cgroup(std::string_view cgroup_path);

// One process, one program (all its processes), one cgroup (or below it),
// unit, container or pod; All: every process recorded.
enum class TargetKind { All, Pid, Comm, Cgroup, Unit, Container, Pod };

struct Target {
  TargetKind kind = TargetKind::All;
  std::string value;  // pid, program name, cgroup path, ...
};

// The processes of one target, running or ended.
bool target_holds(const Target& t, const ProcessInstance& p, const TargetLabels& labels);

// What a request names: a target by path prefix (/pid/N, /comm/NAME,
// /unit/NAME, /container/ID, /pod/UID) or by query parameter (pid=, comm=,
// unit=, container=, pod=, cgroup=; Prometheus turns a target's
// __param_pid label into pid=), and the rest of the path.
struct Addressed {
  Target target;
  std::string path;  // what follows the prefix: "/debug/pprof/allocs"
};
// `params` are the request's query parameters. Two targets, an unknown
// prefix or a bad pid are errors.
Result<Addressed> address(std::string_view path, const std::multimap<std::string, std::string>& params);

const char* target_kind_name(TargetKind k);

}  // namespace allocscope
