/* A ring of records in memory shared by the processes of a traced program
 * (written by the preload library at sampled trials, in the process and its
 * forked children) and read by allocscope: the way in for a recording
 * without BPF. Many writers, one reader; records of any length up to half
 * the ring, 8-byte aligned, each with its writer's process id.
 *
 * A full ring makes a writer wait for the reader to make room, while the
 * reader is known to read (its heartbeat is fresh) and for at most
 * AS_RING_MAX_WAIT_NS a record: an exact recording loses nothing, and a
 * reader that died or hung costs a writer nothing more than the record.
 * A writer waits only briefly for the lock: it is held for a few
 * instructions, so a writer spins a bounded number of times for it (an
 * exact recording of many threads must not lose records to each other),
 * and a record that still finds it taken, or the ring full, is counted
 * lost. The lock holds its holder's process id: a lock whose holder died
 * is broken by the reader (as_ring_break_dead_lock). A reserved
 * record is busy until committed; the reader stops at a busy record, and
 * skips it only once its writer is known to be gone (as_ring_skip_busy).
 * A record that would cross the ring's end is preceded by a padding record
 * filling the rest. Positions are byte counts that only grow (64 bits: no
 * wrap in practice). Plain C with GCC's __atomic builtins, compiled into the
 * preload library and the unit tests. */
#ifndef ALLOCSCOPE_SHARED_RING_H
#define ALLOCSCOPE_SHARED_RING_H

#include <errno.h>
#include <sched.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define AS_RING_BUSY (1u << 31)    /* reserved, not committed yet */
#define AS_RING_PADDING (1u << 30) /* not a record: skipped by the reader */
#define AS_RING_LEN_MASK (AS_RING_PADDING - 1)
#define AS_RING_CORRUPT UINT32_MAX            /* as_ring_peek's *busy_tgid: a record that leaves the ring */
#define AS_RING_HEADER_BYTES 4096             /* the data follow a page of header */
#define AS_RING_MAX_WAIT_NS (1000 * 1000000L) /* for room in a full ring, a record */
#define AS_RING_READER_STALE_NS (2000 * 1000000L) /* a reader silent this long is gone: no waiting */
#define AS_RING_SPINS 64                          /* tries for a taken lock, then it yields... */
/* The header's flags. FREES_ONLY: the kernel's probes take the sampled
 * trials (a recording with BPF); the ring takes only the frees of sampled
 * blocks, each a trap saved. */
#define AS_RING_FREES_ONLY 1u
#define AS_RING_WAIT_NS \
  (20 * 1000000L) /* ...for this long (its holder preempted?) before the record is lost */

/* The ring's header, at the start of the shared mapping. `size` (a power
 * of two, the data's bytes) is set by the reader before any writer maps it. */
struct as_ring_header {
  uint64_t size;
  uint64_t producer;         /* next byte to reserve */
  uint64_t consumer;         /* next byte to read: written by the reader only */
  uint32_t lock;             /* writers' reservation lock: 0 free, else its holder's process id */
  uint32_t flags;            /* AS_RING_FREES_ONLY: set by the reader before it is handed out */
  uint64_t lost, lost_bytes; /* records no room or a taken lock refused, and their payload bytes */
  uint64_t reader_beat_ns;   /* CLOCK_MONOTONIC when the reader last read: 0 never */
  uint64_t number;           /* the reader's name for the ring, set before it is handed out */
};

struct as_ring_record {
  uint32_t len_flags; /* payload bytes, AS_RING_BUSY, AS_RING_PADDING */
  uint32_t tgid;      /* the writer's process */
};

static inline uint8_t *as_ring_data(struct as_ring_header *h) { return (uint8_t *)h + AS_RING_HEADER_BYTES; }

static inline uint64_t as_ring_span(uint32_t len) {
  return sizeof(struct as_ring_record) + (((uint64_t)len + 7) & ~7ULL);
}

static inline void as_ring_count_lost(struct as_ring_header *h, uint32_t len) {
  __atomic_fetch_add(&h->lost, 1, __ATOMIC_RELAXED);
  __atomic_fetch_add(&h->lost_bytes, len, __ATOMIC_RELAXED);
}

static inline long as_ring_now_ns(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t); /* the vDSO's: no system call */
  return t.tv_sec * 1000000000L + t.tv_nsec;
}

/* Takes the reservation lock for process `tgid` (never 0), waiting a
 * bounded time. A holder is a few instructions from releasing it, but may
 * be preempted there or take a page fault on the ring's fresh pages. */
static inline bool as_ring_lock(struct as_ring_header *h, uint32_t tgid) {
  long deadline = 0;
  for (int i = 0;; ++i) {
    uint32_t free_lock = 0;
    if (__atomic_load_n(&h->lock, __ATOMIC_RELAXED) == 0 &&
        __atomic_compare_exchange_n(&h->lock, &free_lock, tgid, false, __ATOMIC_ACQUIRE, __ATOMIC_RELAXED))
      return true;
    if (i < AS_RING_SPINS) {
      __builtin_ia32_pause();
      continue;
    }
    long now = as_ring_now_ns();
    if (!deadline) deadline = now + AS_RING_WAIT_NS;
    if (now > deadline) return false;
    sched_yield();
  }
}

enum as_ring_refusal { AS_RING_PLACED = 0, AS_RING_NO_ROOM = 1, AS_RING_LOCKED = 2, AS_RING_TOO_LONG = 3 };

/* No stamp: as_ring_try_reserve_stamped's stamp_at. */
#define AS_RING_NO_STAMP UINT32_MAX

/* Room for a record of `len` payload bytes now, or NULL (not counted) and
 * why in *why (enum as_ring_refusal). Unless stamp_at is AS_RING_NO_STAMP,
 * the time (CLOCK_MONOTONIC, 8 bytes) is written at that payload offset
 * under the lock, before the record is seen: stamps follow the records'
 * order, and a reader stopped at a busy record can read its stamp. */
static inline void *as_ring_try_reserve_stamped(struct as_ring_header *h, uint32_t len, uint32_t tgid,
                                                int *why, uint32_t stamp_at) {
  uint64_t size = h->size, need = as_ring_span(len);
  if (len > AS_RING_LEN_MASK || need > size / 2 || tgid == 0) {
    *why = AS_RING_TOO_LONG;
    return NULL;
  }
  if (!as_ring_lock(h, tgid)) {
    *why = AS_RING_LOCKED;
    return NULL;
  }
  uint64_t at = h->producer, read = __atomic_load_n(&h->consumer, __ATOMIC_ACQUIRE);
  uint64_t offset = at & (size - 1), tail = size - offset, skip = tail < need ? tail : 0;
  if (at + skip + need - read > size) {
    __atomic_store_n(&h->lock, 0, __ATOMIC_RELEASE);
    *why = AS_RING_NO_ROOM;
    return NULL;
  }
  uint8_t *data = as_ring_data(h);
  if (skip) { /* the rest of the ring, then from its start */
    struct as_ring_record *p = (struct as_ring_record *)(data + offset);
    p->tgid = tgid;
    __atomic_store_n(&p->len_flags, (uint32_t)(tail - sizeof *p) | AS_RING_PADDING, __ATOMIC_RELEASE);
    offset = 0;
  }
  struct as_ring_record *r = (struct as_ring_record *)(data + offset);
  r->tgid = tgid;
  __atomic_store_n(&r->len_flags, len | AS_RING_BUSY, __ATOMIC_RELAXED);
  if (stamp_at != AS_RING_NO_STAMP && (uint64_t)stamp_at + 8 <= len) {
    uint64_t now = (uint64_t)as_ring_now_ns();
    __builtin_memcpy((uint8_t *)(r + 1) + stamp_at, &now, sizeof now);
  }
  __atomic_store_n(&h->producer, at + skip + need, __ATOMIC_RELEASE);
  __atomic_store_n(&h->lock, 0, __ATOMIC_RELEASE);
  *why = AS_RING_PLACED;
  return r + 1;
}

static inline void *as_ring_try_reserve(struct as_ring_header *h, uint32_t len, uint32_t tgid, int *why) {
  return as_ring_try_reserve_stamped(h, len, tgid, why, AS_RING_NO_STAMP);
}

/* Whether a writer may wait for room: the reader read lately. */
static inline bool as_ring_reader_alive(struct as_ring_header *h, long now) {
  long beat = (long)__atomic_load_n(&h->reader_beat_ns, __ATOMIC_RELAXED);
  return beat && now - beat < AS_RING_READER_STALE_NS;
}

/* Room for a record of `len` payload bytes, its payload to be written then
 * committed (as_ring_commit); NULL when it cannot be placed (counted):
 * too long, the lock held too long, or no room in time. `wait`: whether
 * to wait for room while the reader reads. The wait is a raw system call:
 * not a cancellation point inside malloc. */
static inline void *as_ring_reserve_stamped(struct as_ring_header *h, uint32_t len, uint32_t tgid, bool wait,
                                            uint32_t stamp_at) {
  long deadline = 0;
  for (;;) {
    int why;
    void *p = as_ring_try_reserve_stamped(h, len, tgid, &why, stamp_at);
    if (p) return p;
    if (why != AS_RING_NO_ROOM || !wait) break;
    long now = as_ring_now_ns();
    if (!deadline) deadline = now + AS_RING_MAX_WAIT_NS;
    if (now > deadline || !as_ring_reader_alive(h, now)) break;
    struct timespec pause = {0, 50 * 1000}; /* the reader reads every few ms */
    int saved = errno;                      /* an allocation leaves errno as it was */
    syscall(SYS_nanosleep, &pause, NULL);
    errno = saved;
  }
  as_ring_count_lost(h, len);
  return NULL;
}

static inline void *as_ring_reserve_for(struct as_ring_header *h, uint32_t len, uint32_t tgid, bool wait) {
  return as_ring_reserve_stamped(h, len, tgid, wait, AS_RING_NO_STAMP);
}

static inline void *as_ring_reserve(struct as_ring_header *h, uint32_t len, uint32_t tgid) {
  return as_ring_reserve_for(h, len, tgid, true);
}

/* Reader: it reads and makes progress (writers may wait for room while it
 * does; a reader stopped at a busy record must not beat). */
static inline void as_ring_beat(struct as_ring_header *h) {
  __atomic_store_n(&h->reader_beat_ns, (uint64_t)as_ring_now_ns(), __ATOMIC_RELAXED);
}

/* The record whose payload as_ring_reserve gave is complete. */
static inline void as_ring_commit(void *payload) {
  struct as_ring_record *r = (struct as_ring_record *)payload - 1;
  uint32_t len = __atomic_load_n(&r->len_flags, __ATOMIC_RELAXED) & AS_RING_LEN_MASK;
  __atomic_store_n(&r->len_flags, len, __ATOMIC_RELEASE);
}

/* Reader: the next committed record's payload, length and writer, or NULL
 * when there is none yet or the next is busy (*busy_tgid: its writer). */
static inline const void *as_ring_peek(struct as_ring_header *h, uint32_t *len, uint32_t *tgid,
                                       uint32_t *busy_tgid) {
  *busy_tgid = 0;
  uint64_t size = h->size;
  for (;;) {
    uint64_t at = h->consumer, left = size - (at & (size - 1));
    if (at >= __atomic_load_n(&h->producer, __ATOMIC_ACQUIRE)) return NULL;
    struct as_ring_record *r = (struct as_ring_record *)(as_ring_data(h) + (at & (size - 1)));
    uint32_t lf = __atomic_load_n(&r->len_flags, __ATOMIC_ACQUIRE);
    if (lf & AS_RING_BUSY) {
      *busy_tgid = r->tgid;
      return NULL;
    }
    /* Written by the traced processes: a length that leaves the ring (or a
     * padding that does not end at its end) makes it unreadable. */
    uint64_t span =
        lf & AS_RING_PADDING ? sizeof *r + (lf & AS_RING_LEN_MASK) : as_ring_span(lf & AS_RING_LEN_MASK);
    if (span > left || ((lf & AS_RING_PADDING) && span != left)) {
      *busy_tgid = AS_RING_CORRUPT;
      return NULL;
    }
    if (lf & AS_RING_PADDING) {
      __atomic_store_n(&h->consumer, at + span, __ATOMIC_RELEASE);
      continue;
    }
    *len = lf;
    *tgid = r->tgid;
    return r + 1;
  }
}

/* Reader: the payload of the record at the front, committed or still
 * busy (what its writer wrote so far: its stamp, if it takes one), and
 * its length; NULL when there is none. */
static inline const void *as_ring_front(struct as_ring_header *h, uint32_t *len) {
  uint64_t at = h->consumer, size = h->size;
  if (at >= __atomic_load_n(&h->producer, __ATOMIC_ACQUIRE)) return NULL;
  struct as_ring_record *r = (struct as_ring_record *)(as_ring_data(h) + (at & (size - 1)));
  uint32_t lf = __atomic_load_n(&r->len_flags, __ATOMIC_ACQUIRE);
  uint64_t left = size - (at & (size - 1));
  if ((lf & AS_RING_PADDING) || as_ring_span(lf & AS_RING_LEN_MASK) > left) return NULL;
  *len = lf & AS_RING_LEN_MASK;
  return r + 1;
}

/* Reader: done with the record as_ring_peek gave; its room is free again. */
static inline void as_ring_release(struct as_ring_header *h) {
  struct as_ring_record *r = (struct as_ring_record *)(as_ring_data(h) + (h->consumer & (h->size - 1)));
  uint32_t lf = __atomic_load_n(&r->len_flags, __ATOMIC_ACQUIRE);
  __atomic_store_n(&h->consumer, h->consumer + as_ring_span(lf & AS_RING_LEN_MASK), __ATOMIC_RELEASE);
}

/* Reader: passes the busy record at the front, whose writer is gone (it
 * would otherwise stop the ring for good). Only then: a live writer may
 * still be filling it. */
static inline void as_ring_skip_busy(struct as_ring_header *h) { as_ring_release(h); }

/* Reader: the process holding the reservation lock, 0 when free. */
static inline uint32_t as_ring_lock_holder(struct as_ring_header *h) {
  return __atomic_load_n(&h->lock, __ATOMIC_ACQUIRE);
}

/* Reader: frees the lock `holder` took and died holding (every writer would
 * otherwise lose every record). Only then: a live holder is reserving. */
static inline void as_ring_break_dead_lock(struct as_ring_header *h, uint32_t holder) {
  __atomic_compare_exchange_n(&h->lock, &holder, 0, false, __ATOMIC_RELEASE, __ATOMIC_RELAXED);
}

#endif
