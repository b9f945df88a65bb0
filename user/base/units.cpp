#include "base/units.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <string>

namespace allocscope {
namespace {

std::string lower(std::string_view s) {
  std::string out(s);
  std::transform(out.begin(), out.end(), out.begin(), [](unsigned char c) { return std::tolower(c); });
  return out;
}

// Splits "64KiB" into 64 and "kib"; nullopt without a leading number.
std::optional<std::pair<uint64_t, std::string>> split_number(std::string_view text) {
  uint64_t value = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end == text.data()) return std::nullopt;
  std::string_view rest(end, text.data() + text.size() - end);
  while (!rest.empty() && rest.front() == ' ') rest.remove_prefix(1);
  return std::pair{value, lower(rest)};
}

std::optional<uint64_t> scaled(uint64_t value, uint64_t unit) {
  if (unit != 0 && value > UINT64_MAX / unit) return std::nullopt;
  return value * unit;
}

}  // namespace

std::optional<uint64_t> parse_bytes(std::string_view text) {
  auto parts = split_number(text);
  if (!parts) return std::nullopt;
  const auto& [value, suffix] = *parts;
  static const std::pair<const char*, uint64_t> units[] = {{"", 1},
                                                           {"b", 1},
                                                           {"k", 1ULL << 10},
                                                           {"kb", 1ULL << 10},
                                                           {"kib", 1ULL << 10},
                                                           {"m", 1ULL << 20},
                                                           {"mb", 1ULL << 20},
                                                           {"mib", 1ULL << 20},
                                                           {"g", 1ULL << 30},
                                                           {"gb", 1ULL << 30},
                                                           {"gib", 1ULL << 30}};
  for (const auto& [name, unit] : units)
    if (suffix == name) return scaled(value, unit);
  return std::nullopt;
}

std::optional<uint64_t> parse_duration_ms(std::string_view text) {
  auto parts = split_number(text);
  if (!parts) return std::nullopt;
  auto [value, suffix] = *parts;
  // A decimal fraction ("0.5", "1.5s"), to the nearest millisecond.
  double fraction = 0;
  if (suffix.starts_with('.')) {
    size_t digits = 1;
    while (digits < suffix.size() && digits <= 9 && std::isdigit(static_cast<unsigned char>(suffix[digits])))
      ++digits;
    if (digits == 1) return std::nullopt;
    fraction = std::stod("0" + suffix.substr(0, digits));
    suffix = suffix.substr(digits);
    while (!suffix.empty() && suffix.front() == ' ') suffix.erase(0, 1);
  }
  static const std::pair<const char*, uint64_t> units[] = {{"", 1000},   {"s", 1000},    {"ms", 1},
                                                           {"m", 60000}, {"min", 60000}, {"h", 3600000}};
  for (const auto& [name, unit] : units) {
    if (suffix != name) continue;
    auto whole = scaled(value, unit);
    uint64_t part = uint64_t(std::llround(fraction * double(unit)));
    if (!whole || *whole > UINT64_MAX - part) return std::nullopt;
    if (fraction > 0 && *whole + part == 0) return std::nullopt;  // not "no limit" by rounding
    return *whole + part;
  }
  return std::nullopt;
}

std::string format_bytes(double bytes) {
  static const char* names[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  // Live sums can be negative or float residue; a corrupt profile can hold
  // anything, and casting such a double to an integer is undefined.
  const char* sign = bytes < 0 ? "-" : "";
  double v = std::fabs(bytes);
  if (v < 0.5) {
    v = 0;
    sign = "";
  }
  int i = 0;
  while (v >= 1023.95 && i < 4) {  // 1048575 B is "1.0 MiB", not "1024.0 KiB"
    v /= 1024;
    ++i;
  }
  char buf[48];
  if (!(v < 1e15))  // huge, infinite or NaN: no fixed-point digits
    std::snprintf(buf, sizeof buf, "%s%.3g %s", sign, v, names[i]);
  else if (v == std::floor(v))
    std::snprintf(buf, sizeof buf, "%s%.0f %s", sign, v, names[i]);
  else
    std::snprintf(buf, sizeof buf, "%s%.1f %s", sign, v, names[i]);
  return buf;
}

int64_t round_saturating(double v) {
  constexpr double kLimit = 9.2e18;
  if (std::isnan(v)) return 0;
  if (v >= kLimit) return INT64_MAX;
  if (v <= -kLimit) return INT64_MIN;
  return std::llround(v);
}

}  // namespace allocscope
