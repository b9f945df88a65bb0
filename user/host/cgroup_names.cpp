#include "host/cgroup_names.h"

#include <algorithm>
#include <utility>

#include "host/process.h"

namespace allocscope {

CgroupNames::CgroupNames(size_t capacity, Walk walk)
    : capacity_(capacity ? capacity : 1), walk_(walk ? std::move(walk) : Walk(cgroup_path_of_id)) {}

void CgroupNames::make_room() {
  if (paths_.size() < capacity_) return;
  forget_removed(UINT64_MAX);
  if (paths_.size() < capacity_) return;
  forgotten_ += paths_.size();
  paths_.clear();
  removals_.clear();
}

void CgroupNames::learn(uint64_t id, std::string path) {
  if (id == 0 || path.empty()) return;
  if (!paths_.contains(id)) make_room();
  paths_[id] = {std::move(path), 0};
}

const std::string& CgroupNames::path_of(uint64_t id) {
  static const std::string kNone;
  if (id == 0) return kNone;
  if (auto it = paths_.find(id); it != paths_.end()) return it->second.path;
  std::string found = walk_(id);
  if (found.empty()) return kNone;  // not kept: it may be learnt yet
  make_room();
  return paths_[id].path = std::move(found);
}

void CgroupNames::removed(uint64_t id, uint64_t now_ms) {
  auto it = paths_.find(id);
  if (it == paths_.end() || it->second.removed_ms) return;
  it->second.removed_ms = std::max<uint64_t>(now_ms, 1);
  removals_.emplace_back(it->second.removed_ms, id);
}

size_t CgroupNames::forget_removed(uint64_t before_ms) {
  size_t n = 0;
  while (!removals_.empty() && removals_.front().first < before_ms) {
    auto [when, id] = removals_.front();
    removals_.pop_front();
    auto it = paths_.find(id);
    if (it == paths_.end() || it->second.removed_ms != when) continue;  // made again since, or gone
    paths_.erase(it);
    ++n;
  }
  forgotten_ += n;
  return n;
}

}  // namespace allocscope
