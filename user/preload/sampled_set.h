/* The addresses of sampled, not yet freed blocks, inside the traced process:
 * free asks it whether a block was sampled, and only those frees leave the
 * process (a USDT probe). Lock-free and allocation-free, so that malloc,
 * free and signal handlers may all use it at once.
 *
 * Buckets of AS_SET_WAYS slots (one cache line) chosen by the address's
 * hash, and beside them a byte per bucket counting its entries: a free of
 * an unsampled block, nearly every free, reads that one byte. Entries are
 * counted before they are stored and uncounted after they are cleared, so
 * a free (which comes after its allocation's insert returned) never finds
 * the count at 0 while its address is stored. A full bucket refuses the
 * insert: the caller reports that block as not tracked. Plain C with GCC's
 * __atomic builtins, compiled into the preload library and the unit tests. */
#ifndef ALLOCSCOPE_SAMPLED_SET_H
#define ALLOCSCOPE_SAMPLED_SET_H

#include <stdbool.h>
#include <stdint.h>

#define AS_SET_BUCKET_BITS 17 /* 1M blocks: exact mode keeps every live block of a Python program here */
#define AS_SET_BUCKETS (1u << AS_SET_BUCKET_BITS)
#define AS_SET_WAYS 8

struct as_sampled_set {
  uint64_t slots[AS_SET_BUCKETS][AS_SET_WAYS] __attribute__((aligned(64)));
  uint8_t counts[AS_SET_BUCKETS];
};

static inline uint32_t as_set_bucket(uint64_t addr) {
  return (uint32_t)(((addr >> 4) * 0x9E3779B97F4A7C15ULL) >> (64 - AS_SET_BUCKET_BITS));
}

/* Adds a block's address (non-zero); false when its bucket is full. */
static inline bool as_set_insert(struct as_sampled_set *s, uint64_t addr) {
  uint32_t b = as_set_bucket(addr);
  __atomic_fetch_add(&s->counts[b], 1, __ATOMIC_SEQ_CST);
  for (int i = 0; i < AS_SET_WAYS; i++) {
    uint64_t empty = 0;
    if (__atomic_load_n(&s->slots[b][i], __ATOMIC_RELAXED) == 0 &&
        __atomic_compare_exchange_n(&s->slots[b][i], &empty, addr, false, __ATOMIC_SEQ_CST, __ATOMIC_RELAXED))
      return true;
  }
  __atomic_fetch_sub(&s->counts[b], 1, __ATOMIC_SEQ_CST);
  return false;
}

/* Removes the address if it is there; whether it was. */
static inline bool as_set_remove(struct as_sampled_set *s, uint64_t addr) {
  uint32_t b = as_set_bucket(addr);
  if (__builtin_expect(__atomic_load_n(&s->counts[b], __ATOMIC_SEQ_CST) == 0, 1)) return false;
  for (int i = 0; i < AS_SET_WAYS; i++) {
    uint64_t want = addr;
    if (__atomic_load_n(&s->slots[b][i], __ATOMIC_RELAXED) == addr &&
        __atomic_compare_exchange_n(&s->slots[b][i], &want, 0, false, __ATOMIC_SEQ_CST, __ATOMIC_RELAXED)) {
      __atomic_fetch_sub(&s->counts[b], 1, __ATOMIC_SEQ_CST);
      return true;
    }
  }
  return false;
}

#endif
