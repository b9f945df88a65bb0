/* CPython's allocator domains wrapped (python_domains.h). */
#define _GNU_SOURCE
#include "preload/python_domains.h"

#include <dlfcn.h>
#include <stddef.h>
#include <stdint.h>

#include "abi/preload/entry_codes.h"
#include "preload/errand.h"
#include "preload/sampler.h"

/* Python's allocator interface (Include/cpython/pymem.h, stable since 3.5). */
typedef struct {
  void *ctx;
  void *(*malloc)(void *ctx, size_t size);
  void *(*calloc)(void *ctx, size_t nelem, size_t elsize);
  void *(*realloc)(void *ctx, void *ptr, size_t new_size);
  void (*free)(void *ctx, void *ptr);
} py_allocator;
enum { PY_DOMAIN_MEM = 1, PY_DOMAIN_OBJ = 2 };
typedef void (*py_allocator_fn)(int domain, py_allocator *allocator);

/* What each domain did before (mem, obj). Ours keep its ctx, and ignore
 * whose it is: a thread that reads the domain while it is being set (a
 * subinterpreter with a GIL of its own) finds the one ctx either way. */
static py_allocator py_next[2];

ALWAYS_INLINE void *counted_malloc(const py_allocator *next, void *ctx, size_t size, uint32_t code) {
  struct thread_sampler *t = &as_tls;
  void *p;
  {
    IN_CALL(t);
    p = next->malloc(ctx, size);
  }
  count_allocation(t, p, size, code);
  return p;
}

ALWAYS_INLINE void *counted_calloc(const py_allocator *next, void *ctx, size_t n, size_t size,
                                   uint32_t code) {
  struct thread_sampler *t = &as_tls;
  void *p;
  {
    IN_CALL(t);
    p = next->calloc(ctx, n, size);
  }
  size_t total;
  if (!__builtin_mul_overflow(n, size, &total)) count_allocation(t, p, total, code);
  return p;
}

ALWAYS_INLINE void *counted_realloc(const py_allocator *next, void *ctx, void *old, size_t size,
                                    uint32_t code) {
  struct thread_sampler *t = &as_tls;
  release(old);
  void *p;
  {
    IN_CALL(t);
    p = next->realloc(ctx, old, size);
  }
  count_allocation(t, p, size, code);
  return p;
}

ALWAYS_INLINE void counted_free(const py_allocator *next, void *ctx, void *p) {
  release(p);
  next->free(ctx, p);
}

/* One set of four per domain, each with its domain's entry codes. */
#define DOMAIN_FUNCTIONS(d, i, PREFIX)                                               \
  static void *d##_malloc(void *ctx, size_t size) {                                  \
    return counted_malloc(&py_next[i], ctx, size, AS_CODE_##PREFIX##_MALLOC);        \
  }                                                                                  \
  static void *d##_calloc(void *ctx, size_t n, size_t size) {                        \
    return counted_calloc(&py_next[i], ctx, n, size, AS_CODE_##PREFIX##_CALLOC);     \
  }                                                                                  \
  static void *d##_realloc(void *ctx, void *old, size_t size) {                      \
    return counted_realloc(&py_next[i], ctx, old, size, AS_CODE_##PREFIX##_REALLOC); \
  }                                                                                  \
  static void d##_free(void *ctx, void *p) { counted_free(&py_next[i], ctx, p); }
DOMAIN_FUNCTIONS(mem, 0, PYMEM)
DOMAIN_FUNCTIONS(obj, 1, PYOBJ)

static const py_allocator ours[2] = {
    {NULL, mem_malloc, mem_calloc, mem_realloc, mem_free},
    {NULL, obj_malloc, obj_calloc, obj_realloc, obj_free},
};
static const int domains[2] = {PY_DOMAIN_MEM, PY_DOMAIN_OBJ};

struct py_api {
  py_allocator_fn get, set;
  int (*initialized)(void);
  int (*ensure)(void); /* PyGILState_Ensure: the GIL, and a thread state for this thread */
  void (*release)(int);
};

static int find_api(struct py_api *api) {
  api->get = (py_allocator_fn)dlsym(RTLD_DEFAULT, "PyMem_GetAllocator");
  api->set = (py_allocator_fn)dlsym(RTLD_DEFAULT, "PyMem_SetAllocator");
  api->initialized = (int (*)(void))dlsym(RTLD_DEFAULT, "Py_IsInitialized");
  api->ensure = (int (*)(void))dlsym(RTLD_DEFAULT, "PyGILState_Ensure");
  api->release = (void (*)(int))dlsym(RTLD_DEFAULT, "PyGILState_Release");
  return api->get && api->set;
}

/* Whether ours is in the domain's chain: set by us, and not taken out by
 * another since (it may lie beneath a wrapper set later: tracemalloc's). */
static int installed[2];

static int same_allocator(const py_allocator *a, const py_allocator *b) {
  return a->malloc == b->malloc && a->ctx == b->ctx;
}

/* Each domain counted from now on, unless it already is: ours on top, or
 * beneath a wrapper set since, which calls it (wrapping that one would
 * make ours call itself with that wrapper's ctx). */
static void wrap(const struct py_api *api) {
  for (int i = 0; i < 2; i++) {
    py_allocator now;
    api->get(domains[i], &now);
    if (now.malloc == ours[i].malloc) continue;
    if (installed[i] && !same_allocator(&now, &py_next[i])) continue;
    py_next[i] = now;
    py_allocator wrapper = ours[i];
    wrapper.ctx = now.ctx;
    api->set(domains[i], &wrapper);
    installed[i] = 1;
  }
}

/* Each domain given back what it did before, where ours is still the one
 * set; one wrapped again since (tracemalloc started) keeps ours beneath,
 * passing every call through once the sampler is detached. */
static void unwrap(const struct py_api *api) {
  for (int i = 0; i < 2; i++) {
    py_allocator now;
    api->get(domains[i], &now);
    if (now.malloc != ours[i].malloc) continue;
    api->set(domains[i], &py_next[i]);
    installed[i] = 0;
  }
}

void as_wrap_python_domains(void) {
  struct py_api api;
  if (find_api(&api)) wrap(&api);
}

/* ---- An interpreter found running ---------------------------------------- */

typedef int (*py_query_fn)(void);

static py_query_fn py_query(const char *name) { return (py_query_fn)dlsym(RTLD_DEFAULT, name); }

/* CPython 3.7 and later (its GIL made at its start; PyThread_tss_alloc is
 * 3.7's), of the GIL's builds: a free-threaded one (whose Py_DECREF calls
 * these) runs its threads' allocations side by side, and its domains can
 * be set only before it starts. */
static int runs_python(void) {
  return py_query("PyGILState_Ensure") && py_query("PyMem_SetAllocator") && py_query("PyThread_tss_alloc") &&
         !py_query("_Py_MergeZeroLocalRefcount") && !py_query("_Py_DecRefShared");
}

/* Whether a thread may take the GIL now: the interpreter made, not being
 * ended (a thread that asks then is ended, or waits for ever), its GIL made
 * (PyEval_ThreadsInitialized, until 3.12). */
static int interpreter_open(const struct py_api *api) {
  py_query_fn finalizing = py_query("Py_IsFinalizing"); /* 3.13 on */
  if (!finalizing) finalizing = py_query("_Py_IsFinalizing");
  py_query_fn threads = py_query("PyEval_ThreadsInitialized");
  return api->initialized() && finalizing && !finalizing() && (!threads || threads());
}

static int wish;         /* the latest attach's or detach's: 1 wrapped, 0 given back */
static uint64_t wished;  /* raised at every wish */
static int worker_alive; /* one thread does them all, in turn */

/* With the GIL, as tracemalloc sets its hooks at run time: no thread is in
 * either domain meanwhile. The latest wish is done; the worker ends when
 * none came since, else goes on (unless a new worker took over). */
static void *interpreter_worker(void *unused) {
  (void)unused;
  struct py_api api;
  int usable = find_api(&api) && api.initialized && api.ensure && api.release;
  for (;;) {
    uint64_t seen = __atomic_load_n(&wished, __ATOMIC_ACQUIRE);
    if (usable && interpreter_open(&api)) {
      int gil = api.ensure(); /* waits while Python code runs: until its next switch */
      if (__atomic_load_n(&wish, __ATOMIC_ACQUIRE))
        wrap(&api);
      else
        unwrap(&api);
      api.release(gil);
    }
    __atomic_store_n(&worker_alive, 0, __ATOMIC_RELEASE);
    if (__atomic_load_n(&wished, __ATOMIC_ACQUIRE) == seen ||
        __atomic_exchange_n(&worker_alive, 1, __ATOMIC_ACQ_REL))
      return NULL;
  }
}

static void wish_for(int wrapped) {
  __atomic_store_n(&wish, wrapped, __ATOMIC_RELEASE);
  __atomic_add_fetch(&wished, 1, __ATOMIC_ACQ_REL);
  if (__atomic_exchange_n(&worker_alive, 1, __ATOMIC_ACQ_REL)) return; /* the worker there does it */
  if (!as_start_thread(interpreter_worker, NULL)) __atomic_store_n(&worker_alive, 0, __ATOMIC_RELEASE);
}

void as_python_attach_running(void) {
  if (runs_python()) wish_for(1);
}

void as_python_detach_running(void) {
  if (runs_python()) wish_for(0);
}
