// Figures and names written for people: amounts, durations, and names made
// safe for a line of text.
#pragma once

#include <string>

#include "model/profile.h"

namespace allocscope {

// A metric's value for people: "1.5 MiB" for bytes, "1500" for objects.
std::string format_amount(double value, Metric m);

// "4.2 ms", "1.5 s": durations for people.
std::string format_duration_ns(double ns);

// A name for a table line: control characters as \xNN. Names come from ELF
// files, process names and profiles: a newline in a crafted symbol would
// forge lines.
std::string printable(const std::string& name);

// `line` cut to `width` characters (UTF-8 sequences kept whole), its end
// marked "..."; as it is when it fits or width is 0.
std::string fit_width(const std::string& line, size_t width);

}  // namespace allocscope
