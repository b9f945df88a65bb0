// `allocscope record`: attach or launch, sample, write the profile.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <vector>

#include "bpf_session.h"
#include "outputs.h"
#include "profile.h"
#include "sampling.h"

namespace allocscope {

// How stacks are walked: the kernel's frame-pointer walk, DWARF call frame
// information on a copy of the stack, or DWARF where it reaches further.
enum class UnwindMode { Fp, Dwarf, Auto };

struct RecordConfig {
  std::vector<pid_t> pids;           // -p: attach to these processes
  std::vector<std::string> command;  // -- CMD: launch and follow this
  uint64_t duration_ms = 0;          // 0: until the target exits or a signal
  std::vector<OutputSpec> outputs;   // default: allocscope.folded
  uint64_t interval_ms = 0;          // > 0: numbered outputs every interval
  RenderOptions render;              // how outputs show estimates (metric set from `metric`)
  uint64_t rate = kDefaultRate;
  Metric metric = Metric::AllocSpace;
  uint32_t max_live = 1 << 18;
  uint32_t max_stacks = 1 << 18;
  uint32_t ringbuf_bytes = 16 << 20;
  bool no_free = false;          // alloc-only: free is not probed
  UnwindMode unwind = UnwindMode::Auto;
  uint32_t stack_bytes = 16384;  // DWARF: user stack copied per sample
  ProbeMode probe_mode = ProbeMode::Auto;
  bool null_probes = false;      // benchmark floor: probes that do nothing
  bool naive_placement = false;  // benchmark: every probe on the entry instruction
  bool verbose = false;
  bool quiet = false;
};

// Runs a recording; returns the process exit status: the command's with
// `-- CMD`, else 0, or 1 after an error (already printed).
int record(const RecordConfig& config);

}  // namespace allocscope
