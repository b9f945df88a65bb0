// Ring buffer records -> profile. Samples are aggregated per process
// instance (ProcessTable); each new stack is resolved to its mappings while
// its process is known; lifecycle events end instances and drop what they
// held live. DWARF stack snapshots are unwound here.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "allocscope.h"
#include "dwarf_unwinder.h"
#include "process_table.h"
#include "profile.h"
#include "recording_builder.h"
#include "symbolizer.h"

namespace allocscope {

// How stacks are walked: the kernel's frame-pointer walk, DWARF call frame
// information on a copy of the stack, or DWARF where it reaches further.
enum class UnwindMode { Fp, Dwarf, Auto };

// What the recorder decides for the sink.
struct SinkPolicy {
  // Whether a new process instance is recorded (the --comm filter); a
  // rejected one is told to `reject` once, and its samples are dropped.
  std::function<bool(uint32_t tgid, const std::string& comm)> accept;
  std::function<void(uint32_t tgid)> reject;
  // Root processes (-p, -- CMD) keep their live samples at exit: what they
  // never freed. Every other process frees everything when it ends.
  std::function<bool(uint32_t tgid)> keeps_live_at_exit;
  // The kernel's live entries of an ended process, to delete.
  std::function<void(uint32_t tgid, std::span<const uint64_t> addrs)> forget_live;
  // A process ran a new program.
  std::function<void(uint32_t tgid)> on_exec;
  // A process that `reject` was told of has exec'ed or exited.
  std::function<void(uint32_t tgid, bool exited)> unreject;
  // A C library file mapped for the first time (AS_EV_MMAP).
  std::function<void(const as_proc_event&)> new_library;
  // Runtime address of allocator `fn` in process `tgid`, 0 if unknown.
  std::function<uint64_t(uint32_t tgid, int fn)> allocator_address;
  bool per_process = true;  // false: stacks of one name merge across processes
};

// Samples a process lost, by cause.
struct ProcessDrops {
  std::string comm;
  uint64_t live_full = 0, stack_table_full = 0, stack_read = 0;
};

class EventSink {
 public:
  EventSink(Profile& profile, Symbolizer& symbolizer, UnwindMode mode, SinkPolicy policy);

  void operator()(std::span<const uint8_t> data);

  const std::vector<StackOrigin>& origins() const { return origins_; }
  const ProcessTable& processes() const { return processes_; }
  // Process instances with samples recorded (not filtered out).
  uint64_t recorded_processes() const { return processes_.instances() - processes_.rejected(); }
  const std::map<uint32_t, ProcessDrops>& drops() const { return drops_; }
  uint64_t unwinds() const { return unwinds_; }
  uint64_t truncated() const { return truncated_; }
  // The name a process had at its last exec or exit, for processes that
  // sent no sample (all lost); "" when not known.
  std::string last_name(uint32_t tgid) const;

 private:
  void on_alloc(std::span<const uint8_t> data);
  void on_process(const as_proc_event& e);
  void end_instance(uint32_t tgid, bool exited);
  void forget_untracked(uint32_t tgid, uint64_t addr, uint16_t flags);
  std::optional<uint32_t> instance_for(uint32_t tgid, const std::string& comm);
  void unwind(uint32_t pid, std::span<const uint8_t> rest);
  void count_drops(uint32_t tgid, const std::string& comm, bool live_full, bool stack_read, bool table_full);
  StackOrigin origin(uint32_t tgid, const std::string& comm, uint16_t fn);

  Profile& profile_;
  Symbolizer& symbolizer_;
  UnwindMode mode_;
  SinkPolicy policy_;
  DwarfUnwinder unwinder_;
  ProcessTable processes_;
  std::vector<StackOrigin> origins_;      // by stack index
  std::map<uint32_t, ProcessDrops> drops_;
  std::unordered_map<uint32_t, std::string> last_names_;  // bounded: see on_process
  std::vector<uint64_t> ips_;
  std::vector<Mapping> kernel_maps_;
  uint64_t unwinds_ = 0, truncated_ = 0;
};

}  // namespace allocscope
