// Command line: argv -> one validated RecordConfig, then user/ does the work.
#include <CLI/CLI.hpp>

#include <cstdio>
#include <string>
#include <vector>

#include "countdown.h"
#include "recorder.h"
#include "units.h"

using namespace allocscope;

namespace {

// CLI11 validator built on one of our parsers.
template <typename Parse>
CLI::Validator parsed_by(Parse parse, std::string what) {
  return CLI::Validator(
      [parse, what](std::string& value) -> std::string {
        return parse(value) ? std::string() : "invalid " + what + " '" + value + "'";
      },
      what);
}

struct RecordText {  // options parsed by our own parsers after CLI11
  std::string rate = "512KiB", duration, metric = "alloc_space", ringbuf = "16MiB", probe_mode = "auto";
};

void add_record(CLI::App& app, RecordConfig& c, RecordText& text) {
  auto& [rate, duration, metric, ringbuf, probe_mode] = text;
  auto* rec = app.add_subcommand("record", "Sample heap allocations of a process or a command");
  rec->footer(
      "Examples:\n"
      "  allocscope record -p 1234 -d 30 -o heap.folded          attach to a running process\n"
      "  allocscope record -o heap.folded -- ./server --port 80  launch a command and follow it\n"
      "  allocscope record -p 1234 --rate 1 -o exact.folded      exact mode: every allocation\n"
      "  allocscope record -p 1234 --metric inuse_space -o live.folded");
  auto* pid = rec->add_option("-p,--pid", c.pid, "Attach to this running process");
  rec->add_option("-d,--duration", duration,
                  "Stop after this long (30, 30s, 500ms, 2m); default: until the target exits or Ctrl-C")
      ->check(parsed_by(parse_duration_ms, "duration"));
  rec->add_option("-o,--output", c.output, "Folded-stack output file ('-' for stdout)")
      ->capture_default_str();
  rec->add_option("--rate", rate,
                  "Mean bytes between samples (65536, 64KiB, 1MiB); 1 records every allocation")
      ->capture_default_str()
      ->check(parsed_by(
          [](const std::string& v) {
            auto r = parse_bytes(v);
            return r && *r >= 1 && *r <= AS_MAX_RATE;
          },
          "rate (1 byte to 4 GiB)"));
  rec->add_option("--metric", metric,
                  "Value written per stack: alloc_space, alloc_objects, inuse_space (live at the end), "
                  "inuse_objects")
      ->capture_default_str()
      ->check(parsed_by(parse_metric, "metric"));
  rec->add_option("--max-live", c.max_live, "Capacity of the live-allocation tables (samples)")
      ->capture_default_str()
      ->check(CLI::Range(1u, 1u << 26));
  rec->add_option("--max-stacks", c.max_stacks, "Capacity of the distinct-stack table")
      ->capture_default_str()
      ->check(CLI::Range(1u, 1u << 26));
  rec->add_option("--ringbuf-size", ringbuf, "Kernel-to-user ring buffer size (a power of two: 4MiB, 64MiB)")
      ->capture_default_str()
      ->check(parsed_by(
          [](const std::string& v) {
            auto n = parse_bytes(v);
            return n && *n >= 4096 && *n <= (1ULL << 30) && (*n & (*n - 1)) == 0;
          },
          "ring buffer size (power of two, 4 KiB to 1 GiB)"));
  rec->add_flag("--no-free", c.no_free,
                "Alloc-only: do not probe free (cheaper; the inuse metrics are then unavailable)");
  rec->add_option("--probe-mode", text.probe_mode,
                  "How probes are attached: auto, session (kernel 6.13+: return probes only on sampled "
                  "calls) or classic (uprobes and uretprobes)")
      ->capture_default_str()
      ->check(CLI::IsMember({"auto", "session", "classic"}));
  // Benchmark switches (BENCHMARKS.md): not for everyday use.
  rec->add_flag("--null-probes", c.null_probes, "Probes that do nothing: the overhead floor")->group("");
  rec->add_flag("--naive-placement", c.naive_placement, "Every probe on its function's entry")->group("");
  rec->add_flag("-v,--verbose", c.verbose, "Print probe placement and libbpf's messages");
  rec->add_flag("-q,--quiet", c.quiet, "Print nothing but errors");
  auto* cmd = rec->add_option("command", c.command, "Command to launch (after --)");
  pid->excludes(cmd);
  rec->callback([&c, &text, pid, cmd] {
    if (!*pid && !*cmd)
      throw CLI::RequiredError("record needs -p PID or -- COMMAND");
    if (c.no_free && text.metric.starts_with("inuse"))
      throw CLI::ValidationError("--metric " + text.metric + " needs free probed: drop --no-free");
  });
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"allocscope: eBPF heap allocation sampler for Linux"};
  app.set_version_flag("--version", std::string("allocscope ") + ALLOCSCOPE_VERSION);
  app.require_subcommand(1);
  RecordConfig config;
  RecordText text;
  add_record(app, config, text);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    int code = app.exit(e);
    return code == 0 ? 0 : 2;  // usage errors: the conventional 2, whatever CLI11's kind
  }
  config.rate = *parse_bytes(text.rate);
  config.metric = *parse_metric(text.metric);
  config.ringbuf_bytes = static_cast<uint32_t>(*parse_bytes(text.ringbuf));
  config.probe_mode = text.probe_mode == "session"   ? ProbeMode::Session
                      : text.probe_mode == "classic" ? ProbeMode::Classic
                                                     : ProbeMode::Auto;
  if (!text.duration.empty())
    config.duration_ms = *parse_duration_ms(text.duration);
  return record(config);
}
