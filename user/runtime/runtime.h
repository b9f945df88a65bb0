// A language runtime as a recording sees it: one room per runtime
// (user/runtime/NAME/), each behind this interface, made by the registry
// (registry.h). The core tells every runtime what the event path meets (a
// program run, a process found, a file mapped, a process gone) and hands it
// each stack to name its own frames in; at the end it asks what to say.
// Where a runtime's allocations come from (its allocator domains, its own
// sampling) stays, for now, with the rooms that probe them.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "host/proc_maps.h"

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

class Runtime {
 public:
  virtual ~Runtime() = default;

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

  // A stack event of the kernel's, while its process lives: what its frames
  // need read from the process is read now (the walk may end later).
  virtual void read_stack(pid_t /*pid*/, std::span<const Mapping> /*kernel_maps*/,
                          std::span<const uint8_t> /*event*/) {}
  // The same event, its native frames walked (`ips`, innermost first): the
  // runtime's frames put in place. `fn`: the sample's entry code.
  virtual void place_frames(pid_t /*pid*/, std::span<const Mapping> /*kernel_maps*/,
                            std::span<const uint8_t> /*event*/, uint16_t /*fn*/,
                            std::vector<uint64_t>& /*ips*/) {}

  // Its counters for the JSON summary, by name.
  virtual void add_counters(KernelCounters /*kernel*/,
                            std::vector<std::pair<std::string, uint64_t>>& /*out*/) const {}
  // Warnings for the summary, a line each, without the "warning: " prefix.
  virtual std::vector<std::string> warnings(KernelCounters /*kernel*/) const { return {}; }
  // What the recording took from it (versions read, what went uncounted).
  virtual std::vector<RuntimePath> paths() const { return {}; }
};

}  // namespace allocscope
