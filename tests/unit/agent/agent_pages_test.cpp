// What the agent serves as text: /metrics in Prometheus's text format, the
// service discovery Prometheus reads, and the index page.
#include <gtest/gtest.h>

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "agent/metrics.h"
#include "agent/pages.h"
#include "agent/targets.h"
#include "agent_fixture.h"

namespace allocscope {
namespace {

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

}  // namespace
}  // namespace allocscope
