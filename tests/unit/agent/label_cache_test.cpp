// The agent's labels of process instances: from the cgroup each instance's
// first sample named, so that a process that lived milliseconds (ended
// before the labels were read) still has its unit and container.
#include "agent/label_cache.h"

#include <gtest/gtest.h>

#include <map>
#include <vector>

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

// An id the table released and gave to a new instance: the new one never
// shows the old one's labels, whether it has labels of its own or none.
TEST(LabelCache, AReusedIdLosesTheLabelsOfItsLastInstance) {
  ProcessTable table;
  std::map<uint64_t, std::string> paths = {{55, "/system.slice/first.service"},
                                           {66, "/system.slice/third.service"}};
  std::string none;
  auto path = [&](uint64_t id) -> const std::string& {
    auto it = paths.find(id);
    return it == paths.end() ? none : it->second;
  };
  LabelCache labels(16);
  auto run_once = [&](uint32_t tgid, uint64_t cgroup) {
    uint32_t id = table.current(tgid, "job");
    if (cgroup) table.set_cgroup(id, cgroup);
    table.end(tgid);
    labels.refresh(table, path);
    table.release_ended(std::vector<bool>(table.slots(), false));
    return id;
  };
  uint32_t first = run_once(999999990, 55);
  EXPECT_EQ(labels.of(first).unit, "first.service");
  uint32_t second = run_once(999999991, 0);  // ended before it named a cgroup
  ASSERT_EQ(second, first);
  EXPECT_EQ(labels.of(second).unit, "");
  uint32_t third = run_once(999999992, 66);
  ASSERT_EQ(third, first);
  EXPECT_EQ(labels.of(third).unit, "third.service");
}

// A folded instance (no process, no cgroup) keeps the labels its caller set
// when the cache reads the instances made since.
TEST(LabelCache, AFoldedInstanceKeepsTheLabelsItWasGiven) {
  ProcessTable table;
  LabelCache labels(16);
  std::string none;
  auto path = [&](uint64_t) -> const std::string& { return none; };
  uint32_t folded = table.add_folded("job");
  labels.set(folded, table.instance(folded).serial, labels_from_cgroup("/system.slice/folded.service"));
  labels.refresh(table, path);
  EXPECT_EQ(labels.of(folded).unit, "folded.service");
}

}  // namespace
}  // namespace allocscope
