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
/* Reads of the walked stack go through a window copied a few KiB at a
 * time: a user read costs as much for 4 KiB as for 8 bytes (the access
 * checks dominate), and a walk reads upwards. */
#define STACK_WINDOW 4096
struct stack_window {
  __u64 base;  /* user address of bytes[0] */
  __u64 len;   /* valid bytes; 0: empty */
  __u64 limit; /* end of the thread's stack: copies stop there */
  __u8 bytes[STACK_WINDOW + 8];
};

static __always_inline int window_read(struct stack_window *w, __u64 addr, __u64 *out) {
  if (addr < w->base || addr - w->base > w->len || w->len - (addr - w->base) < 8) {
    __u64 base = addr & ~7ULL, len = STACK_WINDOW;
    if (w->limit > base && w->limit - base < len)
      len = w->limit - base;
    if (len < 8 || bpf_probe_read_user(w->bytes, len, (const void *)base) != 0) {
      w->len = 0; /* outside the stack, or a page missing: this word alone */
      return bpf_probe_read_user(out, 8, (const void *)addr);
    }
    w->base = base;
    w->len = len;
  }
  __builtin_memcpy(out, w->bytes + ((addr - w->base) & (STACK_WINDOW - 1)), 8);
  return 0;
}
#define AS_READ_U64(mem, addr, out) window_read((struct stack_window *)(mem), (addr), (out))
static __always_inline const struct as_unwind_row *table_at(void *table, __u32 i) {
  return bpf_map_lookup_elem(table, &i);
}
#define AS_TABLE_AT(table, i) table_at((table), (i))
#include "unwind.h"

char LICENSE[] SEC("license") = "GPL";

/* Set by userspace before load. */
const volatile __u64 sample_rate = 512 * 1024; /* mean bytes between samples; 1 = every allocation */
const volatile __u64 log2_table[AS_LOG2_TABLE_SIZE];
const volatile bool use_sessions = false; /* entry decides whether the return runs */
const volatile __u64 wakeup_bytes = 1 << 20; /* wake the reader only past this much pending data */
const volatile bool use_tables = true; /* unwind with the loaded CFI tables; false: frame pointers only */
/* The frame-pointer rule (as_frame_pointer_row()): frames without a table
 * row. A global, which also puts the row type in the BTF libbpf sizes the
 * inner table maps from. */
const volatile struct as_unwind_row frame_pointer_rule;
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

/* Sampled allocations not yet freed; capacity set by userspace (--max-live).
 * Not preallocated: exact mode needs room for millions, sampling for few. */
struct {
  __uint(type, BPF_MAP_TYPE_HASH);
  __uint(map_flags, BPF_F_NO_PREALLOC);
  __uint(max_entries, 1);
  __type(key, struct as_live_key);
  __type(value, struct as_live_value);
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
  __type(key, struct as_file_key);
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

/* A thread's stack walk in progress, and the stack event it becomes: per
 * thread rather than per CPU, since uprobe programs can be preempted. */
/* Rows of the return addresses the thread's walks met, by address: the
 * frames a walk shares with earlier ones (most of them, for the calls of one
 * code path) need no mapping or table lookup. Valid for one generation of
 * the thread's mapping set (ev.vmas, which walks add to, and which is
 * emptied, with a new generation, when full). */
#define ROW_CACHE 1024
struct cached_row {
  __u64 tag; /* address | generation << 48; 0: empty */
  struct as_unwind_row row;
};

struct walk_scratch {
  struct as_stack_event ev;
  __u64 stack_end; /* end of the mapping that holds the thread's stack; 0: unknown */
  __u64 generation;
  struct cached_row rows[ROW_CACHE];
  struct stack_window window;
};

struct {
  __uint(type, BPF_MAP_TYPE_TASK_STORAGE);
  __uint(map_flags, BPF_F_NO_PREALLOC);
  __type(key, int);
  __type(value, struct walk_scratch);
} walks SEC(".maps");

/* Executable mappings each process's walks have met, for walks that find
 * the mmap lock taken (another thread is mapping memory): code on a live
 * stack stays mapped, so an entry is right for any true return address. */
#define VMA_CACHE 16
struct vma_cache {
  __u32 next; /* slot the next new mapping replaces */
  __u32 pad;
  struct as_vma vmas[VMA_CACHE];
};

struct {
  __uint(type, BPF_MAP_TYPE_LRU_HASH);
  __uint(max_entries, 4096);
  __type(key, __u32);
  __type(value, struct vma_cache);
} process_vmas SEC(".maps");

static const struct vma_cache empty_vma_cache = {}; /* too big for the BPF stack: inserts copy it */

/* Unwind tables by file, laid out as bpf/unwind.h says (a header, a page
 * index, the rules). Sized per file by userspace. */
struct unwind_table {
  __uint(type, BPF_MAP_TYPE_ARRAY);
  __uint(map_flags, BPF_F_INNER_MAP | BPF_F_MMAPABLE);
  __uint(max_entries, 1);
  __type(key, __u32);
  __type(value, struct as_unwind_row);
};

struct {
  __uint(type, BPF_MAP_TYPE_HASH_OF_MAPS);
  __uint(max_entries, 1); /* set by userspace */
  __type(key, struct as_file_key);
  __array(values, struct unwind_table);
} unwind_tables SEC(".maps");

/* Files whose table was asked of userspace (cleared when it is loaded). */
struct {
  __uint(type, BPF_MAP_TYPE_LRU_HASH);
  __uint(max_entries, 4096);
  __type(key, struct as_file_key);
  __type(value, __u8);
} table_requests SEC(".maps");

/* Stack ids userspace has been sent. Forgetting one only sends it again. */
struct {
  __uint(type, BPF_MAP_TYPE_LRU_HASH);
  __uint(max_entries, 1 << 16);
  __type(key, __u64);
  __type(value, __u8);
} sent_stacks SEC(".maps");

/* Exact mode: totals per stack id; capacity set by userspace (--max-stacks). */
struct {
  __uint(type, BPF_MAP_TYPE_HASH);
  __uint(map_flags, BPF_F_NO_PREALLOC);
  __uint(max_entries, 1);
  __type(key, __u64);
  __type(value, struct as_exact_totals);
} exact_totals SEC(".maps");

/* Atomic although per CPU: uprobe programs can be preempted, and another
 * run on the same CPU would otherwise lose an increment. */
static __always_inline void count(__u32 which) {
  __u64 *c = bpf_map_lookup_elem(&counters, &which);
  if (c)
    __sync_fetch_and_add(c, 1);
}

static __always_inline void count_bytes(__u32 which, __u64 n) {
  __u64 *c = bpf_map_lookup_elem(&counters, &which);
  if (c)
    __sync_fetch_and_add(c, n);
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

/* Exact mode: the freed block's allocation leaves its stack's live total. */
static __always_inline void count_exact_free(const struct as_live_value *v) {
  struct as_exact_totals *t = bpf_map_lookup_elem(&exact_totals, &v->stack);
  if (!t)
    return; /* its stack was not counted (the map was full) */
  __sync_fetch_and_add(&t->frees, 1);
  __sync_fetch_and_add(&t->free_bytes, v->size);
  __u64 life = bpf_ktime_get_ns() - v->ts_ns;
  __u32 msb = 0;
  if (life)
    as_normalize(life, &msb);
  __u32 b = msb > AS_LIFETIME_FIRST_LOG2 ? msb - AS_LIFETIME_FIRST_LOG2 : 0;
  if (b >= AS_LIFETIME_BUCKETS)
    b = AS_LIFETIME_BUCKETS - 1;
  __sync_fetch_and_add(&t->lifetimes[b], 1);
}

static __always_inline void free_address(__u64 addr) {
  __u64 id = bpf_get_current_pid_tgid();
  struct as_live_key key = {.tgid = id >> 32, .addr = addr};
  __u32 slot = as_live_slot(key.tgid, addr);
  __u32 *live_here = bpf_map_lookup_elem(&live_filter, &slot);
  /* The filter, then a lookup: a miss (the common case) takes no bucket lock. */
  if (!addr || !live_here || !*live_here)
    return;
  struct as_live_value *found = bpf_map_lookup_elem(&live, &key);
  if (!found)
    return;
  struct as_live_value v = *found;
  struct as_event *e = sample_rate <= 1 ? 0 : bpf_ringbuf_reserve(&events, sizeof(*e), 0);
  if (bpf_map_delete_elem(&live, &key) != 0) { /* a racing free got it first */
    if (e)
      bpf_ringbuf_discard(e, 0);
    return;
  }
  __sync_fetch_and_add(live_here, -1); /* 32-bit atomics: add only */
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
  e->kind = AS_EV_FREE;
  e->tgid = id >> 32;
  e->tid = (__u32)id;
  e->fn = AS_FN_FREE;
  e->flags = 0;
  e->ts_ns = bpf_ktime_get_ns();
  e->addr = addr;
  e->size = 0;
  e->offset = 0;
  e->stack = 0;
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

/* ---- Stack walks ------------------------------------------------------- */

struct walk {
  struct as_stack_event *ev; /* the thread's scratch: frames and mappings so far */
  struct task_struct *task;
  struct as_unwind_regs regs;
  __u64 stack_end; /* end of the mapping that holds the thread's stack */
  __u64 id;        /* stack id, mixed as frames are added */
  __u32 stop;      /* enum as_stop */
  __u32 restart;   /* the mapping set was full: emptied, walk again */
  __u32 misses;    /* frames not in the row cache */
  struct walk_scratch *scratch;
  struct as_unwind_row row; /* the rule of the frame being unwound */
  struct as_vma vma;        /* the mapping it is in */
};

static __always_inline __u64 mix(__u64 h, __u64 v) {
  h ^= v + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2);
  return h * 0xff51afd7ed558ccdULL;
}

struct vma_found {
  struct as_vma v;
  __u64 flags; /* vm_flags */
};

static long remember_vma(struct task_struct *task, struct vm_area_struct *vma, void *data) {
  struct vma_found *f = data;
  f->v.start = vma->vm_start;
  f->v.end = vma->vm_end;
  f->v.pgoff = (__u64)vma->vm_pgoff << 12;
  f->flags = vma->vm_flags;
  struct file *file = vma->vm_file;
  if (file) {
    f->v.ino = BPF_CORE_READ(file, f_inode, i_ino);
    f->v.dev = BPF_CORE_READ(file, f_inode, i_sb, s_dev);
  }
  return 0;
}

/* The scans below are global functions: verified once on their own, where
 * inlined each loop would be verified again on every path into it. */

/* The entry of `vmas` (n of them) holding addr, copied to out; 0 if none. */
__noinline int scan_stack_vmas(struct as_stack_event *ev, __u64 addr, struct as_vma *out) {
  if (!ev || !out)
    return 0;
  for (__u32 j = 0; j < AS_MAX_VMAS; j++) {
    if (j >= ev->nvmas)
      break;
    if (addr >= ev->vmas[j].start && addr < ev->vmas[j].end) {
      *out = ev->vmas[j];
      return 1;
    }
  }
  return 0;
}

__noinline int scan_cached_vmas(struct vma_cache *c, __u64 addr, struct as_vma *out) {
  if (!c || !out)
    return 0;
  for (int j = 0; j < VMA_CACHE; j++) {
    if (addr >= c->vmas[j].start && addr < c->vmas[j].end) {
      *out = c->vmas[j];
      return 1;
    }
  }
  return 0;
}

__noinline int cache_vma_in(struct vma_cache *c, struct as_vma *v) {
  if (!c || !v)
    return 0;
  for (int j = 0; j < VMA_CACHE; j++)
    if (c->vmas[j].start == v->start && c->vmas[j].ino == v->ino)
      return 0;
  c->vmas[c->next % VMA_CACHE] = *v;
  c->next++;
  return 1;
}

static __always_inline void cache_vma(__u32 tgid, struct as_vma *v) {
  struct vma_cache *c = bpf_map_lookup_elem(&process_vmas, &tgid);
  if (!c) {
    bpf_map_update_elem(&process_vmas, &tgid, &empty_vma_cache, BPF_NOEXIST);
    c = bpf_map_lookup_elem(&process_vmas, &tgid);
    if (!c)
      return;
  }
  cache_vma_in(c, v);
}

/* Puts the executable mapping holding `addr` in w->vma, looked up in the
 * kernel the first time (and added to the event's list); false (w->stop
 * set) when there is none. A copy rather than an index into the list: the
 * verifier then follows one path past the search, not one per entry. */
static __always_inline bool find_vma(struct walk *w, __u64 addr) {
  struct as_stack_event *ev = w->ev;
  if (scan_stack_vmas(ev, addr, &w->vma))
    return true;
  __u32 n = ev->nvmas;
  if (n >= AS_MAX_VMAS) {
    /* Full of mappings earlier walks met: start over with this walk's own,
     * unless it is this walk that needs so many. */
    if (ev->nframes < n)
      w->restart = 1;
    else
      w->stop = AS_STOP_VMAS;
    return false;
  }
  struct vma_found f = {};
  long err = bpf_find_vma(w->task, addr, remember_vma, &f, 0);
  if (err == -AS_EBUSY) {
    __u32 tgid = w->task->tgid;
    if (!scan_cached_vmas(bpf_map_lookup_elem(&process_vmas, &tgid), addr, &f.v)) {
      w->stop = AS_STOP_VMA_BUSY;
      return false;
    }
  } else if (err || !(f.flags & AS_VM_EXEC)) { /* not code: a return address that is not one */
    w->stop = AS_STOP_BAD_IP;
    return false;
  } else {
    cache_vma(w->task->tgid, &f.v);
  }
  ev->vmas[n] = f.v;
  ev->nvmas = n + 1;
  w->vma = f.v;
  return true;
}

static __always_inline void request_table(struct walk *w, struct as_vma *v, struct as_file_key *key) {
  __u8 one = 1;
  if (bpf_map_update_elem(&table_requests, key, &one, BPF_NOEXIST) != 0)
    return; /* asked already */
  struct as_table_event *e = bpf_ringbuf_reserve(&events, sizeof(*e), 0);
  if (!e) {
    bpf_map_delete_elem(&table_requests, key); /* ask again next time */
    return;
  }
  count(AS_CNT_TABLE_REQUESTS);
  e->kind = AS_EV_NEED_TABLE;
  e->tgid = w->task->tgid;
  e->vma = *v;
  bpf_ringbuf_submit(e, BPF_RB_FORCE_WAKEUP);
}

/* The row of table `key` that covers file offset `off`: binary search for
 * the last row whose pc is at most `off`. A global function, verified once
 * on its own: inlined, its loop would be verified again on every path. */
__noinline int lookup_row(struct as_file_key *key, __u64 off, struct as_unwind_row *out) {
  if (!key || !out)
    return AS_STOP_NO_INFO;
  void *table = bpf_map_lookup_elem(&unwind_tables, key);
  if (!table)
    return AS_STOP_NO_TABLE;
  struct as_unwind_row none = {0, 0, AS_ROW_NONE, 0};
  const struct as_unwind_row *r = off <= 0xffffffffULL ? as_table_find(table, off) : 0;
  *out = r ? *r : none;
  return r ? AS_STOP_NONE : AS_STOP_NO_INFO;
}

/* The step, verified once on its own (a global function). */
__noinline int unwind_step(struct as_unwind_row *row, struct as_unwind_regs *regs, struct stack_window *window) {
  if (!row || !regs || !window)
    return AS_STOP_BAD_FRAME;
  return as_unwind_step(row, regs, window->limit, window);
}

/* One frame of the walk: records its pc and moves to its caller. The frame
 * number is read from the event, not taken from the loop, so that the
 * verifier sees one frame, not 127 different ones. */
static long walk_frame(__u64 unused, void *data) {
  struct walk *w = data;
  struct as_stack_event *ev = w->ev;
  __u32 n = ev->nframes;
  if (n >= AS_MAX_FRAMES) {
    w->stop = AS_STOP_DEPTH;
    return 1;
  }
  __u64 ip = w->regs.ip;
  /* A return address: the call is before it. Frame 0's pc, the allocator's
   * return into its caller, is where that caller resumes, and its state. */
  __u64 at = n == 0 ? ip : ip - 1;
  struct walk_scratch *sc = w->scratch;
  __u64 tag = at | (sc->generation << 48);
  struct cached_row *c = &sc->rows[(at ^ (at >> 9)) & (ROW_CACHE - 1)];
  if (c->tag == tag) {
    w->row = c->row;
  } else {
    w->misses++;
    if (!find_vma(w, at))
      return 1;
    struct as_vma *v = &w->vma;
    w->row = frame_pointer_rule;
    /* Code in anonymous memory (JIT) has no file to describe it: frame
     * pointers, checked like any row. */
    if (use_tables && v->ino) {
      struct as_file_key key = {.ino = v->ino, .dev = v->dev};
      if (lookup_row(&key, at - v->start + v->pgoff, &w->row) == AS_STOP_NO_TABLE) {
        request_table(w, v, &key);
        ev->frames[n] = ip; /* its pc is known, its caller not yet */
        ev->nframes = n + 1;
        w->stop = AS_STOP_NO_TABLE;
        return 1;
      }
    }
    c->tag = tag;
    c->row = w->row;
  }
  ev->frames[n] = ip;
  ev->nframes = n + 1;
  w->id = mix(w->id, ip);
  int rc = unwind_step(&w->row, &w->regs, &w->scratch->window);
  if (rc != AS_STOP_NONE) {
    w->stop = rc;
    return 1;
  }
  return 0;
}

/* Walks the current thread's user stack from the registers at the
 * allocator's return (the caller's) into the thread's scratch event, and
 * gives the stack's id; NULL when there is no scratch. */
static __always_inline struct as_stack_event *walk_stack(struct pt_regs *ctx, __u16 fn, struct walk *wp) {
  __u64 ip = ctx->ip, sp = ctx->sp, bp = ctx->bp;
  struct task_struct *task = bpf_get_current_task_btf();
  struct walk_scratch *scratch = bpf_task_storage_get(&walks, task, 0, BPF_LOCAL_STORAGE_GET_F_CREATE);
  if (!scratch)
    return 0;
  struct as_stack_event *ev = &scratch->ev;
  struct walk w = {.ev = ev, .task = task, .scratch = scratch};
  /* A thread's stack mapping ends where it did: looked up once per thread
   * (again if sp is past it: a signal stack). */
  if (sp >= scratch->stack_end) {
    struct vma_found stack = {};
    scratch->stack_end = bpf_find_vma(task, sp, remember_vma, &stack, 0) == 0 ? stack.v.end : 0;
  }
  w.stack_end = scratch->stack_end;
  scratch->window.len = 0; /* the stack has changed since the last walk */
  scratch->window.limit = scratch->stack_end;
  /* The id covers the process instance: a new program (exec) or a new
   * process with the same pid never shares a stack with an old one. */
  struct task_struct *leader = task->group_leader;
  __u64 instance = mix(mix(mix(task->tgid, leader->start_time), leader->self_exec_id), fn);
  for (int attempt = 0; attempt < 2; attempt++) {
    ev->nframes = 0;
    w.regs.ip = ip;
    w.regs.sp = sp;
    w.regs.bp = bp;
    w.regs.bp_lost = 0;
    w.id = instance;
    w.stop = AS_STOP_NONE;
    w.restart = 0;
    w.misses = 0;
    bpf_loop(AS_MAX_FRAMES, walk_frame, &w, 0);
    if (!w.restart)
      break;
    ev->nvmas = 0;
    scratch->generation++;
  }
  if (w.stop == AS_STOP_NONE)
    w.stop = w.restart ? AS_STOP_VMAS : AS_STOP_DEPTH;
  count(AS_CNT_STOP_FIRST + (w.stop < 10 ? w.stop : 0));
  count_bytes(AS_CNT_FRAMES, ev->nframes);
  count_bytes(AS_CNT_ROW_MISSES, w.misses);
  ev->kind = AS_EV_STACK;
  ev->tgid = task->tgid;
  ev->fn = fn;
  ev->stop = w.stop;
  ev->pad = 0;
  ev->id = mix(w.id, w.stop);
  bpf_probe_read_kernel_str(ev->comm, sizeof(ev->comm), leader->comm);
  *wp = w;
  return ev;
}

/* A walk that stopped for want of a table, sent with the stopped frame's
 * registers and up to AS_DEFER_STACK_BYTES of stack, copied a page at a
 * time (a read crossing the end of the stack mapping would fail whole).
 * Its id is its own: another stack may share the frames found so far. */
struct deferred_event {
  struct as_stack_event ev;
  struct as_deferred_walk walk;
  __u8 stack[AS_DEFER_STACK_BYTES + 4096]; /* slack: bounds each page copy for the verifier */
};

static __always_inline bool send_deferred(struct as_stack_event *ev, struct walk *w) {
  struct deferred_event *d = bpf_ringbuf_reserve(&events, sizeof(*d), 0);
  if (!d) {
    count(AS_CNT_STACK_DROPS);
    return false;
  }
  ev->id = mix(ev->id, bpf_ktime_get_ns());
  bpf_probe_read_kernel(&d->ev, sizeof(*ev), ev); /* too big to copy inline */
  d->walk.ip = w->regs.ip;
  d->walk.sp = w->regs.sp;
  d->walk.bp = w->regs.bp;
  d->walk.bp_lost = w->regs.bp_lost;
  d->walk.stack_end = w->stack_end;
  __u64 copied = 0, max = AS_DEFER_STACK_BYTES;
  if (w->stack_end > w->regs.sp && w->stack_end - w->regs.sp < max)
    max = w->stack_end - w->regs.sp;
  for (int i = 0; i < AS_DEFER_STACK_BYTES / 4096 + 1; i++) {
    if (copied >= max)
      break;
    __u64 from = w->regs.sp + copied;
    __u64 chunk = 4096 - (from & 4095), left = max - copied;
    if (chunk > left)
      chunk = left;
    /* copied < max <= AS_DEFER_STACK_BYTES, a power of two: the mask only tells the verifier so. */
    if (bpf_probe_read_user(d->stack + (copied & (AS_DEFER_STACK_BYTES - 1)), chunk, (void *)from) != 0)
      break;
    copied += chunk;
  }
  d->walk.len = copied;
  bpf_ringbuf_submit(d, BPF_RB_FORCE_WAKEUP);
  return true;
}

/* Sends the stack unless userspace has it: it is queued before any event
 * that names its id (the ring buffer keeps the order of reservations, and
 * the id is marked sent only once the stack is in). */
static __always_inline bool send_stack(struct as_stack_event *ev) {
  __u64 id = ev->id;
  if (bpf_map_lookup_elem(&sent_stacks, &id))
    return true;
  if (bpf_ringbuf_output(&events, ev, sizeof(*ev), BPF_RB_FORCE_WAKEUP) != 0) {
    count(AS_CNT_STACK_DROPS);
    return false;
  }
  __u8 one = 1;
  bpf_map_update_elem(&sent_stacks, &id, &one, BPF_ANY);
  return true;
}

/* Exact mode: the allocation is added to its stack's totals here, and its
 * block remembered with the stack so that its free subtracts it. */
static __always_inline void count_exact(__u64 id, __u64 size, __u64 addr, __u64 now) {
  struct as_exact_totals *t = bpf_map_lookup_elem(&exact_totals, &id);
  if (!t) {
    struct as_exact_totals zero = {};
    bpf_map_update_elem(&exact_totals, &id, &zero, BPF_NOEXIST);
    t = bpf_map_lookup_elem(&exact_totals, &id);
  }
  if (!t) {
    count(AS_CNT_EXACT_FULL);
    count_bytes(AS_CNT_EXACT_FULL_BYTES, size);
    return;
  }
  __sync_fetch_and_add(&t->allocs, 1);
  __sync_fetch_and_add(&t->alloc_bytes, size);
}

static __always_inline void track_live_block(__u32 tgid, __u64 addr, struct as_live_value *val, __u16 *flags) {
  struct as_live_key key = {.tgid = tgid, .addr = addr};
  /* Counted before the insert: a free of this address, which can only come
   * after this return, then finds the slot raised. */
  __u32 slot = as_live_slot(tgid, addr);
  __u32 *live_here = bpf_map_lookup_elem(&live_filter, &slot);
  if (live_here)
    __sync_fetch_and_add(live_here, 1);
  if (bpf_map_update_elem(&live, &key, val, BPF_ANY) != 0) {
    *flags |= AS_EVF_LIVE_DROPPED;
    count(AS_CNT_LIVE_FULL);
    count_bytes(AS_CNT_LIVE_FULL_BYTES, val->size);
    if (live_here)
      __sync_fetch_and_add(live_here, -1); /* 32-bit atomics: add only */
  }
}

static __always_inline void count_dropped(__u32 tgid, __u64 size) {
  count(AS_CNT_RINGBUF_DROPS);
  count_bytes(AS_CNT_DROPPED_BYTES, size);
  count_process_drop(tgid);
}

static __always_inline void emit_alloc(struct pt_regs *ctx, struct thread_state *st, __u64 addr) {
  __u64 pid_tgid = bpf_get_current_pid_tgid();
  __u32 tgid = pid_tgid >> 32;
  __u64 now = bpf_ktime_get_ns();
  count(AS_CNT_SAMPLES);
  struct walk w;
  struct as_stack_event *stack = walk_stack(ctx, st->pending_fn, &w);
  if (!stack || !(stack->stop == AS_STOP_NO_TABLE ? send_deferred(stack, &w) : send_stack(stack))) {
    count_dropped(tgid, st->pending_size);
    return;
  }
  __u64 id = stack->id;
  __u16 flags = track_live ? 0 : AS_EVF_UNTRACKED;
  struct as_live_value val = {.ts_ns = now, .size = st->pending_size, .stack = id};
  if (sample_rate <= 1) {
    count_exact(id, st->pending_size, addr, now);
    if (track_live)
      track_live_block(tgid, addr, &val, &flags);
    return;
  }
  /* Reserved before the live insert so that a racing free's event is
   * queued after this one. */
  struct as_alloc_event *e = bpf_ringbuf_reserve(&events, sizeof(*e), 0);
  if (!e) {
    count_dropped(tgid, st->pending_size);
    return;
  }
  if (track_live)
    track_live_block(tgid, addr, &val, &flags);
  e->hdr.kind = AS_EV_ALLOC;
  e->hdr.tgid = tgid;
  e->hdr.tid = (__u32)pid_tgid;
  e->hdr.fn = st->pending_fn;
  e->hdr.flags = flags;
  e->hdr.ts_ns = now;
  e->hdr.addr = addr;
  e->hdr.size = st->pending_size;
  e->hdr.offset = st->pending_offset;
  e->hdr.stack = id;
  __builtin_memcpy(e->comm, stack->comm, sizeof(e->comm));
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
  bpf_task_storage_delete(&walks, p); /* its mappings and rows were the old program's */
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
  if (BPF_CORE_READ(regs, orig_ax) != AS_SYS_MMAP || ret <= 0) /* an address, or -errno */
    return 0;
  if (!(BPF_CORE_READ(regs, dx) & AS_PROT_EXEC))
    return 0;
  __u32 tgid = bpf_get_current_pid_tgid() >> 32;
  if (!wanted(bpf_map_lookup_elem(&processes, &tgid)))
    return 0;
  struct file_id id = {};
  struct task_struct *t = bpf_get_current_task_btf();
  if (bpf_find_vma(t, ret, identify_vma, &id, 0) != 0 || !id.ino || !c_library_name(id.name))
    return 0;
  struct as_file_key key = {.ino = id.ino, .dev = id.dev};
  __u8 one = 1;
  if (bpf_map_update_elem(&known_files, &key, &one, BPF_NOEXIST) != 0)
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
