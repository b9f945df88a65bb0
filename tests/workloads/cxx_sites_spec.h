// Sizes and counts of cxx_sites.cpp's allocation sites (at --scale-pct 100),
// shared with the tests that check allocscope against them.
#pragma once

#include <cstddef>

inline constexpr size_t kNewSize = 4000;
inline constexpr unsigned kNewCount = 100000;
inline constexpr size_t kVectorElements = 1000;  // of long: 8000 bytes
inline constexpr unsigned kVectorCount = 50000;
inline constexpr size_t kStringCapacity = 3000;  // 3001 bytes with the terminator
inline constexpr unsigned kStringCount = 100000;
