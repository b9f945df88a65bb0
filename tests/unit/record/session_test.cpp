// What the recording's session hands its parts: the runtimes' settings from
// the command line's choices.
#include <gtest/gtest.h>

#include "record/session/recording_context.h"

namespace allocscope {
namespace {

TEST(RuntimeSettings, FollowTheRecordingsChoices) {
  RecordConfig attached;
  attached.pids = {1234};
  attached.rate = 64 * 1024;
  RuntimeSettings s = runtime_settings(attached);
  EXPECT_EQ(s.rate, 64u * 1024);
  EXPECT_FALSE(s.system_wide);
  EXPECT_TRUE(s.writes_processes);  // -p's own processes: a Go program's MemProfileRate may be set
  EXPECT_TRUE(s.off.empty() && s.by_calls.empty());

  RecordConfig launched;
  launched.command = {"./server"};
  EXPECT_TRUE(runtime_settings(launched).writes_processes);
  EXPECT_TRUE(runtime_settings(launched).system_wide);  // its tree is followed

  RecordConfig all;
  all.all = true;
  EXPECT_TRUE(runtime_settings(all).system_wide);
  EXPECT_FALSE(runtime_settings(all).writes_processes);  // never other users' processes

  attached.inject = false;  // --no-inject: nothing is written into a process
  EXPECT_FALSE(runtime_settings(attached).writes_processes);

  attached.no_go_heap = true;
  attached.go_heap_calls = true;
  RuntimeSettings go = runtime_settings(attached);
  EXPECT_TRUE(go.off.contains("go"));
  EXPECT_TRUE(go.by_calls.contains("go"));
}

}  // namespace
}  // namespace allocscope
