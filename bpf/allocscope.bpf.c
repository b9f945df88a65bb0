// SPDX-License-Identifier: GPL-2.0
/* Allocation sampler: a per-thread byte countdown decides which allocations
 * are sampled; only sampled calls read a stack, touch the live map or emit
 * events. Userspace attaches these programs per process. */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>

#define AS_INLINE static __always_inline
#include "allocscope.h"
#include "countdown.h"

char LICENSE[] SEC("license") = "GPL";

/* Set by userspace before load. */
const volatile __u64 sample_rate = 512 * 1024; /* mean bytes between samples; 1 = every allocation */
const volatile __u64 log2_table[AS_LOG2_TABLE_SIZE];

struct thread_state {
  __u64 countdown;      /* bytes before the next sampled byte */
  __u32 depth;          /* allocator calls in progress on this thread */
  __u32 initialized;
  __u32 pending;        /* the outermost call in progress is sampled */
  __u32 pending_fn;     /* enum as_fn */
  __u64 pending_size;   /* requested bytes */
  __u64 pending_offset; /* bytes before the sampled byte */
  __u64 pending_memptr; /* posix_memalign's out pointer */
};

struct {
  __uint(type, BPF_MAP_TYPE_TASK_STORAGE);
  __uint(map_flags, BPF_F_NO_PREALLOC);
  __type(key, int);
  __type(value, struct thread_state);
} threads SEC(".maps");

/* Sampled allocations not yet freed; capacity set by userspace (--max-live). */
struct {
  __uint(type, BPF_MAP_TYPE_HASH);
  __uint(max_entries, 1);
  __type(key, struct as_live_key);
  __type(value, __u64); /* allocation time, ns */
} live SEC(".maps");

struct {
  __uint(type, BPF_MAP_TYPE_RINGBUF);
  __uint(max_entries, 1); /* set by userspace */
} events SEC(".maps");

struct {
  __uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
  __uint(max_entries, AS_CNT_COUNT);
  __type(key, __u32);
  __type(value, __u64);
} counters SEC(".maps");

static __always_inline void count(__u32 which) {
  __u64 *c = bpf_map_lookup_elem(&counters, &which);
  if (c)
    *c += 1;
}

static __always_inline __u64 draw_countdown(void) {
  __u64 x = ((__u64)bpf_get_prandom_u32() << 32) | bpf_get_prandom_u32() | 1;
  __u32 msb;
  __u64 norm = as_normalize(x, &msb);
  __u32 i = as_table_index(norm) & ((1 << AS_LOG2_TABLE_BITS) - 1);
  return as_countdown_from(norm, msb, log2_table[i], log2_table[i + 1], sample_rate);
}

static __always_inline struct thread_state *thread_state(bool create) {
  return bpf_task_storage_get(&threads, bpf_get_current_task_btf(), 0,
                              create ? BPF_LOCAL_STORAGE_GET_F_CREATE : 0);
}

static __always_inline void free_address(__u64 addr) {
  struct as_live_key key = {.tgid = bpf_get_current_pid_tgid() >> 32, .addr = addr};
  /* Lookup first: a miss (the common case) takes no bucket lock. */
  if (!addr || !bpf_map_lookup_elem(&live, &key))
    return;
  struct as_event *e = bpf_ringbuf_reserve(&events, sizeof(*e), 0);
  if (bpf_map_delete_elem(&live, &key) != 0) { /* a racing free got it first */
    if (e)
      bpf_ringbuf_discard(e, 0);
    return;
  }
  count(AS_CNT_FREES);
  if (!e) {
    count(AS_CNT_RINGBUF_DROPS);
    return;
  }
  __u64 id = bpf_get_current_pid_tgid();
  e->kind = AS_EV_FREE;
  e->tgid = id >> 32;
  e->tid = (__u32)id;
  e->fn = AS_FN_FREE;
  e->flags = 0;
  e->ts_ns = bpf_ktime_get_ns();
  e->addr = addr;
  e->size = 0;
  e->offset = 0;
  e->nframes = 0;
  e->pad = 0;
  bpf_ringbuf_submit(e, 0);
}

/* Entry of an allocating call: the fast path is one storage lookup, a compare
 * and a subtraction. Nested calls (glibc's realloc and memalign call malloc)
 * are counted once, by the outermost entry point. */
static __always_inline int alloc_enter(enum as_fn fn, __u64 size, __u64 memptr) {
  struct thread_state *st = thread_state(true);
  if (!st)
    return 0;
  if (st->depth++ != 0) {
    count(AS_CNT_NESTED);
    return 0;
  }
  st->pending = 0;
  if (sample_rate <= 1) {
    st->pending_offset = 0;
  } else {
    if (!st->initialized) {
      st->countdown = draw_countdown();
      st->initialized = 1;
    }
    if (st->countdown >= size) {
      st->countdown -= size;
      return 0;
    }
    /* Memoryless: a fresh draw for the bytes after this allocation. */
    st->pending_offset = st->countdown;
    st->countdown = draw_countdown();
  }
  st->pending = 1;
  st->pending_fn = fn;
  st->pending_size = size;
  st->pending_memptr = memptr;
  return 0;
}

static __always_inline void emit_alloc(struct pt_regs *ctx, struct thread_state *st, __u64 addr) {
  __u64 id = bpf_get_current_pid_tgid();
  struct as_live_key key = {.tgid = id >> 32, .addr = addr};
  __u64 now = bpf_ktime_get_ns();
  count(AS_CNT_SAMPLES);
  /* Reserve before the live insert so that a racing free's event is queued
   * after this one. */
  struct as_alloc_event *e = bpf_ringbuf_reserve(&events, sizeof(*e), 0);
  if (!e) {
    count(AS_CNT_RINGBUF_DROPS);
    return;
  }
  __u16 flags = 0;
  if (bpf_map_update_elem(&live, &key, &now, BPF_ANY) != 0) {
    flags |= AS_EVF_LIVE_DROPPED;
    count(AS_CNT_LIVE_FULL);
  }
  /* At the return the registers are the caller's: the walk starts at the
   * allocator's direct caller, whatever the allocator's prologue. */
  long n = bpf_get_stack(ctx, e->frames, sizeof(e->frames), BPF_F_USER_STACK);
  if (n <= 0) {
    flags |= AS_EVF_STACK_FAILED;
    count(AS_CNT_STACK_FAIL);
    n = 0;
  }
  e->hdr.kind = AS_EV_ALLOC;
  e->hdr.tgid = id >> 32;
  e->hdr.tid = (__u32)id;
  e->hdr.fn = st->pending_fn;
  e->hdr.flags = flags;
  e->hdr.ts_ns = now;
  e->hdr.addr = addr;
  e->hdr.size = st->pending_size;
  e->hdr.offset = st->pending_offset;
  e->hdr.nframes = n / 8;
  e->hdr.pad = 0;
  bpf_ringbuf_submit(e, 0);
}

/* Return of an allocating call. */
static __always_inline int alloc_exit(struct pt_regs *ctx) {
  struct thread_state *st = thread_state(false);
  if (!st || st->depth == 0) /* entry ran before attach */
    return 0;
  if (--st->depth != 0 || !st->pending)
    return 0;
  st->pending = 0;
  __u64 addr = PT_REGS_RC(ctx);
  if (st->pending_fn == AS_FN_POSIX_MEMALIGN) {
    __u64 out = 0;
    if (addr != 0 || bpf_probe_read_user(&out, sizeof(out), (void *)st->pending_memptr) != 0)
      out = 0;
    addr = out;
  }
  if (!addr) {
    count(AS_CNT_FAILED_ALLOCS);
    return 0;
  }
  emit_alloc(ctx, st, addr);
  return 0;
}

SEC("uprobe")
int BPF_KPROBE(malloc_enter, __u64 size) { return alloc_enter(AS_FN_MALLOC, size, 0); }

/* n * size, or false when it overflows (the C library then fails the call).
 * Computed in 32-bit halves: clang lowers the usual division-based check to
 * a 128-bit multiply that BPF lacks. */
static __always_inline bool array_bytes(__u64 n, __u64 size, __u64 *total) {
  __u64 big = n > size ? n : size, small = n > size ? size : n;
  if (small >> 32)
    return false;
  if (big >> 32) {
    __u64 high = (big >> 32) * small + (((big & 0xffffffffULL) * small) >> 32);
    if (high >> 32)
      return false;
  }
  *total = n * size;
  return true;
}

SEC("uprobe")
int BPF_KPROBE(calloc_enter, __u64 n, __u64 size) {
  __u64 total = 0;
  if (!array_bytes(n, size, &total))
    total = 0;
  return alloc_enter(AS_FN_CALLOC, total, 0);
}

/* realloc frees the old block at entry (realloc(p, 0) frees p; a NULL result
 * for n > 0 would keep p allocated, a rare error we accept) and allocates the
 * new size like malloc. */
SEC("uprobe")
int BPF_KPROBE(realloc_enter, __u64 ptr, __u64 size) {
  struct thread_state *st = thread_state(false);
  if (!st || st->depth == 0)
    free_address(ptr);
  return alloc_enter(AS_FN_REALLOC, size, 0);
}

SEC("uprobe")
int BPF_KPROBE(reallocarray_enter, __u64 ptr, __u64 n, __u64 size) {
  __u64 total = 0;
  if (!array_bytes(n, size, &total))
    return alloc_enter(AS_FN_REALLOCARRAY, 0, 0); /* fails without freeing */
  struct thread_state *st = thread_state(false);
  if (!st || st->depth == 0)
    free_address(ptr);
  return alloc_enter(AS_FN_REALLOCARRAY, total, 0);
}

SEC("uprobe")
int BPF_KPROBE(posix_memalign_enter, __u64 memptr, __u64 align, __u64 size) {
  return alloc_enter(AS_FN_POSIX_MEMALIGN, size, memptr);
}

SEC("uprobe")
int BPF_KPROBE(aligned_alloc_enter, __u64 align, __u64 size) {
  return alloc_enter(AS_FN_ALIGNED_ALLOC, size, 0);
}

SEC("uprobe")
int BPF_KPROBE(memalign_enter, __u64 align, __u64 size) {
  return alloc_enter(AS_FN_MEMALIGN, size, 0);
}

SEC("uprobe")
int BPF_KPROBE(valloc_enter, __u64 size) { return alloc_enter(AS_FN_VALLOC, size, 0); }

SEC("uprobe")
int BPF_KPROBE(pvalloc_enter, __u64 size) { return alloc_enter(AS_FN_PVALLOC, size, 0); }

SEC("uretprobe")
int BPF_KRETPROBE(alloc_return) { return alloc_exit(ctx); }

SEC("uprobe")
int BPF_KPROBE(free_enter, __u64 ptr) {
  free_address(ptr);
  return 0;
}
