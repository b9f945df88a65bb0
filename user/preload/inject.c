/* See inject.h and inject_abi.h. */
#define _GNU_SOURCE
#include "preload/inject.h"

#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <unistd.h>

#include "abi/preload/inject_abi.h"
#include "preload/allocator_apis.h"
#include "preload/jvm_agent.h"
#include "preload/probe_sites.h"
#include "preload/python_domains.h"
#include "preload/ring_channel.h"
#include "preload/sampler.h"

#define EXPORT __attribute__((visibility("default")))
#define AS_MAX_ENTRIES 128

static struct as_wrapped_fn entries[AS_MAX_ENTRIES];
static int entry_count;
static int take_lock;
static int attached; /* as_injected stays: the next definitions stay the program's */
static uint32_t owner_pid;
static uint64_t owner_start;
AS_SEMAPHORE(allocscope, entered);

static void take_slots(struct as_slot_counts *counts) {
  entry_count = as_entry_points(entries, AS_MAX_ENTRIES);
  entry_count += as_allocator_apis(entries + entry_count, AS_MAX_ENTRIES - entry_count);
  as_slots_take(entries, entry_count, counts);
}

void as_inject_take_new_modules(void) {
  if (!as_slots_modules_added() || __atomic_exchange_n(&take_lock, 1, __ATOMIC_ACQUIRE)) return;
  struct as_slot_counts counts = {0};
  if (__atomic_load_n(&attached, __ATOMIC_ACQUIRE)) take_slots(&counts);
  __atomic_store_n(&take_lock, 0, __ATOMIC_RELEASE);
}

/* Why the library cannot attach now; AS_INJECT_OK when it can. */
static uint32_t refusal(const struct as_inject_args *a) {
  if (a->abi != AS_INJECT_ABI) return AS_INJECT_BAD_ABI;
  if (as_interposing()) return AS_INJECT_PRELOADED;
  if (__atomic_load_n(&attached, __ATOMIC_ACQUIRE) && as_sampler_reader_alive() &&
      !(a->flags & AS_INJECT_TAKE_OVER))
    return AS_INJECT_BUSY;
  __atomic_store_n(&as_injected, 1, __ATOMIC_RELEASE);
  if (!as_resolve_next()) return AS_INJECT_NO_MALLOC;
  return AS_INJECT_OK;
}

/* The thread allocscope borrowed finds errno as it left it, even should
 * allocscope die before it puts it back. */
static void attach(struct as_inject_args *a);
static void detach(struct as_inject_args *a);

EXPORT void allocscope_inject_attach(struct as_inject_args *a) {
  int saved = errno;
  attach(a);
  errno = saved;
}

EXPORT void allocscope_inject_detach(struct as_inject_args *a) {
  int saved = errno;
  detach(a);
  errno = saved;
}

static void attach(struct as_inject_args *a) {
  static int fork_handler;
  a->slots = a->modules = a->slots_elsewhere = a->slots_full = 0;
  a->status = refusal(a);
  if (a->status == AS_INJECT_BUSY) {
    a->owner_pid = owner_pid;
    a->owner_start = owner_start;
  }
  /* The seed's fields only where the block has them (an allocscope of
   * another ABI hands a shorter one). */
  int seed_fd = a->abi == AS_INJECT_ABI ? a->seed_fd : -1;
  if (a->abi == AS_INJECT_ABI) a->seeded = 0;
  struct as_ring_header *ring = NULL;
  if (a->ring_fd >= 0) {
    if (a->status == AS_INJECT_OK) ring = as_channel_map(a->ring_fd);
    close(a->ring_fd);
  }
  if (a->status != AS_INJECT_OK) {
    if (seed_fd >= 0) close(seed_fd);
    return;
  }
  if (!fork_handler) fork_handler = pthread_atfork(NULL, NULL, as_sampler_after_fork) == 0;
  owner_pid = a->owner_pid;
  owner_start = a->owner_start;
  as_sampler_attach(a->rate, ring);
  if (seed_fd >= 0) { /* before the slots: no free of theirs passes unseen */
    a->seeded = as_sampler_seed(seed_fd, a->seed_count);
    close(seed_fd);
  }
  /* While the slots are being taken (the loader's lookups: milliseconds
   * under load), the calls that already pass through them are the probes'
   * to count, not the sampler's too: a short process entered near its end
   * had its last sites counted twice. */
  __atomic_store_n(&as_sampler_ready, 0, __ATOMIC_RELEASE);
  struct as_slot_counts counts = {0};
  while (__atomic_exchange_n(&take_lock, 1, __ATOMIC_ACQUIRE)) sched_yield();
  take_slots(&counts);
  __atomic_store_n(&attached, 1, __ATOMIC_RELEASE);
  __atomic_store_n(&take_lock, 0, __ATOMIC_RELEASE);
  /* Its allocscope's allocator probes sample this process no more from
   * here (bpf/inprocess.bpf.h, usdt_entered), and its sampler counts from
   * here: the process is counted by one of the two at every moment but
   * during this probe's trap. */
  __atomic_store_n(&as_sampler_ready, 1, __ATOMIC_RELEASE);
  STAP_PROBE1(allocscope, entered, owner_pid);
  a->slots = as_slots_taken(); /* with those an allocscope that died had taken */
  a->modules = counts.modules;
  a->slots_elsewhere = counts.elsewhere;
  a->slots_full = counts.full;
  if (ring && !(a->flags & AS_INJECT_NO_JAVA)) as_jvm_attach_running(); /* its samples go through the ring */
  as_python_attach_running();
}

static void detach(struct as_inject_args *a) {
  while (__atomic_exchange_n(&take_lock, 1, __ATOMIC_ACQUIRE)) sched_yield();
  a->slots = attached ? as_slots_give_back() : 0;
  __atomic_store_n(&attached, 0, __ATOMIC_RELEASE);
  __atomic_store_n(&take_lock, 0, __ATOMIC_RELEASE);
  as_jvm_detach_running();
  as_python_detach_running();
  as_sampler_detach();
  a->status = AS_INJECT_OK;
}
