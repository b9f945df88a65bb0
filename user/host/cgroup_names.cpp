#include "host/cgroup_names.h"

#include <utility>

#include "host/process.h"

namespace allocscope {

CgroupNames::CgroupNames(size_t capacity, Walk walk)
    : capacity_(capacity ? capacity : 1), walk_(walk ? std::move(walk) : Walk(cgroup_path_of_id)) {}

void CgroupNames::make_room() {
  if (paths_.size() < capacity_) return;
  forgotten_ += paths_.size();
  paths_.clear();
}

void CgroupNames::learn(uint64_t id, std::string path) {
  if (id == 0 || path.empty()) return;
  if (!paths_.contains(id)) make_room();
  paths_[id] = std::move(path);
}

const std::string& CgroupNames::path_of(uint64_t id) {
  static const std::string kNone;
  if (id == 0) return kNone;
  if (auto it = paths_.find(id); it != paths_.end()) return it->second;
  std::string found = walk_(id);
  if (found.empty()) return kNone;  // not kept: it may be learnt yet
  make_room();
  return paths_[id] = std::move(found);
}

}  // namespace allocscope
