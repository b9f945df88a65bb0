// What the event sink asks of the rest of the recorder, as small interfaces
// grouped by role, so that a test can fake each one.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "allocscope.h"

namespace allocscope {

using ExactEntry = std::pair<uint64_t, as_exact_totals>;  // stack id, totals

// Which processes are recorded (the --comm filter), and what that means for
// the kernel's verdicts.
class ProcessVerdicts {
 public:
  virtual ~ProcessVerdicts() = default;
  // Whether a new process instance is recorded; a rejected one is told to
  // `reject` once, and its samples are dropped.
  // `cgroup`: the cgroup v2 id the sample was taken in (0: unknown).
  virtual bool accept(uint32_t tgid, const std::string& comm, uint64_t cgroup) = 0;
  virtual void reject(uint32_t tgid) = 0;
  // A process that `reject` was told of has exec'ed or exited.
  virtual void unreject(uint32_t tgid, bool exited) = 0;
  // A process `accept` took has exec'ed or exited.
  virtual void unaccept(uint32_t, bool) {}
  // Process `tgid` ran a program of this name: judged now, before its
  // samples. True when the name rules the process out whole (it is no root
  // nor member): the kernel samples none of this program.
  virtual bool judge_name(uint32_t, const std::string&) { return false; }
  // Root processes (-p, -- CMD) keep their live samples at exit: what they
  // never freed. Every other process frees everything when it ends.
  virtual bool keeps_live_at_exit(uint32_t tgid) const = 0;
};

// The kernel's state about samples, which the sink retires when their
// process instance ends.
class KernelState {
 public:
  virtual ~KernelState() = default;
  // The kernel's live entries of an ended process, to delete.
  virtual void forget_live(uint32_t tgid, std::span<const uint64_t> addrs) = 0;
  // Exact mode: the kernel's totals of these stack ids, and forgetting them.
  virtual std::vector<ExactEntry> exact_totals(std::span<const uint64_t> ids) = 0;
  virtual void forget_exact(std::span<const uint64_t> ids) = 0;
  // Continues a process the kernel held (an event's `held`) if the hold
  // stamped `stamp` (the event's `hold`) still holds it, not a later one.
  virtual void release_held(uint32_t tgid, uint64_t stamp) = 0;
  // A file the kernel marked seen (kernel device encoding), unmarked: the
  // next process to run or map it is held for it again.
  virtual void forget_file(uint32_t dev, uint64_t ino) = 0;
};

// The C libraries processes map: probed as they appear, and where their
// allocator functions are.
class LibraryWatch {
 public:
  virtual ~LibraryWatch() = default;
  // A C library file mapped for the first time (AS_EV_MMAP).
  virtual void new_library(const as_proc_event& e) = 0;
  // A process ran a new program (whose C library may show no mmap).
  virtual void on_exec(uint32_t tgid) = 0;
  // A traced process forked; a program ended (its process exited, or ran
  // another), whatever the program.
  virtual void on_fork(uint32_t /*parent*/, uint32_t /*child*/) {}
  virtual void on_program_end(uint32_t /*tgid*/) {}
  // Runtime address of allocator `fn` in process `tgid`, 0 if unknown.
  virtual uint64_t allocator_address(uint32_t tgid, int fn) = 0;
};

// Unwinding the kernel could not finish for want of a table.
class UnwindTables {
 public:
  virtual ~UnwindTables() = default;
  // The kernel met a file without an unwind table (AS_EV_NEED_TABLE).
  virtual void need_table(uint32_t tgid, const as_vma& vma) = 0;
  // A process ran a new program (AS_EV_EXEC: its file, kernel device encoding).
  virtual void on_exec(uint32_t tgid, uint32_t dev, uint64_t ino) = 0;
  // The tables of every file a held process maps, in before it goes on: its
  // first stacks are walked in the kernel like any other. `then` (which
  // continues it) runs once they are, maybe later: they are built while
  // events go on being read.
  virtual void prepare_process(uint32_t tgid, std::function<void()> then) = 0;
  // Finishes a walk the kernel stopped there (frames so far in `ips`, the
  // stopped frame's registers and the stack above in `stack`) with the
  // process's mappings as the symbolizer knows them; returns why it ended
  // (enum as_stop), or kWalkWaits when `may_wait` and a table it needs is
  // being built (started now if need be): then it is asked again later.
  static constexpr int kWalkWaits = -1;
  // Whether tables were built since the last collect_tables(): asked at
  // every event, so cheap.
  virtual bool tables_built() const = 0;
  // Loads them (and continues the processes held for them).
  virtual void collect_tables() = 0;
  // A process whose walks wait runs another program: the tables they wait
  // for are waited for here, at most `max_ms` (the reader stops meanwhile).
  virtual void wait_for_walks(uint32_t tgid, uint64_t max_ms) = 0;
  virtual int finish_walk(uint32_t tgid, const as_deferred_walk& walk, std::span<const uint8_t> stack,
                          std::vector<uint64_t>& ips, bool may_wait) = 0;
};

// The sink's collaborators; they outlive it.
struct SinkHooks {
  ProcessVerdicts& verdicts;
  KernelState& kernel;
  LibraryWatch& libraries;
  UnwindTables& unwind;
};

}  // namespace allocscope
