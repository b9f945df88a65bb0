/* liballocscope-preload.so: the sampling countdown inside the traced
 * process. It interposes the allocator's entry points, forwards each call to
 * the next definition (the C library, or jemalloc, tcmalloc, mimalloc
 * preloaded after it), and runs the same per-thread exponential byte
 * countdown as allocscope's BPF programs (sampler.h; CPython's own
 * allocator is counted too: python_domains.c). Only a sampled allocation, and the
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
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "abi/preload/entry_codes.h"
#include "abi/preload/inject_abi.h"
#include "allocscope.h"
#include "preload/allocator_apis.h"
#include "preload/boot_arena.h"
#include "preload/got_slots.h"
#include "preload/inject.h"
#include "preload/python_domains.h"
#include "preload/sampler.h"

#define EXPORT __attribute__((visibility("default")))

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

/* Preloaded, the next definition after ours; injected (as_injected), where
 * the program's own modules bind the name: a library dlopen'ed into a
 * running process is last in every scope. */
static void *lookup(const char *name) {
  void *canonical;
  return as_injected ? as_definition_of(name, &canonical) : dlsym(RTLD_NEXT, name);
}

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

/* ---- The C family -------------------------------------------------------- */

EXPORT void *malloc(size_t size) {
  if (UNLIKELY(!next.malloc) && !resolve()) return as_boot_alloc(size, 16);
  struct thread_sampler *t = &as_tls;
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
  struct thread_sampler *t = &as_tls;
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
  struct thread_sampler *t = &as_tls;
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
  struct thread_sampler *t = &as_tls;
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
  struct thread_sampler *t = &as_tls;
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
    struct thread_sampler *t = &as_tls;                                                 \
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
    struct thread_sampler *t = &as_tls;                          \
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

/* ---- The entry points by name (an injection's slots) ----------------------
 * Hidden aliases: from inside the library, `&malloc` would be the
 * program's malloc (ours is not in its scope when injected). */

#if defined(__GNUC__) && !defined(__clang__) /* an alias needs not repeat the C library's attributes */
#pragma GCC diagnostic ignored "-Wmissing-attributes"
#endif
#define OWN(name) extern __typeof(name) own_##name __attribute__((alias(#name), visibility("hidden")));
// clang-format off
#define ENTRIES(X) \
  X(malloc) \
  X(calloc) \
  X(realloc) \
  X(reallocarray) \
  X(free) \
  X(posix_memalign) \
  X(aligned_alloc) \
  X(memalign) \
  X(valloc) \
  X(pvalloc) \
  X(_Znwm) \
  X(_Znam) \
  X(_ZnwmRKSt9nothrow_t) \
  X(_ZnamRKSt9nothrow_t) \
  X(_ZnwmSt11align_val_t) \
  X(_ZnamSt11align_val_t) \
  X(_ZnwmSt11align_val_tRKSt9nothrow_t) \
  X(_ZnamSt11align_val_tRKSt9nothrow_t) \
  X(_ZdlPv) \
  X(_ZdaPv) \
  X(_ZdlPvm) \
  X(_ZdaPvm) \
  X(_ZdlPvSt11align_val_t) \
  X(_ZdaPvSt11align_val_t) \
  X(_ZdlPvmSt11align_val_t) \
  X(_ZdaPvmSt11align_val_t) \
  X(_ZdlPvRKSt9nothrow_t) \
  X(_ZdaPvRKSt9nothrow_t) \
  X(_ZdlPvSt11align_val_tRKSt9nothrow_t) \
  X(_ZdaPvSt11align_val_tRKSt9nothrow_t)
// clang-format on

ENTRIES(OWN)

int as_entry_points(struct as_wrapped_fn *out, int room) {
#define ENTRY(name) {#name, (void *)own_##name, NULL, NULL},
  static const struct as_wrapped_fn all[] = {ENTRIES(ENTRY)};
  int n = (int)(sizeof all / sizeof all[0]);
  if (n > room) n = room;
  for (int i = 0; i < n; i++) {
    out[i] = all[i];
    out[i].global = as_definition_of(all[i].name, &out[i].canonical);
  }
  return n;
}

/* Whether the library is in the program's scope: preloaded, its malloc the
 * program's. Injected (dlopen'ed, local), it does nothing until allocscope
 * attaches it. (Not a look at whose malloc the scope gives: a program built
 * without PIE that takes malloc's address is given its own PLT entry.) */
int as_interposing(void) {
  void *program = dlopen(NULL, RTLD_LAZY | RTLD_NOLOAD); /* its global scope; RTLD_DEFAULT would be ours */
  int in_scope = program && dlsym(program, AS_INJECT_ATTACH) != NULL;
  if (program) dlclose(program);
  return in_scope;
}

/* ---- Process lifecycle ----------------------------------------------------- */

__attribute__((constructor(101))) static void start(void) {
  as_sampler_init();
  if (!as_interposing()) return; /* dlopen'ed: allocscope's attach starts it */
  resolve();
  as_sampler_start();
  pthread_atfork(NULL, NULL, as_sampler_after_fork);
  as_wrap_python_domains();
  as_preload_allocator_apis();
  __atomic_store_n(&as_sampler_ready, 1, __ATOMIC_RELEASE);
}

int as_resolve_next(void) { return resolve(); }
