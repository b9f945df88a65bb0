/* The allocators' own entry points (jemalloc's mallocx and je_*,
 * tcmalloc's tc_*, mimalloc's mi_*, and the C library's rarer frees), as an
 * injection's slots point them at the library: a program that calls them by
 * name, not through malloc, is sampled in process as through the probes
 * (whose int3s an entry takes out). Hidden, never interposed by a preload:
 * a program that looks for mallocx to tell jemalloc is there must not find
 * ours. */
#ifndef ALLOCSCOPE_ALLOCATOR_APIS_H
#define ALLOCSCOPE_ALLOCATOR_APIS_H

#include "allocscope.h"
#include "preload/got_slots.h"

/* X(name, index in user/probe/allocator_entries.cpp's table, kind, shape):
 * the entry code is AS_ENTRY_CODE(index, kind) (entry_codes.h). The shape
 * says where the size is: SIZED (the first argument), COUNTED (count times
 * size), ALIGNED (the second), POSIX (posix_memalign's), RESIZES (a block
 * and its new size), RESIZES_COUNTED (a block, a count and a size), FREES
 * (a block first). */
// clang-format off
#define AS_ALLOCATOR_APIS(X) \
  X(cfree, 10, AS_FN_FREE, FREES) \
  X(free_sized, 11, AS_FN_FREE, FREES) \
  X(free_aligned_sized, 12, AS_FN_FREE, FREES) \
  X(reallocf, 13, AS_FN_REALLOC, RESIZES) \
  X(mallocx, 34, AS_FN_MALLOC, SIZED) \
  X(rallocx, 35, AS_FN_REALLOC, RESIZES) \
  X(sdallocx, 36, AS_FN_FREE, FREES) \
  X(dallocx, 37, AS_FN_FREE, FREES) \
  X(je_malloc, 38, AS_FN_MALLOC, SIZED) \
  X(je_calloc, 39, AS_FN_CALLOC, COUNTED) \
  X(je_realloc, 40, AS_FN_REALLOC, RESIZES) \
  X(je_posix_memalign, 41, AS_FN_POSIX_MEMALIGN, POSIX) \
  X(je_aligned_alloc, 42, AS_FN_ALIGNED_ALLOC, ALIGNED) \
  X(je_memalign, 43, AS_FN_MEMALIGN, ALIGNED) \
  X(je_valloc, 44, AS_FN_VALLOC, SIZED) \
  X(je_free, 45, AS_FN_FREE, FREES) \
  X(je_mallocx, 46, AS_FN_MALLOC, SIZED) \
  X(je_rallocx, 47, AS_FN_REALLOC, RESIZES) \
  X(je_sdallocx, 48, AS_FN_FREE, FREES) \
  X(je_dallocx, 49, AS_FN_FREE, FREES) \
  X(tc_malloc, 50, AS_FN_MALLOC, SIZED) \
  X(tc_malloc_skip_new_handler, 51, AS_FN_MALLOC, SIZED) \
  X(tc_calloc, 52, AS_FN_CALLOC, COUNTED) \
  X(tc_realloc, 53, AS_FN_REALLOC, RESIZES) \
  X(tc_memalign, 54, AS_FN_MEMALIGN, ALIGNED) \
  X(tc_posix_memalign, 55, AS_FN_POSIX_MEMALIGN, POSIX) \
  X(tc_valloc, 56, AS_FN_VALLOC, SIZED) \
  X(tc_pvalloc, 57, AS_FN_PVALLOC, SIZED) \
  X(tc_new, 58, AS_FN_MALLOC, SIZED) \
  X(tc_new_nothrow, 59, AS_FN_MALLOC, SIZED) \
  X(tc_newarray, 60, AS_FN_MALLOC, SIZED) \
  X(tc_newarray_nothrow, 61, AS_FN_MALLOC, SIZED) \
  X(tc_new_aligned, 62, AS_FN_MALLOC, SIZED) \
  X(tc_new_aligned_nothrow, 63, AS_FN_MALLOC, SIZED) \
  X(tc_newarray_aligned, 64, AS_FN_MALLOC, SIZED) \
  X(tc_newarray_aligned_nothrow, 65, AS_FN_MALLOC, SIZED) \
  X(tc_free, 66, AS_FN_FREE, FREES) \
  X(tc_cfree, 67, AS_FN_FREE, FREES) \
  X(tc_free_sized, 68, AS_FN_FREE, FREES) \
  X(tc_delete, 69, AS_FN_FREE, FREES) \
  X(tc_delete_sized, 70, AS_FN_FREE, FREES) \
  X(tc_delete_nothrow, 71, AS_FN_FREE, FREES) \
  X(tc_delete_aligned, 72, AS_FN_FREE, FREES) \
  X(tc_delete_sized_aligned, 73, AS_FN_FREE, FREES) \
  X(tc_delete_aligned_nothrow, 74, AS_FN_FREE, FREES) \
  X(tc_deletearray, 75, AS_FN_FREE, FREES) \
  X(tc_deletearray_sized, 76, AS_FN_FREE, FREES) \
  X(tc_deletearray_nothrow, 77, AS_FN_FREE, FREES) \
  X(tc_deletearray_aligned, 78, AS_FN_FREE, FREES) \
  X(tc_deletearray_sized_aligned, 79, AS_FN_FREE, FREES) \
  X(tc_deletearray_aligned_nothrow, 80, AS_FN_FREE, FREES) \
  X(mi_malloc, 81, AS_FN_MALLOC, SIZED) \
  X(mi_zalloc, 82, AS_FN_MALLOC, SIZED) \
  X(mi_calloc, 83, AS_FN_CALLOC, COUNTED) \
  X(mi_mallocn, 84, AS_FN_CALLOC, COUNTED) \
  X(mi_realloc, 85, AS_FN_REALLOC, RESIZES) \
  X(mi_reallocn, 86, AS_FN_REALLOCARRAY, RESIZES_COUNTED) \
  X(mi_reallocf, 87, AS_FN_REALLOC, RESIZES) \
  X(mi_malloc_aligned, 88, AS_FN_MALLOC, SIZED) \
  X(mi_zalloc_aligned, 89, AS_FN_MALLOC, SIZED) \
  X(mi_calloc_aligned, 90, AS_FN_CALLOC, COUNTED) \
  X(mi_realloc_aligned, 91, AS_FN_REALLOC, RESIZES) \
  X(mi_new, 92, AS_FN_MALLOC, SIZED) \
  X(mi_new_nothrow, 93, AS_FN_MALLOC, SIZED) \
  X(mi_new_aligned, 94, AS_FN_MALLOC, SIZED) \
  X(mi_new_aligned_nothrow, 95, AS_FN_MALLOC, SIZED) \
  X(mi_free, 96, AS_FN_FREE, FREES) \
  X(mi_free_size, 97, AS_FN_FREE, FREES) \
  X(mi_free_aligned, 98, AS_FN_FREE, FREES) \
  X(mi_free_size_aligned, 99, AS_FN_FREE, FREES)
// clang-format on

/* Writes up to `room` of the entry points into `out` (their definitions
 * looked up now, and kept as the calls' next); returns how many. */
int as_allocator_apis(struct as_wrapped_fn *out, int room) __attribute__((visibility("hidden")));

/* A program started with the library (preloaded, its malloc ours): the
 * slots of those entry points are taken too, in the modules loaded now
 * and, at sampled trials, in those loaded since, while any module defines
 * one of them (the allocators' marks: mallocx, je_malloc, tc_malloc,
 * mi_malloc). Never given back: the library is the program's for its life. */
void as_preload_allocator_apis(void) __attribute__((visibility("hidden")));
void as_preload_new_modules(void) __attribute__((visibility("hidden"), cold));

#endif
