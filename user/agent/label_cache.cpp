#include "agent/label_cache.h"

#include "host/process.h"

namespace allocscope {

void LabelCache::refresh(const ProcessTable& table,
                         const std::function<const std::string&(uint64_t)>& cgroup_path) {
  if (table.made() == seen_) return;
  // Only the ids of new instances can carry another's labels (a released
  // id given again): a scan of the table, no walk of every label each tick.
  for (uint32_t id = 0; id < table.slots(); ++id) {
    const ProcessInstance& p = table.instance(id);
    if (p.serial <= seen_) continue;
    // An ended instance (one that lived milliseconds) is labelled by the
    // cgroup its sample named; /proc would describe whoever has its pid now.
    if (p.rejected || (p.ended && !p.cgroup)) {  // but a folded one's, set() by the caller, stay
      if (auto it = labels_.find(id); it != labels_.end() && it->second.serial != p.serial) labels_.erase(it);
      continue;
    }
    if (labels_.size() >= capacity_ && !labels_.contains(id)) {
      ++dropped_;
      continue;
    }
    std::string path = cgroup_path(p.cgroup);
    if (path.empty() && !p.ended) path = read_cgroup_path(pid_t(p.tgid));
    labels_[id] = {p.serial, labels_from_cgroup(path)};
  }
  seen_ = table.made();
}

const TargetLabels& LabelCache::of(uint32_t instance) const {
  static const TargetLabels kNone;
  auto it = labels_.find(instance);
  return it == labels_.end() ? kNone : it->second.labels;
}

}  // namespace allocscope
