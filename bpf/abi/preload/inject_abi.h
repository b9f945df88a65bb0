/* What allocscope hands liballocscope-preload.so when it loads it into a
 * running process (user/inject/), and what the library answers: the block
 * is on the borrowed thread's stack during the call of
 * allocscope_inject_attach() or allocscope_inject_detach(), written by
 * allocscope before and read back after. Fixed-width fields only. */
#ifndef ALLOCSCOPE_INJECT_ABI_H
#define ALLOCSCOPE_INJECT_ABI_H

#include <stdint.h>

#define AS_INJECT_ABI 2
#define AS_INJECT_ATTACH "allocscope_inject_attach"
#define AS_INJECT_DETACH "allocscope_inject_detach"

/* The answer's status: 0 done, else one of these. */
enum as_inject_status {
  AS_INJECT_OK = 0,
  AS_INJECT_BAD_ABI = 1,   /* another allocscope's library: abi differs */
  AS_INJECT_NO_MALLOC = 2, /* no malloc, free, calloc or realloc in the program's scope */
  AS_INJECT_PRELOADED = 3, /* the library is the program's allocator already (LD_PRELOAD) */
  AS_INJECT_BUSY = 4,      /* another allocscope is attached and reads its ring: owner_* name it */
};

/* attach: take the library over from an allocscope that is gone, however
 * fresh its ring's last read. */
#define AS_INJECT_TAKE_OVER 1u
#define AS_INJECT_NO_JAVA 2u /* a JVM's heap left unsampled (--no-java-heap) */

struct as_inject_args {
  uint32_t abi;    /* AS_INJECT_ABI */
  int32_t ring_fd; /* attach: a memfd holding a frees ring to map (closed after), or -1 */
  uint64_t rate;   /* attach: mean bytes between samples; 1 every allocation */
  uint32_t flags;  /* attach: AS_INJECT_TAKE_OVER, AS_INJECT_NO_JAVA */
  /* attach: the allocscope attaching (its process id and start time, in
   * clock ticks, as its own /proc says); a BUSY answer: the one attached. */
  uint32_t owner_pid;
  uint64_t owner_start;
  /* The answer. */
  uint32_t status;          /* enum as_inject_status */
  uint32_t slots;           /* attach: entry points of modules now calling the library; detach: given back */
  uint32_t modules;         /* modules with a slot redirected */
  uint32_t slots_elsewhere; /* slots bound to another definition than the program's: left alone */
  uint32_t slots_full;      /* slots beyond the library's table: left alone */
  /* attach: a memfd of seed_count block addresses (8 bytes each, closed
   * after), or -1. Blocks allocscope sampled before the entry, through its
   * probes: their frees are sent as those of the library's own samples.
   * The answer: how many were taken (a full bucket of the set refuses one). */
  int32_t seed_fd;
  uint32_t seed_count;
  uint32_t seeded;
};
#ifdef __cplusplus
static_assert(sizeof(struct as_inject_args) == 64, "as_inject_args is an ABI");
#else
_Static_assert(sizeof(struct as_inject_args) == 64, "as_inject_args is an ABI");
#endif

#endif
