// The command line's definition (options.h) and the conversion of what was
// parsed into the configs of record, report and agent.
#include "options.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "base/units.h"
#include "usage.h"
#include "version.h"

namespace allocscope {

namespace {

const CLI::Validator kMetric = parsed_by(parse_metric, "metric (" + names_of(kMetrics, " or ") + ")");
const std::string kFormatNames = names_of(kFormats, " or ");
const CLI::Validator kFormat = parsed_by(parse_format, "format (" + names_of(kFormats) + ")");

// An enum table's names, as CLI11's IsMember takes them (completions and the
// man pages list them).
template <typename Table>
std::vector<std::string> choices(const Table& table) {
  std::vector<std::string> names;
  for (const auto& row : table) names.emplace_back(row.name);
  return names;
}

// Options both subcommands share: how estimates and intervals are shown.
void add_estimate_options(CLI::App* app, RenderOptions& o) {
  app->add_option(
         "--confidence", o.confidence,
         "Confidence level of the intervals shown, and of --diff's and --leaks' verdicts (0.5 to 0.99999)")
      ->type_name("LEVEL")
      ->capture_default_str()
      ->check(CLI::Validator(
          [](std::string& v) {  // Range alone lets "nan" through: every comparison with it is false
            double d = std::strtod(v.c_str(), nullptr);
            return std::isfinite(d) ? std::string() : std::string("not a number: ") + v;
          },
          "", "finite"))
      ->check(CLI::Range(0.5, 0.99999));
  app->add_flag("--lines", o.lines,
                "Frames as 'function (file:line)' where debug info has lines (folded, SVG)");
  app->add_flag(
      "--interval-in-frame", o.interval_in_frame,
      "Folded output: append each stack's interval to its leaf frame (\"malloc 95% [1 MiB; 2 MiB]\")");
}

// "0644", "640": permission bits in octal, nothing above 0777.
std::optional<unsigned> parse_mode(const std::string& v) {
  if (v.empty() || v.size() > 4 || v.find_first_not_of("01234567") != std::string::npos) return std::nullopt;
  unsigned mode = unsigned(std::stoul(v, nullptr, 8));
  return mode <= 0777 ? std::optional(mode) : std::nullopt;
}

void add_output_mode(CLI::App* app, OptionText& t) {
  app->add_option("--output-mode", t.output_mode,
                  "Permissions of the output files, in octal (0644). Default: 0600 as root (recordings name "
                  "other users' code), else 0666 less the umask")
      ->type_name("MODE")
      ->check(parsed_by(parse_mode, "mode (octal, 0000 to 0777)"));
}

std::vector<OutputSpec> output_specs(const std::vector<std::string>& paths, const OptionText& t,
                                     const std::string& format, const std::string& fallback_path,
                                     Format fallback_format) {
  std::vector<OutputSpec> specs;
  std::optional<unsigned> mode = t.output_mode.empty() ? std::nullopt : parse_mode(t.output_mode);
  for (const std::string& p : paths)
    specs.push_back({p, format.empty() ? format_for_path(p) : *parse_format(format), mode, !format.empty()});
  if (specs.empty())
    specs.push_back({fallback_path, format.empty() ? fallback_format : *parse_format(format), mode, true});
  return specs;
}

CLI::App* add_record(CLI::App& app, RecordConfig& c, OptionText& t) {
  auto* rec = app.add_subcommand("record", "Sample heap allocations of a process or a command");
  rec->footer(
      "Examples:\n"
      "  allocscope record -p 1234 -d 30 -o heap.pb.gz -o heap.svg   attach to a running process\n"
      "  allocscope record -o heap.folded -- ./server --port 80      launch a command and follow it\n"
      "  allocscope record -p 1234 --rate 1 -o exact.folded          exact mode: every allocation\n"
      "  allocscope record -p 1234 --metric inuse_space -o live.svg  what is still allocated at the end\n"
      "  allocscope record -p 1234 --interval 30s -o heap.pb.gz      heap.1.pb.gz, heap.2.pb.gz, ...\n"
      "  allocscope record --timeline heap.html -- ./batch-job      live bytes over time, click for flame "
      "graphs\n"
      "  allocscope record --peak -o heap.pb.gz -- ./batch-job       also heap.peak.pb.gz: in use at the "
      "high point\n"
      "  allocscope record -p 1234 --snapshot-above 2GiB -o heap.pb.gz  heap.above-1.pb.gz before an OOM "
      "kill\n"
      "  allocscope record -p 12,34 -d 10 -o both.pb.gz              several processes in one recording\n"
      "  allocscope record --all -d 60 -o host.folded                every process on the machine\n"
      "  allocscope record --all --comm '^(nginx|php)' -o web.svg    every process whose name matches\n"
      "  allocscope record --all --cgroup system.slice/foo.service   one cgroup (a unit, a container)\n"
      "  allocscope record --all --unit foo.service          one systemd unit, across its restarts\n"
      "  allocscope record -p 1234 --children -o tree.pb.gz          a process and what it forks and runs");
  auto* all =
      rec->add_flag("-a,--all", c.all,
                    "Every process on the machine that allocates through a known allocator (C library, "
                    "jemalloc, tcmalloc, mimalloc, a static binary's own), including those "
                    "started while recording (not allocscope itself); -p then picks processes from them. A "
                    "process that maps a file not seen before is stopped for the milliseconds probing it "
                    "takes (--no-hold: never)");
  auto* pid = rec->add_option("-p,--pid", c.pids,
                              "Attach to this running process; repeat or separate by commas "
                              "for several (-p 12,34); with --all: record only these")
                  ->type_name("PID")
                  ->delimiter(',')
                  ->allow_extra_args(false);
  rec->add_option("-d,--duration", t.duration,
                  "Stop after this long (30, 30s, 500ms, 2m); default (and 0): no limit, until the target "
                  "exits or Ctrl-C")
      ->type_name("TIME")
      ->check(parsed_by(parse_duration_ms, "duration (30, 30s, 1.5s, 500ms, 2m, 1h)"));
  rec->add_option("-o,--output", t.outputs,
                  "Output file, repeatable; the format follows the extension: .pb.gz (pprof), .svg (flame "
                  "graph), .json, .txt (top table), else folded stacks; '-' is stdout. Default: "
                  "allocscope.pb.gz (pprof: allocscope report reads it)")
      ->type_name("FILE")
      ->allow_extra_args(false);  // one path per -o, so "-o x -- cmd --flag" stays intact
  rec->add_option("--format", t.format, "Format of every output, whatever its extension: " + kFormatNames)
      ->type_name("FORMAT")
      ->check(kFormat);
  add_output_mode(rec, t);
  rec->add_option("--metric", t.metric,
                  "Value shown per stack: alloc_space, alloc_objects, inuse_space (live at the end), "
                  "inuse_objects (pprof files hold all four)")
      ->type_name("METRIC")
      ->capture_default_str()
      ->check(kMetric);
  rec->add_option("--interval", t.interval,
                  "Also write numbered outputs every interval (30s, 5m); each holds that interval's "
                  "allocations and the live set at its end")
      ->type_name("TIME")
      ->check(parsed_by(parse_duration_ms, "interval (30s, 5m, 1h)"));
  rec->add_flag(
      "--top", t.top,
      "Show the top functions (the allocators' direct callers) by live and by allocated bytes while "
      "recording, redrawn every 2 s to fit the terminal (plain blocks when stdout is not one)");
  rec->add_option("--top-every", t.top_every, "--top, redrawn this often (1s, 5s)")
      ->type_name("TIME")
      ->check(parsed_by(parse_duration_ms, "interval (1s, 5s, 1m)"));
  rec->add_option("--timeline", c.timeline,
                  "Also write an HTML page charting live bytes over the recording (the total and the stacks "
                  "that held the most), with the flame graph of any moment or range picked on the chart")
      ->type_name("FILE.html");
  rec->add_flag("--peak", c.peak,
                "Also write the in-use profile at the moment the estimate of live bytes (over everything "
                "recorded) was highest, beside each output file: heap.pb.gz -> heap.peak.pb.gz");
  rec->add_option("--snapshot-above", t.snapshot_above,
                  "Write the in-use profile whenever the estimate of live bytes crosses SIZE (2GiB), "
                  "beside each output file: heap.above-1.pb.gz, ...; the next waits until it falls below "
                  "90 % of SIZE and crosses again")
      ->type_name("SIZE")
      ->check(parsed_by(
          [](const std::string& v) {
            auto n = parse_bytes(v);
            return n && *n >= 1;
          },
          "size (1 byte or more)"));
  rec->add_option("--max-snapshots", c.max_snapshots,
                  "--snapshot-above writes at most N files; later crossings are counted")
      ->type_name("N")
      ->capture_default_str()
      ->check(CLI::Range(1u, 100000u));
  rec->add_flag("--icicle", c.render.icicle,
                "Flame graphs top-down (root at the top); by default only those taller than a screen are");
  rec->add_flag("!--flame", c.render.icicle_when_tall,
                "Flame graphs bottom-up (root at the bottom) even when taller than a screen");
  add_sampling_options(rec, c, t);
  add_estimate_options(rec, c.render);
  rec->add_flag("--no-free", c.no_free,
                "Alloc-only: do not probe free (cheaper; the inuse metrics are then unavailable)");
  auto [preload, no_bpf] = add_path_options(rec, c);
  t.children_flag =
      rec->add_flag("--children,!--no-children", t.children,
                    "Follow every process the targets fork or run (default with -- CMD): system-wide probes, "
                    "each child traced from its first instruction");
  rec->add_option("--per-process", c.per_process,
                  "false: merge the stacks of processes that have the same name (root frame 'comm' rather "
                  "than 'comm (pid)')")
      ->type_name("BOOL")
      ->capture_default_str();
  rec->add_flag("-q,--quiet", c.quiet, "Print nothing but errors (no progress line, no summary)");
  auto* cmd = rec->add_option("command", c.command, "Command to launch (after --)")->type_name("COMMAND");
  pid->excludes(cmd);
  all->excludes(cmd);
  rec->callback([&c, &t, pid, cmd, all, preload, no_bpf] {
    if (!*pid && !*cmd && !*all)
      throw UsageError(
          "record needs what to record: -- COMMAND, -p PID or --all (allocscope record -- ./app)");
    if (*preload && !*cmd)
      throw CLI::ValidationError(
          "--preload launches a command through the preload library: add -- COMMAND (-p and --all find "
          "processes that already load it by themselves)");
    if (*no_bpf && !*cmd) throw CLI::ValidationError("--no-bpf launches a command: add -- COMMAND");
    if (*preload && c.null_probes)
      throw CLI::ValidationError("--null-probes measures uprobes, not --preload");
    if (c.launch == LaunchPath::Probes && !*cmd)
      throw CLI::ValidationError(
          "--probes chooses how a launched command is sampled: add -- COMMAND (-p and "
          "--all always probe)");
    bool children = *t.children_flag ? t.children : bool(*cmd);
    if ((!c.comm.empty() || !c.cgroup.empty() || !c.unit.empty()) && !*all && !children)
      throw CLI::ValidationError(
          "--comm, --cgroup and --unit filter system-wide recordings: add --all or --children");
    bool top = t.top || !t.top_every.empty();
    for (const std::string& o : t.outputs)
      if (top && o == "-")
        throw CLI::ValidationError("--top shows its tables on stdout: -o - cannot share it");
    if (top && c.quiet) throw CLI::ValidationError("--top shows tables and -q none: choose one");
    if (c.no_free && t.metric.starts_with("inuse"))
      throw CLI::ValidationError("--metric " + t.metric + " needs free probed: drop --no-free");
    if (c.no_free && (c.peak || !t.snapshot_above.empty()))
      throw CLI::ValidationError(
          "--peak and --snapshot-above follow live bytes, which need free probed: "
          "drop --no-free");
  });
  return rec;
}

void finish_record(RecordConfig& c, const OptionText& t) {
  finish_sampling(c, t);
  c.metric = *parse_metric(t.metric);
  if (!t.interval.empty()) c.interval_ms = *parse_duration_ms(t.interval);
  if (t.top) c.top_every_ms = 2000;
  if (!t.top_every.empty()) c.top_every_ms = std::max<uint64_t>(100, *parse_duration_ms(t.top_every));
  if (!t.snapshot_above.empty()) c.snapshot_above = *parse_bytes(t.snapshot_above);
  c.outputs = output_specs(t.outputs, t, t.format, "allocscope.pb.gz", Format::Pprof);
  c.keep_previous = t.outputs.empty();
  if (*t.children_flag) c.children = t.children;
}

// "30s/5m" -> {30000, 300000}.
std::optional<std::pair<uint64_t, uint64_t>> duty_cycle(const std::string& v) {
  size_t slash = v.find('/');
  if (slash == std::string::npos) return std::nullopt;
  auto on = parse_duration_ms(v.substr(0, slash)), period = parse_duration_ms(v.substr(slash + 1));
  if (!on || !period || *on == 0 || *on >= *period) return std::nullopt;
  return std::pair{*on, *period};
}

// The agent's --retention: at least 10 s (a sample may wait that long
// behind a table build before its process is labelled).
std::optional<uint64_t> retention_ms(const std::string& v) {
  auto ms = parse_duration_ms(v);
  if (!ms || *ms < 10000) return std::nullopt;
  return ms;
}

CLI::App* add_agent(CLI::App& app, AgentConfig& c, OptionText& t) {
  auto* agent = app.add_subcommand(
      "agent", "Record without end and serve heap profiles and metrics over HTTP (pprof, Prometheus)");
  agent->footer(
      "Endpoints (each takes ?pid=N, ?comm=NAME, ?unit=U, ?container=ID, ?pod=UID or ?cgroup=PATH, or a\n"
      "prefix /pid/N, /comm/NAME, /unit/U, /container/ID, /pod/UID before the path):\n"
      "  /debug/pprof/allocs  /debug/pprof/heap   pprof, Go's four sample types; ?seconds=N: the next N s\n"
      "  /metrics                                 Prometheus: live and allocated bytes per process, program, "
      "cgroup\n"
      "  /targets                                 Prometheus HTTP service discovery (?level=program)\n"
      "  /flamegraph?metric=inuse_space           SVG flame graph\n"
      "  /                                        index of the processes recorded\n"
      "Examples:\n"
      "  allocscope agent                                   every process, served on 127.0.0.1:6060\n"
      "  allocscope agent --comm '^(nginx|postgres)$'       only these programs\n"
      "  allocscope agent --unit nginx.service              one systemd unit, across its restarts\n"
      "  allocscope agent -p 1234 --listen :7070            one process\n"
      "  allocscope agent --listen 0.0.0.0:6060 --token-file /etc/allocscope/token\n"
      "  go tool pprof -top http://127.0.0.1:6060/debug/pprof/heap?pid=1234");
  auto* pid = agent
                  ->add_option("-p,--pid", c.record.pids,
                               "Record only these processes (repeat or separate by commas); default: every "
                               "process, including those started later")
                  ->type_name("PID")
                  ->delimiter(',');
  agent->add_option("--listen", c.listen, "Address to serve on: HOST:PORT, :PORT (loopback), [IPV6]:PORT")
      ->type_name("ADDRESS")
      ->capture_default_str();
  agent
      ->add_option("--token-file", c.token_file,
                   "File holding a bearer token every request must send (Authorization: Bearer TOKEN); "
                   "owned by root or you, read once")
      ->type_name("FILE")
      ->check(CLI::ExistingFile);
  agent->add_option("--log", c.log_file, "Append messages to this file (reopened on SIGHUP); default stderr")
      ->type_name("FILE");
  agent
      ->add_option("-d,--duration", t.duration,
                   "Stop after this long (tests, trials); default: until SIGTERM")
      ->type_name("TIME")
      ->check(parsed_by(parse_duration_ms, "duration (30, 30s, 1.5s, 500ms, 2m, 1h)"));
  agent
      ->add_option("--max-series", c.max_series,
                   "/metrics: series per level (process, program, cgroup) at most, the largest by live bytes")
      ->type_name("N")
      ->capture_default_str()
      ->check(CLI::Range(1, 100000));
  agent
      ->add_option(
          "--duty", t.duty,
          "Probes attached for ON of every PERIOD (30s/5m): the trap on every allocator call is paid "
          "only then; allocated totals grow only in the windows, and in-use figures count what the "
          "windows allocated (frees are not seen between them). Default: always attached")
      ->type_name("ON/PERIOD")
      ->check(parsed_by(duty_cycle, "duty cycle ON/PERIOD, ON shorter than PERIOD (30s/5m)"));
  agent
      ->add_option("--retention", t.retention,
                   "Keep an ended process's own stacks (its pid's profile), and a removed cgroup's name, "
                   "this long (at least 10s; longer than your scrape interval); then its stacks fold into "
                   "its program's and cgroup's, so no cumulative profile or counter goes down")
      ->type_name("TIME")
      ->check(parsed_by(retention_ms, "retention: a duration of at least 10s"));
  agent->add_flag("!--no-inject", c.record.inject,
                  "Probe each process's allocator (a trap into the kernel at every call) and enter none. By "
                  "default the agent loads liballocscope-preload.so, for as long as it runs, into the -p "
                  "processes, and into each process whose traps cost it over 1% of a core");
  agent->add_option("--max-seconds", c.max_seconds, "Longest ?seconds= window served")
      ->type_name("SECONDS")
      ->capture_default_str()
      ->check(CLI::Range(1, 86400));
  add_sampling_options(agent, c.record, t);
  agent->callback([&c, &t, pid] {
    if (!t.duty.empty() && parse_bytes(t.rate).value_or(0) <= 1)
      throw CLI::ValidationError("--duty samples: exact mode (--rate 1) counts in the kernel without pause");
    c.record.all = true;  // processes started later too; -p then picks from them
    if (*pid) c.record.all = !c.record.comm.empty() || !c.record.cgroup.empty() || !c.record.unit.empty();
    if (*pid && c.record.all)
      throw CLI::ValidationError(
          "-p names processes: --comm, --cgroup and --unit choose among all of them, not both");
  });
  return agent;
}

void finish_agent(AgentConfig& c, const OptionText& t) {
  finish_sampling(c.record, t);
  if (auto duty = duty_cycle(t.duty)) std::tie(c.record.duty_on_ms, c.record.duty_period_ms) = *duty;
  if (!t.retention.empty()) c.retention_ms = *retention_ms(t.retention);
  c.record.outputs.clear();
  c.record.quiet = true;  // the agent logs; no progress line, no summary
  c.record.hangup_stops = false;
  c.record.children = false;
}

CLI::App* add_report(CLI::App& app, ReportConfig& c, OptionText& t) {
  auto* rep = app.add_subcommand("report", "Turn a saved recording (.pb.gz) into any output");
  rep->footer(
      "Examples:\n"
      "  allocscope report heap.pb.gz                          top functions by the file's metric\n"
      "  allocscope report heap.pb.gz --by stack --top 10\n"
      "  allocscope report heap.pb.gz -o heap.svg --metric inuse_space --focus 'parse_'\n"
      "  allocscope report heap.pb.gz --format folded --comm '^nginx' -o -\n"
      "  allocscope report --diff base.pb.gz new.pb.gz            what changed beyond sampling noise\n"
      "  allocscope report --diff base.pb.gz new.pb.gz -o diff.svg   significant growth red, shrinkage blue\n"
      "  allocscope report --diff base.pb.gz new.pb.gz --per-second --by stack\n"
      "  allocscope report --leaks heap.*.pb.gz                  live bytes growing steadily: leak suspects");
  rep->add_option("file", c.inputs,
                  "Recording written by allocscope record (pprof, .pb.gz); with --leaks, its interval "
                  "profiles (heap.*.pb.gz)")
      ->type_name("FILE")
      ->check(CLI::ExistingFile);
  auto* diff =
      rep->add_option("--diff", c.diff_base,
                      "Base recording: compare FILE's recording with it. Each change comes with its "
                      "interval and a verdict where it is beyond sampling noise (Holm's correction over "
                      "every row compared); a table (default), JSON (.json) or a differential flame graph "
                      "(.svg) coloured by those changes alone")
          ->type_name("FILE")
          ->check(CLI::ExistingFile);
  rep->add_option("-o,--output", t.outputs,
                  "Output file, repeatable (format from the extension); default: stdout")
      ->type_name("FILE")
      ->allow_extra_args(false);
  rep->add_option("--format", t.format, "Format of every output: " + kFormatNames)
      ->type_name("FORMAT")
      ->check(kFormat);
  add_output_mode(rep, t);
  rep->add_option("--metric", t.metric,
                  "alloc_space, alloc_objects, inuse_space or inuse_objects; default: "
                  "the recording's own")
      ->type_name("METRIC")
      ->check(kMetric);
  rep->add_option("--pid", c.pid, "Only this process")->type_name("PID");
  rep->add_option("--comm", c.comm, "Only processes whose name matches this regular expression")
      ->type_name("REGEX");
  rep->add_option("--focus", c.focus, "Only stacks with a frame matching this regular expression")
      ->type_name("REGEX");
  rep->add_option("--ignore", c.ignore, "Drop stacks with a frame matching this regular expression")
      ->type_name("REGEX");
  rep->add_option("--top", c.render.top, "Rows of the top table (1 to 1000000)")
      ->type_name("N")
      ->capture_default_str()
      ->check(CLI::Range(1, 1000000));
  rep->add_option(
         "--by", t.by,
         "Top table rows: function (as the allocator's direct caller), stack, process, or code: the "
         "innermost function of the program's own code (a Python or Java function where the stack has "
         "one, a Go function outside Go's runtime; else the direct caller)")
      ->type_name("KIND")
      ->capture_default_str()
      ->check(CLI::IsMember(choices(kTopBy)));
  rep->add_option("--sort", t.sort,
                  "Order of the rows: value (the metric), samples, lifetime (median) or name")
      ->type_name("ORDER")
      ->capture_default_str()
      ->check(CLI::IsMember(choices(kTopSort)));
  rep->add_option("--long-lived", c.render.long_lived_share,
                  "Long-lived: alive for more than this share of the recording (0 to 1)")
      ->type_name("SHARE")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 1.0));
  rep->add_flag(
      "--json", [&t](int64_t) { t.format = "json"; }, "Same as --format json: the table's data for scripts");
  rep->add_flag("--icicle", c.render.icicle,
                "Flame graphs top-down (root at the top); by default only those taller than a screen are");
  rep->add_flag("!--flame", c.render.icicle_when_tall,
                "Flame graphs bottom-up (root at the bottom) even when taller than a screen");
  rep->add_flag("--leaks", c.leaks,
                "FILE... are the interval profiles of one recording (record --interval): rank rows by the "
                "growth of their live bytes, and call suspects those growing beyond sampling noise through "
                "the series (Holm's correction over every row)");
  rep->add_option("--timeline", c.timeline,
                  "FILE... are a series (record --interval's profiles, or the agent's /heap fetched now and "
                  "then): chart their live bytes over time in an HTML page, with the flame graph of any "
                  "moment or range")
      ->type_name("FILE.html");
  rep->add_flag("--per-second", c.render.per_second,
                "With --diff: compare per second of each recording (recordings of different lengths)")
      ->needs(diff);
  add_estimate_options(rep, c.render);
  rep->callback([&c, &t] {
    if (c.inputs.empty())
      throw UsageError(c.diff_base.empty()
                           ? "report needs a recording: allocscope report FILE.pb.gz (one record wrote)"
                           : "--diff compares two recordings: allocscope report --diff BASE.pb.gz NEW.pb.gz");
    if (c.leaks && !c.timeline.empty()) throw CLI::ValidationError("--leaks or --timeline: one at a time");
    if (c.leaks) {
      if (c.inputs.size() < 3 || !c.diff_base.empty())
        throw CLI::ValidationError(
            "--leaks reads a series of at least 3 interval profiles (record --interval), without --diff");
      for (const OutputSpec& out : output_specs(t.outputs, t, t.format, "-", Format::Top))
        if (out.format != Format::Top && out.format != Format::Json)
          throw CLI::ValidationError(
              "--leaks writes a table (.txt; stdout without -o) or JSON (.json): not " + out.path);
      return;
    }
    if (!c.timeline.empty()) {
      if (c.inputs.size() < 2 || !c.diff_base.empty())
        throw CLI::ValidationError("--timeline charts a series of at least 2 profiles, without --diff");
      return;
    }
    if (c.inputs.size() > 1)
      throw CLI::ValidationError("report reads one FILE (several only with --leaks or --timeline)");
    if (c.diff_base.empty()) return;
    for (const OutputSpec& out : output_specs(t.outputs, t, t.format, "-", Format::Top))
      if (out.format != Format::Top && out.format != Format::Json && out.format != Format::Svg)
        throw CLI::ValidationError(
            "--diff writes a table (.txt; stdout without -o), JSON (.json) or a flame graph (.svg): not " +
            out.path);
  });
  return rep;
}

void finish_report(ReportConfig& c, OptionText& t) {
  if (!t.metric.empty()) c.metric = *parse_metric(t.metric);
  c.render.top_by = parse_named(kTopBy, t.by).value_or(TopBy::Function);
  c.render.sort = parse_named(kTopSort, t.sort).value_or(TopSort::Value);
  c.outputs = output_specs(t.outputs, t, t.format, "-", Format::Top);
}

}  // namespace

std::string version_line() {
  return std::string("allocscope ") + ALLOCSCOPE_VERSION + " (git " + ALLOCSCOPE_GIT_REVISION + ")";
}

CommandLine::CommandLine() : app("allocscope: eBPF heap allocation sampler for Linux") {
  app.formatter(std::make_shared<HelpFormatter>());  // before the subcommands, which copy it
  app.set_version_flag("-V,--version", version_line());
  app.require_subcommand(1);
  report_text.metric = "";
  record = add_record(app, record_config, record_text);
  report = add_report(app, report_config, report_text);
  agent = add_agent(app, agent_config, agent_text);
  check = add_check(app, check_config);
}

void CommandLine::finish() {
  if (record->parsed()) finish_record(record_config, record_text);
  if (report->parsed()) finish_report(report_config, report_text);
  if (agent->parsed()) finish_agent(agent_config, agent_text);
}

}  // namespace allocscope
