#include "model/process_table.h"

namespace allocscope {

uint32_t ProcessTable::current(uint32_t tgid, std::string_view comm, bool* made) {
  auto it = latest_.find(tgid);
  bool make = it == latest_.end() || instances_[it->second].ended;
  if (made) *made = make;
  if (!make) return it->second;
  uint32_t id = uint32_t(instances_.size());
  instances_.push_back({tgid, std::string(comm), false, false});
  latest_[tgid] = id;
  ++running_;
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

std::optional<uint32_t> ProcessTable::end(uint32_t tgid) {
  auto id = find(tgid);
  if (id) {
    instances_[*id].ended = true;
    --running_;
  }
  return id;
}

void ProcessTable::reject(uint32_t id) {
  if (!instances_[id].rejected) ++rejected_;
  instances_[id].rejected = true;
}

}  // namespace allocscope
