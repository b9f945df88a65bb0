// Errors and warnings of a recording, on stderr.
#pragma once

#include <cstdio>
#include <string>

#include "base/result.h"

namespace allocscope {

inline void print_error(const std::string& message) {
  std::fprintf(stderr, "allocscope: %s\n", message.c_str());
}
inline void print_error(const Error& e) { print_error(e.message); }

}  // namespace allocscope
