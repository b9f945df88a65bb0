// Byte sizes and durations as users type them on the command line.
#include "base/units.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <optional>

namespace allocscope {
namespace {

TEST(ParseBytes, PlainNumbersAndBinarySuffixes) {
  EXPECT_EQ(parse_bytes("0"), 0u);
  EXPECT_EQ(parse_bytes("65536"), 65536u);
  EXPECT_EQ(parse_bytes("100B"), 100u);
  EXPECT_EQ(parse_bytes("64KiB"), 64u * 1024);
  EXPECT_EQ(parse_bytes("64k"), 64u * 1024);
  EXPECT_EQ(parse_bytes("64K"), 64u * 1024);
  EXPECT_EQ(parse_bytes("64KB"), 64u * 1024);  // KB is binary too, as in most tools' flags
  EXPECT_EQ(parse_bytes("1MiB"), 1u << 20);
  EXPECT_EQ(parse_bytes("3mb"), 3u << 20);
  EXPECT_EQ(parse_bytes("2G"), 2ULL << 30);
  EXPECT_EQ(parse_bytes("5GiB"), 5ULL << 30);
  EXPECT_EQ(parse_bytes("1 MiB"), 1u << 20);  // a space before the unit is fine
}

TEST(ParseBytes, RejectsMalformed) {
  EXPECT_EQ(parse_bytes(""), std::nullopt);
  EXPECT_EQ(parse_bytes("abc"), std::nullopt);
  EXPECT_EQ(parse_bytes("KiB"), std::nullopt);
  EXPECT_EQ(parse_bytes("12XB"), std::nullopt);
  EXPECT_EQ(parse_bytes("12 TiB"), std::nullopt);  // units stop at GiB
  EXPECT_EQ(parse_bytes("-5"), std::nullopt);
  EXPECT_EQ(parse_bytes("1.5M"), std::nullopt);
  EXPECT_EQ(parse_bytes(" 64"), std::nullopt);
}

TEST(ParseBytes, RejectsOverflowAndAcceptsTheLargestValues) {
  EXPECT_EQ(parse_bytes("18446744073709551615"), UINT64_MAX);
  EXPECT_EQ(parse_bytes("18446744073709551616"), std::nullopt);
  EXPECT_EQ(parse_bytes("99999999999999999999"), std::nullopt);
  EXPECT_EQ(parse_bytes("20000000000GiB"), std::nullopt);
  // 2^34 - 1 GiB = 2^64 - 2^30 fits; 2^34 GiB = 2^64 does not.
  EXPECT_EQ(parse_bytes("17179869183G"), UINT64_MAX - (1ULL << 30) + 1);
  EXPECT_EQ(parse_bytes("17179869184G"), std::nullopt);
  EXPECT_EQ(parse_bytes("18014398509481984k"), std::nullopt);  // 2^54 KiB = 2^64
}

TEST(ParseDuration, UnitsInMilliseconds) {
  EXPECT_EQ(parse_duration_ms("30"), 30000u);  // bare numbers are seconds
  EXPECT_EQ(parse_duration_ms("30s"), 30000u);
  EXPECT_EQ(parse_duration_ms("500ms"), 500u);
  EXPECT_EQ(parse_duration_ms("2m"), 120000u);
  EXPECT_EQ(parse_duration_ms("5min"), 300000u);
  EXPECT_EQ(parse_duration_ms("1h"), 3600000u);
  EXPECT_EQ(parse_duration_ms("0"), 0u);
  EXPECT_EQ(parse_duration_ms("10 S"), 10000u);
  // Decimal fractions, to the nearest millisecond.
  EXPECT_EQ(parse_duration_ms("0.5"), 500u);
  EXPECT_EQ(parse_duration_ms("1.5s"), 1500u);
  EXPECT_EQ(parse_duration_ms("2.25m"), 135000u);
  EXPECT_EQ(parse_duration_ms("0.1h"), 360000u);
  EXPECT_EQ(parse_duration_ms("1.5ms"), 2u);
  EXPECT_EQ(parse_duration_ms("0.0004"), std::nullopt);  // under a millisecond is not 0, "no limit"
}

TEST(ParseDuration, RejectsMalformedAndOverflow) {
  EXPECT_EQ(parse_duration_ms(""), std::nullopt);
  EXPECT_EQ(parse_duration_ms("5x"), std::nullopt);
  EXPECT_EQ(parse_duration_ms("s"), std::nullopt);
  EXPECT_EQ(parse_duration_ms("1.s"), std::nullopt);
  EXPECT_EQ(parse_duration_ms(".5s"), std::nullopt);
  EXPECT_EQ(parse_duration_ms("1.5.5s"), std::nullopt);
  EXPECT_EQ(parse_duration_ms("1.5e3"), std::nullopt);
  EXPECT_EQ(parse_duration_ms("-1s"), std::nullopt);
  // UINT64_MAX / 1000 = 18446744073709551.
  EXPECT_EQ(parse_duration_ms("18446744073709551s"), 18446744073709551000ULL);
  EXPECT_EQ(parse_duration_ms("18446744073709552s"), std::nullopt);
  EXPECT_EQ(parse_duration_ms("18446744073709551.999s"), std::nullopt);
  EXPECT_EQ(parse_duration_ms("99999999999999999h"), std::nullopt);
}

TEST(FormatBytes, PicksTheLargestUnitAndOneDecimalWhenNeeded) {
  EXPECT_EQ(format_bytes(0), "0 B");
  EXPECT_EQ(format_bytes(1), "1 B");
  EXPECT_EQ(format_bytes(1023), "1023 B");
  EXPECT_EQ(format_bytes(1024), "1 KiB");
  EXPECT_EQ(format_bytes(1536), "1.5 KiB");
  EXPECT_EQ(format_bytes(524288), "512 KiB");
  EXPECT_EQ(format_bytes(1 << 20), "1 MiB");
  EXPECT_EQ(format_bytes(2.3 * (1 << 30)), "2.3 GiB");
  EXPECT_EQ(format_bytes(double(1ULL << 40)), "1 TiB");
  EXPECT_EQ(format_bytes(double(1ULL << 50)), "1024 TiB");  // TiB is the largest unit
  EXPECT_EQ(format_bytes(100.5), "100.5 B");
}

TEST(FormatBytes, NegativeHugeAndNonFiniteValuesAreWrittenNotCast) {
  EXPECT_EQ(format_bytes(-2048), "-2 KiB");
  EXPECT_EQ(format_bytes(-0.25), "0 B");
  EXPECT_EQ(format_bytes(3.29477e+71), "3e+59 TiB");  // a fuzzed pprof's value
  EXPECT_EQ(format_bytes(INFINITY), "inf TiB");
  EXPECT_EQ(format_bytes(NAN), "nan B");
}

TEST(RoundSaturating, RoundsInRangeAndSaturatesOutside) {
  EXPECT_EQ(round_saturating(2.5), 3);
  EXPECT_EQ(round_saturating(-2.5), -3);
  EXPECT_EQ(round_saturating(1e30), INT64_MAX);
  EXPECT_EQ(round_saturating(-1e30), INT64_MIN);
  EXPECT_EQ(round_saturating(INFINITY), INT64_MAX);
  EXPECT_EQ(round_saturating(NAN), 0);
}

}  // namespace
}  // namespace allocscope
