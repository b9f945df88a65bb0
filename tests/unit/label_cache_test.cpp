// The agent's labels of process instances: from the cgroup each instance's
// first sample named, so that a process that lived milliseconds (ended
// before the labels were read) still has its unit and container.
#include "agent/label_cache.h"

#include <gtest/gtest.h>

#include <map>

namespace allocscope {
namespace {

TEST(LabelCache, AnEndedInstanceIsLabelledByTheCgroupOfItsSample) {
  ProcessTable table;
  uint32_t gone = table.current(999999999, "short");  // no such pid: /proc has nothing
  table.set_cgroup(gone, 55);
  table.end(999999999);
  uint32_t unknown = table.current(999999998, "unknown");  // ended, and no cgroup named
  table.end(999999998);
  std::map<uint64_t, std::string> paths = {{55, "/system.slice/short-job.service"}};
  std::string none;
  LabelCache labels(16);
  labels.refresh(table, [&](uint64_t id) -> const std::string& {
    auto it = paths.find(id);
    return it == paths.end() ? none : it->second;
  });
  EXPECT_EQ(labels.of(gone).unit, "short-job.service");
  EXPECT_EQ(labels.of(unknown).unit, "");
}

}  // namespace
}  // namespace allocscope
