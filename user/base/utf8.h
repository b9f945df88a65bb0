// Text from the system (process names, paths, symbols) is arbitrary bytes;
// formats that must be UTF-8 (profile.proto's strings, Prometheus labels,
// JSON) get it repaired.
#pragma once

#include <string>
#include <string_view>

namespace allocscope {

// `s` with every byte that does not begin a well-formed UTF-8 sequence
// (RFC 3629) replaced by U+FFFD.
std::string valid_utf8(std::string_view s);

}  // namespace allocscope
