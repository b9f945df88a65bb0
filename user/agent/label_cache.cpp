#include "agent/label_cache.h"

#include "host/process.h"

namespace allocscope {

void LabelCache::refresh(const ProcessTable& table) {
  for (; seen_ < table.instances(); ++seen_) {
    const ProcessInstance& p = table.instance(uint32_t(seen_));
    if (p.rejected || p.ended) continue;
    if (labels_.size() >= capacity_) {
      ++dropped_;
      continue;
    }
    labels_.emplace(uint32_t(seen_), labels_from_cgroup(read_cgroup_path(pid_t(p.tgid))));
  }
}

const TargetLabels& LabelCache::of(uint32_t instance) const {
  static const TargetLabels kNone;
  auto it = labels_.find(instance);
  return it == labels_.end() ? kNone : it->second;
}

}  // namespace allocscope
