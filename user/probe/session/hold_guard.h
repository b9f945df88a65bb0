// Processes the kernel stops (SIGSTOP) when they map a file not seen before,
// until that file is examined and probed: none of its allocations is missed.
// This continues them: each once its file is settled, any held past a bound,
// and every one when the session ends. A guard process, forked at start,
// continues those still held if allocscope itself dies without doing so
// (SIGKILL, a crash): a held process never outlives its tracer stopped.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <unordered_set>
#include <vector>

#include "base/result.h"
#include "base/unique_fd.h"
#include "stats/recent_durations.h"

namespace allocscope {

class HoldGuard {
 public:
  // `held_map`: the kernel's map of held processes (tgid -> when, ns);
  // `relays_map`, if any: held child -> the parent held with it, having
  // stopped itself when it saw the child stop (su, sudo).
  static Result<std::unique_ptr<HoldGuard>> start(int held_map, int relays_map = -1);
  HoldGuard(const HoldGuard&) = delete;
  HoldGuard& operator=(const HoldGuard&) = delete;
  // Continues every process still held, then lets the guard go.
  ~HoldGuard();

  // Continues `tgid` if the kernel still holds it by the hold stamped
  // `stamp` (as_proc_event.hold): true when it did, and then the parents
  // held with it. A later hold of the process (its event not read yet)
  // stays. How long it was held goes to `times`.
  bool release(uint32_t tgid, uint64_t stamp, RecentDurations* times = nullptr);
  // Continues those held since before `before_ns` (CLOCK_MONOTONIC), but
  // those in `waiting` only when held since before `waiting_before_ns`; how
  // many (their ids appended to `pids`).
  size_t release_older(uint64_t before_ns, const std::unordered_set<uint32_t>& waiting = {},
                       uint64_t waiting_before_ns = 0, RecentDurations* times = nullptr,
                       std::vector<uint32_t>* pids = nullptr);

 private:
  HoldGuard(int held_map, int relays_map, UniqueFd pipe, pid_t guard)
      : map_(held_map), relays_(relays_map), pipe_(std::move(pipe)), guard_(guard) {}
  void release_relays(uint32_t child);

  int map_;
  int relays_;
  UniqueFd pipe_;  // the write end: its closing (here or by death) wakes the guard
  pid_t guard_;
};

// Continues every process in `held_map` held since before `before_ns`
// (deleting each entry first, so that no process is continued twice); those
// in `waiting`, when given, only if held since before `waiting_before_ns`.
// Async-signal-safe without `waiting`, `times` (how long each was held:
// a hold of a process at its exit, stamped with its grace ahead, is not
// timed) and `pids` (their ids). How many.
size_t release_every_held(int held_map, uint64_t before_ns = UINT64_MAX,
                          const std::unordered_set<uint32_t>* waiting = nullptr,
                          uint64_t waiting_before_ns = 0, RecentDurations* times = nullptr,
                          std::vector<uint32_t>* pids = nullptr);

}  // namespace allocscope
