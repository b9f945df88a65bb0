/* See java_tags.h. */
#include "preload/java_tags.h"

#include <stdlib.h>

#define WORDS_PER_CHUNK ((1u << AS_JAVA_TAG_CHUNK_SHIFT) / 64)

static uint64_t *chunks[AS_JAVA_TAG_CHUNKS];

static uint64_t *chunk_of(uint64_t tag, int make) {
  uint64_t c = tag >> AS_JAVA_TAG_CHUNK_SHIFT;
  if (c >= AS_JAVA_TAG_CHUNKS) return NULL;
  uint64_t *words = __atomic_load_n(&chunks[c], __ATOMIC_ACQUIRE);
  if (words || !make) return words;
  uint64_t *made = calloc(WORDS_PER_CHUNK, sizeof *made);
  if (!made) return NULL;
  if (!__atomic_compare_exchange_n(&chunks[c], &words, made, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
    free(made); /* another thread made it first */
    return words;
  }
  return made;
}

int as_java_tag_mark(uint64_t tag) {
  uint64_t *words = chunk_of(tag, 1);
  if (!words) return 0;
  uint64_t bit = tag & ((1u << AS_JAVA_TAG_CHUNK_SHIFT) - 1);
  __atomic_fetch_or(&words[bit / 64], 1ULL << (bit % 64), __ATOMIC_RELEASE);
  return 1;
}

int as_java_tag_clear(uint64_t tag) {
  uint64_t *words = chunk_of(tag, 0);
  if (!words) return 0;
  uint64_t bit = tag & ((1u << AS_JAVA_TAG_CHUNK_SHIFT) - 1), mask = 1ULL << (bit % 64);
  return (__atomic_fetch_and(&words[bit / 64], ~mask, __ATOMIC_ACQ_REL) & mask) != 0;
}

void as_java_tags_forget(void) {
  for (uint32_t c = 0; c < AS_JAVA_TAG_CHUNKS; c++) {
    uint64_t *words = __atomic_load_n(&chunks[c], __ATOMIC_ACQUIRE);
    for (uint32_t w = 0; words && w < WORDS_PER_CHUNK; w++) __atomic_store_n(&words[w], 0, __ATOMIC_RELEASE);
  }
}

void as_java_tags_each(uint64_t last, uint64_t *batch, uint32_t room,
                       int (*each)(const uint64_t *tags, uint32_t n, void *arg), void *arg) {
  uint32_t n = 0;
  for (uint64_t c = 0; c < AS_JAVA_TAG_CHUNKS && (c << AS_JAVA_TAG_CHUNK_SHIFT) <= last; c++) {
    uint64_t *words = __atomic_load_n(&chunks[c], __ATOMIC_ACQUIRE);
    for (uint32_t w = 0; words && w < WORDS_PER_CHUNK; w++) {
      uint64_t bits = __atomic_load_n(&words[w], __ATOMIC_ACQUIRE);
      for (; bits; bits &= bits - 1) {
        batch[n++] = (c << AS_JAVA_TAG_CHUNK_SHIFT) + (uint64_t)w * 64 + (uint64_t)__builtin_ctzll(bits);
        if (n == room) {
          if (!each(batch, n, arg)) return;
          n = 0;
        }
      }
    }
  }
  if (n) each(batch, n, arg);
}
