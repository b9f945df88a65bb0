// The options record and agent share: what is sampled, how, and the
// capacities of the kernel's and allocscope's tables.
#include <string>

#include "base/pattern.h"
#include "base/units.h"
#include "countdown.h"
#include "options.h"

namespace allocscope {

void add_force_fallback(CLI::App* app, std::string& list) {
  app->add_option("--force-fallback", list,
                  "Act as if the kernel lacked these optional features, to run or measure the paths older "
                  "kernels take: the keys of `allocscope check --json`'s features, comma-separated "
                  "(uprobe_session,nop_emulation)")
      ->type_name("FEATURES");
}

void add_sampling_options(CLI::App* app, RecordConfig& c, OptionText& t) {
  add_force_fallback(app, c.force_fallback);
  app->add_option("--rate", t.rate,
                  "Mean bytes between samples (65536, 64KiB, 1MiB); 1 records every allocation")
      ->type_name("SIZE")
      ->capture_default_str()
      ->check(parsed_by(
          [](const std::string& v) {
            auto r = parse_bytes(v);
            return r && *r >= 1 && *r <= AS_MAX_RATE;
          },
          "rate (1 byte to 4 GiB)"));
  t.max_live_opt =
      app->add_option(
             "--max-live", c.max_live,
             "Capacity of the live-allocation tables (samples; default 262144, 4194304 in exact mode)")
          ->type_name("N")
          ->check(CLI::Range(1u, 1u << 26));
  app->add_option("--max-live-per-process", c.max_live_per_process,
                  "Live-table entries one process may hold, so that one process cannot fill it for the "
                  "others (default: a quarter of --max-live with --all, no limit for the processes -p "
                  "and -- CMD name; 0: no limit); what a full share refuses is counted")
      ->type_name("N")
      ->check(CLI::Range(0u, 1u << 26));
  app->add_option("--max-stacks", c.max_stacks, "Capacity of the distinct-stack table")
      ->type_name("N")
      ->capture_default_str()
      ->check(CLI::Range(1u, 1u << 26));
  app->add_option("--ringbuf-size", t.ringbuf,
                  "Kernel-to-user ring buffer size (a power of two: 4MiB, 64MiB)")
      ->type_name("SIZE")
      ->capture_default_str()
      ->check(parsed_by(
          [](const std::string& v) {
            auto n = parse_bytes(v);
            return n && *n >= 4096 && *n <= (1ULL << 30) && (*n & (*n - 1)) == 0;
          },
          "ring buffer size (power of two, 4 KiB to 1 GiB)"));
  app->add_option(
         "--unwind", t.unwind,
         "How the kernel walks sampled stacks: dwarf (the binaries' call frame information, compiled "
         "into tables the kernel follows: full stacks through code without frame pointers) or fp "
         "(frame pointers only: no tables, but stacks stop at code built without them)")
      ->type_name("MODE")
      ->capture_default_str()
      ->check(CLI::IsMember({"fp", "dwarf"}));
  app->add_option("--probe-mode", t.probe_mode,
                  "How probes are attached: auto, session (kernel 6.13+: return probes only on sampled "
                  "calls) or classic (uprobes and uretprobes)")
      ->type_name("MODE")
      ->capture_default_str()
      ->check(CLI::IsMember({"auto", "session", "classic"}));
  app->add_option("--comm", c.comm,
                  "With --all or --children: only processes whose name matches this regular "
                  "expression (extended syntax)")
      ->type_name("REGEX")
      ->check([](const std::string& re) -> std::string {
        auto p = Pattern::compile(re);
        return p ? "" : p.error().message;
      });
  app->add_option("--cgroup", c.cgroup,
                  "With --all or --children: only processes in this cgroup v2 or below it "
                  "(/sys/fs/cgroup/system.slice/x.service or system.slice/x.service)")
      ->type_name("PATH");
  app->add_option("--unit", c.unit,
                  "With --all or --children: only processes of this systemd unit (nginx.service, "
                  "user@1000.service, a .slice or .scope), judged by name on each process's first "
                  "sample, so a restarted unit is still followed")
      ->type_name("UNIT")
      ->check([](const std::string& u) -> std::string {
        return u.empty() || u.find('/') != std::string::npos || u == "." || u == ".."
                   ? "a unit name (nginx.service), not a path: --cgroup takes paths"
                   : "";
      });
  app->add_option("--max-processes", c.max_processes,
                  "Capacity of the kernel's table of followed and ignored processes")
      ->type_name("N")
      ->capture_default_str()
      ->check(CLI::Range(16u, 1u << 22));
  app->add_option("--max-allocator-files", c.max_allocator_files,
                  "Distinct allocator files probed at most (any user can make --all meet new ones); "
                  "more are counted and not probed")
      ->type_name("N")
      ->capture_default_str()
      ->check(CLI::Range(1u, 65536u));
  app->add_flag("!--no-hold", c.hold_new_files,
                "With --all or --children: never stop a process that maps or runs a file not seen before (by "
                "default it is stopped, for the milliseconds that probing the file takes, so that none "
                "of its allocations is missed; debugged processes and a shell's jobs never are)");
  app->add_flag(
      "--no-go-heap", c.no_go_heap,
      "Leave Go programs' own heap (runtime.mallocgc) unprobed: each of their allocations otherwise "
      "traps into the kernel, about a microsecond, sampled or not; their C allocations (cgo) are "
      "still recorded");
  app->add_flag("--no-java-heap", c.no_java_heap,
                "Leave launched JVMs' Java heap unsampled: allocscope gives a java it launches its JVMTI "
                "agent (the JVM then samples its own heap at --rate, nearly free for an allocation not "
                "sampled); with this it does not, and only the JVM's native allocations are recorded");
  app->add_flag("--go-heap-calls", c.go_heap_calls,
                "Sample Go programs' heap at every runtime.mallocgc call, at --rate (allocated bytes only; "
                "about a microsecond a call), rather than from their runtime's own sampling (allocated and "
                "in use, no cost a call; used where the program links runtime/pprof and --rate is Go's "
                "MemProfileRate, 512 KiB)")
      ->excludes("--no-go-heap");
  app->add_flag("-v,--verbose", c.verbose, "Print probe placement, kernel counters and libbpf's messages");
}

void finish_sampling(RecordConfig& c, const OptionText& t) {
  c.rate = *parse_bytes(t.rate);
  c.ringbuf_bytes = static_cast<uint32_t>(*parse_bytes(t.ringbuf));
  c.probe_mode = t.probe_mode == "session"   ? ProbeMode::Session
                 : t.probe_mode == "classic" ? ProbeMode::Classic
                                             : ProbeMode::Auto;
  if (!t.duration.empty()) c.duration_ms = *parse_duration_ms(t.duration);
  c.unwind = t.unwind == "fp" ? UnwindMode::Fp : UnwindMode::Dwarf;
  // Exact mode tracks every live block, not a sample of them.
  if (c.rate <= 1 && !*t.max_live_opt) c.max_live = 1 << 22;
}

}  // namespace allocscope
