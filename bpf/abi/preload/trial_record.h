/* What the preload library writes into the shared ring (shared_ring.h)
 * when allocscope records without BPF: a sampled trial with its registers
 * and the top of its stack, which allocscope unwinds in userspace with the
 * tables and step the kernel's walk uses (as perf --call-graph dwarf does),
 * and the free of a sampled block. Plain C, compiled into the preload
 * library and the unit tests. */
#ifndef ALLOCSCOPE_TRIAL_RECORD_H
#define ALLOCSCOPE_TRIAL_RECORD_H

#include <stddef.h>
#include <stdint.h>

#include "abi/preload/shared_ring.h"
#include "allocscope.h"

enum as_trial_kind {
  AS_TRIAL_ALLOC = 1, /* struct as_trial_alloc, then walk.len bytes of stack */
  AS_TRIAL_FREE = 2,  /* struct as_trial_free */
  AS_TRIAL_FORK = 3,  /* struct as_trial_free, addr 0: a forked child says it may write here */
};

struct as_trial_alloc {
  uint32_t kind; /* AS_TRIAL_ALLOC */
  uint32_t tid;
  uint64_t addr, size, weight, offset, rate; /* as the otel_memory:alloc probe's arguments */
  uint64_t ts_ns;                            /* CLOCK_MONOTONIC at the trial */
  uint32_t code, pad;
  /* The sampler's frame as a deferred kernel walk: ip/sp/bp where the
   * capture ran (steps 0), skip = its own frames to leave out. */
  struct as_deferred_walk walk;
};

struct as_trial_free {
  uint32_t kind; /* AS_TRIAL_FREE, AS_TRIAL_FORK */
  uint32_t tid;
  uint64_t addr;
  uint64_t ts_ns; /* CLOCK_MONOTONIC */
};

/* The registers of the function this expands in, at one instruction: rip
 * (the next instruction's address), rsp and rbp. The unwind row at that
 * rip describes this very rsp, so the walk can start there. */
#define AS_CAPTURE_REGS(ip_, sp_, bp_) \
  __asm__ volatile("lea 0(%%rip), %0\n\tmov %%rsp, %1\n\tmov %%rbp, %2" : "=r"(ip_), "=r"(sp_), "=r"(bp_))

/* Copies n bytes of stack in 8-byte words through a volatile pointer: the
 * copy reads the callers' frames on purpose, which an instrumented memcpy
 * would report, and the compiler must not turn the loop back into one. */
static inline void as_copy_stack_words(uint8_t *to, uint64_t from, uint32_t n) {
  const volatile uint64_t *src = (const volatile uint64_t *)(uintptr_t)from;
  uint64_t *dst = (uint64_t *)to;
  for (uint32_t i = 0; i < n / 8; ++i) dst[i] = src[i];
}

/* The stack bytes worth copying from sp: up to the stack's end, at most
 * AS_DEFER_STACK_BYTES (as much as the kernel copies for a deferred walk),
 * a whole number of words. */
static inline uint32_t as_trial_stack_len(uint64_t sp, uint64_t stack_end) {
  if (stack_end <= sp) return 0;
  uint64_t n = stack_end - sp;
  if (n > AS_DEFER_STACK_BYTES) n = AS_DEFER_STACK_BYTES;
  return (uint32_t)(n & ~7ULL);
}

/* Writes a sampled trial whose registers were captured in the calling
 * function (AS_CAPTURE_REGS): false when the ring refused it (counted
 * lost there). `walk` holds the registers, stack_end and skip; its len is
 * set here. */
static inline int as_trial_write_alloc(struct as_ring_header *h, uint32_t tgid,
                                       const struct as_trial_alloc *t) {
  uint32_t len = as_trial_stack_len(t->walk.sp, t->walk.stack_end);
  void *p = as_ring_reserve(h, (uint32_t)sizeof *t + len, tgid);
  if (!p) return 0;
  struct as_trial_alloc *out = (struct as_trial_alloc *)p;
  *out = *t;
  out->kind = AS_TRIAL_ALLOC;
  out->walk.len = len;
  as_copy_stack_words((uint8_t *)(out + 1), t->walk.sp, len);
  as_ring_commit(p);
  return 1;
}

static inline int as_trial_write(struct as_ring_header *h, uint32_t kind, uint32_t tgid, uint32_t tid,
                                 uint64_t addr) {
  /* Stamped as it is placed: a reader stopped at a busy one knows every
   * record after it is later. */
  uint32_t len = (uint32_t)sizeof(struct as_trial_free), at = (uint32_t)offsetof(struct as_trial_free, ts_ns);
  struct as_trial_free *p;
  if (h->flags & AS_RING_FREES_ONLY) { /* never waits, nor counts: the caller traps instead */
    int why;
    p = (struct as_trial_free *)as_ring_try_reserve_stamped(h, len, tgid, &why, at);
  } else { /* a fork's record never waits: the child must not be held in fork() */
    p = (struct as_trial_free *)as_ring_reserve_stamped(h, len, tgid, kind != AS_TRIAL_FORK, at);
  }
  if (!p) return 0;
  p->kind = kind;
  p->tid = tid;
  p->addr = addr;
  as_ring_commit(p);
  return 1;
}

static inline int as_trial_write_free(struct as_ring_header *h, uint32_t tgid, uint32_t tid, uint64_t addr) {
  return as_trial_write(h, AS_TRIAL_FREE, tgid, tid, addr);
}

#endif
