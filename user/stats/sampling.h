// Sampling math: the countdown table the BPF program draws from, and the
// Horvitz-Thompson weights that unbias each sample.
#pragma once

#include <array>
#include <cstdint>

#include "countdown.h"

namespace allocscope {

inline constexpr uint64_t kDefaultRate = 512 * 1024;

using Log2Table = std::array<uint64_t, AS_LOG2_TABLE_SIZE>;

// log2(1 + i / 1024) in Q32, the table the BPF countdown interpolates.
Log2Table make_log2_table();

// The BPF draw, from a 64-bit random number (the BPF code ORs in bit 0).
uint64_t draw_countdown(uint64_t random, uint64_t rate, const Log2Table& table);

// Probability that an allocation of `size` bytes is sampled at mean rate R.
double sample_probability(uint64_t size, uint64_t rate);

// What one sampled allocation stands for.
struct Weight {
  double objects;
  double bytes;
};
Weight unbias(uint64_t size, uint64_t rate);

// Whether a sampler that reports only a weight (otel_memory providers)
// sampled at `rate`: its weight is size / p(size, rate), to rounding. (The
// rate cannot be recovered from the weight of a block much larger than it,
// whose weight is its size at every such rate.)
bool weight_fits_rate(uint64_t size, uint64_t weight, uint64_t rate);
// The expected offset of the sampled byte in a sampled allocation, when the
// sampler does not say it: the mean of an exponential truncated at size.
uint64_t expected_offset(uint64_t size, uint64_t rate);

// Userspace twin of the per-thread countdown in the BPF program, for tests
// and simulations: feeds allocation sizes, says which are sampled.
class Countdown {
 public:
  Countdown(uint64_t rate, const Log2Table& table, uint64_t seed);
  // Returns true (and the sampled byte's offset) when the allocation is sampled.
  bool sample(uint64_t size, uint64_t* offset);

 private:
  uint64_t next_random();
  uint64_t rate_;
  const Log2Table& table_;
  uint64_t state_;
  uint64_t countdown_;
};

}  // namespace allocscope
