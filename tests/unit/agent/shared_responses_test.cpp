// Answers shared between scrapers: built once for those who ask together or
// within the window, built afresh after it, never shared when they failed,
// and not kept past the table's capacity.
#include "agent/shared_responses.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <future>
#include <thread>
#include <vector>

namespace allocscope {
namespace {

using namespace std::chrono_literals;
using Clock = SharedResponses::Clock;

SharedAnswer ok(std::string body) { return {200, {{"Content-Type", "text/plain"}}, std::move(body)}; }

TEST(SharedResponses, ThoseWhoAskWhileItIsBuiltWaitForTheSameAnswer) {
  SharedResponses shared(1000ms, 16);
  std::atomic<int> builds{0};
  std::promise<void> release;
  std::shared_future<void> go = release.get_future().share();
  auto build = [&] {
    ++builds;
    go.wait();  // slow: every other asker arrives meanwhile
    return ok("profile");
  };
  Clock::time_point now = Clock::now();
  std::vector<std::future<std::string>> askers;
  for (int i = 0; i < 16; ++i)
    askers.push_back(
        std::async(std::launch::async, [&] { return shared.get("/metrics", now, build)->body; }));
  std::this_thread::sleep_for(100ms);
  release.set_value();
  for (auto& a : askers) EXPECT_EQ(a.get(), "profile");
  EXPECT_EQ(builds.load(), 1);
  EXPECT_EQ(shared.shared(), 15u);
}

TEST(SharedResponses, AfterTheWindowItIsBuiltAgain) {
  SharedResponses shared(1000ms, 16);
  int builds = 0;
  auto build = [&] { return ok("v" + std::to_string(++builds)); };
  Clock::time_point t0 = Clock::now();
  EXPECT_EQ(shared.get("k", t0, build)->body, "v1");
  EXPECT_EQ(shared.get("k", t0 + 999ms, build)->body, "v1");
  EXPECT_EQ(shared.get("k", t0 + 1000ms, build)->body, "v2");
  EXPECT_EQ(shared.get("other", t0 + 1000ms, build)->body, "v3") << "each key its own";
}

TEST(SharedResponses, AFailedAnswerIsNotShared) {
  SharedResponses shared(1000ms, 16);
  int builds = 0;
  auto build = [&] { return SharedAnswer{503, {}, "busy " + std::to_string(++builds)}; };
  Clock::time_point t0 = Clock::now();
  EXPECT_EQ(shared.get("k", t0, build)->body, "busy 1");
  EXPECT_EQ(shared.get("k", t0, build)->body, "busy 2");
  EXPECT_EQ(shared.shared(), 0u);
}

TEST(SharedResponses, PastItsCapacityAnAnswerIsBuiltAndNotKept) {
  SharedResponses shared(1000ms, 2);
  int builds = 0;
  auto build = [&] { return ok(std::to_string(++builds)); };
  Clock::time_point t0 = Clock::now();
  shared.get("a", t0, build);
  shared.get("b", t0, build);
  shared.get("c", t0, build);
  EXPECT_EQ(shared.get("c", t0, build)->body, "4") << "not kept: the table was full";
  EXPECT_EQ(shared.get("a", t0, build)->body, "1");
  EXPECT_EQ(shared.get("d", t0 + 2s, build)->body, "5") << "old answers make room";
  EXPECT_EQ(shared.get("d", t0 + 2s, build)->body, "5");
}

}  // namespace
}  // namespace allocscope
