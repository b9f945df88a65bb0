// Which processes a recording enters (record/discovery/injections.h): the
// recordings that enter busy processes, the rule that says which are busy,
// and the summary's words.
#include <gtest/gtest.h>

#include "record/discovery/injections.h"
#include "record/record.h"

namespace allocscope {
namespace {

TEST(Entries, BusyProcessesAreEnteredUnderSystemWideProbesOnly) {
  RecordConfig all;
  all.all = true;
  EXPECT_TRUE(enters_busy(all));
  EXPECT_FALSE(injects(all)) << "--all enters only the busy ones";
  RecordConfig pid;
  pid.pids = {1234};
  EXPECT_FALSE(enters_busy(pid)) << "-p alone enters its processes at once, and probes none other";
  EXPECT_TRUE(injects(pid));
  pid.children = true;
  EXPECT_TRUE(enters_busy(pid)) << "-p --children probes system-wide";
  RecordConfig command;
  command.command = {"./server"};
  EXPECT_FALSE(enters_busy(command)) << "a launched command's processes load the library at exec";
  RecordConfig refused = all;
  refused.inject = false;
  EXPECT_FALSE(enters_busy(refused));
  RecordConfig exact = all;
  exact.rate = 1;
  EXPECT_FALSE(enters_busy(exact)) << "exact mode traps at every call either way";
  RecordConfig duty = all;
  duty.duty_period_ms = 1000;
  EXPECT_FALSE(enters_busy(duty));
}

TEST(Entries, AProcessIsBusyWhereItsTrapsCostItOnePercentOfACore) {
  // Two traps a call at 6 us (this VM): 10 ms a second at 833 calls.
  EXPECT_NEAR(busy_threshold(6000), 833.3, 0.1);
  // Not timed: bare metal's dearest trap, 0.5 us.
  EXPECT_NEAR(busy_threshold(0), 10000, 1e-6);
  EXPECT_GT(busy_threshold(300), busy_threshold(500));
}

TEST(Entries, AProcessIsEnteredOnceBusyInTwoPeriodsInARow) {
  BusyStreaks streaks;
  using Calls = std::vector<std::pair<uint32_t, uint64_t>>;
  constexpr double kNever = 1e18;
  // 1,000 calls a second is over a threshold of 900; 800 is not.
  EXPECT_TRUE(streaks.note(Calls{{10, 1000}, {11, 2000}}, 1.0, 900, kNever).empty()) << "a first busy second";
  EXPECT_EQ(streaks.note(Calls{{10, 1000}, {11, 800}, {12, 5000}}, 1.0, 900, kNever),
            (std::vector<uint32_t>{10}));
  EXPECT_TRUE(streaks.note(Calls{{11, 2000}}, 1.0, 900, kNever).empty()) << "11 was not busy in between";
  EXPECT_EQ(streaks.note(Calls{{11, 2000}}, 2.0, 900, kNever), (std::vector<uint32_t>{11}))
      << "1,000 a second over 2 s";
  EXPECT_TRUE(streaks.note(Calls{{11, 2000}}, 0, 900, kNever).empty()) << "no time: no rate";
}

TEST(Entries, AProcessWhoseTrapsCostAnEntryInOnePeriodIsEnteredAtOnce) {
  // 20 ms of traps: 1,667 calls at 6 us a trap (this VM), 20,000 untimed.
  EXPECT_NEAR(entry_worth(6000), 1666.7, 0.1);
  EXPECT_NEAR(entry_worth(0), 20000, 1e-6);
  BusyStreaks streaks;
  using Calls = std::vector<std::pair<uint32_t, uint64_t>>;
  EXPECT_EQ(streaks.note(Calls{{20, 1700}, {21, 1600}}, 0.25, 833, entry_worth(6000)),
            (std::vector<uint32_t>{20}))
      << "20 paid for its entry in a quarter of a second; 21 only busy";
  EXPECT_EQ(streaks.note(Calls{{21, 1600}}, 0.25, 833, entry_worth(6000)), (std::vector<uint32_t>{21}))
      << "busy twice in a row";
}

TEST(Entries, TheSummarySaysHowManyWereEntered) {
  EXPECT_EQ(describe_busy_entries(1, 0), "allocator probes, in process where busy (1 process entered)");
  EXPECT_EQ(describe_busy_entries(0, 2),
            "allocator probes, in process where busy (0 processes entered, 2 could not be)");
}

}  // namespace
}  // namespace allocscope
