// The folded instances of a long recording, and how a delta begun before a
// fold sees through it.
#include "record/view/folds.h"

#include <gtest/gtest.h>

namespace allocscope {
namespace {

WindowBase base(double bytes, uint64_t samples) {
  WindowBase b;
  b.bytes = bytes;
  b.objects = double(samples);
  b.samples = samples;
  return b;
}

// Two stacks folded into a third after a delta began: the delta's baseline
// of the third is the sum of theirs (and its own, when it had one), so
// nothing allocated before the window counts in it.
TEST(Folds, ABaselineFollowsItsStacksIntoTheirFold) {
  Folds f(16);
  f.journal(1, 9, 1000);
  f.journal(2, 9, 1000);
  f.journal(3, 8, 1000);
  Baseline since{{1, base(100, 1)}, {2, base(50, 2)}, {9, base(7, 1)}, {4, base(1, 1)}};
  Baseline now = f.through(since);
  EXPECT_FALSE(now.contains(1));
  EXPECT_FALSE(now.contains(2));
  EXPECT_FALSE(now.contains(8)) << "stack 3 began after the baseline";
  EXPECT_EQ(now.at(9).bytes, 157);
  EXPECT_EQ(now.at(9).samples, 4u);
  EXPECT_EQ(now.at(4).bytes, 1);
}

// The journal is bounded by age and by its capacity, the latter counted.
TEST(Folds, TheJournalForgetsOldFoldsAndCountsThoseItHadNoRoomFor) {
  Folds f(2);
  f.journal(1, 9, 1000);
  f.journal(2, 9, 2000);
  f.journal(3, 9, 3000);
  EXPECT_EQ(f.journal_dropped(), 1u);
  EXPECT_EQ(f.journal_size(), 2u);
  f.prune(2000);
  EXPECT_EQ(f.journal_size(), 1u);
  EXPECT_EQ(f.through({{2, base(5, 1)}}).count(9), 0u) << "a fold older than any window";
  EXPECT_EQ(f.through({{3, base(5, 1)}}).at(9).bytes, 5);
}

// A folded instance is found by its key while the table holds it; an id
// the table released and gave to another instance is not it.
TEST(Folds, AFoldedInstanceIsFoundWhileTheTableHoldsIt) {
  ProcessTable table;
  Folds f(4);
  FoldKey web{"web", "/system.slice/web.service"};
  EXPECT_EQ(f.find(web, table), std::nullopt);
  uint32_t id = table.add_folded("web");
  f.add(web, id, table.instance(id).serial);
  EXPECT_EQ(f.find(web, table), id);
  EXPECT_TRUE(table.instance(id).folded);
  EXPECT_TRUE(table.instance(id).ended);
  EXPECT_EQ(table.instance(id).tgid, 0u);
  EXPECT_EQ(f.find({"web", ""}, table), std::nullopt);
  table.release_ended({});
  EXPECT_EQ(f.find(web, table), std::nullopt);
  uint32_t other = table.add_folded("db");
  EXPECT_EQ(other, id) << "the premise: the id is given again";
  EXPECT_EQ(f.find(web, table), std::nullopt);
}

}  // namespace
}  // namespace allocscope
