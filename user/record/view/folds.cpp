#include "record/view/folds.h"

namespace allocscope {

std::optional<uint32_t> Folds::find(const FoldKey& key, const ProcessTable& table) const {
  auto it = instances_.find(key);
  if (it == instances_.end() || it->second.id >= table.slots()) return std::nullopt;
  const ProcessInstance& p = table.instance(it->second.id);
  if (!p.folded || p.serial != it->second.serial) return std::nullopt;
  return it->second.id;
}

void Folds::journal(uint64_t from, uint64_t to, uint64_t now_ms) {
  if (journal_.size() >= journal_capacity_) {
    journal_.pop_front();
    ++journal_dropped_;
  }
  journal_.push_back({from, to, now_ms});
}

void Folds::prune(uint64_t kept_after_ms) {
  while (!journal_.empty() && journal_.front().ms <= kept_after_ms) journal_.pop_front();
}

Baseline Folds::through(const Baseline& since) const {
  Baseline now = since;
  // In order: a stack folded twice (never, today) would follow both.
  for (const Entry& e : journal_) {
    auto from = now.find(e.from);
    if (from == now.end()) continue;
    WindowBase moved = from->second;
    now.erase(from);
    WindowBase& to = now[e.to];
    to.objects += moved.objects;
    to.bytes += moved.bytes;
    to.samples += moved.samples;
    to.stats.merge(moved.stats);
    to.live_objects += moved.live_objects;
    to.live_bytes += moved.live_bytes;
  }
  return now;
}

}  // namespace allocscope
