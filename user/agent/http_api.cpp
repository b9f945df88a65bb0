#include "agent/http_api.h"

#include <httplib.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <chrono>
#include <unordered_map>

#include "agent/agent_server.h"
#include "agent/connection_queue.h"
#include "agent/metrics.h"
#include "agent/pages.h"
#include "agent/self_usage.h"
#include "agent/shared_responses.h"
#include "agent/targets.h"
#include "base/clocks.h"
#include "output/pprof.h"
#include "output/render.h"

namespace allocscope {
namespace {

const std::string kTool = std::string("allocscope ") + ALLOCSCOPE_VERSION_STRING;
constexpr size_t kWorkers = 8;
constexpr size_t kMaxConnections = 64;  // accepted and unfinished; more wait in the listen backlog
// Scrapers asking for the same thing within a second share one answer.
constexpr std::chrono::milliseconds kShareWindow{1000};
constexpr size_t kMaxSharedAnswers = 256;

// The selector of a target's instances; `found` tells whether any matched.
InstanceSelector selector(const Target& t, const LabelCache& labels, bool& found) {
  return [&t, &labels, &found](uint32_t instance, const ProcessInstance& p) {
    bool holds = !p.rejected && target_holds(t, p, labels.of(instance));
    found = found || holds;
    return holds;
  };
}

// Each sample named as backends name services: unit, container, pod, host.
void add_labels(Recording& r, const LabelCache& labels, const std::string& host) {
  for (RecSample& s : r.samples) {
    const TargetLabels& l = labels.of(s.instance);
    s.labels = {{"unit", l.unit}, {"container", l.container}, {"pod", l.pod}, {"host", host}};
  }
}

// Instances of the target with their labels, running ones first.
std::vector<TargetRow> rows_of(const std::vector<ProcessTotals>& all, const LabelCache& labels,
                               bool programs) {
  std::vector<TargetRow> rows;
  std::unordered_map<std::string, size_t> by_comm;
  for (const ProcessTotals& p : all) {
    if (p.process.rejected) continue;
    if (!programs) {
      if (p.process.ended) continue;
      rows.push_back({.pid = p.process.tgid,
                      .comm = p.process.comm,
                      .ns_pid = p.process.shown_ns_pid(),
                      .start_wall_ns = p.process.start_ns ? wall_of_monotonic_ns(p.process.start_ns) : 0,
                      .labels = labels.of(p.instance),
                      .live_bytes = p.totals.live_bytes,
                      .alloc_bytes = p.totals.alloc_bytes});
      continue;
    }
    auto [it, made] = by_comm.try_emplace(p.process.comm, rows.size());
    if (made) {
      TargetRow program;  // a program's row: pid 0
      program.comm = p.process.comm;
      rows.push_back(std::move(program));
    }
    rows[it->second].alloc_bytes += p.totals.alloc_bytes;
    if (!p.process.ended) rows[it->second].live_bytes += p.totals.live_bytes;
  }
  std::sort(rows.begin(), rows.end(), [](const TargetRow& a, const TargetRow& b) {
    return a.live_bytes != b.live_bytes ? a.live_bytes > b.live_bytes : a.alloc_bytes > b.alloc_bytes;
  });
  return rows;
}

std::string local_host_name() {
  char name[256] = {};
  if (gethostname(name, sizeof name - 1) != 0) return "";
  return name;
}

}  // namespace

HttpApi::HttpApi(const AgentConfig& config, Bridge& bridge, LabelCache& labels, FoldGroups& groups,
                 std::string token)
    : config_(config),
      bridge_(bridge),
      labels_(labels),
      groups_(groups),
      token_(std::move(token)),
      host_name_(local_host_name()),
      server_(std::make_unique<AgentServer>()),
      shared_(std::make_unique<SharedResponses>(kShareWindow, kMaxSharedAnswers)) {}

HttpApi::~HttpApi() { stop(); }

Result<void> HttpApi::start(const std::string& host, int port) {
  AgentServer& s = *server_;
  s.new_task_queue = [this] { return new ConnectionQueue(kWorkers, kMaxConnections, queue_full_); };
  // SO_REUSEADDR only: the library's default, SO_REUSEPORT, would let a
  // second agent share the port and answer half of the scrapes.
  s.set_socket_options([](int sock) {
    int yes = 1;
    setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
  });
  s.set_payload_max_length(64 << 10);  // every endpoint is a GET
  s.set_keep_alive_max_count(100);     // reads and writes: AgentServer's deadlines
  s.Get(".*", [this](const httplib::Request& req, httplib::Response& res) { handle(req, res); });
  s.set_error_handler([](const httplib::Request&, httplib::Response& res) {
    if (res.body.empty())
      res.set_content("allocscope agent: HTTP " + std::to_string(res.status) + "\n", "text/plain");
  });
  if (!s.bind_to_port(host, port))
    return fail("listen on " + host + ":" + std::to_string(port) + ": address in use or not available",
                EADDRNOTAVAIL);
  if (!s.raise_backlog()) return fail_errno("listen on " + host + ":" + std::to_string(port), errno);
  thread_ = std::thread([this] { server_->listen_after_bind(); });
  // stop() before the loop runs would be lost, and join() would wait forever.
  for (int i = 0; i < 5000 && !server_->is_running(); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  return {};
}

void HttpApi::stop() {
  if (!thread_.joinable()) return;
  server_->stop();
  thread_.join();
}

bool HttpApi::authorized(const httplib::Request& req) const {
  if (token_.empty()) return true;
  std::string given = req.get_header_value("Authorization");
  std::string want = "Bearer " + token_;
  // Compared in constant time: the time taken tells nothing of the token.
  unsigned char diff = given.size() == want.size() ? 0 : 1;
  for (size_t i = 0; i < want.size(); ++i) diff |= (i < given.size() ? given[i] : 0) ^ want[i];
  return diff == 0;
}

void HttpApi::error(httplib::Response& res, int status, const std::string& message) {
  ++errors_;
  res.status = status;
  res.set_content("allocscope agent: " + message + "\n", "text/plain; charset=utf-8");
}

// Runs a job on the recording's thread; on failure the response says why.
bool HttpApi::ran(Bridge::Job job, httplib::Response& res) {
  switch (bridge_.run(std::move(job))) {
    case Bridge::Outcome::Done:
      return true;
    case Bridge::Outcome::Busy:
      error(res, 503, "too many requests waiting; retry later");
      res.set_header("Retry-After", "1");
      return false;
    case Bridge::Outcome::Stopped:
      error(res, 503, "the recording has stopped");
      return false;
  }
  return false;
}

void HttpApi::handle(const httplib::Request& req, httplib::Response& res) {
  ++requests_;
  if (!authorized(req)) {
    res.set_header("WWW-Authenticate", "Bearer");
    return error(res, 401, "a bearer token is required (Authorization: Bearer ...)");
  }
  if (req.has_param("seconds")) return route(req, res);  // a window of the client's own
  std::string key = req.path;
  for (const auto& [name, value] : req.params) key += "\n" + name + "=" + value;
  auto answer = shared_->get(key, SharedResponses::Clock::now(), [&] {
    httplib::Response built;
    route(req, built);
    int status = built.status == -1 ? 200 : built.status;  // -1: not set, which the server sends as 200
    return SharedAnswer{status, {built.headers.begin(), built.headers.end()}, std::move(built.body)};
  });
  res.status = answer->status;
  for (const auto& [name, value] : answer->headers) res.set_header(name, value);
  res.body = answer->body;
}

void HttpApi::route(const httplib::Request& req, httplib::Response& res) {
  if (req.path == "/") return index(res);
  if (req.path == "/targets") return targets(req, res);
  auto a = address(req.path, req.params);
  if (!a) return error(res, 400, a.error().message);
  if (a->path == "/debug/pprof/heap") return profile(*a, true, req, res);
  if (a->path == "/debug/pprof/allocs") return profile(*a, false, req, res);
  if (a->path == "/flamegraph") return flamegraph(*a, req, res);
  if (a->path == "/metrics") return metrics(*a, res);
  error(res, 404,
        "no such endpoint: " + req.path +
            " (try /, /metrics, /targets, /debug/pprof/heap, /debug/pprof/allocs, /flamegraph)");
}

void HttpApi::profile(const Addressed& a, bool heap, const httplib::Request& req, httplib::Response& res) {
  unsigned seconds = 0;
  if (req.has_param("seconds")) {
    std::string v = req.get_param_value("seconds");
    auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), seconds);
    if (ec != std::errc() || end != v.data() + v.size() || seconds == 0 || seconds > config_.max_seconds)
      return error(res, 400,
                   "seconds must be 1 to " + std::to_string(config_.max_seconds) + ", not '" + v + "'");
  }
  bool found = false;
  InstanceSelector keep = selector(a.target, labels_, found);
  Baseline base;
  int64_t window_start = 0;
  if (seconds) {
    if (++deltas_ > config_.max_deltas) {
      --deltas_;
      return error(res, 429,
                   "too many ?seconds= profiles at once (" + std::to_string(config_.max_deltas) + ")");
    }
    bool ok = ran([&](LiveView& v) { base = v.baseline(keep); }, res);
    window_start = std::chrono::duration_cast<std::chrono::nanoseconds>(
                       std::chrono::system_clock::now().time_since_epoch())
                       .count();
    bool slept =
        ok && (found || a.target.kind == TargetKind::All) && bridge_.sleep(std::chrono::seconds(seconds));
    --deltas_;
    if (!ok) return;
    if (!found && a.target.kind != TargetKind::All) return error(res, 404, "no such target recorded");
    if (!slept) return error(res, 503, "the recording stopped during the window");
  }
  Recording r;
  bool ok = ran(
      [&](LiveView& v) {
        r = v.snapshot(keep, seconds ? &base : nullptr);
        add_labels(r, labels_, host_name_);
      },
      res);
  if (!ok) return;
  if (!found && a.target.kind != TargetKind::All) return error(res, 404, "no such target recorded");
  r.default_metric = heap ? Metric::InuseSpace : Metric::AllocSpace;
  if (seconds) {
    r.time_nanos = window_start;
    r.duration_nanos = int64_t(seconds) * 1000000000;
  }
  auto encoded = encode_pprof(r, kTool);
  if (!encoded) return error(res, 500, encoded.error().message);
  res.set_header("Content-Disposition",
                 heap ? "attachment; filename=\"heap\"" : "attachment; filename=\"allocs\"");
  res.set_content(std::move(*encoded), "application/octet-stream");
}

void HttpApi::flamegraph(const Addressed& a, const httplib::Request& req, httplib::Response& res) {
  std::string name = req.has_param("metric") ? req.get_param_value("metric") : "inuse_space";
  auto metric = parse_metric(name);
  if (!metric) return error(res, 400, "unknown metric '" + name + "' (" + names_of(kMetrics) + ")");
  bool found = false;
  InstanceSelector keep = selector(a.target, labels_, found);
  Recording r;
  if (!ran([&](LiveView& v) { r = v.snapshot(keep, nullptr); }, res)) return;
  if (!found && a.target.kind != TargetKind::All) return error(res, 404, "no such target recorded");
  RenderOptions o;
  o.metric = *metric;
  auto svg = render(r, Format::Svg, o);
  if (!svg) return error(res, 500, svg.error().message);
  res.set_content(std::move(*svg), "image/svg+xml");
}

void HttpApi::metrics(const Addressed& a, httplib::Response& res) {
  bool found = false;
  InstanceSelector keep = selector(a.target, labels_, found);
  std::vector<ProcessTotals> all;
  std::vector<TargetLabels> labels;  // copied: the cache changes on the recording's thread
  MetricsInput in;
  if (!ran(
          [&](LiveView& v) {
            for (ProcessTotals& p : v.processes())
              if (keep(p.instance, p.process)) {
                labels.push_back(labels_.of(p.instance));
                all.push_back(std::move(p));
              }
            in.counters = v.counters();
            in.tables = v.table_sizes();
            in.self.stacks = v.stack_table().first;
            in.holds = v.hold_times();
            in.counters.emplace_back("agent_processes_forgotten", groups_.processes());
            in.counters.emplace_back("agent_processes_folded_unnamed", groups_.unnamed());
            in.self.labels_dropped = labels_.dropped();
          },
          res))
    return;
  for (size_t i = 0; i < all.size(); ++i) in.processes.push_back({&all[i], &labels[i]});
  SelfUsage self = self_usage();
  in.self.cpu_seconds = self.cpu_seconds;
  in.self.resident_bytes = self.resident_bytes;
  in.self.requests = requests_;
  in.self.request_errors = errors_;
  in.self.connection_queue_full = queue_full_;
  in.self.request_timeouts = server_->timed_out();
  in.self.responses_shared = shared_->shared();
  in.max_series = config_.max_series;
  res.set_content(render_metrics(in), "text/plain; version=0.0.4; charset=utf-8");
}

void HttpApi::targets(const httplib::Request& req, httplib::Response& res) {
  bool programs = req.has_param("level") && req.get_param_value("level") == "program";
  if (req.has_param("level") && !programs && req.get_param_value("level") != "process")
    return error(res, 400, "level is process (the default) or program");
  std::vector<TargetRow> rows;
  if (!ran([&](LiveView& v) { rows = rows_of(v.processes(), labels_, programs); }, res)) return;
  std::string host = req.get_header_value("Host");
  if (host.empty()) host = config_.listen;
  res.set_content(discovery_json(rows, host), "application/json");
}

void HttpApi::index(httplib::Response& res) {
  std::vector<TargetRow> rows;
  if (!ran([&](LiveView& v) { rows = rows_of(v.processes(), labels_, false); }, res)) return;
  res.set_content(index_html(rows, kTool), "text/html; charset=utf-8");
}

}  // namespace allocscope
