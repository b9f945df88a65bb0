#include "output/text_format.h"

#include <gtest/gtest.h>

namespace allocscope {
namespace {

// Each unit from its threshold on, and the digits each shows.
TEST(TextFormat, DurationsTakeTheLargestUnitBelowThem) {
  EXPECT_EQ(format_duration_ns(0), "0 ns");
  EXPECT_EQ(format_duration_ns(999), "999 ns");
  EXPECT_EQ(format_duration_ns(1000), "1.0 us");
  EXPECT_EQ(format_duration_ns(4.2e6), "4.2 ms");
  EXPECT_EQ(format_duration_ns(1.5e9), "1.50 s");
  EXPECT_EQ(format_duration_ns(3600e9), "3600.00 s");
}

TEST(TextFormat, AmountsAreBytesOrWholeObjectsByMetric) {
  EXPECT_EQ(format_amount(1536, Metric::AllocObjects), "1536");
  EXPECT_EQ(format_amount(2.6, Metric::InuseObjects), "3");
  EXPECT_NE(format_amount(1536, Metric::AllocSpace).find("KiB"), std::string::npos);
  EXPECT_EQ(format_amount(1536, Metric::AllocSpace), format_amount(1536, Metric::InuseSpace));
}

// A crafted symbol's newline or escape cannot forge a line of a table.
TEST(TextFormat, ControlCharactersOfANameAreEscaped) {
  EXPECT_EQ(printable("malloc"), "malloc");
  EXPECT_EQ(printable("a\nb\x1b[2J\x7f"), "a\\x0ab\\x1b[2J\\x7f");
  EXPECT_EQ(printable("caf\xc3\xa9"), "caf\xc3\xa9");  // UTF-8 stays
}

// Cut to a width in characters, never inside a UTF-8 sequence.
TEST(TextFormat, LinesAreFittedToAWidthByCharacters) {
  EXPECT_EQ(fit_width("abcdefgh", 0), "abcdefgh");
  EXPECT_EQ(fit_width("abcdefgh", 8), "abcdefgh");
  EXPECT_EQ(fit_width("abcdefgh", 7), "abcd...");
  EXPECT_EQ(fit_width("caf\xc3\xa9 caf\xc3\xa9", 9), "caf\xc3\xa9 caf\xc3\xa9");
  EXPECT_EQ(fit_width("caf\xc3\xa9 caf\xc3\xa9", 8), "caf\xc3\xa9 ...");
  EXPECT_EQ(fit_width("caf\xc3\xa9s", 5), "caf\xc3\xa9s");
  EXPECT_EQ(fit_width("abcdef", 2), "..");
}

}  // namespace
}  // namespace allocscope
