// The agent's -p enters its processes as record -p does (inject/): the
// preload library samples in each for as long as the agent runs, and the
// profiles it serves are the truth's.
#include <gtest/gtest.h>
#include <signal.h>

#include <chrono>
#include <string>
#include <thread>

#include "agent_harness.h"
#include "harness.h"
#include "host/process.h"

namespace allocscope::test {
namespace {

std::string status_of(const std::string& pid) {
  return read_text_file("/proc/" + pid + "/status").value_or("");
}

// A workload named with -p: entered while the agent runs (the library in
// its maps), every site's allocated and in-use bytes as go tool pprof reads
// them within kMaxZ standard deviations of the truth (8 checks a mode at
// 1.8e-7 each, harness.h: under 3e-6 a run), and when the agent stops the
// workload goes on, untraced, to its end. With --no-inject the library is
// never loaded.
TEST(AgentEntry, APidIsEnteredForAsLongAsTheAgentRuns) {
  REQUIRE_BPF();
  constexpr int kScale = 20;
  for (bool inject : {true, false}) {
    Child workload(
        {WORKLOAD_BIN, "--threads", "1", "--scale-pct", std::to_string(kScale), "--wait", "--hold"});
    ASSERT_TRUE(workload.wait_for_line("ready", 10000));
    std::string pid = std::to_string(workload.pid());
    std::vector<std::string> options = {"-p", pid};
    if (!inject) options.push_back("--no-inject");
    Agent agent(options);
    ASSERT_TRUE(agent.ready()) << agent.child.err();
    bool mapped =
        read_text_file("/proc/" + pid + "/maps").value_or("").find("allocscope-preload") != std::string::npos;
    EXPECT_EQ(mapped, inject) << agent.child.err();
    workload.signal(SIGUSR1);
    ASSERT_TRUE(workload.wait_for_line("done", 60000));
    std::this_thread::sleep_for(std::chrono::milliseconds(500));  // the last samples reach the agent
    RunResult raw = go_pprof("-raw", agent.url("/debug/pprof/heap?pid=" + pid));
    ASSERT_EQ(raw.status, 0) << raw.err;
    expect_sites_match(parse_raw(raw.out), kScale, inject ? "agent -p" : "agent -p --no-inject");
    agent.child.signal(SIGTERM);
    EXPECT_EQ(agent.child.wait(), 0) << agent.child.err();
    EXPECT_NE(status_of(pid).find("TracerPid:\t0\n"), std::string::npos) << status_of(pid);
    workload.signal(SIGUSR1);
    EXPECT_EQ(workload.wait(), 0);
  }
}

}  // namespace
}  // namespace allocscope::test
