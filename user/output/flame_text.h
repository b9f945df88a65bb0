// Text for the flame graph's SVG: names made safe for XML and JSON, numbers
// as short as exactness allows, labels cut to fit. Internal to output/.
#pragma once

#include <string>
#include <string_view>

namespace allocscope::flame {

// The labels' 12 px monospace advance, rounded up so labels never overflow.
inline constexpr double kCharPx = 7.3;

// Whether s needs no cleaning (clean(s) == s).
bool is_clean(std::string_view s);

// Symbol names are bytes from ELF files: anything XML cannot carry becomes
// U+FFFD, and line breaks become spaces because a tooltip's first line is
// the name.
std::string clean(std::string_view s);

// Escapes all five specials so the result is safe in text and in attributes.
void append_xml(std::string& out, std::string_view s);

// A JSON string for the script; <, > and ] are escaped so that no name can
// close the CDATA section or the script.
void append_json(std::string& out, std::string_view s);

// Fixed decimals without trailing zeros: coordinates are most of the file.
std::string fixed(double v, int decimals);

// Enough digits that the script's layout from values stays exact at any zoom.
std::string precise(double v);

// Merged blocks' search values only feed a percentage.
std::string approx(double v);

std::string format_value(double v, const std::string& unit);

std::string format_change(double delta, const std::string& unit);

// Shares keep their decimals ("25.00%") so tooltips line up.
std::string percent(double part, double total, int decimals);

// Whole characters that fit the frame, ".." when cut; the script applies the
// same rule after a zoom. Cuts never split a UTF-8 sequence.
std::string fit_label(std::string_view name, double width);

}  // namespace allocscope::flame
