// What the agent serves besides profiles and metrics: Prometheus's HTTP
// service discovery (JSON) and the index page. Pure logic.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "agent/targets.h"

namespace allocscope {

struct TargetRow {
  uint32_t pid = 0;  // 0 for a program's row
  std::string comm;
  uint32_t ns_pid = 0;        // pid in its own PID namespace, when it differs
  int64_t start_wall_ns = 0;  // when the process started (0: unknown)
  TargetLabels labels;
  double live_bytes = 0, alloc_bytes = 0;
};

// [{"targets": [host_port], "labels": {...}}], one group per row: pid rows
// carry __param_pid (Prometheus and Alloy then scrape ?pid=N), program rows
// __param_comm; pid, comm, unit, container, pod and cgroup as labels, and
// service_name (the unit, else the program) for Pyroscope.
std::string discovery_json(const std::vector<TargetRow>& rows, const std::string& host_port);

// A page listing the rows with links to each one's profiles, flame graphs
// and metrics.
std::string index_html(const std::vector<TargetRow>& rows, const std::string& version);

// RFC 3986: every byte but the unreserved ones as %XX.
std::string percent_encode(const std::string& s);

}  // namespace allocscope
