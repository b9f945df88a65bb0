// A sampled BPF recording of a launched command in process: the kernel's
// probes take the sampled trials, and each process sends the frees of its
// sampled blocks through the ring allocscope handed it (PreloadChannel,
// FreesOnly), a trap saved per sampled block. This stage merges those frees
// into the kernel's events in time, as the sink would have had them from
// the kernel: each after its block's allocation, and before the next
// allocation at its address. Pure logic, on decoded events (events.h).
//
// How. Each pass over the kernel's ring buffer begins with the time, then a
// read of the rings: every free stamped before that time is read (a free is
// stamped as its record is placed, so a ring read short of its end, at a
// record still being written, holds the time back to that record's stamp).
// The pass hands on the kernel's events of that time or earlier; the first
// one later is kept for the next pass, and the pass stops there (the ring
// buffer keeps the rest). Before an allocation's event go the frees earlier
// than it: its time was taken before its place in the ring buffer, so a free
// earlier than it had its own allocation's event earlier still. Before a
// process's exit or exec go its own frees earlier than that (its
// allocations' events are all before). The rest go at the end of a pass
// that read past every event placed in the ring buffer before it began:
// there were the allocations of every free read before it. A free held back
// (a writer stopped inside its record for longer than the time is held) can
// come after the next allocation at its address: the profile passes it over
// (Profile::on_free) and counts the replaced sample (live_replaced).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <set>
#include <utility>

#include "record/events/events.h"

namespace allocscope {

class RingFrees {
 public:
  using Emit = std::function<void(Event)>;
  // Frees waiting for their place: past it, the earliest goes on at once
  // (counted: its allocation's event may not have been read yet).
  static constexpr size_t kMaxPending = size_t(1) << 20;

  explicit RingFrees(size_t max_pending = kMaxPending) : max_pending_(max_pending) {}

  // A pass begins at read_ns (CLOCK_MONOTONIC, taken before the rings were
  // read for it).
  void pass_begins(uint64_t read_ns) {
    ++passes_;
    read_ns_ = read_ns;
  }
  // A free read from a ring: its process (the kernel's id), thread, block
  // and time.
  void add(uint32_t tgid, uint32_t tid, uint64_t addr, uint64_t ts_ns, const Emit& emit);
  // Before `event` (the kernel's) goes to the sink: the frees that precede
  // it go first. False: the event is later than the pass's time, kept
  // (take_kept) for the next pass, which it must begin.
  bool before(const Event& event, const Emit& emit);
  // The event kept by the last pass (none if none), handed over once.
  std::optional<Event> take_kept() { return std::exchange(kept_, std::nullopt); }
  bool has_kept() const { return kept_.has_value(); }
  // The pass ended; complete: it read past every event placed in the ring
  // buffer before it began.
  void pass_ends(bool complete, const Emit& emit);
  // The recording ends: every free goes on (the kernel sends no more).
  void flush(const Emit& emit);

  struct Counts {
    uint64_t read = 0;   // frees read from the rings
    uint64_t early = 0;  // of them, passed on before their place: kMaxPending waiting
    uint64_t kept = 0;   // events of the kernel's kept for the next pass
    size_t pending = 0;  // waiting now
  };
  Counts counts() const { return {read_, early_, kept_count_, pending_.size()}; }

 private:
  struct Free {
    uint64_t ts_ns, addr;
    uint32_t tgid, tid;
    uint64_t read_in;  // passes begun when it was read
    bool operator<(const Free& o) const { return ts_ns < o.ts_ns; }
  };
  void emit_free(const Free& f, const Emit& emit);
  void emit_before(uint64_t ts_ns, const Emit& emit);
  void emit_own_before(uint32_t tgid, uint64_t ts_ns, const Emit& emit);

  size_t max_pending_;
  std::multiset<Free> pending_;
  std::optional<Event> kept_;
  uint64_t passes_ = 0, read_ns_ = 0;
  uint64_t read_ = 0, early_ = 0, kept_count_ = 0;
};

}  // namespace allocscope
