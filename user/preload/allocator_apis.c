/* See allocator_apis.h. Each entry point is written once per shape, over
 * four integer registers: on x86-64 (the only ABI allocscope records) every
 * one of these functions takes at most four integer arguments and returns
 * in rax, so forwarding the four registers, and rax back, calls the next
 * definition exactly as the program did, whatever its own arity (the extra
 * registers are ignored by it, a void one's rax by the program). */
#include "preload/allocator_apis.h"

#include <dlfcn.h>
#include <stdint.h>

#include "abi/preload/entry_codes.h"
#include "preload/sampler.h"

typedef uintptr_t word;
typedef word (*api_fn)(word, word, word, word);

ALWAYS_INLINE word sized(api_fn f, word a, word b, word c, word d, size_t size, uint32_t code) {
  struct thread_sampler *t = &as_tls;
  word p;
  {
    IN_CALL(t);
    p = f(a, b, c, d);
  }
  count_allocation(t, (void *)p, size, code);
  return p;
}

ALWAYS_INLINE size_t product(word n, word size) {
  size_t total;
  return __builtin_mul_overflow(n, size, &total) ? 0 : total;
}

/* Shapes: the call, with what it frees before and allocates after. */
#define CALL_SIZED(f, code) return sized(f, a, b, c, d, a, code)
#define CALL_ALIGNED(f, code) return sized(f, a, b, c, d, b, code)
#define CALL_COUNTED(f, code) return sized(f, a, b, c, d, product(a, b), code)
#define CALL_RESIZES(f, code) \
  release((void *)a);         \
  return sized(f, a, b, c, d, b, code)
#define CALL_RESIZES_COUNTED(f, code) \
  release((void *)a);                 \
  return sized(f, a, b, c, d, product(b, c), code)
#define CALL_FREES(f, code) \
  release((void *)a);       \
  return f(a, b, c, d)
#define CALL_POSIX(f, code)                                          \
  struct thread_sampler *t = &as_tls;                                \
  word err;                                                          \
  {                                                                  \
    IN_CALL(t);                                                      \
    err = f(a, b, c, d);                                             \
  }                                                                  \
  if ((int)err == 0 && a) count_allocation(t, *(void **)a, c, code); \
  return err

/* The next definition of each, set as its slots are taken, or at its first
 * call where a lazy slot was taken before its library was loaded (the call
 * would bind it there). None at all: the call would have failed to bind. */
static api_fn next_of(api_fn *next, const char *name) {
  api_fn f = __atomic_load_n(next, __ATOMIC_ACQUIRE);
  if (UNLIKELY(!f)) {
    void *canonical;
    f = (api_fn)as_definition_of(name, &canonical);
    __atomic_store_n(next, f, __ATOMIC_RELEASE);
  }
  return f;
}

#define DEFINE_API(name, index, kind, shape)               \
  static api_fn next_##name;                               \
  static word api_##name(word a, word b, word c, word d) { \
    api_fn f = next_of(&next_##name, #name);               \
    if (UNLIKELY(!f)) return 0;                            \
    CALL_##shape(f, AS_ENTRY_CODE(index, kind));           \
  }
AS_ALLOCATOR_APIS(DEFINE_API)

int as_allocator_apis(struct as_wrapped_fn *out, int room) {
  int n = 0;
#define LIST_API(name, index, kind, shape)                                                      \
  if (n < room) {                                                                               \
    out[n] = (struct as_wrapped_fn){#name, (void *)api_##name, NULL, NULL};                     \
    out[n].global = as_definition_of(#name, &out[n].canonical);                                 \
    if (out[n].global) __atomic_store_n(&next_##name, (api_fn)out[n].global, __ATOMIC_RELEASE); \
    n++;                                                                                        \
  }
  AS_ALLOCATOR_APIS(LIST_API)
  return n;
}

/* ---- A program started with the library ---------------------------------- */

#define AS_PRELOAD_APIS 96
static struct as_wrapped_fn preloaded[AS_PRELOAD_APIS];
static int preloading, preload_lock;
static unsigned long long loads_checked;

static int maps_allocator_apis(void) {
  static const char *const marks[] = {"mallocx", "je_malloc", "tc_malloc", "mi_malloc"};
  for (unsigned i = 0; i < sizeof marks / sizeof marks[0]; i++)
    if (dlsym(RTLD_DEFAULT, marks[i])) return 1;
  return 0;
}

void as_preload_allocator_apis(void) {
  __atomic_store_n(&preloading, 1, __ATOMIC_RELEASE);
  as_preload_new_modules();
}

void as_preload_new_modules(void) {
  if (!__atomic_load_n(&preloading, __ATOMIC_ACQUIRE)) return;
  unsigned long long loads = as_module_loads();
  if (loads == __atomic_load_n(&loads_checked, __ATOMIC_ACQUIRE) ||
      __atomic_exchange_n(&preload_lock, 1, __ATOMIC_ACQUIRE))
    return;
  if (maps_allocator_apis()) {
    struct as_slot_counts counts = {0};
    as_slots_take(preloaded, as_allocator_apis(preloaded, AS_PRELOAD_APIS), &counts);
  }
  __atomic_store_n(&loads_checked, loads, __ATOMIC_RELEASE);
  __atomic_store_n(&preload_lock, 0, __ATOMIC_RELEASE);
}
