// /metrics in Prometheus's text exposition format (version 0.0.4): the
// estimates per process, program and cgroup, the recording's counters and
// the agent's own cost. Pure logic.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "agent/targets.h"
#include "record/live_view.h"

namespace allocscope {

struct LabelledProcess {
  const ProcessTotals* process;
  const TargetLabels* labels;
};

struct AgentSelf {
  double cpu_seconds = 0;
  uint64_t resident_bytes = 0;
  uint64_t requests = 0, request_errors = 0, labels_dropped = 0;
  uint64_t connection_queue_full = 0;  // times accepting waited for a free slot
  uint64_t request_timeouts = 0;       // requests or answers cut short by their deadline
  uint64_t responses_shared = 0;       // answers given from another request's build
  uint64_t stacks = 0;                 // in the recording's stack table
};

struct MetricsInput {
  std::vector<LabelledProcess> processes;  // the target's, running or ended
  std::vector<std::pair<std::string, uint64_t>> counters;
  std::vector<std::pair<std::string, uint64_t>> tables;  // entries per table of the agent's
  AgentSelf self;
  HoldTimes holds;
  size_t max_series = 500;  // per level (process, program, cgroup): the largest by live bytes
};

std::string render_metrics(const MetricsInput& in);

// A label value as the exposition format quotes it.
std::string escape_label_value(const std::string& v);

}  // namespace allocscope
