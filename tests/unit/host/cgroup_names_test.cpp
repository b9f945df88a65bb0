// cgroup v2 paths by id: what the kernel's cgroup_mkdir events teach, what a
// walk of the hierarchy finds for older cgroups, and the table's bound.
#include "host/cgroup_names.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <map>

namespace allocscope {
namespace {

TEST(CgroupNames, ALearntCgroupIsNamedAfterItIsGone) {
  int walks = 0;
  CgroupNames names(16, [&](uint64_t) {
    ++walks;
    return std::string();  // gone: a walk finds nothing
  });
  names.learn(4242, "/system.slice/short.service");
  EXPECT_EQ(names.path_of(4242), "/system.slice/short.service");
  EXPECT_EQ(walks, 0);
  EXPECT_EQ(names.path_of(0), "") << "0: a sample that named no cgroup";
  EXPECT_EQ(walks, 0);
}

TEST(CgroupNames, AnOlderCgroupIsFoundByAWalkOnceAndKept) {
  std::map<uint64_t, int> walks;
  CgroupNames names(16, [&](uint64_t id) {
    ++walks[id];
    return id == 7 ? std::string("/user.slice") : std::string();
  });
  EXPECT_EQ(names.path_of(7), "/user.slice");
  EXPECT_EQ(names.path_of(7), "/user.slice");
  EXPECT_EQ(walks[7], 1);
  EXPECT_EQ(names.path_of(8), "");
  EXPECT_EQ(names.path_of(8), "") << "not found is not kept: the cgroup may be learnt yet";
  EXPECT_EQ(walks[8], 2);
  names.learn(8, "/late");
  EXPECT_EQ(names.path_of(8), "/late");
}

TEST(CgroupNames, PastItsCapacityItStartsAfreshAndCountsWhatItForgot) {
  CgroupNames names(3, [](uint64_t) { return std::string(); });
  for (uint64_t id = 1; id <= 3; ++id) names.learn(id, "/c" + std::to_string(id));
  EXPECT_EQ(names.size(), 3u);
  names.learn(2, "/c2-again");  // known: no room needed
  EXPECT_EQ(names.forgotten(), 0u);
  names.learn(4, "/c4");
  EXPECT_EQ(names.forgotten(), 3u);
  EXPECT_EQ(names.size(), 1u);
  EXPECT_EQ(names.path_of(4), "/c4");
  EXPECT_EQ(names.path_of(1), "");
}

TEST(CgroupNames, ARemovedCgroupIsForgottenAfterItsRetentionAndCounted) {
  int walks = 0;
  CgroupNames names(16, [&](uint64_t) {
    ++walks;
    return std::string();
  });
  names.learn(1, "/a");
  names.learn(2, "/b");
  names.learn(3, "/kept");
  names.removed(1, 1000);
  names.removed(2, 2000);
  names.removed(9, 2500);  // never learnt: nothing to forget
  EXPECT_EQ(names.forget_removed(1000), 0u) << "removed at 1000: not before it";
  EXPECT_EQ(names.path_of(1), "/a") << "still named while samples in flight may need it";
  EXPECT_EQ(names.forget_removed(1500), 1u);
  EXPECT_EQ(names.path_of(1), "");
  EXPECT_EQ(names.path_of(2), "/b");
  EXPECT_EQ(names.forget_removed(10000), 1u);
  EXPECT_EQ(names.size(), 1u);
  EXPECT_EQ(names.path_of(3), "/kept") << "not removed: kept however old";
  EXPECT_EQ(names.forgotten(), 2u);
}

TEST(CgroupNames, AnIdLearntAgainAfterItsRemovalIsNotForgottenForIt) {
  CgroupNames names(16, [](uint64_t) { return std::string(); });
  names.learn(5, "/old");
  names.removed(5, 100);
  names.learn(5, "/new");  // made again (an id the kernel reused)
  EXPECT_EQ(names.forget_removed(1000), 0u);
  EXPECT_EQ(names.path_of(5), "/new");
  names.removed(5, 2000);
  EXPECT_EQ(names.forget_removed(3000), 1u);
}

TEST(CgroupNames, WhenFullTheRemovedGoFirst) {
  CgroupNames names(3, [](uint64_t) { return std::string(); });
  for (uint64_t id = 1; id <= 3; ++id) names.learn(id, "/c" + std::to_string(id));
  names.removed(2, 10);
  names.learn(4, "/c4");  // room made by the removed one alone
  EXPECT_EQ(names.forgotten(), 1u);
  EXPECT_EQ(names.path_of(1), "/c1");
  EXPECT_EQ(names.path_of(2), "");
  EXPECT_EQ(names.path_of(4), "/c4");
}

// The default walk on this machine: the cgroup2 mount's root directory is
// found by its inode number, as the kernel's cgroup id names it.
TEST(CgroupNames, TheDefaultWalkFindsTheRootCgroup) {
  CgroupNames names;
  struct stat st;
  for (const char* root : {"/sys/fs/cgroup", "/sys/fs/cgroup/unified"}) {
    if (stat((std::string(root) + "/cgroup.procs").c_str(), &st) != 0) continue;
    if (stat((std::string(root) + "/cgroup.subtree_control").c_str(), &st) != 0) continue;  // v1
    ASSERT_EQ(stat(root, &st), 0);
    EXPECT_EQ(names.path_of(st.st_ino), "/") << root;
    return;
  }
  GTEST_SKIP() << "no cgroup v2 mount here";
}

}  // namespace
}  // namespace allocscope
