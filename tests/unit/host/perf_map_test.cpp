#include "host/perf_map.h"

#include <gtest/gtest.h>

namespace allocscope {
namespace {

TEST(PerfMap, ParsesLinesAndFindsSymbols) {
  auto s = parse_perf_map(
      "7f0000001000 40 LazyCompile:*foo bar.js:1\n"
      "0x7f0000002000 0x10 stub\r\n"
      "garbage line\n"
      "7f0000003000 0 empty\n"
      "7f0000001000 20 replaced\n");
  ASSERT_EQ(s.size(), 2u);
  EXPECT_EQ(s[0].name, "replaced");
  EXPECT_EQ(s[0].end, 0x7f0000001020u);
  EXPECT_EQ(s[1].name, "stub");
  ASSERT_NE(find_jit_symbol(s, 0x7f000000101f), nullptr);
  EXPECT_EQ(find_jit_symbol(s, 0x7f000000101f)->name, "replaced");
  EXPECT_EQ(find_jit_symbol(s, 0x7f0000001020), nullptr);
  EXPECT_EQ(find_jit_symbol(s, 0x7f0000002008)->name, "stub");
  EXPECT_EQ(find_jit_symbol(s, 0x1000), nullptr);
}

TEST(PerfMap, NamesWithSpacesKeepThem) {
  auto s = parse_perf_map("1000 10 void Foo::bar(int) [tier 2]\n");
  ASSERT_EQ(s.size(), 1u);
  EXPECT_EQ(s[0].name, "void Foo::bar(int) [tier 2]");
}

}  // namespace
}  // namespace allocscope
