/* CPython's allocator domains wrapped (python_domains.h). */
#define _GNU_SOURCE
#include "preload/python_domains.h"

#include <dlfcn.h>
#include <pthread.h>
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

/* Each domain counted from now on, unless it already is. */
static void wrap(const struct py_api *api) {
  for (int i = 0; i < 2; i++) {
    py_allocator now;
    api->get(domains[i], &now);
    if (now.malloc == ours[i].malloc) continue;
    py_next[i] = now;
    py_allocator wrapper = ours[i];
    wrapper.ctx = now.ctx;
    api->set(domains[i], &wrapper);
  }
}

/* Each domain given back what it did before, where ours is still the one
 * set; one wrapped again since (tracemalloc started) keeps ours beneath,
 * passing every call through once the sampler is detached. */
static void unwrap(const struct py_api *api) {
  for (int i = 0; i < 2; i++) {
    py_allocator now;
    api->get(domains[i], &now);
    if (now.malloc == ours[i].malloc) api->set(domains[i], &py_next[i]);
  }
}

void as_wrap_python_domains(void) {
  struct py_api api;
  if (find_api(&api)) wrap(&api);
}

/* ---- An interpreter found running ---------------------------------------- */

/* The GIL's builds only: a free-threaded one (whose Py_DECREF calls these)
 * runs its threads' allocations side by side, and its domains can be set
 * only before it starts. */
static int free_threaded(void) {
  return dlsym(RTLD_DEFAULT, "_Py_MergeZeroLocalRefcount") || dlsym(RTLD_DEFAULT, "_Py_DecRefShared");
}

static pthread_mutex_t lifecycle = PTHREAD_MUTEX_INITIALIZER;
static void in_the_interpreter(int start, uint64_t generation);
static struct as_errands python_errands = {0, in_the_interpreter};

/* With the GIL, as tracemalloc sets its hooks at run time: no thread is in
 * either domain meanwhile. */
static void in_the_interpreter(int start, uint64_t generation) {
  struct py_api api;
  if (!find_api(&api) || !api.initialized || !api.ensure || !api.release) return;
  pthread_mutex_lock(&lifecycle);
  if (as_errand_latest(&python_errands, generation) && api.initialized()) {
    int gil = api.ensure(); /* waits while Python code runs: until the next switch */
    if (as_errand_latest(&python_errands, generation)) {
      if (start)
        wrap(&api);
      else
        unwrap(&api);
    }
    api.release(gil);
  }
  pthread_mutex_unlock(&lifecycle);
}

static int runs_python(void) {
  return dlsym(RTLD_DEFAULT, "PyGILState_Ensure") && dlsym(RTLD_DEFAULT, "PyMem_SetAllocator") &&
         !free_threaded();
}

void as_python_attach_running(void) {
  if (runs_python()) as_errand_send(&python_errands, 1);
}

void as_python_detach_running(void) {
  if (runs_python()) as_errand_send(&python_errands, 0);
}
