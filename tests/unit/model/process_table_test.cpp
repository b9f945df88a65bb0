#include "model/process_table.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <ctime>

#include "host/process.h"
#include "model/profile.h"

namespace allocscope {
namespace {

TEST(ProcessTable, ExecAndExitStartNewInstances) {
  ProcessTable t;
  uint32_t sh = t.current(100, "sh");
  EXPECT_EQ(t.current(100, "other name"), sh);  // the same run: the first name stays
  EXPECT_EQ(t.end(100), sh);                    // exec
  uint32_t prog = t.current(100, "prog");
  EXPECT_NE(prog, sh);
  EXPECT_EQ(t.instance(prog).comm, "prog");
  EXPECT_TRUE(t.instance(sh).ended);
  EXPECT_EQ(t.end(100), prog);  // exit
  EXPECT_FALSE(t.find(100).has_value());
  EXPECT_FALSE(t.end(100).has_value());
  uint32_t reused = t.current(100, "prog");  // the pid comes back: a new process
  EXPECT_NE(reused, prog);
  EXPECT_EQ(t.slots(), 3u);
  EXPECT_EQ(t.made(), 3u);
  EXPECT_EQ(t.running(), 1u);
  EXPECT_EQ(t.latest(100), reused);
  t.end(100);
  EXPECT_EQ(t.latest(100), reused);  // ended, still the latest
  EXPECT_FALSE(t.latest(101).has_value());
}

// Ended instances nothing holds give their ids to new ones; held and
// running ones keep theirs, and a released id is no pid's latest.
TEST(ProcessTable, ReleasedIdsAreReusedByNewInstances) {
  ProcessTable t;
  uint32_t a = t.current(1, "a"), b = t.current(2, "b"), c = t.current(3, "c");
  t.end(1);
  t.end(2);
  std::vector<bool> held(t.slots());
  held[b] = true;  // still has stacks
  EXPECT_EQ(t.release_ended(held), 1u);
  EXPECT_FALSE(t.latest(1).has_value());
  EXPECT_EQ(t.latest(2), b);
  EXPECT_EQ(t.instance(b).comm, "b");
  EXPECT_EQ(t.instance(c).comm, "c");
  uint32_t d = t.current(4, "d");
  EXPECT_EQ(d, a);  // the released id, not a new one
  EXPECT_EQ(t.instance(d).comm, "d");
  EXPECT_EQ(t.instance(d).tgid, 4u);
  EXPECT_FALSE(t.instance(d).ended);
  EXPECT_GT(t.instance(d).serial, t.instance(c).serial);
  EXPECT_EQ(t.slots(), 3u);
  EXPECT_EQ(t.made(), 4u);
  EXPECT_EQ(t.running(), 2u);
  // A second release finds nothing new; then b goes too.
  EXPECT_EQ(t.release_ended(held), 0u);
  EXPECT_EQ(t.release_ended({}), 1u);
  EXPECT_EQ(t.current(5, "e"), b);
}

// An ended process's live samples leave the inuse totals; another
// process's samples at the same addresses stay.
TEST(ProcessTable, DroppedProcessReleasesOnlyItsOwnLiveSamples) {
  Profile p(1, 16, 16);
  std::vector<uint64_t> ips{0x1000};
  for (uint32_t pid : {1u, 2u})
    for (uint64_t addr : {0xa0u, 0xb0u})
      p.on_alloc({.pid = pid,
                  .fn = 0,
                  .addr = addr,
                  .size = 100,
                  .offset = 0,
                  .ts_ns = 0,
                  .live_tracked = true,
                  .ips = ips});
  std::vector<uint64_t> dropped = p.drop_process(1);
  std::sort(dropped.begin(), dropped.end());
  EXPECT_EQ(dropped, (std::vector<uint64_t>{0xa0, 0xb0}));
  EXPECT_EQ(p.live_count(), 2u);
  double live = 0;
  for (const StackRecord& s : p.stacks()) live += s.totals.live_bytes;
  EXPECT_EQ(live, 200);
  p.on_free(1, 0xa0);  // too late: nothing left to free
  EXPECT_EQ(p.counters().unmatched_frees, 1u);
  p.on_free(2, 0xa0);
  EXPECT_EQ(p.live_count(), 1u);
  EXPECT_TRUE(p.drop_process(3).empty());
}

TEST(ProcStat, ParentFieldPastAnOddName) {
  EXPECT_EQ(parent_from_stat("1234 (a) b (c)) S 77 1234 1234 0 -1"), 77);
  EXPECT_EQ(parent_from_stat("1 (init) S 0 1 1"), 0);
  EXPECT_EQ(parent_from_stat("garbage"), 0);
}

TEST(ProcStatus, PidNamespaceDepthCountsTheNSpidIds) {
  EXPECT_EQ(pid_namespace_depth("Name:\tx\nNSpid:\t4242\nNSsid:\t1\n"), 1u);
  EXPECT_EQ(pid_namespace_depth("Name:\tx\nNSpid:\t4242\t17\t1\nNSsid:\t1\n"), 3u);
  EXPECT_EQ(pid_namespace_depth("Name:\tx\nPid:\t4242\n"), 0u);
  EXPECT_FALSE(in_nested_pid_namespace(getpid())) << "the tests run in /proc's own namespace";
}

TEST(ProcStat, StartTimeOfThisProcessIsRecent) {
  double started = process_start_time(getpid());
  double now = double(time(nullptr));
  EXPECT_GT(started, now - 3600);  // the test binary started within the hour
  EXPECT_LE(started, now + 1);
  EXPECT_EQ(process_start_time(999999999), 0);
}

TEST(ProcMounts, FindsTheCgroup2MountAmongV1Ones) {
  std::string info =
      "30 22 0:26 / /sys/fs/cgroup ro,nosuid shared:9 - tmpfs tmpfs ro,mode=755\n"
      "31 30 0:27 / /sys/fs/cgroup/unified rw,nosuid shared:10 - cgroup2 cgroup2 rw,nsdelegate\n"
      "32 30 0:28 / /sys/fs/cgroup/memory rw shared:11 - cgroup cgroup rw,memory\n";
  EXPECT_EQ(cgroup2_mount(info), "/sys/fs/cgroup/unified");
  EXPECT_EQ(cgroup2_mount("25 1 0:22 / /sys/fs/cgroup rw - cgroup2 cgroup2 rw\n"), "/sys/fs/cgroup");
  EXPECT_EQ(cgroup2_mount("32 30 0:28 / /x rw - cgroup cgroup rw,memory\n"), "");
}

// A cgroup v2 id (what BPF reports) back to its path: this process's own.
TEST(CgroupPathOfId, FindsThisProcesssCgroup) {
  auto mountinfo = read_text_file("/proc/self/mountinfo");
  std::string root = mountinfo ? cgroup2_mount(*mountinfo) : "";
  std::string own = read_cgroup_path(getpid());
  if (root.empty() || own.empty()) GTEST_SKIP() << "no cgroup v2 hierarchy here";
  struct stat st;
  ASSERT_EQ(stat((root + (own == "/" ? "" : own)).c_str(), &st), 0);
  EXPECT_EQ(cgroup_path_of_id(st.st_ino), own);
  EXPECT_EQ(cgroup_path_of_id(0), "");
  EXPECT_EQ(cgroup_path_of_id(~uint64_t{0}), "");  // no such cgroup
}

}  // namespace
}  // namespace allocscope
