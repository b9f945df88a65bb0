// Text from the system (process names, paths, symbols) is arbitrary bytes;
// formats that must be UTF-8 (profile.proto's strings, Prometheus labels,
// JSON) get it repaired.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace allocscope {

// `s` with every byte that does not begin a well-formed UTF-8 sequence
// (RFC 3629) replaced by U+FFFD.
std::string valid_utf8(std::string_view s);

// Appends code point `c` in UTF-8; U+FFFD for a surrogate or a value above
// U+10FFFF.
void append_utf8(std::string& out, uint32_t c);

}  // namespace allocscope
