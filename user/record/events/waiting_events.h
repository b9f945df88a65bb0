// Events held back while a stack's walk waits for an unwind table that is
// being built off the reading thread: the reader goes on draining the ring
// buffer, and the stack is walked whole once its table is in. What must
// follow the waiting stack waits with it, in order: the samples that name
// it, any event on an address one of those holds, and its process's exit.
// Everything else goes on. Pure bookkeeping: the sink feeds the events.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <map>
#include <span>
#include <unordered_set>
#include <vector>

#include "record/events/events.h"

namespace allocscope {

class WaitingEvents {
 public:
  explicit WaitingEvents(size_t max_bytes) : max_bytes_(max_bytes) {}

  bool holds(uint32_t tgid) const { return processes_.contains(tgid); }
  // Whether an event of `tgid` on stack `stack` (0: none) and address
  // `addr` (0: none) must wait behind the held ones.
  bool must_wait(uint32_t tgid, uint64_t stack, uint64_t addr) const;
  // Holds `event`, behind the others of `tgid`. `stack`: the id
  // of a stack event that waits (its samples wait too), else 0. `since_ns`
  // counts for a process's first held event only.
  void hold(uint32_t tgid, Event event, uint64_t stack, uint64_t addr, uint64_t since_ns);
  // Takes the events of `tgid`, in order, to be fed again.
  std::deque<Event> take(uint32_t tgid);
  // When the oldest held event of `tgid` was held.
  uint64_t since_ns(uint32_t tgid) const;

  // Processes with events held, oldest first.
  std::vector<uint32_t> processes() const;
  size_t bytes() const { return bytes_; }
  // Over its capacity: the caller lets the oldest process's events go.
  bool full() const { return bytes_ > max_bytes_; }
  bool empty() const { return processes_.empty(); }

 private:
  struct Held {
    uint64_t since_ns = 0;
    std::deque<Event> events;
    std::unordered_set<uint64_t> stacks, addrs;
  };
  size_t max_bytes_;
  size_t bytes_ = 0;
  std::map<uint32_t, Held> processes_;
};

}  // namespace allocscope
