#include "model/process_table.h"

namespace allocscope {

uint32_t ProcessTable::current(uint32_t tgid, std::string_view comm, bool* made) {
  auto it = latest_.find(tgid);
  bool make = it == latest_.end() || instances_[it->second].ended;
  if (made) *made = make;
  if (!make) return it->second;
  uint32_t id = new_id();
  instances_[id] = {tgid, std::string(comm), false, false, ++made_};
  latest_[tgid] = id;
  ++running_;
  return id;
}

uint32_t ProcessTable::add_folded(std::string_view comm) {
  uint32_t id = new_id();
  instances_[id] = {.comm = std::string(comm), .ended = true, .serial = ++made_, .folded = true};
  return id;
}

uint32_t ProcessTable::new_id() {
  if (free_.empty()) {
    instances_.emplace_back();
    return uint32_t(instances_.size() - 1);
  }
  uint32_t id = free_.back();
  free_.pop_back();
  return id;
}

std::optional<uint32_t> ProcessTable::find(uint32_t tgid) const {
  auto id = latest(tgid);
  if (id && instances_[*id].ended) return std::nullopt;
  return id;
}

std::optional<uint32_t> ProcessTable::latest(uint32_t tgid) const {
  auto it = latest_.find(tgid);
  if (it == latest_.end()) return std::nullopt;
  return it->second;
}

std::optional<uint32_t> ProcessTable::end(uint32_t tgid, bool in_process, uint64_t now_ms) {
  auto id = find(tgid);
  if (id) {
    instances_[*id].ended = true;
    instances_[*id].ended_ms = now_ms;
    --running_;
    if (!instances_[*id].rejected) ++(in_process ? ended_in_process_ : ended_through_probes_);
  }
  return id;
}

std::vector<std::pair<uint32_t, uint32_t>> ProcessTable::running_instances() const {
  std::vector<std::pair<uint32_t, uint32_t>> out;
  out.reserve(running_);
  for (const auto& [tgid, id] : latest_)
    if (!instances_[id].ended) out.emplace_back(tgid, id);
  return out;
}

void ProcessTable::reject(uint32_t id) {
  if (!instances_[id].rejected) ++rejected_;
  instances_[id].rejected = true;
}

size_t ProcessTable::release_ended(const std::vector<bool>& held) {
  size_t released = 0;
  for (uint32_t id = 0; id < instances_.size(); ++id) {
    ProcessInstance& p = instances_[id];
    if (!p.ended || p.serial == 0 || (id < held.size() && held[id])) continue;
    if (auto it = latest_.find(p.tgid); !p.folded && it != latest_.end() && it->second == id)
      latest_.erase(it);
    p = {};
    free_.push_back(id);
    ++released;
  }
  return released;
}

}  // namespace allocscope
