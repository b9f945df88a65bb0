/* The sampler inside the traced process: the per-thread byte countdown and
 * the set of sampled blocks, shared by the interposed entry points
 * (preload.c) and CPython's allocator domains (python_domains.c). Its fast
 * path is inline here, so that no caller pays a call for it; what runs only
 * for a sampled allocation, or for the free of a sampled block, is in
 * sampler.c. Hidden: nothing here is the traced program's to see. */
#ifndef ALLOCSCOPE_SAMPLER_H
#define ALLOCSCOPE_SAMPLER_H

#include <stddef.h>
#include <stdint.h>

#include "abi/preload/shared_ring.h"
#include "preload/probe_sites.h"
#include "preload/sampled_set.h"

#define AS_HIDDEN __attribute__((visibility("hidden")))
#define ALWAYS_INLINE static inline __attribute__((always_inline))
#define UNLIKELY(x) __builtin_expect(!!(x), 0)

#define AS_DEFAULT_RATE (512 * 1024)

struct thread_sampler {
  uint64_t countdown;          /* bytes before the next sampled byte */
  uint64_t rng;                /* splitmix64 state */
  uint32_t depth;              /* interposed calls in progress on this thread */
  uint32_t seeded;             /* as_seed_epoch when drawn: an injection's attach draws every thread anew */
  uint64_t stack_lo, stack_hi; /* the thread's stack, once a trial needed it (hi 1: unknown) */
  uint32_t writing;            /* writing a record into the ring (a signal handler's is dropped) */
  uint32_t tid, tid_in;        /* gettid(), asked once in process tid_in (a forked child's thread differs) */
  uint32_t connecting;         /* connecting to the frees channel (a signal handler's trial goes untracked) */
};
extern __thread struct thread_sampler as_tls __attribute__((tls_model("initial-exec"))) AS_HIDDEN;

extern uint64_t as_sample_rate AS_HIDDEN; /* mean bytes between samples; 1: every allocation */
extern int as_sampler_ready AS_HIDDEN;    /* the countdown's table is filled: sampling may start */
extern uint32_t as_seed_epoch AS_HIDDEN;  /* 1 from the start; raised by each injection's attach */
extern int as_injected AS_HIDDEN;         /* loaded into a running process by allocscope, and attached */
/* The ring allocscope handed this process (a forked child writes into its
 * parent's). Without BPF it takes the trials and frees (as_ring); with BPF
 * only the frees of sampled blocks (as_free_ring alone, asked for at the
 * process's first sampled trial), the trials trapping into the kernel's
 * probes. */
extern struct as_ring_header *as_ring AS_HIDDEN;
extern struct as_ring_header *as_free_ring AS_HIDDEN;
extern struct as_sampled_set as_sampled AS_HIDDEN;

/* The countdown's table. */
void as_sampler_init(void) AS_HIDDEN;
/* The rate from ALLOCSCOPE_RATE and the ring when allocscope offers one
 * (its socket in the environment): a program started with the library. */
void as_sampler_start(void) AS_HIDDEN;
/* An injection's attach: sampling at `rate` from now on, every thread's
 * countdown drawn anew, no sampled block remembered, the frees into `ring`
 * (NULL: through the probe). */
void as_sampler_attach(uint64_t rate, struct as_ring_header *ring) AS_HIDDEN;
/* An injection's blocks sampled before it (the memfd `fd` holds `count`
 * addresses): remembered as sampled, so that their frees leave the process.
 * Returns how many were. */
uint32_t as_sampler_seed(int fd, uint32_t count) AS_HIDDEN;
/* Whether the reader of this process's frees ring read lately: an
 * allocscope attached now. */
int as_sampler_reader_alive(void) AS_HIDDEN;
/* An injection's detach: no more frees into its ring, which is unmapped
 * once no thread writes into it. */
void as_sampler_detach(void) AS_HIDDEN;
/* The ring a runtime's agent in the process (jvm_agent.c) writes its
 * records into, connected if it was only offered: NULL when there is none.
 * Its writer is counted until as_sampler_ring_done (a detach waits). */
struct as_ring_header *as_sampler_ring_begin(void) AS_HIDDEN;
void as_sampler_ring_done(void) AS_HIDDEN;
/* Whether allocscope records this process (a ring was given or offered). */
int as_sampler_recorded(void) AS_HIDDEN;
/* gettid(), asked once per thread and process. */
uint32_t as_sampler_tid(uint32_t pid) AS_HIDDEN;
/* A forked child: a random stream and a sampled set of its own. */
void as_sampler_after_fork(void) AS_HIDDEN;
/* The calling thread's countdown ran out at an allocation of `size` bytes
 * (or was never drawn): whether the allocation is sampled, and at which of
 * its bytes (*offset). */
int as_countdown_expired(uint64_t size, uint64_t *offset) AS_HIDDEN __attribute__((cold));
/* A sampled allocation, and the free of a sampled block, leave the process
 * (a probe, or the ring). Each is called by the entry point itself, so that
 * its site is two frames of ours above the program's (AS_USDT_OWN_FRAMES). */
void as_fire_alloc(void *p, uint64_t size, uint64_t offset, uint32_t code) AS_HIDDEN __attribute__((cold));
void as_fire_free(void *p) AS_HIDDEN __attribute__((cold));

/* After an allocation of `size` bytes returned p: counts it down, and
 * fires the probe if one of its bytes is the sampled one. Calls made inside
 * another interposed call (an allocator calling itself) are the outer
 * call's, and not counted again. */
ALWAYS_INLINE void count_allocation(struct thread_sampler *t, void *p, size_t size, uint32_t code) {
  if (__builtin_expect(!AS_PROBES_ATTACHED() && !as_ring, 1) || !p || t->depth || !as_sampler_ready) return;
  if (__builtin_expect(t->countdown >= size && t->seeded == as_seed_epoch, 1)) {
    t->countdown -= size;
    return;
  }
  uint64_t offset;
  if (as_countdown_expired(size, &offset)) as_fire_alloc(p, size, offset, code);
}

/* Before a block is freed (and its address can be handed out again). */
ALWAYS_INLINE void release(void *p) {
  if (p && UNLIKELY(as_set_remove(&as_sampled, (uint64_t)(uintptr_t)p))) as_fire_free(p);
}

static inline void leave_call(uint32_t **depth) { --**depth; }
/* The interposed call in progress, until the block ends (also when an
 * operator new throws through it). */
#define IN_CALL(t) \
  uint32_t *in_call_ __attribute__((cleanup(leave_call), unused)) = (++(t)->depth, &(t)->depth)

#endif
