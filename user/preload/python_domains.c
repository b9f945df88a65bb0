/* CPython's allocator domains wrapped (python_domains.h). */
#define _GNU_SOURCE
#include "preload/python_domains.h"

#include <dlfcn.h>
#include <stddef.h>
#include <stdint.h>

#include "abi/preload/entry_codes.h"
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

struct py_domain {
  py_allocator next; /* what the domain did before */
  uint32_t malloc_code, calloc_code, realloc_code;
};
static struct py_domain py_domains[2] = {
    {.malloc_code = AS_CODE_PYMEM_MALLOC,
     .calloc_code = AS_CODE_PYMEM_CALLOC,
     .realloc_code = AS_CODE_PYMEM_REALLOC},
    {.malloc_code = AS_CODE_PYOBJ_MALLOC,
     .calloc_code = AS_CODE_PYOBJ_CALLOC,
     .realloc_code = AS_CODE_PYOBJ_REALLOC},
};

static void *py_malloc(void *ctx, size_t size) {
  struct py_domain *d = ctx;
  struct thread_sampler *t = &as_tls;
  void *p;
  {
    IN_CALL(t);
    p = d->next.malloc(d->next.ctx, size);
  }
  count_allocation(t, p, size, d->malloc_code);
  return p;
}

static void *py_calloc(void *ctx, size_t n, size_t size) {
  struct py_domain *d = ctx;
  struct thread_sampler *t = &as_tls;
  void *p;
  {
    IN_CALL(t);
    p = d->next.calloc(d->next.ctx, n, size);
  }
  size_t total;
  if (!__builtin_mul_overflow(n, size, &total)) count_allocation(t, p, total, d->calloc_code);
  return p;
}

static void *py_realloc(void *ctx, void *old, size_t size) {
  struct py_domain *d = ctx;
  struct thread_sampler *t = &as_tls;
  release(old);
  void *p;
  {
    IN_CALL(t);
    p = d->next.realloc(d->next.ctx, old, size);
  }
  count_allocation(t, p, size, d->realloc_code);
  return p;
}

static void py_free(void *ctx, void *p) {
  struct py_domain *d = ctx;
  release(p);
  d->next.free(d->next.ctx, p);
}

void as_wrap_python_domains(void) {
  py_allocator_fn get = (py_allocator_fn)dlsym(RTLD_DEFAULT, "PyMem_GetAllocator");
  py_allocator_fn set = (py_allocator_fn)dlsym(RTLD_DEFAULT, "PyMem_SetAllocator");
  if (!get || !set) return;
  const int domains[2] = {PY_DOMAIN_MEM, PY_DOMAIN_OBJ};
  for (int i = 0; i < 2; i++) {
    get(domains[i], &py_domains[i].next);
    py_allocator ours = {&py_domains[i], py_malloc, py_calloc, py_realloc, py_free};
    set(domains[i], &ours);
  }
}
