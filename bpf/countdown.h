/* The byte countdown draw in integer arithmetic, compiled both into the BPF
 * program and into the unit tests, so the tests check the very code that runs.
 *
 * countdown = floor(R * E) with E = -ln(U), U uniform in (0, 1), makes
 * P(countdown >= k) = exp(-k / R): an allocation of S bytes is sampled
 * (countdown < S) with probability 1 - exp(-S / R), memorylessly.
 * -ln(U) = ln 2 * (64 - log2(x)) for a 64-bit random x; log2(x) is the index
 * of x's top bit plus log2(1 + f), f from a 1024-entry table of
 * log2(1 + i/1024) in Q32 with linear interpolation (error below 2e-7). */
#ifndef ALLOCSCOPE_COUNTDOWN_H
#define ALLOCSCOPE_COUNTDOWN_H

#include "allocscope.h"

#define AS_LOG2_TABLE_BITS 10
#define AS_LOG2_TABLE_SIZE ((1 << AS_LOG2_TABLE_BITS) + 1)
#define AS_LN2_Q24 11629080ULL /* round(ln 2 * 2^24) */
/* Above this the fixed-point product could overflow 64 bits. */
#define AS_MAX_RATE (1ULL << 32)

#ifndef AS_INLINE
#define AS_INLINE static inline
#endif

/* x with its top bit moved to bit 63, and the index of that bit. */
AS_INLINE as_u64 as_normalize(as_u64 x, as_u32 *msb) {
  as_u32 k = 63;
  if (!(x >> 32)) {
    x <<= 32;
    k -= 32;
  }
  if (!(x >> 48)) {
    x <<= 16;
    k -= 16;
  }
  if (!(x >> 56)) {
    x <<= 8;
    k -= 8;
  }
  if (!(x >> 60)) {
    x <<= 4;
    k -= 4;
  }
  if (!(x >> 62)) {
    x <<= 2;
    k -= 2;
  }
  if (!(x >> 63)) {
    x <<= 1;
    k -= 1;
  }
  *msb = k;
  return x;
}

/* Table index for the mantissa of a normalized x. */
AS_INLINE as_u32 as_table_index(as_u64 norm) { return (as_u32)((norm << 1) >> (64 - AS_LOG2_TABLE_BITS)); }

/* floor(rate * -ln(x / 2^64)) given the normalized x, its top bit and the two
 * table entries around its mantissa. x must be non-zero; rate <= AS_MAX_RATE. */
AS_INLINE as_u64 as_countdown_from(as_u64 norm, as_u32 msb, as_u64 t_lo, as_u64 t_hi, as_u64 rate) {
  as_u64 frac = ((norm << 1) << AS_LOG2_TABLE_BITS) >> 32; /* Q32 between entries */
  as_u64 log2_x = ((as_u64)msb << 32) + t_lo + (((t_hi - t_lo) * frac) >> 32);
  as_u64 neg_log2_u = (64ULL << 32) - log2_x;        /* Q32, at most 2^38 */
  as_u64 neg_ln_u = (neg_log2_u * AS_LN2_Q24) >> 24; /* Q32 */
  return ((neg_ln_u >> 8) * rate) >> 24;
}

#endif
