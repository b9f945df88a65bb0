/* See boot_arena.h. */
#include "preload/boot_arena.h"

#include <string.h>

char as_boot_arena[AS_BOOT_ARENA] __attribute__((aligned(64)));
static size_t used_bytes;

void *as_boot_alloc(size_t size, size_t align) {
  if (align < 16) align = 16;
  for (;;) {
    size_t used = __atomic_load_n(&used_bytes, __ATOMIC_RELAXED);
    size_t start = (used + 16 + align - 1) & ~(align - 1);
    if (start + size < start || start + size > AS_BOOT_ARENA) return NULL;
    if (__atomic_compare_exchange_n(&used_bytes, &used, start + size, 0, __ATOMIC_SEQ_CST,
                                    __ATOMIC_RELAXED)) {
      memcpy(as_boot_arena + start - sizeof(size_t), &size, sizeof(size_t));
      return as_boot_arena + start;
    }
  }
}

size_t as_boot_size(const void *p) {
  size_t had;
  memcpy(&had, (const char *)p - sizeof(size_t), sizeof(size_t));
  return had;
}
