// The advice a recording gives about itself.
#include "record/view/hints.h"

#include <gtest/gtest.h>

namespace allocscope {
namespace {

TEST(Hints, EnoughSamplesSayNothing) {
  EXPECT_EQ(few_samples_hint(kFewSamples, 512 * 1024, 1e9), "");
  EXPECT_EQ(few_samples_hint(1000, 1, 1e6), "");
}

TEST(Hints, NoSampleSuggestsExactMode) {
  std::string h = few_samples_hint(0, 512 * 1024, 0);
  EXPECT_NE(h.find("only 0 samples at rate 512 KiB"), std::string::npos) << h;
  EXPECT_NE(h.find("--rate 1 (every allocation"), std::string::npos) << h;
}

// 5 samples of 512 KiB: about 2.5 MiB allocated; a thousand samples of it
// at 2 KiB (the power of two below 2.5 KiB).
TEST(Hints, FewSamplesSuggestARateForAThousand) {
  std::string h = few_samples_hint(5, 512 * 1024, 5 * 512 * 1024.0);
  EXPECT_NE(h.find("only 5 samples at rate 512 KiB"), std::string::npos) << h;
  EXPECT_NE(h.find("--rate 2KiB (about a thousand samples) or --rate 1"), std::string::npos) << h;
  // Never above the rate recorded at.
  h = few_samples_hint(10, 4096, 1e12);
  EXPECT_NE(h.find("--rate 4KiB"), std::string::npos) << h;
}

TEST(Hints, ExactModeWithFewSamplesPointsAtTheProbes) {
  std::string h = few_samples_hint(3, 1, 300);
  EXPECT_NE(h.find("allocated little through the allocators allocscope probes"), std::string::npos) << h;
}

}  // namespace
}  // namespace allocscope

namespace allocscope {
namespace {

TEST(TrapCost, SaysWhatTheTrapsCostTheProgramsOnlyWhenThereWereAny) {
  EXPECT_EQ(trap_cost_line(0, 6000), "");
  EXPECT_EQ(trap_cost_line(812, 0), "the probes trapped 812 times");
  std::string line = trap_cost_line(41'200'000, 6300);
  EXPECT_NE(line.find("trapped 41.2 M times, about 6.3 us each here"), std::string::npos) << line;
  EXPECT_NE(line.find("about 259.56 s of the traced programs' time"), std::string::npos) << line;
}

// Said when the traps took 1 % of the recording's time or more: a launched
// command's few sampled traps are not worth a line, --all's every call is.
TEST(TrapCost, MattersFromOnePercentOfTheRecordingsTime) {
  EXPECT_FALSE(trap_cost_matters(241, 11'100, 300'000'000));  // 2.7 ms of 0.3 s
  EXPECT_TRUE(trap_cost_matters(271, 11'100, 300'000'000));   // 3.0 ms
  EXPECT_TRUE(trap_cost_matters(270'900, 6300, 10'000'000'000));
  EXPECT_FALSE(trap_cost_matters(0, 6300, 1));
  EXPECT_FALSE(trap_cost_matters(812, 0, 1));  // not timed: said with -v only
}

}  // namespace
}  // namespace allocscope
