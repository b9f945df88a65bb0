#include "agent/metrics.h"

#include <algorithm>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <map>

#include "base/utf8.h"

namespace allocscope {
namespace {

struct Row {
  std::string labels;  // rendered: pid="1",comm="x"
  double live_bytes = 0, live_objects = 0, alloc_bytes = 0, alloc_objects = 0;
  uint64_t samples = 0;
};

std::string number(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.17g", v);
  return buf;
}

// An estimate of bytes or objects, as the whole number it stands for (a
// fraction of a byte is the estimator's, not the program's).
std::string whole(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.0f", std::round(v));
  return buf;
}

std::string label(const char* key, const std::string& value) {
  return std::string(key) + "=\"" + escape_label_value(value) + "\"";
}

void add(Row& r, const StackTotals& t, bool running) {
  r.alloc_bytes += t.alloc_bytes;
  r.alloc_objects += t.alloc_objects;
  r.samples += t.samples;
  if (!running) return;  // an ended process holds nothing
  r.live_bytes += t.live_bytes;
  r.live_objects += t.live_objects;
}

// The largest `max` rows by live bytes (then allocated bytes); the count
// left out.
size_t keep_largest(std::vector<Row>& rows, size_t max) {
  std::sort(rows.begin(), rows.end(), [](const Row& a, const Row& b) {
    return a.live_bytes != b.live_bytes ? a.live_bytes > b.live_bytes : a.alloc_bytes > b.alloc_bytes;
  });
  size_t omitted = rows.size() > max ? rows.size() - max : 0;
  rows.resize(std::min(rows.size(), max));
  return omitted;
}

void family(std::string& out, const std::string& name, const char* type, const char* help,
            const std::vector<Row>& rows, double Row::*field) {
  out += "# HELP " + name + " " + help + "\n# TYPE " + name + " " + type + "\n";
  for (const Row& r : rows) out += name + "{" + r.labels + "} " + whole(r.*field) + "\n";
}

void level(std::string& out, const std::string& prefix, const char* what, const std::vector<Row>& rows) {
  family(out, prefix + "live_bytes", "gauge",
         (std::string("Estimated bytes allocated and not yet freed, per ") + what).c_str(), rows,
         &Row::live_bytes);
  family(out, prefix + "live_objects", "gauge",
         (std::string("Estimated allocations not yet freed, per ") + what).c_str(), rows, &Row::live_objects);
  family(out, prefix + "allocated_bytes_total", "counter",
         (std::string("Estimated bytes allocated since the agent began tracking, per ") + what).c_str(), rows,
         &Row::alloc_bytes);
  family(out, prefix + "allocated_objects_total", "counter",
         (std::string("Estimated allocations since the agent began tracking, per ") + what).c_str(), rows,
         &Row::alloc_objects);
}

void scalar(std::string& out, const char* name, const char* type, const char* help, double v) {
  out += std::string("# HELP ") + name + " " + help + "\n# TYPE " + name + " " + type + "\n" + name + " " +
         number(v) + "\n";
}

// One family of series told apart by one label (a counter's or a table's
// name, free text as a label value; the metric name is fixed).
void named_family(std::string& out, const char* metric, const char* type, const char* help, const char* key,
                  const std::vector<std::pair<std::string, uint64_t>>& named) {
  out += std::string("# HELP ") + metric + " " + help + "\n# TYPE " + metric + " " + type + "\n";
  for (const auto& [name, n] : named)
    out += std::string(metric) + "{" + label(key, name) + "} " + std::to_string(n) + "\n";
}

}  // namespace

std::string escape_label_value(const std::string& raw) {
  // Prometheus rejects a whole scrape over one label that is not UTF-8 (a
  // comm cut mid-character at 15 bytes).
  std::string out;
  for (char c : valid_utf8(raw)) {
    if (c == '\\' || c == '"') out += '\\';
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    out += c;
  }
  return out;
}

std::string render_metrics(const MetricsInput& in) {
  std::vector<Row> processes;
  std::map<std::string, Row> programs, cgroups;
  for (const LabelledProcess& lp : in.processes) {
    const ProcessInstance& p = lp.process->process;
    bool running = !p.ended;
    if (running) {
      Row r;
      r.labels = label("pid", std::to_string(p.tgid)) + "," + label("comm", p.comm);
      if (uint32_t ns = p.shown_ns_pid()) r.labels += "," + label("ns_pid", std::to_string(ns));
      if (!lp.labels->unit.empty()) r.labels += "," + label("unit", lp.labels->unit);
      if (!lp.labels->container.empty()) r.labels += "," + label("container", lp.labels->container);
      if (!lp.labels->pod.empty()) r.labels += "," + label("pod", lp.labels->pod);
      add(r, lp.process->totals, true);
      processes.push_back(std::move(r));
    }
    Row& program = programs[p.comm];
    program.labels = label("comm", p.comm);
    add(program, lp.process->totals, running);
    if (!lp.labels->cgroup.empty()) {
      Row& cgroup = cgroups[lp.labels->cgroup];
      cgroup.labels = label("cgroup", lp.labels->cgroup);
      add(cgroup, lp.process->totals, running);
    }
  }
  auto rows = [](std::map<std::string, Row>& m) {
    std::vector<Row> v;
    for (auto& [key, r] : m) v.push_back(std::move(r));
    return v;
  };
  std::vector<Row> by_program = rows(programs), by_cgroup = rows(cgroups);
  size_t omitted = keep_largest(processes, in.max_series) + keep_largest(by_program, in.max_series) +
                   keep_largest(by_cgroup, in.max_series);
  std::string out;
  level(out, "allocscope_process_", "running process", processes);
  level(out, "allocscope_program_", "program (all its processes; allocations of ended ones included)",
        by_program);
  level(out, "allocscope_cgroup_", "cgroup", by_cgroup);
  scalar(out, "allocscope_series_omitted", "gauge",
         "Series left out of this scrape by the --max-series bound (the smallest by live bytes)",
         double(omitted));
  named_family(out, "allocscope_recording_events_total", "counter",
               "The recording's counters by name: samples, frees, drops by cause, probes", "name",
               in.counters);
  named_family(out, "allocscope_agent_table_entries", "gauge",
               "Entries in the agent's own tables (what its memory grows with)", "table", in.tables);
  // A file not seen before stops the process that maps it until examined.
  scalar(out, "allocscope_hold_median_seconds", "gauge",
         "Median time a process was held for a new file (of the last 4096 holds)",
         double(in.holds.p50) / 1e9);
  scalar(out, "allocscope_hold_p99_seconds", "gauge",
         "99th percentile of the time a process was held for a new file (of the last 4096 holds)",
         double(in.holds.p99) / 1e9);
  scalar(out, "allocscope_hold_longest_seconds", "gauge", "The longest a process was held for a new file",
         double(in.holds.max) / 1e9);
  scalar(out, "allocscope_agent_cpu_seconds_total", "counter",
         "CPU time the agent has used (user and system)", in.self.cpu_seconds);
  scalar(out, "allocscope_agent_resident_bytes", "gauge", "The agent's resident memory",
         double(in.self.resident_bytes));
  scalar(out, "allocscope_agent_stacks", "gauge",
         "Distinct stacks held (bounded by --max-stacks; those of ended processes are forgotten at half)",
         double(in.self.stacks));
  scalar(out, "allocscope_agent_requests_total", "counter", "HTTP requests served", double(in.self.requests));
  scalar(out, "allocscope_agent_request_errors_total", "counter", "HTTP requests answered with an error",
         double(in.self.request_errors));
  scalar(out, "allocscope_agent_connection_queue_full_total", "counter",
         "Times the HTTP server stopped accepting because 64 connections were open or waiting",
         double(in.self.connection_queue_full));
  scalar(out, "allocscope_agent_request_timeouts_total", "counter",
         "HTTP requests not read within 5 s, or answers not written within 20 s (the connection is closed)",
         double(in.self.request_timeouts));
  scalar(out, "allocscope_agent_responses_shared_total", "counter",
         "HTTP answers given from another request's build of the same thing within a second",
         double(in.self.responses_shared));
  scalar(out, "allocscope_agent_labels_dropped_total", "counter",
         "Processes left unlabelled because the label table was full", double(in.self.labels_dropped));
  return out;
}

}  // namespace allocscope
