// A language runtime as a recording sees it: one room per runtime
// (user/runtime/NAME/), each behind this interface, made by the registry
// (registry.h). Two faces: where the runtime's allocations come from (its
// entry points among a file's probes, the route chosen among them, what it
// changed in processes to read them), and how its frames are named (told
// what the event path meets: a program run, a process found, a file mapped,
// a process gone; handed each stack to put its own frames in). At the end
// the core asks what it says.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "host/proc_maps.h"
#include "probe/placement/allocator_probes.h"
#include "symbols/elf_file.h"

namespace allocscope {

// The kernel's counters (AS_CNT_*), by index.
using KernelCounters = std::span<const uint64_t>;

// A line of what the recording took: its key in the recording's paths (the
// pprof's comments, the JSON), and its words for people.
struct RuntimePath {
  std::string key;    // "python"
  std::string shown;  // "python": the summary's "allocscope: SHOWN: VALUE"; empty: not in the summary
  std::string value;
};

// A file about to be probed, as found (its targets, entry points of the C
// family and the runtimes' own, are the runtime's to choose among).
struct ProbedFile {
  pid_t pid = 0;  // the process it was met in (0: none, system-wide probes)
  uint32_t kernel_dev = 0;
  uint64_t ino = 0;
  std::string path;   // as allocscope holds it open
  std::string shown;  // as processes map it
  // The file, opened on first call (nullptr when it cannot be).
  std::function<const ElfFile*()> elf;
};

// What a runtime made of a file's targets.
struct HeapRoute {
  // Its heap is read through probes: they attach now, never left to
  // in-process sampling.
  bool probed = false;
  // Every target erased on purpose: why ("a Go program, its heap left
  // unprobed (--no-go-heap)").
  std::string unprobed;
};

class Runtime {
 public:
  virtual ~Runtime() = default;

  // --- Where its allocations come from.
  // Chooses among the file's targets (`found`: as found) those of its own
  // to probe, erasing the others from `targets`.
  virtual HeapRoute choose_targets(const ProbedFile& /*file*/, std::vector<ProbeTarget>& /*targets*/,
                                   const std::vector<ProbeTarget>& /*found*/) {
    return {};
  }
  // The file's targets were attached (`attached`), or it was found to hold
  // no allocator at all (nothing attached).
  virtual void on_probed(const ProbedFile& /*file*/, const std::vector<ProbeTarget>& /*attached*/) {}
  // Why a process whose only file is (kernel device, inode) has no heap
  // allocscope can probe, when it is this runtime's ("a Go program (go1.16),
  // whose heap ..."); "" when it is not.
  virtual std::string unprobed_program(uint32_t /*kernel_dev*/, uint64_t /*ino*/) const { return ""; }
  // Whether the file is one of its programs (met among the files probed).
  virtual bool owns_program(uint32_t /*kernel_dev*/, uint64_t /*ino*/) const { return false; }
  // Whether the runtime reads process `pid`'s heap itself (Go's, through its
  // runtime's sampling): allocscope's library is not loaded into it.
  virtual bool reads_heap_of(pid_t /*pid*/) const { return false; }
  // Processes it asks to have entered (allocscope's library loaded into
  // them, as a busy one is: its agent there reads their heap), each once,
  // `most` at a time (the rest at the next ask). Asked only where busy
  // processes are entered (--all, the agent).
  virtual std::vector<pid_t> processes_to_enter(size_t /*most*/) { return {}; }
  // A while later: what it set in processes, checked again.
  virtual void recheck(uint64_t /*now_ms*/) {}
  // Before the probes go: what it set in processes set back.
  virtual void restore() {}
  // Names of the heaps it read through probes ("Go's heap"), for a recording
  // that samples the rest in process.
  virtual std::vector<std::string> probed_heaps() const { return {}; }
  // Programs run whose heap it could not read: a recording without samples
  // is explained by them.
  virtual uint64_t programs_unread() const { return 0; }

  // --- How its frames are named.

  // Process `pid` runs the program file (kernel device, inode).
  virtual void on_program(pid_t /*pid*/, uint32_t /*kernel_dev*/, uint64_t /*ino*/) {}
  // Process `pid` was found running (at the start, or entered).
  virtual void on_process(pid_t /*pid*/) {}
  // Process `pid` mapped a file not seen before at `addr` (the kernel's
  // vma names it `name`).
  virtual void on_mapping(pid_t /*pid*/, uint64_t /*addr*/, std::string_view /*name*/) {}
  // The files a launched command will map (its loader's list), before it runs.
  virtual void on_files(const std::vector<std::string>& /*paths*/) {}
  // The process ended or runs another program.
  virtual void forget(pid_t /*pid*/) {}

  // A stack, while its process lives: what its frames need read from the
  // process is read now (the walk may end later). `runtime_part`: the stack
  // record's bytes past its native frames (as_stack_event from npy on),
  // where each runtime finds its own.
  virtual void read_stack(pid_t /*pid*/, std::span<const Mapping> /*kernel_maps*/,
                          std::span<const uint8_t> /*runtime_part*/) {}
  // The same stack, its native frames walked (`ips`, innermost first): the
  // runtime's frames put in place. `fn`: the sample's entry code.
  virtual void place_frames(pid_t /*pid*/, std::span<const Mapping> /*kernel_maps*/,
                            std::span<const uint8_t> /*runtime_part*/, uint16_t /*fn*/,
                            std::vector<uint64_t>& /*ips*/) {}

  // A stack whose frames the runtime's agent inside process `pid` named
  // itself (`agent`: the room, "jvm"; `frames`: its encoding): put in
  // place, when the agent is this runtime's.
  virtual void place_agent_frames(pid_t /*pid*/, std::string_view /*agent*/,
                                  std::span<const uint8_t> /*frames*/, std::vector<uint64_t>& /*ips*/) {}
  // The runtime's agent in process `pid` says why it samples nothing.
  virtual void on_agent_note(pid_t /*pid*/, std::string_view /*agent*/, const std::string& /*text*/) {}

  // Its counters for the JSON summary, by name.
  virtual void add_counters(KernelCounters /*kernel*/,
                            std::vector<std::pair<std::string, uint64_t>>& /*out*/) const {}
  // Warnings and notes for the summary, a line each ("warning: ...", "note: ...").
  virtual std::vector<std::string> warnings(KernelCounters /*kernel*/) const { return {}; }
  // What the recording took from it (versions read, what went uncounted).
  virtual std::vector<RuntimePath> paths() const { return {}; }
};

}  // namespace allocscope
