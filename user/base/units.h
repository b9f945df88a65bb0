// Parsing and printing of the quantities users type: byte sizes, durations.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace allocscope {

// "65536", "64KiB", "64k", "1MiB", "2G": binary multiples; nullopt if malformed.
std::optional<uint64_t> parse_bytes(std::string_view text);

// "30", "30s", "500ms", "2m", "1h": in milliseconds; nullopt if malformed.
std::optional<uint64_t> parse_duration_ms(std::string_view text);

// 524288 -> "512 KiB", 1536 -> "1.5 KiB".
std::string format_bytes(double bytes);

// An estimate as an integer: llround is undefined outside int64's range and
// for NaN, where an estimate is already meaningless, so this saturates (NaN: 0).
int64_t round_saturating(double v);

}  // namespace allocscope
