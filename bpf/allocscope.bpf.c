// SPDX-License-Identifier: GPL-2.0
/* Allocation sampler: a per-thread byte countdown decides which allocations
 * are sampled; only sampled calls read a stack, touch the live map or emit
 * events. Userspace attaches these programs per process, or system-wide per
 * C library file with the `processes` map deciding who is traced. */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>

#define AS_INLINE static __always_inline
#include "allocscope.h"
#include "countdown.h"

char LICENSE[] SEC("license") = "GPL";

/* Set by userspace before load. */
const volatile __u64 sample_rate = 512 * 1024; /* mean bytes between samples; 1 = every allocation */
const volatile __u64 log2_table[AS_LOG2_TABLE_SIZE];
const volatile bool use_sessions = false; /* entry decides whether the return runs */
const volatile __u64 wakeup_bytes = 1 << 20; /* wake the reader only past this much pending data */
const volatile __u32 stack_bytes = 0;          /* DWARF mode: user stack bytes to copy; 0: frame pointers only */
const volatile bool track_live = true;         /* false (--no-free): no free is seen, keep no live entries */
/* System-wide probes: which processes are traced (see process_traced). */
const volatile bool filter_processes = false;
const volatile bool trace_unknown = false;   /* processes without a verdict are traced (--all) */
const volatile bool follow_children = false; /* members' forked children become members */
const volatile __u64 cgroup_id = 0;          /* --cgroup: traced only inside this cgroup ... */
const volatile __u32 cgroup_level = 0;       /* ... at this depth below the root; 0: no filter */

extern bool bpf_session_is_return(void) __ksym __weak;

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
  __uint(type, BPF_MAP_TYPE_ARRAY);
  __uint(map_flags, BPF_F_MMAPABLE);
  __uint(max_entries, 1 << AS_LIVE_FILTER_BITS);
  __type(key, __u32);
  __type(value, __u32);
} live_filter SEC(".maps");

struct {
  __uint(type, BPF_MAP_TYPE_RINGBUF);
  __uint(max_entries, 1); /* set by userspace */
} events SEC(".maps");

/* Processes that have sent a sample: the first sample of a process wakes the
 * reader at once, so that it reads the process's mappings while it lives
 * (short-lived processes are otherwise gone before the next poll). */
struct {
  __uint(type, BPF_MAP_TYPE_LRU_HASH);
  __uint(max_entries, 8192);
  __type(key, __u32);
  __type(value, __u8);
} seen_processes SEC(".maps");

/* tgid -> enum as_process_verdict; capacity set by userspace. */
struct {
  __uint(type, BPF_MAP_TYPE_HASH);
  __uint(max_entries, 1);
  __type(key, __u32);
  __type(value, __u8);
} processes SEC(".maps");

/* Files (device, inode) already reported by an mmap event. */
struct {
  __uint(type, BPF_MAP_TYPE_LRU_HASH);
  __uint(max_entries, 4096);
  __type(key, __u64[2]);
  __type(value, __u8);
} known_files SEC(".maps");

/* Per-process count of samples lost to a full ring buffer. */
struct {
  __uint(type, BPF_MAP_TYPE_LRU_HASH);
  __uint(max_entries, 4096);
  __type(key, __u32);
  __type(value, __u64);
} process_drops SEC(".maps");

struct {
  __uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
  __uint(max_entries, AS_CNT_COUNT);
  __type(key, __u32);
  __type(value, __u64);
} counters SEC(".maps");

/* Atomic although per CPU: uprobe programs can be preempted, and another
 * run on the same CPU would otherwise lose an increment. */
static __always_inline void count(__u32 which) {
  __u64 *c = bpf_map_lookup_elem(&counters, &which);
  if (c)
    __sync_fetch_and_add(c, 1);
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

/* Whether samples of the current process are wanted. Per-process probes
 * only reach traced processes; system-wide ones reach every process mapping
 * the library, and this is asked only when a countdown fires. */
static __always_inline bool process_traced(__u32 tgid) {
  if (!filter_processes)
    return true;
  __u8 *v = bpf_map_lookup_elem(&processes, &tgid);
  if (v ? *v != AS_PROC_MEMBER : !trace_unknown)
    return false;
  return !cgroup_level || bpf_get_current_ancestor_cgroup_id(cgroup_level) == cgroup_id;
}

static __always_inline void count_process_drop(__u32 tgid) {
  __u64 one = 1, *n = bpf_map_lookup_elem(&process_drops, &tgid);
  if (n)
    __sync_fetch_and_add(n, 1);
  else
    bpf_map_update_elem(&process_drops, &tgid, &one, BPF_NOEXIST);
}

/* Submitting without a wakeup spares the traced thread an irq_work and the
 * reader a context switch per event; the reader polls on a timer and is woken
 * only when the buffer fills up. */
static __always_inline __u64 submit_flags(void) {
  return bpf_ringbuf_query(&events, BPF_RB_AVAIL_DATA) > wakeup_bytes ? BPF_RB_FORCE_WAKEUP
                                                                       : BPF_RB_NO_WAKEUP;
}

static __always_inline void free_address(__u64 addr) {
  __u64 id = bpf_get_current_pid_tgid();
  struct as_live_key key = {.tgid = id >> 32, .addr = addr};
  __u32 slot = as_live_slot(key.tgid, addr);
  __u32 *live_here = bpf_map_lookup_elem(&live_filter, &slot);
  /* The filter, then a lookup: a miss (the common case) takes no bucket lock. */
  if (!addr || !live_here || !*live_here || !bpf_map_lookup_elem(&live, &key))
    return;
  struct as_event *e = bpf_ringbuf_reserve(&events, sizeof(*e), 0);
  if (bpf_map_delete_elem(&live, &key) != 0) { /* a racing free got it first */
    if (e)
      bpf_ringbuf_discard(e, 0);
    return;
  }
  __sync_fetch_and_add(live_here, -1); /* 32-bit atomics: add only */
  count(AS_CNT_FREES);
  if (!e) {
    count(AS_CNT_RINGBUF_DROPS);
    return;
  }
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
  bpf_ringbuf_submit(e, submit_flags());
}

/* Entry of an allocating call; returns whether its return must be seen.
 * The fast path is one storage lookup, a compare and a subtraction. Nested
 * calls (glibc's realloc and memalign call malloc) are counted once, by the
 * outermost entry point: every entry point that may call another one raises
 * the thread's depth until it returns. malloc calls no other, so with uprobe
 * sessions only its sampled calls pay for a return probe. */
static __always_inline bool alloc_enter(enum as_fn fn, __u64 size, __u64 memptr) {
  bool always_return = !use_sessions || fn != AS_FN_MALLOC;
  struct thread_state *st = thread_state(true);
  if (!st)
    return false;
  if (st->depth != 0) {
    count(AS_CNT_NESTED);
    if (always_return)
      st->depth++;
    return always_return;
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
      if (always_return)
        st->depth = 1;
      return always_return;
    }
    /* Memoryless: a fresh draw for the bytes after this allocation. */
    st->pending_offset = st->countdown;
    st->countdown = draw_countdown();
  }
  if (!process_traced(bpf_get_current_pid_tgid() >> 32)) {
    count(AS_CNT_FILTERED);
    if (always_return)
      st->depth = 1;
    return always_return;
  }
  st->pending = 1;
  st->pending_fn = fn;
  st->pending_size = size;
  st->pending_memptr = memptr;
  st->depth = 1;
  return true;
}

/* The caller's registers, in DWARF order, and up to `max` bytes of its stack,
 * copied a page at a time: a read that crossed the end of the stack mapping
 * would fail whole. `max` is a power of two the verifier knows (read-only
 * data), and `dst` has 8 KiB of slack past it, which lets it bound each copy. */
static __always_inline void snapshot(struct pt_regs *ctx, struct as_stack_snapshot *snap, __u8 *dst, __u64 max) {
  snap->regs[0] = ctx->ax;
  snap->regs[1] = ctx->dx;
  snap->regs[2] = ctx->cx;
  snap->regs[3] = ctx->bx;
  snap->regs[4] = ctx->si;
  snap->regs[5] = ctx->di;
  snap->regs[6] = ctx->bp;
  snap->regs[7] = ctx->sp;
  snap->regs[8] = ctx->r8;
  snap->regs[9] = ctx->r9;
  snap->regs[10] = ctx->r10;
  snap->regs[11] = ctx->r11;
  snap->regs[12] = ctx->r12;
  snap->regs[13] = ctx->r13;
  snap->regs[14] = ctx->r14;
  snap->regs[15] = ctx->r15;
  snap->regs[16] = ctx->ip;
  snap->sp = ctx->sp;
  snap->pad = 0;
  __u64 copied = 0;
  for (int i = 0; i < AS_MAX_STACK_BYTES / 4096 + 1; i++) {
    if (copied >= max)
      break;
    __u64 from = snap->sp + copied;
    __u64 chunk = 4096 - (from & 4095), left = max - copied;
    if (chunk > left)
      chunk = left;
    /* copied < max, a power of two: the masks only tell the verifier so. */
    if (bpf_probe_read_user(dst + (copied & (max - 1)), chunk & 8191, (void *)from) != 0)
      break;
    copied += chunk;
  }
  snap->len = copied;
}

struct alloc_event_64k {
  struct as_alloc_event e;
  struct as_stack_snapshot snap;
  __u8 stack[AS_MAX_STACK_BYTES + 8192];
};

/* Reserves an alloc event with room for a `bytes` stack snapshot (a
 * constant: the verifier sizes the reservation). */
#define RESERVE_WITH_STACK(bytes) \
  bpf_ringbuf_reserve(&events, sizeof(struct as_alloc_event) + sizeof(struct as_stack_snapshot) + (bytes) + 8192, 0)

static __always_inline struct as_alloc_event *reserve_alloc_event(void) {
  switch (stack_bytes) { /* read-only: the verifier keeps one branch */
    case 0: return bpf_ringbuf_reserve(&events, sizeof(struct as_alloc_event), 0);
    case 4096: return RESERVE_WITH_STACK(4096);
    case 8192: return RESERVE_WITH_STACK(8192);
    case 16384: return RESERVE_WITH_STACK(16384);
    case 32768: return RESERVE_WITH_STACK(32768);
    default: return RESERVE_WITH_STACK(AS_MAX_STACK_BYTES);
  }
}

static long remember_vma(struct task_struct *task, struct vm_area_struct *vma, void *data) {
  struct as_vma *v = data;
  v->start = vma->vm_start;
  v->end = vma->vm_end;
  v->pgoff = (__u64)vma->vm_pgoff << 12;
  struct file *f = vma->vm_file;
  if (f) {
    v->ino = BPF_CORE_READ(f, f_inode, i_ino);
    v->dev = BPF_CORE_READ(f, f_inode, i_sb, s_dev);
  }
  return 0;
}

struct vma_walk {
  struct as_alloc_event *e;
  struct task_struct *task;
  __u32 nframes;
};

/* Names the mapping of frame i unless an earlier frame's mapping holds it. */
static long name_frame_vma(__u64 i, void *data) {
  struct vma_walk *w = data;
  struct as_alloc_event *e = w->e;
  if (i >= w->nframes || i >= AS_MAX_FRAMES)
    return 1;
  __u64 ip = e->frames[i] - 1; /* a return address: the call is before it */
  __u32 n = e->nvmas;
  for (__u32 j = 0; j < AS_MAX_VMAS; j++) {
    if (j >= n)
      break;
    if (ip >= e->vmas[j].start && ip < e->vmas[j].end)
      return 0;
  }
  if (n >= AS_MAX_VMAS)
    return 1;
  struct as_vma v = {};
  long err = bpf_find_vma(w->task, ip, remember_vma, &v, 0);
  if (err == -16) { /* EBUSY: the mmap lock is taken; the next frames would wait as well */
    count(AS_CNT_VMA_MISSES);
    return 1;
  }
  if (err || v.end == 0) /* else no mapping: a bogus frame past the stack's end */
    return 0;
  e->vmas[n & (AS_MAX_VMAS - 1)] = v;
  e->nvmas = n + 1;
  return 0;
}

static __always_inline void emit_alloc(struct pt_regs *ctx, struct thread_state *st, __u64 addr) {
  __u64 id = bpf_get_current_pid_tgid();
  struct as_live_key key = {.tgid = id >> 32, .addr = addr};
  __u64 now = bpf_ktime_get_ns();
  count(AS_CNT_SAMPLES);
  /* Reserve before the live insert so that a racing free's event is queued
   * after this one. */
  struct as_alloc_event *e = reserve_alloc_event();
  if (!e) {
    count(AS_CNT_RINGBUF_DROPS);
    count_process_drop(id >> 32);
    return;
  }
  __u16 flags = track_live ? 0 : AS_EVF_UNTRACKED;
  if (track_live) {
  /* Counted before the insert: a free of this address, which can only come
   * after this return, then finds the slot raised. */
  __u32 slot = as_live_slot(key.tgid, addr);
  __u32 *live_here = bpf_map_lookup_elem(&live_filter, &slot);
  if (live_here)
    __sync_fetch_and_add(live_here, 1);
  if (bpf_map_update_elem(&live, &key, &now, BPF_ANY) != 0) {
    flags |= AS_EVF_LIVE_DROPPED;
    count(AS_CNT_LIVE_FULL);
    if (live_here)
      __sync_fetch_and_add(live_here, -1); /* 32-bit atomics: add only */
  }
  }
  /* At the return the registers are the caller's: the walk starts at the
   * allocator's direct caller, whatever the allocator's prologue. */
  long n = bpf_get_stack(ctx, e->frames, sizeof(e->frames), BPF_F_USER_STACK);
  if (n <= 0) {
    flags |= AS_EVF_STACK_FAILED;
    count(AS_CNT_STACK_FAIL);
    n = 0;
  }
  if (stack_bytes) {
    struct alloc_event_64k *big = (void *)e;
    __u64 max = stack_bytes > AS_MAX_STACK_BYTES ? AS_MAX_STACK_BYTES : stack_bytes;
    snapshot(ctx, &big->snap, big->stack, max);
    flags |= AS_EVF_SNAPSHOT;
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
  e->hdr.nframes = (__u64)n / 8;
  e->hdr.pad = 0;
  /* The process's name (its main thread's), not this thread's. */
  struct task_struct *task = bpf_get_current_task_btf();
  bpf_probe_read_kernel_str(e->comm, sizeof(e->comm), task->group_leader->comm);
  e->nvmas = 0;
  e->pad = 0;
  struct vma_walk walk = {.e = e, .task = task, .nframes = e->hdr.nframes};
  bpf_loop(AS_MAX_FRAMES, name_frame_vma, &walk, 0);
  __u32 tgid = id >> 32;
  __u8 one = 1;
  bool first = !bpf_map_lookup_elem(&seen_processes, &tgid);
  if (first)
    bpf_map_update_elem(&seen_processes, &tgid, &one, BPF_ANY);
  bpf_ringbuf_submit(e, first ? BPF_RB_FORCE_WAKEUP : submit_flags());
}

/* Return of an allocating call. */
static __always_inline int alloc_exit(struct pt_regs *ctx) {
  count(AS_CNT_RETURNS);
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

/* realloc frees the old block at entry (realloc(p, 0) frees p; a NULL result
 * for n > 0 would keep p allocated, a rare error we accept) and allocates the
 * new size like malloc. */
static __always_inline bool realloc_enter(enum as_fn fn, __u64 ptr, __u64 size) {
  struct thread_state *st = thread_state(false);
  if (!st || st->depth == 0)
    free_address(ptr);
  return alloc_enter(fn, size, 0);
}

/* One allocator entry, by its enum as_fn; returns whether its return must be
 * seen. With a constant fn the switch folds away. */
static __always_inline bool enter(struct pt_regs *ctx, __u64 fn) {
  __u64 a = PT_REGS_PARM1(ctx), b = PT_REGS_PARM2(ctx), c = PT_REGS_PARM3(ctx), total = 0;
  switch (fn) {
    case AS_FN_MALLOC: return alloc_enter(AS_FN_MALLOC, a, 0);
    case AS_FN_CALLOC: return alloc_enter(AS_FN_CALLOC, array_bytes(a, b, &total) ? total : 0, 0);
    case AS_FN_REALLOC: return realloc_enter(AS_FN_REALLOC, a, b);
    case AS_FN_REALLOCARRAY:
      if (!array_bytes(b, c, &total)) /* fails without freeing */
        return alloc_enter(AS_FN_REALLOCARRAY, 0, 0);
      return realloc_enter(AS_FN_REALLOCARRAY, a, total);
    case AS_FN_POSIX_MEMALIGN: return alloc_enter(AS_FN_POSIX_MEMALIGN, c, a);
    case AS_FN_ALIGNED_ALLOC: return alloc_enter(AS_FN_ALIGNED_ALLOC, b, 0);
    case AS_FN_MEMALIGN: return alloc_enter(AS_FN_MEMALIGN, b, 0);
    case AS_FN_VALLOC: return alloc_enter(AS_FN_VALLOC, a, 0);
    case AS_FN_PVALLOC: return alloc_enter(AS_FN_PVALLOC, a, 0);
    case AS_FN_FREE: free_address(a); return false;
  }
  return false;
}

/* Uprobe session (kernel 6.13+): one program for every allocating entry
 * point of a library, the entry point in the attach cookie. Returning 1 from
 * the entry skips the return probe. */
SEC("uprobe")
int alloc_session(struct pt_regs *ctx) {
  if (bpf_session_is_return()) {
    alloc_exit(ctx);
    return 0;
  }
  return enter(ctx, bpf_get_attach_cookie(ctx)) ? 0 : 1;
}

/* malloc, the hottest entry point, has a session link of its own: no
 * cookie to read and no dispatch. */
SEC("uprobe")
int malloc_session(struct pt_regs *ctx) {
  if (bpf_session_is_return()) {
    alloc_exit(ctx);
    return 0;
  }
  return alloc_enter(AS_FN_MALLOC, PT_REGS_PARM1(ctx), 0) ? 0 : 1;
}

/* free through a uprobe_multi link (placed after free's NULL check). */
SEC("uprobe")
int free_multi(struct pt_regs *ctx) {
  free_address(PT_REGS_PARM1(ctx));
  return 0;
}

/* Classic uprobes and uretprobes, one program per entry point, for kernels
 * without sessions. */
#define CLASSIC_ENTRY(name, fn) \
  SEC("uprobe") int name(struct pt_regs *ctx) { enter(ctx, fn); return 0; }
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

SEC("uretprobe")
int alloc_return(struct pt_regs *ctx) {
  alloc_exit(ctx);
  return 0;
}

/* Process lifecycle. Events go only for processes userspace may hold
 * samples of: members, or (--all) every process not ignored. */
static __always_inline bool wanted(__u8 *verdict) {
  return verdict ? *verdict != AS_PROC_IGNORED : trace_unknown;
}

struct file_id {
  __u64 ino;
  __u32 dev;
  char name[32];
};

static __always_inline void identify(struct file *f, struct file_id *id) {
  id->ino = BPF_CORE_READ(f, f_inode, i_ino);
  id->dev = BPF_CORE_READ(f, f_inode, i_sb, s_dev);
  bpf_probe_read_kernel_str(id->name, sizeof(id->name), BPF_CORE_READ(f, f_path.dentry, d_name.name));
}

static __always_inline void emit_proc(__u32 kind, __u32 tgid, __u32 parent, const char *comm,
                                      const struct file_id *file, __u64 addr) {
  struct as_proc_event *e = bpf_ringbuf_reserve(&events, sizeof(*e), 0);
  if (!e) {
    count(AS_CNT_PROC_DROPS);
    return;
  }
  __builtin_memset(e, 0, sizeof(*e));
  e->kind = kind;
  e->tgid = tgid;
  e->parent = parent;
  e->ts_ns = bpf_ktime_get_ns();
  e->addr = addr;
  bpf_probe_read_kernel_str(e->comm, sizeof(e->comm), comm);
  if (file) {
    e->ino = file->ino;
    e->dev = file->dev;
    __builtin_memcpy(e->name, file->name, sizeof(e->name));
  }
  /* Userspace must read the process while it lives: wake it now. */
  bpf_ringbuf_submit(e, BPF_RB_FORCE_WAKEUP);
}

SEC("tp_btf/sched_process_fork")
int BPF_PROG(on_fork, struct task_struct *parent, struct task_struct *child) {
  if (child->pid != child->tgid) /* a new thread, not a process */
    return 0;
  __u32 ptgid = parent->tgid, ctgid = child->tgid;
  __u8 *v = bpf_map_lookup_elem(&processes, &ptgid);
  if (v && (*v != AS_PROC_MEMBER || follow_children)) {
    __u8 copy = *v; /* a child of an ignored process has its name until exec */
    if (bpf_map_update_elem(&processes, &ctgid, &copy, BPF_ANY) != 0)
      count(AS_CNT_PROC_TABLE_FULL);
  }
  if (wanted(v) && (follow_children || trace_unknown))
    emit_proc(AS_EV_FORK, ctgid, ptgid, child->comm, 0, 0);
  return 0;
}

SEC("tp_btf/sched_process_exec")
int BPF_PROG(on_exec, struct task_struct *p, pid_t old_pid, struct linux_binprm *bprm) {
  __u32 tgid = p->tgid;
  __u8 *v = bpf_map_lookup_elem(&processes, &tgid);
  /* A new name: judged again. */
  if (v && *v == AS_PROC_IGNORED) {
    bpf_map_delete_elem(&processes, &tgid);
    v = 0;
  } else if (v && *v == AS_PROC_MEMBER_IGNORED) {
    *v = AS_PROC_MEMBER;
  }
  /* A new program: a fresh countdown, no allocator call in progress. */
  bpf_task_storage_delete(&threads, p);
  if (wanted(v)) {
    struct file_id id = {};
    identify(bprm->file, &id);
    emit_proc(AS_EV_EXEC, tgid, 0, p->comm, &id, 0);
  }
  return 0;
}

SEC("tp_btf/sched_process_exit")
int BPF_PROG(on_exit, struct task_struct *p) {
  /* The last thread out: do_exit has counted it out of signal->live by now
   * (read here rather than taken as the tracepoint's newer second argument). */
  if (BPF_CORE_READ(p, signal, live.counter) != 0)
    return 0;
  __u32 tgid = p->tgid;
  __u8 *v = bpf_map_lookup_elem(&processes, &tgid);
  /* With --all, an ignored process's exit too: its id may come back. */
  bool want = v ? (*v != AS_PROC_IGNORED || trace_unknown) : trace_unknown;
  /* The process id may be reused: nothing of this process may carry over. */
  bpf_map_delete_elem(&processes, &tgid);
  bpf_map_delete_elem(&seen_processes, &tgid);
  if (want)
    emit_proc(AS_EV_EXIT, tgid, 0, p->comm, 0, 0);
  return 0;
}

static long identify_vma(struct task_struct *task, struct vm_area_struct *vma, void *data) {
  if (vma->vm_file)
    identify(vma->vm_file, data);
  return 0;
}

static __always_inline bool c_library_name(const char *n) {
  return (n[0] == 'l' && n[1] == 'i' && n[2] == 'b' && n[3] == 'c' && (n[4] == '.' || n[4] == '-')) ||
         (n[0] == 'l' && n[1] == 'd' && n[2] == '-' && n[3] == 'm' && n[4] == 'u'); /* musl */
}

/* A C library file mapped executable for the first time (a container's, a
 * copy run through its own loader): userspace probes it. Seen at the mmap
 * syscall's exit, the one hook this needs that every kernel with BTF has
 * (fentry and LSM programs may be locked down); the first instruction of
 * the program rejects every other system call. */
SEC("tp_btf/sys_exit")
int BPF_PROG(on_syscall_exit, struct pt_regs *regs, long ret) {
  if (BPF_CORE_READ(regs, orig_ax) != 9 /* mmap */ || ret <= 0) /* an address, or -errno */
    return 0;
  if (!(BPF_CORE_READ(regs, dx) & 4 /* PROT_EXEC */))
    return 0;
  __u32 tgid = bpf_get_current_pid_tgid() >> 32;
  if (!wanted(bpf_map_lookup_elem(&processes, &tgid)))
    return 0;
  struct file_id id = {};
  struct task_struct *t = bpf_get_current_task_btf();
  if (bpf_find_vma(t, ret, identify_vma, &id, 0) != 0 || !id.ino || !c_library_name(id.name))
    return 0;
  __u64 key[2] = {id.dev, id.ino};
  __u8 one = 1;
  if (bpf_map_update_elem(&known_files, key, &one, BPF_NOEXIST) != 0)
    return 0;
  emit_proc(AS_EV_MMAP, tgid, 0, t->comm, &id, ret);
  return 0;
}

/* --null-probes: the same probes doing nothing, to measure the floor. */
SEC("uprobe")
int null_session(struct pt_regs *ctx) { return 1; }

SEC("uprobe")
int null_multi(struct pt_regs *ctx) { return 0; }

SEC("uprobe")
int null_classic(struct pt_regs *ctx) { return 0; }
