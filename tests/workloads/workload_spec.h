/* The allocation sites of alloc_sites.c, shared with the tests that check
 * allocscope's estimates against this exact truth. Counts are per thread at
 * --scale-pct 100. */
#ifndef ALLOCSCOPE_WORKLOAD_SPEC_H
#define ALLOCSCOPE_WORKLOAD_SPEC_H

#include <stdint.h>

enum site_keep { KEEP_NONE = 0, KEEP_ALL = 1, KEEP_HALF = 2 };

struct site_spec {
  const char *function; /* the noinline function that calls the allocator */
  const char *allocator;
  uint64_t size;  /* bytes requested per call */
  uint32_t count; /* calls per thread at 100 % */
  int keep;       /* enum site_keep: what is still allocated at exit */
};

/* site_realloc_seed allocates the blocks that site_realloc then grows, so
 * none of the seed blocks is live at the end. */
static const struct site_spec kSites[] = {
    {"site_malloc_small", "malloc", 48, 600000, KEEP_NONE},
    {"site_malloc_kept", "malloc", 1000, 30000, KEEP_ALL},
    {"site_calloc", "calloc", 1000, 30000, KEEP_HALF},
    {"site_realloc_seed", "malloc", 4096, 6000, KEEP_NONE},
    {"site_realloc", "realloc", 16384, 6000, KEEP_ALL},
    {"site_posix_memalign", "posix_memalign", 2048, 25000, KEEP_ALL},
    {"site_aligned_alloc", "aligned_alloc", 8192, 6000, KEEP_NONE},
    {"site_large", "malloc", 1 << 20, 48, KEEP_HALF},
};
#define N_SITES (sizeof kSites / sizeof kSites[0])

static inline uint32_t site_count(const struct site_spec *s, int scale_pct) {
  return (uint32_t)(((uint64_t)s->count * (uint64_t)scale_pct + 99) / 100);
}

static inline uint32_t site_kept(const struct site_spec *s, uint32_t count) {
  return s->keep == KEEP_ALL ? count : s->keep == KEEP_HALF ? count / 2 : 0;
}

#endif
