#include "agent/fold_groups.h"

namespace allocscope {

FoldKey FoldGroups::key(const std::string& comm, const std::string& cgroup) {
  ++processes_;
  // Past the capacity a new cgroup is lost before the program is: the
  // program's profile must not go down.
  FoldKey k{comm, cgroup};
  if (!keys_.contains(k) && keys_.size() >= capacity_) k = {comm, ""};
  if (!keys_.contains(k) && keys_.size() >= 2 * capacity_) k = {"[other]", ""};
  if (k.comm != comm || k.group != cgroup) ++unnamed_;
  keys_.insert(k);
  return k;
}

}  // namespace allocscope
