/* The allocator's slots in the program's modules (their GOT: the
 * addresses their calls of malloc, free, operator new, ... go through),
 * pointed at the library's entry points while allocscope has injected it
 * into a running process, and given back after. A slot is taken only when
 * it holds the definition the program's modules bind to (or the lazy
 * binder's stub, which would bind there), so that every call the library
 * forwards ends where it would have. Each taken slot is kept (a table of
 * AS_MAX_SLOTS) and put back only while its module is loaded and only if
 * it still holds the library's address. No allocation, no stdio. */
#ifndef ALLOCSCOPE_GOT_SLOTS_H
#define ALLOCSCOPE_GOT_SLOTS_H

#include <stdint.h>

#define AS_MAX_SLOTS 8192
#define AS_MAX_MODULES 2048

struct as_wrapped_fn {
  const char *name;
  void *ours;      /* the library's entry point */
  void *global;    /* the definition the program's calls bind the name to; NULL: none (yet) */
  void *canonical; /* its address as the program takes it: global, or a non-PIE program's PLT entry */
};

struct as_slot_counts {
  uint32_t slots, modules, elsewhere, full;
};

/* The definition the program's calls of `name` bind to, and (*canonical)
 * the address the program's modules take of it: dlsym(RTLD_DEFAULT) gives
 * the latter, which in a program built without PIE that takes the
 * function's address is that program's PLT entry, a jump through its own
 * slot (then the definition is the first module after the program's that
 * has one). NULL when none is loaded. */
void *as_definition_of(const char *name, void **canonical) __attribute__((visibility("hidden")));

/* Takes the slots of the modules not yet visited; `counts` adds up what was
 * done. The library's own module and the dynamic loader's are left alone. */
void as_slots_take(const struct as_wrapped_fn *fns, int n, struct as_slot_counts *counts)
    __attribute__((visibility("hidden")));
/* Whether modules were loaded since the last visit (cheap enough for a
 * sampled trial: the loader's list is not walked). */
int as_slots_modules_added(void) __attribute__((visibility("hidden")));
/* The loader's count of modules loaded so far (dlopen'ed ones included). */
unsigned long long as_module_loads(void) __attribute__((visibility("hidden")));
/* The slots taken now. */
uint32_t as_slots_taken(void) __attribute__((visibility("hidden")));
/* Puts every taken slot back; the count given back. */
uint32_t as_slots_give_back(void) __attribute__((visibility("hidden")));

#endif
