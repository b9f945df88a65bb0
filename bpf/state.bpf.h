/* SPDX-License-Identifier: GPL-2.0 */
/* Settings from userspace, the maps, and the helpers every program uses. A
 * part of allocscope.bpf.c's one translation unit, included there first. */
#pragma once

/* Linux values the programs use (vmlinux.h has no macros). */
#define AS_EBUSY 16
#define AS_SYS_MMAP 9
#define AS_PROT_EXEC 4
#define AS_VM_EXEC 0x4

/* Set by userspace before load. */
const volatile __u64 sample_rate = 512 * 1024; /* mean bytes between samples; 1 = every allocation */
const volatile __u64 log2_table[AS_LOG2_TABLE_SIZE];
const volatile bool use_sessions = false;    /* entry decides whether the return runs */
const volatile __u64 wakeup_bytes = 1 << 20; /* wake the reader only past this much pending data */
const volatile bool use_tables = true; /* unwind with the loaded CFI tables; false: frame pointers only */
/* The frame-pointer rule (as_frame_pointer_row()): frames without a table
 * row. A global, which also puts the row type in the BTF libbpf sizes the
 * inner table maps from. */
const volatile struct as_unwind_row frame_pointer_rule;
const volatile bool track_live = true; /* false (--no-free): no free is seen, keep no live entries */
/* System-wide probes: which processes are traced (see process_traced). */
const volatile bool filter_processes = false;
const volatile bool trace_unknown = false;   /* processes without a verdict are traced (--all) */
const volatile bool follow_children = false; /* members' forked children become members */
/* Stop a process that maps or runs a new file until it is examined. */
const volatile bool hold_new_files = false;
/* --comm or --unit: name_verdicts applies to processes without a verdict,
 * by name (and with --unit, cgroup). */
const volatile bool judge_names = false;
const volatile bool judge_cgroups = false;
const volatile __u64 cgroup_id = 0;    /* --cgroup: traced only inside this cgroup ... */
const volatile __u32 cgroup_level = 0; /* ... at this depth below the root; 0: no filter */

struct thread_state {
  __u64 countdown; /* bytes before the next sampled byte */
  __u32 depth;     /* allocator calls in progress on this thread */
  __u32 initialized;
  __u32 pending;        /* the outermost call in progress is sampled */
  __u32 pending_fn;     /* enum as_fn */
  __u64 pending_size;   /* requested bytes */
  __u64 pending_offset; /* bytes before the sampled byte */
  __u64 pending_memptr; /* posix_memalign's out pointer */
  __u32 epoch;          /* probe_epoch when this state was last good */
  __u32 calls;          /* allocating calls since the last batch added to `busy` */
};

/* Raised by userspace whenever it attaches probes again (the agent's duty
 * cycle): a call whose return probe went away mid-call left its thread's
 * depth raised, so a state from an older epoch starts afresh. */
volatile __u32 probe_epoch = 0;

/* Kernels from 6.13 give a tracing program's functions of 64 bytes of stack
 * or more a per-CPU private stack, which is safe where a program cannot run
 * twice on a CPU at once. A uprobe program can: it runs preemptibly, and
 * another thread's run on the same CPU overwrites the first's stack (a
 * kernel oops, seen on Debian's 7.3). A program that may tail-call gets no
 * private stack: every uprobe program has a tail call the verifier cannot
 * rule out, never taken, into an empty array (as_no_private_stack), one per
 * attach type (a program array serves programs of one kind). */
#define NO_PRIVATE_STACK(name)             \
  struct {                                 \
    __uint(type, BPF_MAP_TYPE_PROG_ARRAY); \
    __uint(max_entries, 1);                \
    __type(key, __u32);                    \
    __type(value, __u32);                  \
  } name SEC(".maps");
NO_PRIVATE_STACK(tail_classic) /* uprobes, uretprobes, USDT probes */
NO_PRIVATE_STACK(tail_session) /* uprobe sessions */
NO_PRIVATE_STACK(tail_multi)   /* uprobe_multi */

#define as_no_private_stack(ctx, array)                                     \
  do {                                                                      \
    if (probe_epoch == 0xffffffffu) /* never: userspace counts up from 0 */ \
      bpf_tail_call(ctx, &array, 0);                                        \
  } while (0)

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

/* --max-live-per-process: live entries one process may hold (0: no share),
 * so that one process cannot fill the live map for all the others. */
const volatile __u32 live_share = 0;

/* tgid -> its entries in `live`; capacity set by userspace (the process
 * table's). Gone at exit and at exec (the old program's entries are removed
 * by userspace, and its frees never come). */
struct {
  __uint(type, BPF_MAP_TYPE_HASH);
  __uint(max_entries, 1);
  __type(key, __u32);
  __type(value, __u32);
} process_live SEC(".maps");

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

/* Files whose in-process probes are attached system-wide: a process that
 * maps or runs one is marked AS_PROC_IN_PROCESS. */
struct {
  __uint(type, BPF_MAP_TYPE_HASH);
  __uint(max_entries, 256);
  __type(key, struct as_file_key);
  __type(value, __u8);
} in_process_files SEC(".maps");

/* Processes stopped (SIGSTOP) when they mapped a new file, until userspace
 * has examined it and continues them: the value is when (ns). A process
 * that outlives allocscope is continued by its guard (user/probe). */
struct {
  __uint(type, BPF_MAP_TYPE_HASH);
  __uint(max_entries, AS_MAX_HELD);
  __type(key, __u32);
  __type(value, __u64);
} held SEC(".maps");

/* A parent that waits on its child's stops and stops itself in turn (su,
 * runuser and sudo pass a child's stop up to their own parent) would stay
 * stopped after a hold. hold_watch: a held process's parent -> the child
 * (and when it was held); hold_relays: a held child -> the parent held with
 * it when it stopped itself, continued with the child. LRU: no cleanup. */
struct hold_watch {
  __u32 child;
  __u32 pad;
  __u64 since;
};
struct {
  __uint(type, BPF_MAP_TYPE_LRU_HASH);
  __uint(max_entries, AS_MAX_HELD);
  __type(key, __u32);
  __type(value, struct hold_watch);
} hold_watches SEC(".maps");
struct {
  __uint(type, BPF_MAP_TYPE_LRU_HASH);
  __uint(max_entries, AS_MAX_HELD);
  __type(key, __u32);
  __type(value, __u32);
} hold_relays SEC(".maps");

/* Filters' judgements by name (and cgroup), written by userspace when it
 * judges a process: every later process of that name is decided here,
 * before anything of it is sent. AS_PROC_MEMBER: recorded; AS_PROC_IGNORED. */
struct {
  __uint(type, BPF_MAP_TYPE_LRU_HASH);
  __uint(max_entries, 4096);
  __type(key, struct as_name_key);
  __type(value, __u8);
} name_verdicts SEC(".maps");

/* Samples of processes no filter had judged, lost to a full ring buffer:
 * charged to the recording only if the process turns out to be recorded. */
struct {
  __uint(type, BPF_MAP_TYPE_LRU_HASH);
  __uint(max_entries, 4096);
  __type(key, __u32);
  __type(value, struct as_unjudged_drops);
} unjudged_drops SEC(".maps");

/* Files (device, inode) already reported by an exec or mmap event, valued
 * AS_FILE_KNOWN, AS_FILE_DEFERRED or AS_FILE_PREPARED. */
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

/* A thread's stack walk in progress, the stack event it becomes, the
 * window on its stack and the rows its walks met: per thread rather than per
 * CPU, since uprobe programs can be preempted. In three task storages of a
 * few KiB each: kernels after 6.18 (7.3 does) allocate a value without
 * locks, which serves 8 KiB at most (a larger one is never created, and no
 * walk done). */

/* Rows of the return addresses the thread's walks met, by address: the
 * frames a walk shares with earlier ones (most of them, for the calls of one
 * code path) need no mapping or table lookup. Valid for one generation of
 * the thread's mapping set (ev.vmas, which walks add to, and which is
 * emptied, with a new generation, when full). */
#define ROW_CACHE 256
struct cached_row {
  __u64 tag; /* address | generation << 48; 0: empty */
  struct as_unwind_row row;
};
struct row_cache {
  struct cached_row rows[ROW_CACHE];
};

/* The walk in progress lives here rather than on the BPF stack: verifiers
 * before 6.13 allow 512 bytes of stack across a program, its loop callback
 * and the global functions that calls, and the walk's state alone would take
 * a third of that twice over. Here too (not in the loop's index) the frame
 * number, so that the verifier sees one frame rather than each of 127. */
struct walk_scratch {
  struct as_stack_event ev;
  __u64 stack_end; /* end of the mapping that holds the thread's stack; 0: unknown */
  __u64 generation;
  struct as_unwind_regs regs; /* of the frame being unwound */
  struct as_unwind_row row;   /* its rule */
  struct as_vma vma;          /* the mapping it is in */
  __u64 id;                   /* stack id, mixed as frames are added */
  __u32 stop;                 /* enum as_stop */
  __u32 restart;              /* the mapping set was full: emptied, walk again */
  __u32 misses;               /* frames not in the row cache */
  __u32 skip;                 /* first frames unwound but not recorded (a USDT probe's sampler) */
  __u32 steps;                /* frames unwound so far */
  __u32 pad;
  __u64 until, until_end; /* until_end != 0: frames are not recorded up to the one whose call is in range */
  __u64 also, also_end;   /* a second such range (also_end != 0) */
  __u32 own_found;        /* a frame in either range was met: the first frame out of them is recorded */
  __u32 own_pad;
  __u64 stack_limit; /* this walk's bound on the stack: stack_end, or a guess */
  /* The Python walk (bpf/python.bpf.h): its program's layout, the thread
   * state searched for, the frame being read and a copy of its fields. */
  struct as_py_layout py;
  __u64 py_thread; /* the sampled thread's pthread_t */
  __u64 py_tstate; /* thread state being looked at; 0: none left */
  __u64 py_frame;  /* frame being read; 0: none left */
  __u32 py_found;  /* py_tstate is the sampled thread's */
  __u32 py_pad;
  __u8 py_buf[AS_PY_FRAME_BYTES + 8];
};

struct {
  __uint(type, BPF_MAP_TYPE_TASK_STORAGE);
  __uint(map_flags, BPF_F_NO_PREALLOC);
  __type(key, int);
  __type(value, struct walk_scratch);
} walks SEC(".maps");

struct {
  __uint(type, BPF_MAP_TYPE_TASK_STORAGE);
  __uint(map_flags, BPF_F_NO_PREALLOC);
  __type(key, int);
  __type(value, struct row_cache);
} row_caches SEC(".maps");

struct {
  __uint(type, BPF_MAP_TYPE_TASK_STORAGE);
  __uint(map_flags, BPF_F_NO_PREALLOC);
  __type(key, int);
  __type(value, struct stack_window);
} windows SEC(".maps");

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

/* CPython programs (a file as the kernel's vma names it) and where their
 * interpreter's structures lie: written by userspace when it first sees the
 * file run. */
struct {
  __uint(type, BPF_MAP_TYPE_HASH);
  __uint(max_entries, 256);
  __type(key, struct as_file_key);
  __type(value, struct as_py_layout);
} python_files SEC(".maps");

/* Processes running CPython from a library (libpython3.X.so, a plugin's):
 * written by the kernel when a process maps a file of python_files, copied
 * at fork, gone at exec and exit; written by userspace for a process found
 * running or held at the library's first mapping. */
struct {
  __uint(type, BPF_MAP_TYPE_HASH);
  __uint(max_entries, AS_PY_MAX_PROCESSES);
  __type(key, __u32);
  __type(value, struct as_py_process);
} python_processes SEC(".maps");

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
  if (c) __sync_fetch_and_add(c, 1);
}

static __always_inline void count_bytes(__u32 which, __u64 n) {
  __u64 *c = bpf_map_lookup_elem(&counters, &which);
  if (c) __sync_fetch_and_add(c, n);
}

static __always_inline __u64 draw_countdown(void) {
  __u64 x = ((__u64)bpf_get_prandom_u32() << 32) | bpf_get_prandom_u32() | 1;
  __u32 msb;
  __u64 norm = as_normalize(x, &msb);
  __u32 i = as_table_index(norm) & ((1 << AS_LOG2_TABLE_BITS) - 1);
  return as_countdown_from(norm, msb, log2_table[i], log2_table[i + 1], sample_rate);
}

/* The thread's byte countdown over an allocation of `size` bytes: true when
 * it holds the sampled byte, `*offset` the bytes before it; then a fresh
 * draw for the bytes after it (memoryless). */
static __always_inline bool countdown_fires(struct thread_state *st, __u64 size, __u64 *offset) {
  if (!st->initialized) {
    st->countdown = draw_countdown();
    st->initialized = 1;
  }
  if (st->countdown >= size) {
    st->countdown -= size;
    return false;
  }
  *offset = st->countdown;
  st->countdown = draw_countdown();
  return true;
}

static __always_inline struct thread_state *thread_state(bool create) {
  struct thread_state *st = bpf_task_storage_get(&threads, bpf_get_current_task_btf(), 0,
                                                 create ? BPF_LOCAL_STORAGE_GET_F_CREATE : 0);
  if (st && st->epoch != probe_epoch) {
    st->epoch = probe_epoch;
    st->depth = 0;
    st->pending = 0;
  }
  return st;
}

/* A process's verdict without the in-process bit; 0 for none. */
static __always_inline __u8 base_verdict(const __u8 *v) { return v ? *v & AS_PROC_VERDICT_MASK : 0; }

/* The filters' judgement of the current process's name (and cgroup), 0 for
 * none yet. */
static __always_inline __u8 name_verdict(void) {
  if (!judge_names) return 0;
  struct as_name_key key = {};
  bpf_get_current_comm(key.comm, sizeof(key.comm));
  if (judge_cgroups) key.cgroup = bpf_get_current_cgroup_id();
  __u8 *v = bpf_map_lookup_elem(&name_verdicts, &key);
  return v ? *v : 0;
}

/* Whether --cgroup leaves the current process out: it runs outside the
 * cgroup (at no depth below it). */
static __always_inline bool outside_cgroup(void) {
  return cgroup_level && bpf_get_current_ancestor_cgroup_id(cgroup_level) != cgroup_id;
}

/* Whether samples of the current process are wanted, from allocator probes
 * or (in_process) from its own sampler's probes. Per-process probes only
 * reach traced processes; system-wide ones reach every process mapping the
 * file, and this is asked only when a sample is taken. */
static __always_inline bool process_traced(__u32 tgid, bool in_process) {
  if (!filter_processes) return true;
  __u8 *v = bpf_map_lookup_elem(&processes, &tgid);
  if (v && (*v & AS_PROC_IN_PROCESS) && !in_process) return false; /* its own sampler counts it */
  __u8 b = base_verdict(v);
  if (b == AS_PROC_ACCEPTED) {
    /* a filter judged its program: traced, whatever its threads are named */
  } else if (b) {
    if (b != AS_PROC_MEMBER) return false;
  } else if (!trace_unknown || name_verdict() == AS_PROC_IGNORED) {
    return false;
  }
  return !outside_cgroup();
}

/* Marks a process that runs or maps an in-process sampler file. */
static __always_inline void mark_in_process(__u32 tgid, const struct as_file_key *key) {
  if (!filter_processes || !bpf_map_lookup_elem(&in_process_files, key)) return;
  __u8 *v = bpf_map_lookup_elem(&processes, &tgid);
  __u8 marked = (v ? *v : 0) | AS_PROC_IN_PROCESS;
  if (bpf_map_update_elem(&processes, &tgid, &marked, BPF_ANY) != 0) count(AS_CNT_PROC_TABLE_FULL);
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
