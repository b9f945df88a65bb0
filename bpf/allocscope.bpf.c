// SPDX-License-Identifier: GPL-2.0
/* Allocation sampler: a per-thread byte countdown decides which allocations
 * are sampled; only sampled calls read a stack, touch the live map or emit
 * events. Userspace attaches these programs per process, or system-wide per
 * C library file with the `processes` map deciding who is traced. */
/* vmlinux.h first: libbpf's headers use its types. */
// clang-format off
#include "vmlinux.h"
#include <bpf/bpf_core_read.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/usdt.bpf.h>
// clang-format on

#define AS_INLINE static __always_inline
#include "allocscope.h"

#include "countdown.h"
#include "trial_parts.h"
#define AS_READ_USER(dst, len, addr) AS_PART_READ((dst), (len), (const void *)(addr))
#include "stack_window.h"
#define AS_READ_U64(mem, addr, out) as_window_read((struct stack_window *)(mem), (addr), (out))
static __always_inline const struct as_unwind_row *table_at(void *table, __u32 i) {
  return bpf_map_lookup_elem(table, &i);
}
#define AS_TABLE_AT(table, i) table_at((table), (i))
#include "unwind.h"

char LICENSE[] SEC("license") = "GPL";

/* The program in parts, in dependency order. */
// clang-format off
#include "state.bpf.h"
#include "busy.bpf.h"
#include "walk.bpf.h"
#include "python.bpf.h"
#include "lifecycle.bpf.h"
// clang-format on

/* One more live entry for the process, if its share has room. A process
 * the share table has no room for is not held to a share (counted as a full
 * process table). */
static __always_inline bool take_live_share(__u32 tgid) {
  if (!live_share) return true;
  __u32 *held = bpf_map_lookup_elem(&process_live, &tgid);
  if (!held) {
    __u32 zero = 0;
    bpf_map_update_elem(&process_live, &tgid, &zero, BPF_NOEXIST); /* or a racing thread's */
    held = bpf_map_lookup_elem(&process_live, &tgid);
    if (!held) {
      count(AS_CNT_PROC_TABLE_FULL);
      return true;
    }
  }
  /* A full share is refused on a plain read (the common case once full).
   * Otherwise added, then checked against what was there: of threads racing
   * for the last entry one gets it, the others give theirs back. The share
   * is never exceeded (the count may pass it for the moment of the give-back). */
  if (*held >= live_share) return false;
  if (__sync_fetch_and_add(held, 1) < live_share) return true;
  __sync_fetch_and_add(held, -1);
  return false;
}

/* A live entry of the process is gone (freed, or its insert failed). Never
 * below zero: the count started afresh at exec, after entries of the old
 * program that userspace removes. */
static __always_inline void release_live_share(__u32 tgid) {
  if (!live_share) return;
  __u32 *held = bpf_map_lookup_elem(&process_live, &tgid);
  if (held && __sync_fetch_and_add(held, -1) == 0) __sync_fetch_and_add(held, 1); /* it was at zero */
}

/* Exact mode: the freed block's allocation leaves its stack's live total. */
static __always_inline void count_exact_free(const struct as_live_value *v) {
  struct as_exact_totals *t = bpf_map_lookup_elem(&exact_totals, &v->stack);
  if (!t) return; /* its stack was not counted (the map was full) */
  __sync_fetch_and_add(&t->frees, 1);
  __sync_fetch_and_add(&t->free_bytes, v->size);
  __u64 life = bpf_ktime_get_ns() - v->ts_ns;
  __u32 msb = 0;
  if (life) as_normalize(life, &msb);
  __u32 b = msb > AS_LIFETIME_FIRST_LOG2 ? msb - AS_LIFETIME_FIRST_LOG2 : 0;
  if (b >= AS_LIFETIME_BUCKETS) b = AS_LIFETIME_BUCKETS - 1;
  __sync_fetch_and_add(&t->lifetimes[b], 1);
}

static __always_inline void send_free(struct as_event *e, __u64 pid_tgid, __u64 addr) {
  e->kind = AS_EV_FREE;
  e->tgid = pid_tgid >> 32;
  e->tid = (__u32)pid_tgid;
  e->fn = AS_FN_FREE;
  e->flags = 0;
  e->ts_ns = bpf_ktime_get_ns();
  e->addr = addr;
  e->size = 0;
  e->offset = 0;
  e->stack = 0;
  bpf_ringbuf_submit(e, submit_flags());
}

static __always_inline void free_address(__u64 addr) {
  __u64 id = bpf_get_current_pid_tgid();
  struct as_live_key key = {.tgid = id >> 32, .addr = addr};
  __u32 slot = as_live_slot(key.tgid, addr);
  __u32 *live_here = bpf_map_lookup_elem(&live_filter, &slot);
  /* The filter, then a lookup: a miss (the common case) takes no bucket lock. */
  if (!addr || !live_here || !*live_here) return;
  struct as_live_value *found = bpf_map_lookup_elem(&live, &key);
  if (!found) return;
  struct as_live_value v = *found;
  struct as_event *e = sample_rate <= 1 ? 0 : bpf_ringbuf_reserve(&events, sizeof(*e), 0);
  if (bpf_map_delete_elem(&live, &key) != 0) { /* a racing free got it first */
    if (e) bpf_ringbuf_discard(e, 0);
    return;
  }
  __sync_fetch_and_add(live_here, -1); /* 32-bit atomics: add only */
  release_live_share(key.tgid);
  count(AS_CNT_FREES);
  if (sample_rate <= 1) {
    count_exact_free(&v);
    return;
  }
  if (!e) {
    count(AS_CNT_FREE_DROPS);
    count_bytes(AS_CNT_FREE_DROPS_BYTES, v.size);
    return;
  }
  send_free(e, id, addr);
}

/* Exact mode: one live entry whose stack's totals userspace has deleted (its
 * program ended) goes, with its filter slot. Deleting the entry the walk is
 * on is allowed for a hash map. */
static long sweep_entry(struct bpf_map *map, struct as_live_key *key, struct as_live_value *v,
                        struct as_sweep *s) {
  s->visited++;
  if (bpf_map_lookup_elem(&exact_totals, &v->stack) || bpf_map_delete_elem(map, key) != 0) return 0;
  __u32 slot = as_live_slot(key->tgid, key->addr);
  __u32 *live_here = bpf_map_lookup_elem(&live_filter, &slot);
  if (live_here) __sync_fetch_and_add(live_here, -1);
  s->deleted++;
  return 0;
}

/* Run by userspace (BPF_PROG_RUN): the sweep of ended programs' entries in
 * the kernel, none copied out, as one entry deleted by a system call each
 * cost the exact agent most of its time. */
SEC("syscall")
int sweep_live(struct as_sweep *ctx) {
  struct as_sweep s = {};
  bpf_for_each_map_elem(&live, sweep_entry, &s, 0);
  ctx->visited = s.visited;
  ctx->deleted = s.deleted;
  return 0;
}

/* A free the process sent here for want of room in its ring: userspace
 * holds its block (AS_EVF_FREE_IN_RING), the live map does not. */
static __always_inline void forward_free(__u64 addr) {
  if (!addr || sample_rate <= 1) return;
  struct as_event *e = bpf_ringbuf_reserve(&events, sizeof(*e), 0);
  if (!e) {
    count(AS_CNT_FREE_DROPS);
    return;
  }
  count(AS_CNT_FREES);
  send_free(e, bpf_get_current_pid_tgid(), addr);
}

/* Entry of an allocating call; returns whether its return must be seen.
 * The fast path is one storage lookup, a compare and a subtraction. Nested
 * calls (glibc's realloc and memalign call malloc) are counted once, by the
 * outermost entry point: every entry point that may call another one raises
 * the thread's depth until it returns. malloc calls no other, so with uprobe
 * sessions only its sampled calls pay for a return probe. */
static __always_inline bool alloc_enter(__u32 fn, __u64 size, __u64 memptr) {
  bool always_return = !use_sessions || fn != AS_FN_MALLOC;
  struct thread_state *st = thread_state(true);
  if (!st) return false;
  count_call(st);
  if (st->depth != 0) {
    count(AS_CNT_NESTED);
    if (always_return) st->depth++;
    return always_return;
  }
  st->pending = 0;
  __u64 offset = 0;
  if (sample_rate > 1 && !countdown_fires(st, size, &offset)) {
    if (always_return) st->depth = 1;
    return always_return;
  }
  st->pending_offset = offset;
  if (!process_traced(bpf_get_current_pid_tgid() >> 32, false)) {
    count(AS_CNT_FILTERED);
    if (always_return) st->depth = 1;
    return always_return;
  }
  st->pending = 1;
  st->pending_fn = fn;
  st->pending_size = size;
  st->pending_memptr = memptr;
  st->depth = 1;
  return true;
}

static const struct as_exact_totals zero_totals = {}; /* too big for the BPF stack: inserts copy it */

/* Exact mode: the allocation is added to its stack's totals here, and its
 * block remembered with the stack so that its free subtracts it. A block
 * not counted is not remembered: a live entry whose stack has no totals is
 * one sweep_live may delete. */
static __always_inline bool count_exact(__u64 id, __u64 size) {
  struct as_exact_totals *t = bpf_map_lookup_elem(&exact_totals, &id);
  if (!t) {
    bpf_map_update_elem(&exact_totals, &id, &zero_totals, BPF_NOEXIST);
    t = bpf_map_lookup_elem(&exact_totals, &id);
  }
  if (!t) {
    count(AS_CNT_EXACT_FULL);
    count_bytes(AS_CNT_EXACT_FULL_BYTES, size);
    return false;
  }
  __sync_fetch_and_add(&t->allocs, 1);
  __sync_fetch_and_add(&t->alloc_bytes, size);
  return true;
}

static __always_inline void track_live_block(__u32 tgid, __u64 addr, struct as_live_value *val,
                                             __u16 *flags) {
  if (!take_live_share(tgid)) {
    *flags |= AS_EVF_LIVE_DROPPED;
    count(AS_CNT_LIVE_SHARE);
    count_bytes(AS_CNT_LIVE_SHARE_BYTES, val->size);
    return;
  }
  struct as_live_key key = {.tgid = tgid, .addr = addr};
  /* Counted before the insert: a free of this address, which can only come
   * after this return, then finds the slot raised. */
  __u32 slot = as_live_slot(tgid, addr);
  __u32 *live_here = bpf_map_lookup_elem(&live_filter, &slot);
  if (live_here) __sync_fetch_and_add(live_here, 1);
  if (bpf_map_update_elem(&live, &key, val, BPF_ANY) != 0) {
    *flags |= AS_EVF_LIVE_DROPPED;
    count(AS_CNT_LIVE_FULL);
    count_bytes(AS_CNT_LIVE_FULL_BYTES, val->size);
    if (live_here) __sync_fetch_and_add(live_here, -1); /* 32-bit atomics: add only */
    release_live_share(tgid);
  }
}

static __always_inline void count_dropped(__u32 tgid, __u64 size) {
  count(AS_CNT_RINGBUF_DROPS);
  count_bytes(AS_CNT_DROPPED_BYTES, size);
  count_process_drop(tgid);
  __u8 *v = bpf_map_lookup_elem(&processes, &tgid);
  if (!judge_names || (v && base_verdict(v)) || name_verdict()) return;
  /* A process the filters may yet reject: its loss is set apart. */
  count(AS_CNT_UNJUDGED_DROPS);
  count_bytes(AS_CNT_UNJUDGED_DROPS_BYTES, size);
  struct as_unjudged_drops one = {1, size}, *d = bpf_map_lookup_elem(&unjudged_drops, &tgid);
  if (!d) {
    bpf_map_update_elem(&unjudged_drops, &tgid, &one, BPF_NOEXIST);
    return;
  }
  __sync_fetch_and_add(&d->samples, 1);
  __sync_fetch_and_add(&d->bytes, size);
}

/* A sampled allocation of `size` bytes at addr, entry code fn: its stack
 * walked and sent, its block tracked live, its event sent (exact mode: its
 * stack's totals counted). `flags` may already say the block is not to be
 * tracked (AS_EVF_LIVE_DROPPED: its free will not be seen). */
static __always_inline void emit_alloc(struct pt_regs *ctx, __u32 fn, __u64 size, __u64 offset, __u64 addr,
                                       __u16 flags, const struct own_frames *own) {
  __u64 pid_tgid = bpf_get_current_pid_tgid();
  __u32 tgid = pid_tgid >> 32;
  __u64 now = bpf_ktime_get_ns();
  count(AS_CNT_SAMPLES);
  /* A USDT probe fires inside the sampler's code: its frames are not the
   * program's (the leaf is named by fn). A uprobe's sample is taken at the
   * return, where the first pc is already the caller's. */
  struct walk_scratch *w = walk_stack(ctx, fn, own);
  if (w) walk_python(w);
  AS_PART(AS_PART_PYTHON);
  struct as_stack_event *stack = w ? &w->ev : 0;
  if (!w || !(stack->stop == AS_STOP_NO_TABLE && may_defer() ? send_deferred(w) : send_stack(stack))) {
    count_dropped(tgid, size);
    return;
  }
  AS_PART(AS_PART_SEND);
  __u64 id = stack->id;
  bool collected = flags & AS_EVF_COLLECTED;
  bool elsewhere = flags & AS_EVF_FREE_IN_RING; /* userspace alone tracks it */
  bool live = track_live && !collected && !elsewhere && !(flags & AS_EVF_LIVE_DROPPED);
  if (!track_live) flags |= AS_EVF_UNTRACKED;
  if (track_live && !collected && !elsewhere && !live) {
    count(AS_CNT_LIVE_FULL);
    count_bytes(AS_CNT_LIVE_FULL_BYTES, size);
  }
  struct as_live_value val = {.ts_ns = now, .size = size, .stack = id};
  if (sample_rate <= 1) {
    if (count_exact(id, size) && live) track_live_block(tgid, addr, &val, &flags);
    return;
  }
  /* Reserved before the live insert so that a racing free's event is
   * queued after this one. */
  struct as_alloc_event *e = bpf_ringbuf_reserve(&events, sizeof(*e), 0);
  if (!e) {
    count_dropped(tgid, size);
    return;
  }
  if (live) track_live_block(tgid, addr, &val, &flags);
  AS_PART(AS_PART_LIVE);
  e->hdr.kind = AS_EV_ALLOC;
  e->hdr.tgid = tgid;
  e->hdr.tid = (__u32)pid_tgid;
  e->hdr.fn = fn;
  e->hdr.flags = flags;
  e->hdr.ts_ns = now;
  e->hdr.addr = addr;
  e->hdr.size = size;
  e->hdr.offset = offset;
  e->hdr.stack = id;
  __builtin_memcpy(e->comm, stack->comm, sizeof(e->comm));
  __u8 one = 1;
  bool first = !bpf_map_lookup_elem(&seen_processes, &tgid);
  if (first) bpf_map_update_elem(&seen_processes, &tgid, &one, BPF_ANY);
  bpf_ringbuf_submit(e, first ? BPF_RB_FORCE_WAKEUP : submit_flags());
  AS_PART(AS_PART_EVENT);
  AS_PART_COUNT_ONE(AS_PART_TRIALS);
}

/* Return of an allocating call. */
static __always_inline int alloc_exit(struct pt_regs *ctx) {
  count(AS_CNT_RETURNS);
  struct thread_state *st = thread_state(false);
  if (!st || st->depth == 0) /* entry ran before attach */
    return 0;
  if (--st->depth != 0 || !st->pending) return 0;
  st->pending = 0;
  __u64 addr = PT_REGS_RC(ctx);
  if (as_fn_kind(st->pending_fn) == AS_FN_POSIX_MEMALIGN) {
    __u64 out = 0;
    if (addr != 0 || bpf_probe_read_user(&out, sizeof(out), (void *)st->pending_memptr) != 0) out = 0;
    addr = out;
  }
  if (!addr) {
    count(AS_CNT_FAILED_ALLOCS);
    return 0;
  }
  struct own_frames none = {};
  emit_alloc(ctx, st->pending_fn, st->pending_size, st->pending_offset, addr, 0, &none);
  return 0;
}

/* n * size, or false when it overflows (the C library then fails the call).
 * Computed in 32-bit halves: clang lowers the usual division-based check to
 * a 128-bit multiply that BPF lacks. */
static __always_inline bool array_bytes(__u64 n, __u64 size, __u64 *total) {
  __u64 big = n > size ? n : size, small = n > size ? size : n;
  if (small >> 32) return false;
  if (big >> 32) {
    __u64 high = (big >> 32) * small + (((big & 0xffffffffULL) * small) >> 32);
    if (high >> 32) return false;
  }
  *total = n * size;
  return true;
}

/* realloc frees the old block at entry (realloc(p, 0) frees p; a NULL result
 * for n > 0 would keep p allocated, a rare error we accept) and allocates the
 * new size like malloc. */
static __always_inline bool realloc_enter(__u32 fn, __u64 ptr, __u64 size) {
  struct thread_state *st = thread_state(false);
  if (!st || st->depth == 0) free_address(ptr);
  return alloc_enter(fn, size, 0);
}

/* One allocator entry, by its entry code (the kind in the low byte); returns
 * whether its return must be seen. With a constant code the switch folds
 * away. Only the C library's malloc (code AS_FN_MALLOC exactly) may skip
 * its return: other allocators' entry points may call one another. */
static __always_inline bool enter(struct pt_regs *ctx, __u64 code) {
  __u64 a = PT_REGS_PARM1(ctx), b = PT_REGS_PARM2(ctx), c = PT_REGS_PARM3(ctx), total = 0;
  __u32 fn = code & 0xffff;
  switch (as_fn_kind(code)) {
    case AS_FN_MALLOC:
    case AS_FN_VALLOC:
    case AS_FN_PVALLOC:
      return alloc_enter(fn, a, 0);
    case AS_FN_CALLOC:
      return alloc_enter(fn, array_bytes(a, b, &total) ? total : 0, 0);
    case AS_FN_REALLOC:
      return realloc_enter(fn, a, b);
    case AS_FN_REALLOCARRAY:
      if (!array_bytes(b, c, &total)) /* fails without freeing */
        return alloc_enter(fn, 0, 0);
      return realloc_enter(fn, a, total);
    case AS_FN_POSIX_MEMALIGN:
      return alloc_enter(fn, c, a);
    case AS_FN_ALIGNED_ALLOC:
    case AS_FN_MEMALIGN:
      return alloc_enter(fn, b, 0);
    case AS_FN_EXIT:
      exit_called();
      return false;
    case AS_FN_GO_MALLOC: /* programs of their own (go.bpf.h) */
    case AS_FN_GO_PROFILE:
    case AS_FN_GO_FREE:
    case AS_FN_COUNT:
      return false;
    case AS_FN_FREE:
      free_address(a);
      return false;
  }
  return false;
}

// clang-format off
#include "inprocess.bpf.h"
#include "go.bpf.h"
// clang-format on

/* Uprobe session (kernel 6.13+): one program for every allocating entry
 * point of a library, the entry point in the attach cookie. Returning 1 from
 * the entry skips the return probe. */
SEC("uprobe")
int alloc_session(struct pt_regs *ctx) {
  as_no_private_stack(ctx, tail_session);
  count(AS_CNT_TRAPS);
  if (as_session_is_return(ctx)) {
    alloc_exit(ctx);
    return 0;
  }
  return enter(ctx, bpf_get_attach_cookie(ctx)) ? 0 : 1;
}

/* malloc, the hottest entry point, has a session link of its own: no
 * cookie to read and no dispatch. */
SEC("uprobe")
int malloc_session(struct pt_regs *ctx) {
  as_no_private_stack(ctx, tail_session);
  count(AS_CNT_TRAPS);
  if (as_session_is_return(ctx)) {
    alloc_exit(ctx);
    return 0;
  }
  return alloc_enter(AS_FN_MALLOC, PT_REGS_PARM1(ctx), 0) ? 0 : 1;
}

/* free through a uprobe_multi link (placed after free's NULL check). */
SEC("uprobe")
int free_multi(struct pt_regs *ctx) {
  as_no_private_stack(ctx, tail_multi);
  count(AS_CNT_TRAPS);
  free_address(PT_REGS_PARM1(ctx));
  return 0;
}

/* Classic uprobes and uretprobes, one program per entry point, for kernels
 * without sessions. */
#define CLASSIC_ENTRY(name, kind)                                                \
  SEC("uprobe") int name(struct pt_regs *ctx) {                                  \
    as_no_private_stack(ctx, tail_classic);                                      \
    count(AS_CNT_TRAPS);                                                         \
    enter(ctx, (bpf_get_attach_cookie(ctx) & ~(__u64)AS_FN_KIND_MASK) | (kind)); \
    return 0;                                                                    \
  }
CLASSIC_ENTRY(malloc_enter, AS_FN_MALLOC)
CLASSIC_ENTRY(calloc_enter, AS_FN_CALLOC)
CLASSIC_ENTRY(realloc_enter_classic, AS_FN_REALLOC)
CLASSIC_ENTRY(reallocarray_enter, AS_FN_REALLOCARRAY)
CLASSIC_ENTRY(posix_memalign_enter, AS_FN_POSIX_MEMALIGN)
CLASSIC_ENTRY(aligned_alloc_enter, AS_FN_ALIGNED_ALLOC)
CLASSIC_ENTRY(memalign_enter, AS_FN_MEMALIGN)
CLASSIC_ENTRY(valloc_enter, AS_FN_VALLOC)
CLASSIC_ENTRY(pvalloc_enter, AS_FN_PVALLOC)
CLASSIC_ENTRY(free_enter, AS_FN_FREE)
CLASSIC_ENTRY(exit_enter, AS_FN_EXIT)

SEC("uretprobe")
int alloc_return(struct pt_regs *ctx) {
  as_no_private_stack(ctx, tail_classic);
  count(AS_CNT_TRAPS);
  alloc_exit(ctx);
  return 0;
}

SEC("uprobe")
int null_session(struct pt_regs *ctx) { return 1; }

SEC("uprobe")
int null_multi(struct pt_regs *ctx) { return 0; }

SEC("uprobe")
int null_classic(struct pt_regs *ctx) { return 0; }
