// How `record -- CMD` samples the command it launches. A probe on the
// allocator traps into the kernel on every call; the preload library
// samples inside the process and enters the kernel only for sampled
// allocations, so a launched command is given it wherever it can load it,
// and the processes of its tree that do not load it (static programs,
// set-id ones, an environment cleared on the way) are probed instead.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/result.h"
#include "record/record.h"

namespace allocscope {

// What the launched program's file says about loading the preload library.
struct ProgramFacts {
  bool found = false;       // the file execvp would run exists
  bool elf = false;         // an ELF file (else a script: its interpreter runs)
  bool dynamic = false;     // ELF with an interpreter (the dynamic linker)
  bool set_id = false;      // setuid or setgid: the loader ignores LD_PRELOAD
  bool own_malloc = false;  // defines malloc itself: no preload can interpose it
};

// How the command's processes are sampled.
struct LaunchPlan {
  bool in_process = false;         // the command starts with the preload library in LD_PRELOAD
  bool probes = true;              // allocator probes for processes that do not sample in process
  bool root_in_process = false;    // the launched program itself will load it
  std::string preload_library;     // with in_process
  std::string why_probes;          // Auto chose the probes alone: why
  std::vector<std::string> files;  // the program, the libraries the loader maps for it, preloads
};

// Reads the program's file (ELF headers and symbols).
ProgramFacts program_facts(const std::string& program);

// Why the launched program cannot sample in process; "" when it can.
std::string in_process_refusal(const ProgramFacts& facts);

// The plan for `c`. Auto: in process when the program can load the library
// (installed, sampled mode, the probes not what is measured), the probes for
// the processes of its tree that do not; the probes alone otherwise. Fails only
// when --preload cannot be honoured.
Result<LaunchPlan> plan_launch(const RecordConfig& c);
// A recording without BPF: in process only; fails, naming why, when the
// program cannot load the library (nothing else could sample it).
Result<LaunchPlan> plan_launch_in_process_only(const RecordConfig& c);

// The environment and command line to launch with: LD_PRELOAD and
// ALLOCSCOPE_RATE set when the plan samples in process.
std::vector<std::string> launch_environment(const LaunchPlan& plan, uint64_t rate);
std::vector<std::string> launch_command(const LaunchPlan& plan, const std::vector<std::string>& command);

// The plan and the processes that ended under it, in a few words for the
// summary and the outputs ("in process (3 processes), allocator probes (1)").
std::string describe_sampling(const LaunchPlan& plan, uint64_t in_process, uint64_t through_probes);

}  // namespace allocscope
