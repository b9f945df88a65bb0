/* See inject.h and inject_abi.h. */
#define _GNU_SOURCE
#include "preload/inject.h"

#include <pthread.h>
#include <unistd.h>

#include "preload/inject_abi.h"
#include "preload/ring_channel.h"
#include "preload/sampler.h"

#define EXPORT __attribute__((visibility("default")))
#define AS_MAX_ENTRIES 64

static struct as_wrapped_fn entries[AS_MAX_ENTRIES];
static int entry_count;
static int take_lock;
static int attached; /* as_injected stays: the next definitions stay the program's */

static void take_slots(struct as_slot_counts *counts) {
  entry_count = as_entry_points(entries, AS_MAX_ENTRIES);
  as_slots_take(entries, entry_count, counts);
}

void as_inject_take_new_modules(void) {
  if (!as_slots_modules_added() || __atomic_exchange_n(&take_lock, 1, __ATOMIC_ACQUIRE)) return;
  struct as_slot_counts counts = {0};
  if (__atomic_load_n(&attached, __ATOMIC_ACQUIRE)) take_slots(&counts);
  __atomic_store_n(&take_lock, 0, __ATOMIC_RELEASE);
}

EXPORT void allocscope_inject_attach(struct as_inject_args *a) {
  static int fork_handler;
  struct as_ring_header *ring = NULL;
  if (a->ring_fd >= 0) {
    ring = as_channel_map(a->ring_fd);
    close(a->ring_fd);
  }
  a->slots = a->modules = a->slots_elsewhere = a->slots_full = 0;
  if (a->abi != AS_INJECT_ABI) {
    a->status = AS_INJECT_BAD_ABI;
    return;
  }
  if (as_interposing()) {
    a->status = AS_INJECT_PRELOADED;
    return;
  }
  __atomic_store_n(&as_injected, 1, __ATOMIC_RELEASE);
  if (!as_resolve_next()) {
    a->status = AS_INJECT_NO_MALLOC;
    return;
  }
  if (!fork_handler) fork_handler = pthread_atfork(NULL, NULL, as_sampler_after_fork) == 0;
  as_sampler_attach(a->rate, ring);
  __atomic_store_n(&as_sampler_ready, 1, __ATOMIC_RELEASE);
  struct as_slot_counts counts = {0};
  while (__atomic_exchange_n(&take_lock, 1, __ATOMIC_ACQUIRE)) sched_yield();
  take_slots(&counts);
  __atomic_store_n(&attached, 1, __ATOMIC_RELEASE);
  __atomic_store_n(&take_lock, 0, __ATOMIC_RELEASE);
  a->slots = counts.slots;
  a->modules = counts.modules;
  a->slots_elsewhere = counts.elsewhere;
  a->slots_full = counts.full;
  a->status = AS_INJECT_OK;
}

EXPORT void allocscope_inject_detach(struct as_inject_args *a) {
  while (__atomic_exchange_n(&take_lock, 1, __ATOMIC_ACQUIRE)) sched_yield();
  a->slots = attached ? as_slots_give_back() : 0;
  __atomic_store_n(&attached, 0, __ATOMIC_RELEASE);
  __atomic_store_n(&take_lock, 0, __ATOMIC_RELEASE);
  as_sampler_detach();
  a->status = AS_INJECT_OK;
}
