#include "base/pattern.h"

#include <gtest/gtest.h>

#include <string>

namespace allocscope {
namespace {

TEST(Pattern, MatchesAnywhereInExtendedSyntax) {
  auto p = Pattern::compile("^(alloc|make)_[a-z]+$");
  ASSERT_TRUE(p) << p.error();
  EXPECT_TRUE(p->found_in("alloc_sites"));
  EXPECT_TRUE(p->found_in("make_node"));
  EXPECT_FALSE(p->found_in("xalloc_sites"));
  auto anywhere = Pattern::compile("site_(malloc|calloc)");
  ASSERT_TRUE(anywhere);
  EXPECT_TRUE(anywhere->found_in("main;site_calloc;calloc"));
  EXPECT_TRUE(Pattern::compile("[[:digit:]]+")->found_in("python3.11"));
}

TEST(Pattern, SaysWhyAnExpressionIsInvalid) {
  for (const char* bad : {"(unclosed", "[z-a]", "*a", "trailing\\"}) {
    auto p = Pattern::compile(bad);
    ASSERT_FALSE(p) << bad;
    EXPECT_EQ(p.error().message.rfind("invalid regular expression: ", 0), 0u) << p.error();
  }
}

// A frame name of a crafted profile or of heavy template code: libstdc++'s
// std::regex recursed once per character here and overflowed the stack
// (report --focus 'x.*bar' on a 60 KB name died of SIGSEGV).
TEST(Pattern, LongTextsNeitherCrashNorStall) {
  std::string name(1 << 20, 'x');
  auto p = Pattern::compile("x.*bar");
  ASSERT_TRUE(p);
  EXPECT_FALSE(p->found_in(name));
  name += "bar";
  EXPECT_TRUE(p->found_in(name));
  EXPECT_TRUE(Pattern::compile("x+bar")->found_in(name));
}

}  // namespace
}  // namespace allocscope
