#include "record/events/ring_frees.h"

#include <cstddef>
#include <cstring>

#include "allocscope.h"

namespace allocscope {

void RingFrees::emit_free(const Free& f, const Emit& emit) {
  as_event e{};
  e.kind = AS_EV_FREE;
  e.tgid = f.tgid;
  e.tid = f.tid;
  e.fn = AS_FN_FREE;
  e.ts_ns = f.ts_ns;
  e.addr = f.addr;
  emit({reinterpret_cast<const uint8_t*>(&e), sizeof e});
}

void RingFrees::add(uint32_t tgid, uint32_t tid, uint64_t addr, uint64_t ts_ns, const Emit& emit) {
  ++read_;
  if (pending_.size() >= max_pending_) {
    ++early_;
    emit_free(*pending_.begin(), emit);
    pending_.erase(pending_.begin());
  }
  pending_.insert({ts_ns, addr, tgid, tid, passes_});
}

void RingFrees::emit_before(uint64_t ts_ns, const Emit& emit) {
  while (!pending_.empty() && pending_.begin()->ts_ns < ts_ns) {
    emit_free(*pending_.begin(), emit);
    pending_.erase(pending_.begin());
  }
}

void RingFrees::emit_own_before(uint32_t tgid, uint64_t ts_ns, const Emit& emit) {
  for (auto it = pending_.begin(); it != pending_.end() && it->ts_ns < ts_ns;) {
    if (it->tgid != tgid) {
      ++it;
      continue;
    }
    emit_free(*it, emit);
    it = pending_.erase(it);
  }
}

bool RingFrees::before(std::span<const uint8_t> event, const Emit& emit) {
  as_event h;
  if (event.size() < sizeof h) return true;
  std::memcpy(&h, event.data(), sizeof h);
  // Every kind with a time keeps it where an as_event does.
  static_assert(offsetof(as_event, ts_ns) == offsetof(as_proc_event, ts_ns));
  bool timed = h.kind == AS_EV_ALLOC || h.kind == AS_EV_FREE ||
               (h.kind >= AS_EV_FORK && h.kind <= AS_EV_MMAP) || h.kind == AS_EV_EXITING;
  if (!timed) return true;
  if (h.ts_ns > read_ns_) {
    kept_.assign(event.begin(), event.end());
    ++kept_count_;
    return false;
  }
  if (h.kind == AS_EV_ALLOC)
    emit_before(h.ts_ns, emit);
  else if (h.kind == AS_EV_EXIT || h.kind == AS_EV_EXEC)
    emit_own_before(h.tgid, h.ts_ns, emit);
  return true;
}

void RingFrees::pass_ends(bool complete, const Emit& emit) {
  if (!complete) return;
  // In time order, up to the first read during the pass.
  while (!pending_.empty() && pending_.begin()->read_in < passes_) {
    emit_free(*pending_.begin(), emit);
    pending_.erase(pending_.begin());
  }
}

void RingFrees::flush(const Emit& emit) {
  for (const Free& f : pending_) emit_free(f, emit);
  pending_.clear();
}

}  // namespace allocscope
