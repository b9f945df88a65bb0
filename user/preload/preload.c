/* liballocscope-preload.so: the sampling countdown inside the traced
 * process. It interposes the allocator's entry points, forwards each call to
 * the next definition (the C library, or jemalloc, tcmalloc, mimalloc
 * preloaded after it), and runs the same per-thread exponential byte
 * countdown as allocscope's BPF programs. Only a sampled allocation, and the
 * free of a sampled block, fires a USDT probe (otel_memory:alloc and
 * otel_memory:free, or their twins allocscope:*: probe_sites.h); every
 * other call stays in the process: no system call, lock or allocation.
 * While no tracer is attached (the probes' semaphores are 0) nothing is
 * sampled.
 *
 * Configuration: ALLOCSCOPE_RATE, mean bytes between samples (default 512
 * KiB; 1 samples every allocation). */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <math.h>
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "allocscope.h"
#include "countdown.h"
#include "preload/boot_arena.h"
#include "preload/entry_codes.h"
#include "preload/probe_sites.h"
#include "preload/ring_channel.h"
#include "preload/sampled_set.h"
#include "preload/trial_record.h"

#define EXPORT __attribute__((visibility("default")))
#define ALWAYS_INLINE static inline __attribute__((always_inline))
#define UNLIKELY(x) __builtin_expect(!!(x), 0)

/* ---- Settings and per-thread state ------------------------------------ */

#define DEFAULT_RATE (512 * 1024)
static uint64_t sample_rate = DEFAULT_RATE;
static uint64_t log2_table[AS_LOG2_TABLE_SIZE];
static int sampler_ready; /* the table is filled: sampling may start */

struct thread_sampler {
  uint64_t countdown; /* bytes before the next sampled byte */
  uint64_t rng;       /* splitmix64 state */
  uint32_t depth;     /* interposed calls in progress on this thread */
  uint32_t seeded;
  uint64_t stack_lo, stack_hi; /* the thread's stack, once a trial needed it (hi 1: unknown) */
  uint32_t writing;            /* writing a record into the ring (a signal handler's is dropped) */
  uint32_t tid, tid_in;        /* gettid(), asked once in process tid_in (a forked child's thread differs) */
};
static __thread struct thread_sampler tls __attribute__((tls_model("initial-exec")));

/* Without BPF: the ring allocscope reads the trials from (a forked child
 * writes into its parent's). */
static struct as_ring_header *ring;

/* A page-aligned set in pages of its own: the child of a fork empties it. */
static struct as_sampled_set sampled __attribute__((aligned(4096)));

/* ---- The next definitions, found lazily --------------------------------- */

struct next_fns {
  void *(*malloc)(size_t);
  void *(*calloc)(size_t, size_t);
  void *(*realloc)(void *, size_t);
  void *(*reallocarray)(void *, size_t, size_t);
  int (*posix_memalign)(void **, size_t, size_t);
  void *(*aligned_alloc)(size_t, size_t);
  void *(*memalign)(size_t, size_t);
  void *(*valloc)(size_t);
  void *(*pvalloc)(size_t);
  void (*free)(void *);
};
static struct next_fns next;
static __thread int resolving __attribute__((tls_model("initial-exec")));

static void *lookup(const char *name) { return dlsym(RTLD_NEXT, name); }

/* Whether the next definitions are known; false only while dlsym runs. */
static int resolve(void) {
  if (__atomic_load_n(&next.free, __ATOMIC_ACQUIRE)) return 1;
  if (resolving) return 0;
  resolving = 1;
  struct next_fns n;
  n.malloc = lookup("malloc");
  n.calloc = lookup("calloc");
  n.realloc = lookup("realloc");
  n.reallocarray = lookup("reallocarray");
  n.posix_memalign = lookup("posix_memalign");
  n.aligned_alloc = lookup("aligned_alloc");
  n.memalign = lookup("memalign");
  n.valloc = lookup("valloc");
  n.pvalloc = lookup("pvalloc");
  n.free = lookup("free");
  resolving = 0;
  if (!n.malloc || !n.free || !n.calloc || !n.realloc) abort(); /* no allocator behind us */
  next.malloc = n.malloc;
  next.calloc = n.calloc;
  next.realloc = n.realloc;
  next.reallocarray = n.reallocarray;
  next.posix_memalign = n.posix_memalign;
  next.aligned_alloc = n.aligned_alloc;
  next.memalign = n.memalign;
  next.valloc = n.valloc;
  next.pvalloc = n.pvalloc;
  __atomic_store_n(&next.free, n.free, __ATOMIC_RELEASE);
  return 1;
}

/* ---- Sampling ---------------------------------------------------------- */

static uint64_t splitmix64(uint64_t *state) {
  uint64_t z = (*state += 0x9E3779B97F4A7C15ULL);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}

static uint64_t draw_countdown(struct thread_sampler *t) {
  uint32_t msb;
  uint64_t norm = as_normalize(splitmix64(&t->rng) | 1, &msb);
  uint32_t i = as_table_index(norm);
  return as_countdown_from(norm, msb, log2_table[i], log2_table[i + 1], sample_rate);
}

/* A seed per thread and per process: the clock, the thread's own address
 * and a global count (no system call: clock_gettime is in the vDSO). */
static void seed(struct thread_sampler *t) {
  static uint64_t threads;
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  t->rng = ((uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec) ^ (uint64_t)(uintptr_t)t ^
           (__atomic_fetch_add(&threads, 1, __ATOMIC_RELAXED) << 48);
  t->countdown = draw_countdown(t);
  t->seeded = 1;
}

static uint64_t stack_end_of(uint64_t sp) {
  struct thread_sampler *t = &tls;
  return as_stack_end_of(sp, &t->stack_lo, &t->stack_hi, &t->depth);
}

/* The calling thread's id for a record of process pid: gettid() is a
 * system call, asked again only in another process. */
static uint32_t thread_id(struct thread_sampler *t, uint32_t pid) {
  if (t->tid_in != pid) {
    t->tid = (uint32_t)gettid();
    t->tid_in = pid;
  }
  return t->tid;
}

/* The sampled allocation leaves the process: remembered, then probed. One
 * probe site for every entry point (each site is a uprobe to attach, and to
 * remove: ~0.1 s each), in a function the entry point calls: the tracer
 * skips these two frames of ours (bpf/allocscope.h, AS_USDT_OWN_FRAMES). */
__attribute__((noinline, cold)) static void fire_alloc(void *p, uint64_t size, uint64_t offset,
                                                       uint32_t code) {
  uint64_t weight = size;
  if (sample_rate > 1) weight = (uint64_t)llround((double)size / -expm1(-(double)size / (double)sample_rate));
  if (!as_set_insert(&sampled, (uint64_t)(uintptr_t)p)) code |= AS_USDT_UNTRACKED;
  uint64_t rate = sample_rate;
  if (ring) {
    struct thread_sampler *self = &tls;
    if (self->writing) { /* a signal handler's trial, inside this thread's own write */
      as_ring_count_lost(ring, 0);
      return;
    }
    self->writing = 1;
    uint32_t pid = as_channel_pid(ring);
    struct as_trial_alloc t = {.tid = thread_id(self, pid),
                               .addr = (uint64_t)(uintptr_t)p,
                               .size = size,
                               .weight = weight,
                               .offset = offset,
                               .rate = rate,
                               .ts_ns = (uint64_t)as_ring_now_ns(),
                               .code = code};
    AS_CAPTURE_REGS(t.walk.ip, t.walk.sp, t.walk.bp);
    t.walk.skip = AS_USDT_OWN_FRAMES_FULL;
    t.walk.stack_end = stack_end_of(t.walk.sp);
    as_trial_write_alloc(ring, pid, &t);
    self->writing = 0;
    return;
  }
  AS_FIRE_ALLOC(p, size, weight, code, offset, rate);
}

/* After an allocation of `size` bytes returned p: counts it down, and
 * fires the probe if one of its bytes is the sampled one. Calls made inside
 * another interposed call (an allocator calling itself) are the outer
 * call's, and not counted again. */
ALWAYS_INLINE void count_allocation(struct thread_sampler *t, void *p, size_t size, uint32_t code) {
  if (__builtin_expect(!AS_PROBES_ATTACHED() && !ring, 1) || !p || t->depth || !sampler_ready) return;
  if (__builtin_expect(t->countdown >= size && t->seeded, 1)) {
    t->countdown -= size;
    return;
  }
  if (sample_rate <= 1) {
    fire_alloc(p, size, 0, code);
    return;
  }
  if (!t->seeded) {
    seed(t);
    if (t->countdown >= size) {
      t->countdown -= size;
      return;
    }
  }
  uint64_t offset = t->countdown; /* memoryless: a fresh draw for the bytes after */
  t->countdown = draw_countdown(t);
  fire_alloc(p, size, offset, code);
}

__attribute__((noinline, cold)) static void fire_free(void *p) {
  struct thread_sampler *self = &tls;
  if (!ring) {
    AS_FIRE_FREE(p);
  } else if (self->writing) {
    as_ring_count_lost(ring, 0);
  } else {
    self->writing = 1;
    uint32_t pid = as_channel_pid(ring);
    as_trial_write_free(ring, pid, thread_id(self, pid), (uint64_t)(uintptr_t)p);
    self->writing = 0;
  }
}

/* Before a block is freed (and its address can be handed out again). */
ALWAYS_INLINE void release(void *p) {
  if (p && UNLIKELY(as_set_remove(&sampled, (uint64_t)(uintptr_t)p))) fire_free(p);
}

static void leave_call(uint32_t **depth) { --**depth; }
/* The interposed call in progress, until the block ends (also when an
 * operator new throws through it). */
#define IN_CALL(t) \
  uint32_t *in_call_ __attribute__((cleanup(leave_call), unused)) = (++(t)->depth, &(t)->depth)

/* ---- The C family -------------------------------------------------------- */

EXPORT void *malloc(size_t size) {
  if (UNLIKELY(!next.malloc) && !resolve()) return as_boot_alloc(size, 16);
  struct thread_sampler *t = &tls;
  void *p;
  {
    IN_CALL(t);
    p = next.malloc(size);
  }
  count_allocation(t, p, size, AS_FN_MALLOC);
  return p;
}

EXPORT void *calloc(size_t n, size_t size) {
  if (UNLIKELY(!next.calloc) && !resolve()) {
    size_t total;
    return __builtin_mul_overflow(n, size, &total) ? NULL : as_boot_alloc(total, 16); /* the arena is zero */
  }
  struct thread_sampler *t = &tls;
  void *p;
  {
    IN_CALL(t);
    p = next.calloc(n, size);
  }
  size_t total;
  if (!__builtin_mul_overflow(n, size, &total)) count_allocation(t, p, total, AS_FN_CALLOC);
  return p;
}

EXPORT void free(void *p) {
  if (UNLIKELY(as_is_boot(p))) return;
  if (UNLIKELY(!next.free) && !resolve()) return;
  release(p);
  next.free(p);
}

/* A boot block grown: copied into a real one. */
static void *grow_boot_block(void *old, size_t size) {
  size_t had = as_boot_size(old);
  void *p = malloc(size);
  if (p) memcpy(p, old, had < size ? had : size);
  return p;
}

/* realloc frees the old block when called (as the BPF path counts it; a
 * failed realloc that keeps it is a rare error accepted) and allocates the
 * new size. */
EXPORT void *realloc(void *old, size_t size) {
  if (UNLIKELY(as_is_boot(old))) return grow_boot_block(old, size);
  if (UNLIKELY(!next.realloc) && !resolve()) return as_boot_alloc(size, 16);
  struct thread_sampler *t = &tls;
  release(old);
  void *p;
  {
    IN_CALL(t);
    p = next.realloc(old, size);
  }
  count_allocation(t, p, size, AS_FN_REALLOC);
  return p;
}

EXPORT void *reallocarray(void *old, size_t n, size_t size) {
  size_t total;
  if (__builtin_mul_overflow(n, size, &total))
    return next.reallocarray ? next.reallocarray(old, n, size) : NULL;
  if (UNLIKELY(as_is_boot(old))) return grow_boot_block(old, total);
  if (UNLIKELY(!next.realloc) && !resolve()) return as_boot_alloc(total, 16);
  struct thread_sampler *t = &tls;
  release(old);
  void *p;
  {
    IN_CALL(t);
    p = next.reallocarray ? next.reallocarray(old, n, size) : next.realloc(old, total);
  }
  count_allocation(t, p, total, AS_FN_REALLOCARRAY);
  return p;
}

EXPORT int posix_memalign(void **out, size_t align, size_t size) {
  if (UNLIKELY(!next.posix_memalign) && !resolve()) {
    *out = as_boot_alloc(size, align);
    return *out ? 0 : 12 /* ENOMEM */;
  }
  struct thread_sampler *t = &tls;
  int err;
  {
    IN_CALL(t);
    err = next.posix_memalign(out, align, size);
  }
  if (err == 0) count_allocation(t, *out, size, AS_FN_POSIX_MEMALIGN);
  return err;
}

/* aligned_alloc, memalign, valloc and pvalloc: one shape. */
#define ALIGNED_ENTRY(name, kind, params, args, size_arg, boot_align)                   \
  EXPORT void *name params {                                                            \
    if (UNLIKELY(!next.name) && !resolve()) return as_boot_alloc(size_arg, boot_align); \
    if (UNLIKELY(!next.name)) return NULL;                                              \
    struct thread_sampler *t = &tls;                                                    \
    void *p;                                                                            \
    {                                                                                   \
      IN_CALL(t);                                                                       \
      p = next.name args;                                                               \
    }                                                                                   \
    count_allocation(t, p, size_arg, kind);                                             \
    return p;                                                                           \
  }
ALIGNED_ENTRY(aligned_alloc, AS_FN_ALIGNED_ALLOC, (size_t align, size_t size), (align, size), size, align)
ALIGNED_ENTRY(memalign, AS_FN_MEMALIGN, (size_t align, size_t size), (align, size), size, align)
ALIGNED_ENTRY(valloc, AS_FN_VALLOC, (size_t size), (size), size, 4096)
ALIGNED_ENTRY(pvalloc, AS_FN_PVALLOC, (size_t size), (size), size, 4096)

/* ---- C++ operators --------------------------------------------------------
 * libstdc++'s operator new calls malloc, which counts it: then ours only
 * forwards (a tail call, no frame of ours left on the stack). An allocator
 * that defines the operators itself (tcmalloc, jemalloc) does not call
 * malloc: then they are counted here. Every delete leaves the sampled set. */

static int operators_counted = -1; /* -1: not decided yet */

static int count_operators(void *next_new) {
  int v = __atomic_load_n(&operators_counted, __ATOMIC_RELAXED);
  if (__builtin_expect(v >= 0, 1)) return v;
  Dl_info op, m;
  resolve();
  v = next_new && next.malloc && dladdr(next_new, &op) && dladdr((void *)next.malloc, &m) &&
      op.dli_fbase == m.dli_fbase;
  __atomic_store_n(&operators_counted, v, __ATOMIC_RELAXED);
  return v;
}

/* The next definition of a C++ operator, looked up at its first call (the
 * C++ runtime may be loaded late, by dlopen). */
#define NEXT_OPERATOR(type, symbol)                             \
  static type next_##symbol;                                    \
  static type find_##symbol(void) {                             \
    type f = __atomic_load_n(&next_##symbol, __ATOMIC_RELAXED); \
    if (__builtin_expect(!f, 0)) {                              \
      f = (type)lookup(#symbol);                                \
      __atomic_store_n(&next_##symbol, f, __ATOMIC_RELAXED);    \
    }                                                           \
    return f;                                                   \
  }

typedef void *(*new_fn)(size_t);
typedef void *(*new_nothrow_fn)(size_t, const void *);
typedef void *(*new_aligned_fn)(size_t, size_t);
typedef void *(*new_aligned_nothrow_fn)(size_t, size_t, const void *);
typedef void (*delete_fn)(void *);
typedef void (*delete_sized_fn)(void *, size_t);
typedef void (*delete_aligned_fn)(void *, size_t);
typedef void (*delete_sized_aligned_fn)(void *, size_t, size_t);
typedef void (*delete_nothrow_fn)(void *, const void *);
typedef void (*delete_aligned_nothrow_fn)(void *, size_t, const void *);

/* With no operator behind (nothing defines it: cannot happen once a C++
 * runtime is loaded), the plain form is malloc's. */
#define NEW_OPERATOR(symbol, type, code, params, args, fallback) \
  NEXT_OPERATOR(type, symbol)                                    \
  EXPORT void *symbol params {                                   \
    type f = find_##symbol();                                    \
    if (UNLIKELY(!f)) return fallback;                           \
    if (!count_operators((void *)f)) return f args;              \
    struct thread_sampler *t = &tls;                             \
    void *p;                                                     \
    {                                                            \
      IN_CALL(t);                                                \
      p = f args;                                                \
    }                                                            \
    count_allocation(t, p, size, code);                          \
    return p;                                                    \
  }

NEW_OPERATOR(_Znwm, new_fn, AS_CODE_NEW, (size_t size), (size), malloc(size))
NEW_OPERATOR(_Znam, new_fn, AS_CODE_NEW_ARRAY, (size_t size), (size), malloc(size))
NEW_OPERATOR(_ZnwmRKSt9nothrow_t, new_nothrow_fn, AS_CODE_NEW_NOTHROW, (size_t size, const void *tag),
             (size, tag), malloc(size))
NEW_OPERATOR(_ZnamRKSt9nothrow_t, new_nothrow_fn, AS_CODE_NEW_ARRAY_NOTHROW, (size_t size, const void *tag),
             (size, tag), malloc(size))
NEW_OPERATOR(_ZnwmSt11align_val_t, new_aligned_fn, AS_CODE_NEW_ALIGNED, (size_t size, size_t align),
             (size, align), aligned_alloc(align, size))
NEW_OPERATOR(_ZnamSt11align_val_t, new_aligned_fn, AS_CODE_NEW_ARRAY_ALIGNED, (size_t size, size_t align),
             (size, align), aligned_alloc(align, size))
NEW_OPERATOR(_ZnwmSt11align_val_tRKSt9nothrow_t, new_aligned_nothrow_fn, AS_CODE_NEW_ALIGNED_NOTHROW,
             (size_t size, size_t align, const void *tag), (size, align, tag), aligned_alloc(align, size))
NEW_OPERATOR(_ZnamSt11align_val_tRKSt9nothrow_t, new_aligned_nothrow_fn, AS_CODE_NEW_ARRAY_ALIGNED_NOTHROW,
             (size_t size, size_t align, const void *tag), (size, align, tag), aligned_alloc(align, size))

#define DELETE_OPERATOR(symbol, type, params, args) \
  NEXT_OPERATOR(type, symbol)                       \
  EXPORT void symbol params {                       \
    release(p);                                     \
    type f = find_##symbol();                       \
    if (UNLIKELY(!f)) {                             \
      free(p);                                      \
      return;                                       \
    }                                               \
    f args;                                         \
  }

DELETE_OPERATOR(_ZdlPv, delete_fn, (void *p), (p))
DELETE_OPERATOR(_ZdaPv, delete_fn, (void *p), (p))
DELETE_OPERATOR(_ZdlPvm, delete_sized_fn, (void *p, size_t n), (p, n))
DELETE_OPERATOR(_ZdaPvm, delete_sized_fn, (void *p, size_t n), (p, n))
DELETE_OPERATOR(_ZdlPvSt11align_val_t, delete_aligned_fn, (void *p, size_t a), (p, a))
DELETE_OPERATOR(_ZdaPvSt11align_val_t, delete_aligned_fn, (void *p, size_t a), (p, a))
DELETE_OPERATOR(_ZdlPvmSt11align_val_t, delete_sized_aligned_fn, (void *p, size_t n, size_t a), (p, n, a))
DELETE_OPERATOR(_ZdaPvmSt11align_val_t, delete_sized_aligned_fn, (void *p, size_t n, size_t a), (p, n, a))
DELETE_OPERATOR(_ZdlPvRKSt9nothrow_t, delete_nothrow_fn, (void *p, const void *tag), (p, tag))
DELETE_OPERATOR(_ZdaPvRKSt9nothrow_t, delete_nothrow_fn, (void *p, const void *tag), (p, tag))
DELETE_OPERATOR(_ZdlPvSt11align_val_tRKSt9nothrow_t, delete_aligned_nothrow_fn,
                (void *p, size_t a, const void *tag), (p, a, tag))
DELETE_OPERATOR(_ZdaPvSt11align_val_tRKSt9nothrow_t, delete_aligned_nothrow_fn,
                (void *p, size_t a, const void *tag), (p, a, tag))

#include "preload/python_domains.h"

/* ---- Process lifecycle ----------------------------------------------------- */

/* A forked child is a new process to the tracer: its own random stream, and
 * none of the parent's sampled blocks (the tracer keys them by process). */
static void after_fork_in_child(void) {
  tls.seeded = 0;
  madvise(&sampled, sizeof(sampled), MADV_DONTNEED);
  if (ring) { /* a writer of its parent's ring: allocscope keeps the ring while it lives */
    uint32_t pid = as_channel_pid(ring); /* a hello first: its own, in its PID namespace */
    as_trial_write(ring, AS_TRIAL_FORK, pid, pid, 0);
  }
}

static uint64_t rate_from_environment(void) {
  const char *s = getenv("ALLOCSCOPE_RATE");
  if (!s || !*s) return DEFAULT_RATE;
  char *end;
  unsigned long long v = strtoull(s, &end, 10);
  if (*end || v == 0 || v > AS_MAX_RATE) return DEFAULT_RATE;
  return v;
}

__attribute__((constructor(101))) static void start(void) {
  resolve();
  sample_rate = rate_from_environment();
  for (int i = 0; i < AS_LOG2_TABLE_SIZE; i++)
    log2_table[i] = (uint64_t)llround(log2(1.0 + (double)i / (1 << AS_LOG2_TABLE_BITS)) * 4294967296.0);
  pthread_atfork(NULL, NULL, after_fork_in_child);
  const char *socket_path = getenv(AS_CHANNEL_ENV);
  if (socket_path && *socket_path) ring = as_channel_connect(socket_path);
  if (ring) { /* this thread's stack now: the C library reads the first one's with stdio's locks */
    stack_end_of((uint64_t)(uintptr_t)__builtin_frame_address(0));
  }
  wrap_python_domains();
  __atomic_store_n(&sampler_ready, 1, __ATOMIC_RELEASE);
}
