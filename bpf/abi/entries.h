/* Part of the ABI (allocscope.h): the allocator entry points, by kind, and
 * the entry codes the probes carry as their cookie and events name. */
#ifndef ALLOCSCOPE_ABI_ENTRIES_H
#define ALLOCSCOPE_ABI_ENTRIES_H

#include "abi/types.h"

/* Allocator entry points, in the order userspace attaches them. */
enum as_fn {
  AS_FN_MALLOC = 0,
  AS_FN_CALLOC = 1,
  AS_FN_REALLOC = 2,
  AS_FN_REALLOCARRAY = 3,
  AS_FN_POSIX_MEMALIGN = 4,
  AS_FN_ALIGNED_ALLOC = 5,
  AS_FN_MEMALIGN = 6,
  AS_FN_VALLOC = 7,
  AS_FN_PVALLOC = 8,
  AS_FN_FREE = 9,
  AS_FN_EXIT = 10,       /* not an allocator: the C library's _exit (a Python process held there) */
  AS_FN_GO_MALLOC = 11,  /* Go's runtime.mallocgc: size in rax; its collector frees, never a call */
  AS_FN_GO_PROFILE = 12, /* Go's runtime.mProf_Malloc: a block its runtime sampled (as_go_profile) */
  AS_FN_GO_FREE = 13,    /* Go's runtime.freeSpecial: a sampled block's record freed by its sweeper */
  AS_FN_COUNT = 14,
};

/* Entry codes (the attach cookie, `fn` in events): the kind in the low byte,
 * how the arguments carry size and pointer; above it, userspace's index of
 * the named entry point (0: the C library's own of that kind). */
#define AS_FN_KIND_MASK 0xff
#define AS_FN_ENTRY_SHIFT 8
#define as_fn_kind(code) ((enum as_fn)((code)&AS_FN_KIND_MASK))

#endif
