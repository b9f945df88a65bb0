// splitmix64: a small, seeded generator for simulated allocation streams,
// independent of the countdown's own generator.
#pragma once

#include <cstdint>

namespace allocscope {

struct Rng {
  uint64_t state;
  uint64_t next() {
    uint64_t z = (state += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  }
  double uniform() { return double(next() >> 11) * 0x1p-53; }
  uint64_t below(uint64_t n) { return next() % n; }
};

}  // namespace allocscope
