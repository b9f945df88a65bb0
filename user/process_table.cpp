#include "process_table.h"

namespace allocscope {

uint32_t ProcessTable::current(uint32_t tgid, std::string_view comm) {
  auto [it, added] = current_.try_emplace(tgid, uint32_t(instances_.size()));
  if (added) {
    instances_.push_back({tgid, std::string(comm), false});
    latest_[tgid] = it->second;
  }
  return it->second;
}

std::optional<uint32_t> ProcessTable::find(uint32_t tgid) const {
  auto it = current_.find(tgid);
  if (it == current_.end())
    return std::nullopt;
  return it->second;
}

std::optional<uint32_t> ProcessTable::latest(uint32_t tgid) const {
  auto it = latest_.find(tgid);
  if (it == latest_.end())
    return std::nullopt;
  return it->second;
}

std::optional<uint32_t> ProcessTable::end(uint32_t tgid) {
  auto it = current_.find(tgid);
  if (it == current_.end())
    return std::nullopt;
  uint32_t id = it->second;
  instances_[id].ended = true;
  current_.erase(it);
  return id;
}

}  // namespace allocscope
