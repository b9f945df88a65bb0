#include "agent/retired.h"

namespace allocscope {

void RetiredTotals::add(const ProcessTotals& p, const TargetLabels& labels) {
  ++processes_;
  // Past the capacity a new cgroup is lost before the program is: the
  // program's counter must not go down.
  std::pair<std::string, std::string> key{p.process.comm, labels.cgroup};
  if (!entries_.contains(key) && entries_.size() >= capacity_) key = {p.process.comm, ""};
  if (!entries_.contains(key) && entries_.size() >= 2 * capacity_) key = {"[other]", ""};
  auto [it, made] = entries_.try_emplace(key);
  Entry& e = it->second;
  if (made) {
    e.totals.process.comm = key.first;
    e.totals.process.ended = true;
    e.labels = labels_from_cgroup(key.second);  // unit, container and pod filters find it too
  }
  // Only the allocated side: an ended process holds nothing.
  e.totals.totals.alloc_bytes += p.totals.alloc_bytes;
  e.totals.totals.alloc_objects += p.totals.alloc_objects;
  e.totals.totals.samples += p.totals.samples;
}

}  // namespace allocscope
