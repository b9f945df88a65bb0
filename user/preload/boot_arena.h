/* Allocations made while the preload library looks up the next
 * definitions with dlsym (which allocates): from a static arena, never
 * freed. Each block has its size in front, for realloc. */
#ifndef ALLOCSCOPE_BOOT_ARENA_H
#define ALLOCSCOPE_BOOT_ARENA_H

#include <stddef.h>

#define AS_BOOT_ARENA (256 * 1024)
extern char as_boot_arena[AS_BOOT_ARENA];

/* NULL when the arena is spent. */
void *as_boot_alloc(size_t size, size_t align);
/* The size a block of the arena was made with. */
size_t as_boot_size(const void *p);

/* On every free: inline. */
static inline int as_is_boot(const void *p) {
  return (const char *)p >= as_boot_arena && (const char *)p < as_boot_arena + AS_BOOT_ARENA;
}

#endif
