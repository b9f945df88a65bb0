// `allocscope record`: attach or launch, sample, write the profile.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "model/profile.h"
#include "output/outputs.h"
#include "probe/modes.h"
#include "record/live_view.h"
#include "stats/sampling.h"

namespace allocscope {

enum class LaunchPath { Auto, InProcess, Probes };

struct RecordConfig {
  std::vector<pid_t> pids;              // -p: attach to these processes (with --all: only these)
  std::vector<std::string> command;     // -- CMD: launch and follow this
  bool all = false;                     // --all: every process on the machine
  std::optional<bool> children;         // follow descendants; default: with -- CMD
  std::string comm;                     // --comm: only processes whose name matches (regex)
  std::string cgroup;                   // --cgroup: only processes in this cgroup
  std::string unit;                     // --unit: only processes of this systemd unit, across restarts
  bool per_process = true;              // false: merge processes of one name
  uint32_t max_processes = 1 << 16;     // capacity of the kernel's process table
  uint32_t max_allocator_files = 1024;  // distinct files probed; more are counted, not probed
  // A process mapping a file not seen before is stopped until the file is
  // examined (and probed): nothing of it runs unseen (--no-hold: off).
  bool hold_new_files = true;
  uint64_t duration_ms = 0;         // 0: until the target exits or a signal
  std::vector<OutputSpec> outputs;  // default: allocscope.pb.gz
  bool keep_previous = false;       // the default output: an earlier one is kept as its .old
  uint64_t interval_ms = 0;         // > 0: numbered outputs every interval
  std::string timeline;             // --timeline: an HTML chart of live bytes over the recording
  bool peak = false;                // --peak: also the in-use profile at the highest live estimate
  uint64_t snapshot_above = 0;      // > 0: the in-use profile whenever live bytes cross this
  uint32_t max_snapshots = 100;     // --snapshot-above files at most; more crossings are counted
  // Duty cycle (the agent's --duty): probes attached for the first
  // duty_on_ms of every duty_period_ms; 0: always attached.
  uint64_t duty_on_ms = 0, duty_period_ms = 0;
  RenderOptions render;  // how outputs show estimates (metric set from `metric`)
  uint64_t rate = kDefaultRate;
  Metric metric = Metric::AllocSpace;
  uint32_t max_live = 1 << 18;
  // Live entries one process may hold (--max-live-per-process); unset: a
  // quarter of max_live with --all, no share otherwise; 0: no share.
  std::optional<uint32_t> max_live_per_process;
  uint32_t max_stacks = 1 << 18;
  uint32_t ringbuf_bytes = 16 << 20;
  bool no_free = false;     // alloc-only: free is not probed
  bool no_go_heap = false;  // Go programs' runtime.mallocgc is not probed (their cgo allocations are)
  bool no_java_heap =
      false;  // a launched JVM is not given the JVMTI agent (its native allocations are recorded)
  bool go_heap_calls = false;  // Go's heap sampled at every mallocgc call, not from its runtime's sampling
  // How a launched command is sampled: Auto, in process (the preload
  // library's USDT probes) in every process that loads it and allocator
  // probes in the others; InProcess (--preload) only in process; Probes
  // (--probes) only allocator probes.
  LaunchPath launch = LaunchPath::Auto;
  bool no_bpf = false;  // --no-bpf: in process only, stacks unwound in userspace, no kernel probe
  // -p: the preload library is loaded into each running process, which then
  // samples in process; under system-wide probes, into each busy process
  // (--no-inject: their allocators are probed instead).
  bool inject = true;
  UnwindMode unwind = UnwindMode::Dwarf;
  uint64_t max_unwind_rows = 1 << 25;  // budget of the kernel's unwind tables (8 bytes a row)
  ProbeMode probe_mode = ProbeMode::Auto;
  std::string force_fallback;    // --force-fallback: kernel features taken as missing ("uprobe_session")
  bool null_probes = false;      // benchmark floor: probes that do nothing
  bool naive_placement = false;  // benchmark: every probe on the entry instruction
  bool frees_trap = false;       // benchmark: in process, frees of sampled blocks trap (no ring)
  bool verbose = false;
  bool quiet = false;
  bool hangup_stops = true;   // SIGHUP ends the recording (the agent reopens its log instead)
  uint64_t top_every_ms = 0;  // --top: the top live and allocated stacks on stdout this often (0: off)

  // The probes are what is measured or chosen (the benchmarks' floors, a
  // probe mode): a launched command and a -p process are probed, not
  // sampled in process.
  bool probes_chosen() const { return null_probes || naive_placement || probe_mode != ProbeMode::Auto; }
};

// Runs a recording; returns the process exit status: the command's with
// `-- CMD`, else 0, or 1 after an error (already printed). An observer sees
// the recording as it runs (the agent); with no outputs, none are written.
int record(const RecordConfig& config, RecordObserver* observer = nullptr);
// From now on SIGINT and SIGTERM are held for record() to answer (it says
// what they stopped) rather than ending the process: called before options
// are read, so that a Ctrl-C at once is answered too.
void hold_stop_signals_for_record();
// For the start line: what recording every process does to a process that
// maps an allocator file not seen before (it is held while probed); "" when
// none is held.
std::string hold_note(const RecordConfig& c);

// Every file allocscope writes from now on (record's, report's, the
// agent's) is given to this user and group: a root run under sudo makes
// them for the user who asked.
void make_outputs_for(unsigned uid, unsigned gid);

}  // namespace allocscope
