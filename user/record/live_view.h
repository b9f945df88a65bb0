// A recording seen while it runs: what the always-on agent serves. The view
// is used from the recording's own thread only (RecordObserver::on_tick),
// so it needs no locks; the agent hands its requests to that thread.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "model/process_table.h"
#include "model/profile.h"
#include "model/recording.h"

namespace allocscope {

// One process instance (a run of one program in one process) with the sum
// of its stacks so far.
struct ProcessTotals {
  uint32_t instance = 0;
  ProcessInstance process;
  StackTotals totals;
};

// Which folded instance an ended instance's stacks go to: equal keys, one.
struct FoldKey {
  std::string comm;   // the folded instance's name: its program's
  std::string group;  // the observer's own (a cgroup's path, say)
  auto operator<=>(const FoldKey&) const = default;
};
using FoldGrouping = std::function<FoldKey(uint32_t instance, const ProcessInstance&)>;
struct Folded {
  ProcessTotals totals;  // of the instance whose stacks moved
  uint32_t into = 0;     // the folded instance that holds them now
  FoldKey key;           // `into`'s
  bool made = false;     // `into` was made for it
};

// How long processes were stopped for a file not seen before (ns): the
// median and 99th percentile of the last 4,096 holds, the longest of all.
struct HoldTimes {
  uint64_t count = 0, p50 = 0, p99 = 0, max = 0;
};

// Which process instances a view holds (by id in the process table).
using InstanceSelector = std::function<bool(uint32_t instance, const ProcessInstance&)>;
// Totals per stack (by serial) at one moment: the start of a delta.
using Baseline = std::unordered_map<uint64_t, WindowBase>;

class LiveView {
 public:
  virtual ~LiveView() = default;
  // Every instance with samples, running or ended.
  virtual std::vector<ProcessTotals> processes() = 0;
  // Every instance seen; new ones are appended.
  virtual const ProcessTable& process_table() const = 0;
  // The path of the cgroup v2 with this id (as samples carry it), "" when
  // unknown: learnt as cgroups were made, so also of those gone since.
  virtual const std::string& cgroup_path(uint64_t id) = 0;
  // Forgets the paths of cgroups removed before `before_ms` (CLOCK_MONOTONIC):
  // those whose processes' labels are taken. How many (also in counters()).
  virtual size_t forget_removed_cgroups(uint64_t before_ms) = 0;
  // Reads the events the kernel placed until now (waiting briefly for one
  // still being written): what follows sees everything before the call.
  virtual void catch_up() = 0;
  virtual Baseline baseline(const InstanceSelector& keep) = 0;
  // The symbolized profile of the chosen instances: allocations since the
  // recording began and what is live now; given `since`, what was allocated
  // after it and how the live side changed (Go's ?seconds= delta).
  virtual Recording snapshot(const InstanceSelector& keep, const Baseline* since = nullptr) = 0;
  // The recording's named counters (samples, drops by cause, probe state).
  virtual std::vector<std::pair<std::string, uint64_t>> counters() = 0;
  virtual HoldTimes hold_times() const = 0;
  // Stacks in the table, and its capacity.
  virtual std::pair<size_t, size_t> stack_table() const = 0;
  // Entries in the recording's own tables now (stacks, process ids,
  // resolved mappings, open binaries): what its memory grows with.
  virtual std::vector<std::pair<std::string, uint64_t>> table_sizes() const = 0;
  // Moves the stacks of instances that ended before `ended_before_ms`
  // (now_ms()'s clock) to folded instances, one per key `group` gives
  // (ProcessTable::add_folded): what is distinct stays, not each process,
  // and no cumulative total goes down. In exact mode, only instances whose
  // final totals were read from the kernel (a root kept to the end is not).
  // Deltas up to `window_ms` long see through the folds.
  virtual std::vector<Folded> fold_ended(uint64_t ended_before_ms, const FoldGrouping& group,
                                         uint64_t window_ms) = 0;
};

class RecordObserver {
 public:
  virtual ~RecordObserver() = default;
  // From the recording's loop between polls: at most ~100 ms apart.
  virtual void on_tick(LiveView& view) = 0;
  // Once the recording can be woken: `wake` (callable from any thread until
  // on_stop) makes the next tick come at once.
  virtual void set_wake(std::function<void()> wake) { (void)wake; }
  // The recording has ended (a signal, the duration, the targets gone) and
  // its probes are detached; a last tick came just before. The view is not
  // offered again.
  virtual void on_stop() {}
};

}  // namespace allocscope
