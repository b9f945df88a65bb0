#include "stats/sampling.h"

#include <algorithm>
#include <cmath>

namespace allocscope {

Log2Table make_log2_table() {
  Log2Table t{};
  for (size_t i = 0; i < t.size(); ++i)
    t[i] = static_cast<uint64_t>(
        std::llround(std::log2(1.0 + double(i) / (1 << AS_LOG2_TABLE_BITS)) * 4294967296.0));
  return t;
}

uint64_t draw_countdown(uint64_t random, uint64_t rate, const Log2Table& table) {
  as_u32 msb;
  as_u64 norm = as_normalize(random | 1, &msb);
  as_u32 i = as_table_index(norm);
  return as_countdown_from(norm, msb, table[i], table[i + 1], rate);
}

double sample_probability(uint64_t size, uint64_t rate) {
  if (rate <= 1) return 1.0;
  return -std::expm1(-double(size) / double(rate));
}

Weight unbias(uint64_t size, uint64_t rate) {
  double p = sample_probability(size, rate);
  if (p <= 0)  // never sampled in sampling mode; keep the math total
    return {0, 0};
  return {1.0 / p, double(size) / p};
}

bool weight_fits_rate(uint64_t size, uint64_t weight, uint64_t rate) {
  double p = sample_probability(size, rate);
  if (p <= 0) return false;
  double expected = double(size) / p;
  return std::fabs(double(weight) - expected) <= std::max(1.0, 1e-3 * expected);
}

uint64_t expected_offset(uint64_t size, uint64_t rate) {
  if (rate <= 1 || size == 0) return 0;
  double s = double(size), r = double(rate), x = s / r;
  // E[C | C < s] for C ~ Exp(mean r): r - s e^-x / (1 - e^-x); s/2 as x -> 0.
  double mean = x < 1e-6 ? s / 2 : r - s / std::expm1(x);
  return uint64_t(std::clamp(mean, 0.0, s - 1));
}

Countdown::Countdown(uint64_t rate, const Log2Table& table, uint64_t seed)
    : rate_(rate), table_(table), state_(seed | 1), countdown_(0) {
  if (rate_ > 1) countdown_ = draw_countdown(next_random(), rate_, table_);
}

// splitmix64: a statistically sound stream for simulations.
uint64_t Countdown::next_random() {
  uint64_t z = (state_ += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

bool Countdown::sample(uint64_t size, uint64_t* offset) {
  if (rate_ <= 1) {
    *offset = 0;
    return true;
  }
  if (countdown_ >= size) {
    countdown_ -= size;
    return false;
  }
  *offset = countdown_;
  countdown_ = draw_countdown(next_random(), rate_, table_);
  return true;
}

}  // namespace allocscope
