/* The sampler's state and what runs only for a sampled allocation or the
 * free of a sampled block: the countdown's draws, and the probe sites (or,
 * without BPF, the ring's records). Its fast path is sampler.h's. */
#define _GNU_SOURCE
#include "preload/sampler.h"

#include <math.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "abi/preload/trial_record.h"
#include "allocscope.h"
#include "countdown.h"
#include "preload/allocator_apis.h"
#include "preload/inject.h"
#include "preload/ring_channel.h"

AS_SEMAPHORE(otel_memory, alloc);
AS_SEMAPHORE(otel_memory, free);
AS_SEMAPHORE(allocscope, alloc);
AS_SEMAPHORE(allocscope, free);

__thread struct thread_sampler as_tls __attribute__((tls_model("initial-exec")));
uint64_t as_sample_rate = AS_DEFAULT_RATE;
int as_sampler_ready;
uint32_t as_seed_epoch = 1;
int as_injected;
/* Threads writing into as_free_ring now: an injection's detach unmaps it
 * only when none is. */
static uint32_t ring_writers;
struct as_ring_header *as_ring, *as_free_ring;
/* A page-aligned set in pages of its own: the child of a fork empties it. */
struct as_sampled_set as_sampled __attribute__((aligned(4096)));

static uint64_t log2_table[AS_LOG2_TABLE_SIZE];

/* The frees channel (with BPF), connected at the process's first sampled
 * trial rather than at its start: a program that never samples (most short
 * ones) pays nothing for it, some 0.6 ms of its start. */
enum { FREES_NONE, FREES_OFFERED, FREES_CONNECTING, FREES_READY };
static char frees_path[sizeof(((struct sockaddr_un *)0)->sun_path)];
static int frees_state;

/* The ring for the free of a block sampled now: NULL when there is none
 * (its free traps). Other threads wait for a connect in progress (at most
 * its timeout); a signal handler inside its own thread's connect cannot:
 * *busy, and its block goes untracked. */
static struct as_ring_header *frees_ring(struct thread_sampler *self, int *busy) {
  int s = __atomic_load_n(&frees_state, __ATOMIC_ACQUIRE);
  if (s == FREES_OFFERED && __atomic_compare_exchange_n(&frees_state, &s, FREES_CONNECTING, 0,
                                                        __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
    self->connecting = 1;
    struct as_ring_header *ring = as_channel_connect(frees_path, AS_FREES_CHANNEL_TIMEOUT_MS);
    __atomic_store_n(&as_free_ring, ring, __ATOMIC_RELEASE);
    self->connecting = 0;
    __atomic_store_n(&frees_state, ring ? FREES_READY : FREES_NONE, __ATOMIC_RELEASE);
    return ring;
  }
  if (s == FREES_CONNECTING && self->connecting) {
    *busy = 1;
    return NULL;
  }
  while (s == FREES_CONNECTING) {
    sched_yield();
    s = __atomic_load_n(&frees_state, __ATOMIC_ACQUIRE);
  }
  return s == FREES_READY ? __atomic_load_n(&as_free_ring, __ATOMIC_ACQUIRE) : NULL;
}

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
  return as_countdown_from(norm, msb, log2_table[i], log2_table[i + 1], as_sample_rate);
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
  t->seeded = __atomic_load_n(&as_seed_epoch, __ATOMIC_RELAXED);
}

int as_countdown_expired(uint64_t size, uint64_t *offset) {
  struct thread_sampler *t = &as_tls;
  *offset = 0;
  if (as_sample_rate <= 1) return 1;
  if (t->seeded != __atomic_load_n(&as_seed_epoch, __ATOMIC_RELAXED)) {
    seed(t);
    if (t->countdown >= size) {
      t->countdown -= size;
      return 0;
    }
  }
  *offset = t->countdown; /* memoryless: a fresh draw for the bytes after */
  t->countdown = draw_countdown(t);
  return 1;
}

static uint64_t stack_end_of(uint64_t sp) {
  struct thread_sampler *t = &as_tls;
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
__attribute__((noinline)) void as_fire_alloc(void *p, uint64_t size, uint64_t offset, uint32_t code) {
  if (UNLIKELY(as_injected))
    as_inject_take_new_modules();
  else
    as_preload_new_modules();
  uint64_t weight = size;
  if (as_sample_rate > 1)
    weight = (uint64_t)llround((double)size / -expm1(-(double)size / (double)as_sample_rate));
  int busy = 0;
  struct as_ring_header *frees = as_ring ? NULL : frees_ring(&as_tls, &busy);
  if (busy || !as_set_insert(&as_sampled, (uint64_t)(uintptr_t)p)) code |= AS_USDT_UNTRACKED;
  uint64_t rate = as_sample_rate;
  if (as_ring) {
    struct thread_sampler *self = &as_tls;
    if (self->writing) { /* a signal handler's trial, inside this thread's own write */
      as_ring_count_lost(as_ring, 0);
      return;
    }
    self->writing = 1;
    uint32_t pid = as_channel_pid(as_ring);
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
    as_trial_write_alloc(as_ring, pid, &t);
    self->writing = 0;
    return;
  }
  if (frees) code |= AS_USDT_FREE_IN_RING;
  AS_FIRE_ALLOC(p, size, weight, code, offset, rate);
}

__attribute__((noinline)) void as_fire_free(void *p) {
  struct thread_sampler *self = &as_tls;
  __atomic_add_fetch(&ring_writers, 1, __ATOMIC_SEQ_CST);
  struct as_ring_header *ring = __atomic_load_n(&as_free_ring, __ATOMIC_SEQ_CST);
  int written = 0;
  if (ring && !self->writing) {
    self->writing = 1;
    uint32_t pid = as_channel_pid(ring);
    written = as_trial_write_free(ring, pid, thread_id(self, pid), (uint64_t)(uintptr_t)p);
    self->writing = 0;
  }
  __atomic_sub_fetch(&ring_writers, 1, __ATOMIC_SEQ_CST);
  if (!ring) {
    AS_FIRE_FREE(p);
    return;
  }
  if (written) return;
  /* Not written (a signal handler's, inside this thread's own write; a full
   * ring; its lock held long). With BPF the probe takes it, marked: the
   * kernel holds no entry for the block, and passes the free on. Without,
   * it is lost (a failed write counted itself). */
  if (!as_ring)
    AS_FIRE_FREE((uintptr_t)p | AS_USDT_FREE_FORWARD);
  else if (self->writing)
    as_ring_count_lost(ring, 0);
}

struct as_ring_header *as_sampler_ring_begin(void) {
  __atomic_add_fetch(&ring_writers, 1, __ATOMIC_SEQ_CST);
  if (as_ring) return as_ring;
  int busy = 0;
  return frees_ring(&as_tls, &busy);
}

void as_sampler_ring_done(void) { __atomic_sub_fetch(&ring_writers, 1, __ATOMIC_SEQ_CST); }

int as_sampler_recorded(void) {
  return as_ring || __atomic_load_n(&as_free_ring, __ATOMIC_ACQUIRE) ||
         __atomic_load_n(&frees_state, __ATOMIC_ACQUIRE) != FREES_NONE;
}

uint32_t as_sampler_tid(uint32_t pid) { return thread_id(&as_tls, pid); }

/* A forked child is a new process to the tracer: its own random stream, and
 * none of the parent's sampled blocks (the tracer keys them by process). */
void as_sampler_after_fork(void) {
  as_tls.seeded = 0;
  madvise(&as_sampled, sizeof(as_sampled), MADV_DONTNEED);
  if (frees_state == FREES_CONNECTING) { /* another thread's connect, which did not come along */
    as_tls.connecting = 0;
    frees_state = FREES_OFFERED;
  }
  if (as_free_ring) { /* a writer of its parent's ring: allocscope keeps the ring while it lives */
    uint32_t pid = as_channel_pid(as_free_ring); /* a hello first: its own, in its PID namespace */
    as_trial_write(as_free_ring, AS_TRIAL_FORK, pid, pid, 0);
  }
}

static uint64_t rate_from_environment(void) {
  const char *s = getenv("ALLOCSCOPE_RATE");
  if (!s || !*s) return AS_DEFAULT_RATE;
  char *end;
  unsigned long long v = strtoull(s, &end, 10);
  if (*end || v == 0 || v > AS_MAX_RATE) return AS_DEFAULT_RATE;
  return v;
}

void as_sampler_init(void) {
  for (int i = 0; i < AS_LOG2_TABLE_SIZE; i++)
    log2_table[i] = (uint64_t)llround(log2(1.0 + (double)i / (1 << AS_LOG2_TABLE_BITS)) * 4294967296.0);
}

void as_sampler_start(void) {
  as_sample_rate = rate_from_environment();
  const char *socket_path = getenv(AS_CHANNEL_ENV), *frees_socket = getenv(AS_FREES_CHANNEL_ENV);
  if (socket_path && *socket_path) {
    as_free_ring = as_channel_connect(socket_path, AS_CHANNEL_TIMEOUT_MS);
    if (as_free_ring && !(as_free_ring->flags & AS_RING_FREES_ONLY)) as_ring = as_free_ring;
  } else if (frees_socket && *frees_socket && strlen(frees_socket) < sizeof frees_path) {
    strcpy(frees_path, frees_socket); /* the program may change its environment */
    frees_state = FREES_OFFERED;
  }
  if (as_ring) { /* this thread's stack now: the C library reads the first one's with stdio's locks */
    stack_end_of((uint64_t)(uintptr_t)__builtin_frame_address(0));
  }
}

int as_sampler_reader_alive(void) {
  struct as_ring_header *ring = __atomic_load_n(&as_free_ring, __ATOMIC_ACQUIRE);
  return ring && as_ring_reader_alive(ring, as_ring_now_ns());
}

void as_sampler_attach(uint64_t rate, struct as_ring_header *ring) {
  as_sampler_detach(); /* the ring of an allocscope that died */
  as_sample_rate = rate ? rate : AS_DEFAULT_RATE;
  madvise(&as_sampled, sizeof(as_sampled), MADV_DONTNEED); /* a former attach's blocks */
  __atomic_store_n(&as_free_ring, ring, __ATOMIC_SEQ_CST);
  __atomic_store_n(&frees_state, ring ? FREES_READY : FREES_NONE, __ATOMIC_RELEASE);
  __atomic_add_fetch(&as_seed_epoch, 1, __ATOMIC_RELEASE);
}

uint32_t as_sampler_seed(int fd, uint32_t count) {
  if (count == 0) return 0;
  size_t bytes = (size_t)count * sizeof(uint64_t);
  const uint64_t *addrs = mmap(NULL, bytes, PROT_READ, MAP_SHARED, fd, 0);
  if (addrs == MAP_FAILED) return 0;
  uint32_t taken = 0;
  for (uint32_t i = 0; i < count; i++) taken += addrs[i] && as_set_insert(&as_sampled, addrs[i]);
  munmap((void *)addrs, bytes);
  return taken;
}

/* A preempted writer holds the ring for microseconds; one stopped (a
 * debugger) may hold it longer: then the ring stays mapped. */
#define AS_RING_RETIRE_WAIT_MS 100

void as_sampler_detach(void) {
  struct as_ring_header *ring = __atomic_exchange_n(&as_free_ring, NULL, __ATOMIC_SEQ_CST);
  __atomic_store_n(&frees_state, FREES_NONE, __ATOMIC_RELEASE);
  if (!ring) return;
  for (int i = 0; i < AS_RING_RETIRE_WAIT_MS * 10; i++) {
    if (__atomic_load_n(&ring_writers, __ATOMIC_SEQ_CST) == 0) {
      munmap(ring, (size_t)(AS_RING_HEADER_BYTES + ring->size));
      return;
    }
    struct timespec pause = {0, 100000};
    nanosleep(&pause, NULL);
  }
}
