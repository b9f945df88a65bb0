/* The library loaded into a running process by allocscope (user/inject/):
 * dormant from its dlopen until allocscope calls allocscope_inject_attach
 * (inject_abi.h), which points the program's allocator slots at it
 * (got_slots.h) and starts the sampler; allocscope_inject_detach gives the
 * slots back and leaves it dormant again. Hidden: what preload.c and
 * sampler.c call. */
#ifndef ALLOCSCOPE_INJECT_H
#define ALLOCSCOPE_INJECT_H

#include "preload/got_slots.h"

#define AS_HIDDEN_FN __attribute__((visibility("hidden")))

/* preload.c: the entry points by name, with where the program binds each;
 * whether the library is the program's allocator (preloaded); the next
 * definitions looked up (0 while dlsym runs). */
int as_entry_points(struct as_wrapped_fn *out, int room) AS_HIDDEN_FN;
int as_interposing(void) AS_HIDDEN_FN;
int as_resolve_next(void) AS_HIDDEN_FN;

/* At a sampled trial of an injected process: the slots of modules loaded
 * since the attach are taken too. */
void as_inject_take_new_modules(void) AS_HIDDEN_FN __attribute__((cold));

#endif
