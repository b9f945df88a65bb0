#include "record/events/ring_frees.h"

namespace allocscope {

void RingFrees::emit_free(const Free& f, const Emit& emit) {
  emit(FreeEvent{f.tgid, f.tid, f.ts_ns, f.addr});
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

bool RingFrees::before(const Event& event, const Emit& emit) {
  std::optional<uint64_t> ts_ns = event_time(event);
  if (!ts_ns) return true;
  if (*ts_ns > read_ns_) {
    kept_ = event;
    ++kept_count_;
    return false;
  }
  if (std::holds_alternative<AllocEvent>(event)) {
    emit_before(*ts_ns, emit);
  } else if (const auto* p = std::get_if<ProcessEvent>(&event)) {
    if (p->e.kind == AS_EV_EXIT || p->e.kind == AS_EV_EXEC) emit_own_before(p->e.tgid, *ts_ns, emit);
  }
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
