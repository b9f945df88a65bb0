// `allocscope agent`: an always-on recording whose profiles and metrics are
// served over HTTP to Prometheus, Parca, Pyroscope (Grafana Alloy) and
// `go tool pprof`.
#pragma once

#include <cstddef>
#include <string>

#include "record/record.h"

namespace allocscope {

struct AgentConfig {
  RecordConfig record;  // what to record (no outputs)
  std::string listen = "127.0.0.1:6060";
  std::string token_file;      // bearer token every request must carry; "" for none
  std::string log_file;        // "" for stderr; reopened on SIGHUP
  size_t max_series = 500;     // /metrics: series per level
  unsigned max_seconds = 600;  // ?seconds= at most
  unsigned max_deltas = 4;     // ?seconds= requests at once
  // How long an ended process's stacks and a removed cgroup's path are kept
  // (their totals live on in their program's and cgroup's counters): longer
  // than the scrape interval, so that every scraper sees each process once.
  uint64_t retention_ms = 60000;
};

// Runs until SIGINT or SIGTERM (or --duration); returns the exit status.
int agent(const AgentConfig& config);

}  // namespace allocscope
