// The folded-stack writer: merging, rounding, ordering and frame escaping.
#include "output/folded.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <sstream>
#include <string>
#include <vector>

namespace allocscope {
namespace {

std::string fold(const std::vector<FoldedStack>& stacks) {
  std::ostringstream out;
  write_folded(out, stacks);
  return out.str();
}

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

TEST(WriteFolded, MergesEqualFrameLists) {
  EXPECT_EQ(fold({{{"main", "f", "malloc"}, 10}, {{"main", "g", "malloc"}, 5}, {{"main", "f", "malloc"}, 7}}),
            "main;f;malloc 17\n"
            "main;g;malloc 5\n");
}

TEST(WriteFolded, ARootPrefixIsADifferentStack) {
  EXPECT_EQ(fold({{{"main", "f"}, 1}, {{"main", "f", "malloc"}, 2}}),
            "main;f 1\n"
            "main;f;malloc 2\n");
}

TEST(WriteFolded, RoundsToNearestAfterMerging) {
  EXPECT_EQ(fold({{{"a"}, 2.4}}), "a 2\n");
  EXPECT_EQ(fold({{{"a"}, 2.6}}), "a 3\n");
  EXPECT_EQ(fold({{{"a"}, 2.5}}), "a 3\n");  // halves round away from zero
  // Merged first, then rounded: 0.4 + 0.4 is one line of 1, not two zeros.
  EXPECT_EQ(fold({{{"a"}, 0.4}, {{"a"}, 0.4}}), "a 1\n");
  EXPECT_EQ(fold({{{"a"}, 1e12 + 0.7}}), "a 1000000000001\n");
}

TEST(WriteFolded, DropsLinesThatRoundToZero) {
  EXPECT_EQ(fold({{{"a"}, 0.4}, {{"b"}, 0}, {{"c"}, 1e-9}, {{"d"}, -1e-9}, {{"e"}, 0.5}}), "e 1\n");
  EXPECT_EQ(fold({}), "");
}

TEST(WriteFolded, OutputIsSortedWhateverTheInputOrder) {
  std::vector<FoldedStack> stacks = {
      {{"zeta", "x"}, 1}, {{"alpha"}, 2}, {{"main", "b"}, 3}, {{"main", "a"}, 4}, {{"Main"}, 5}};
  std::vector<std::string> lines = lines_of(fold(stacks));
  ASSERT_EQ(lines.size(), 5u);
  EXPECT_TRUE(std::is_sorted(lines.begin(), lines.end()));
  std::reverse(stacks.begin(), stacks.end());
  EXPECT_EQ(lines_of(fold(stacks)), lines);  // stable diffs between runs
}

TEST(WriteFolded, SeparatorsInsideNamesCannotSplitOrMergeFrames) {
  // "a;b" as one frame must not become the two frames a and b.
  EXPECT_EQ(fold({{{"main", "a;b"}, 1}, {{"main", "a", "b"}, 2}}),
            "main;a:b 1\n"
            "main;a;b 2\n");
  EXPECT_EQ(fold({{{"main", "line\nbreak", "cr\rlf"}, 3}}), "main;line break;cr lf 3\n");
}

TEST(FoldedFrame, ReplacesSemicolonsAndLineBreaks) {
  EXPECT_EQ(folded_frame("std::map<int, int>::operator[]"), "std::map<int, int>::operator[]");
  EXPECT_EQ(folded_frame("a;b;c"), "a:b:c");
  EXPECT_EQ(folded_frame("x\ny\r\nz"), "x y  z");
  EXPECT_EQ(folded_frame(""), "");
  for (const std::string& name : {std::string("f;\n\r;g"), std::string(";;;")}) {
    std::string safe = folded_frame(name);
    EXPECT_EQ(safe.size(), name.size());
    EXPECT_EQ(safe.find_first_of(";\n\r"), std::string::npos) << safe;
  }
}

}  // namespace
}  // namespace allocscope
