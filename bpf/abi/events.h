/* Part of the ABI (allocscope.h): the ring buffer's records, what each kind
 * carries. */
#ifndef ALLOCSCOPE_ABI_EVENTS_H
#define ALLOCSCOPE_ABI_EVENTS_H

#include "abi/python.h"
#include "abi/types.h"

/* perf's default kernel.perf_event_max_stack. */
#define AS_MAX_FRAMES 127

#define AS_COMM_LEN 16
/* Distinct mappings a stack's frames may lie in. */
#define AS_MAX_VMAS 16

enum as_event_kind {
  AS_EV_ALLOC = 1,        /* a sampled allocation returned: struct as_alloc_event */
  AS_EV_FREE = 2,         /* a sampled (live-tracked) address was freed: struct as_event */
  AS_EV_FORK = 3,         /* a traced process forked: struct as_proc_event */
  AS_EV_EXEC = 4,         /* a traced process ran a new program: struct as_proc_event */
  AS_EV_EXIT = 5,         /* a traced process's last thread exited: struct as_proc_event */
  AS_EV_MMAP = 6,         /* a traced process mapped a C library not seen before: struct as_proc_event */
  AS_EV_STACK = 7,        /* a stack not sent before: struct as_stack_event */
  AS_EV_NEED_TABLE = 8,   /* an unwind met a file without an unwind table: struct as_table_event */
  AS_EV_CGROUP = 9,       /* a cgroup v2 directory was made: struct as_cgroup_event */
  AS_EV_EXITING = 10,     /* a CPython process called _exit: struct as_proc_event */
  AS_EV_CGROUP_GONE = 11, /* a cgroup v2 directory was removed: struct as_cgroup_event, no path */
};

enum as_event_flags {
  AS_EVF_LIVE_DROPPED = 1,  /* live map was full: this sample's free will not be seen */
  AS_EVF_UNTRACKED = 2,     /* live tracking is off (--no-free): no live entry, nothing dropped */
  AS_EVF_WEIGHTED = 4,      /* a USDT provider gave only a weight: `offset` holds it (weighted bytes) */
  AS_EVF_COLLECTED = 8,     /* a garbage-collected block (Go): no address, no free; alloc metrics only */
  AS_EVF_NO_OFFSET = 16,    /* the sampler (Go's runtime) did not say where its sampled byte was */
  AS_EVF_FREE_IN_RING = 32, /* the process sends this block's free through its ring: no live entry here */
};

/* A mapping holding some of a stack's frames, read by the kernel at sample
 * time: frames of processes that are gone by the time userspace looks can
 * still be tied to their file. */
struct as_vma {
  as_u64 start, end; /* runtime address range */
  as_u64 pgoff;      /* file offset of start, bytes */
  as_u64 ino;        /* inode of the mapped file; 0: anonymous */
  as_u32 dev;        /* device of the file, kernel encoding (major << 20 | minor) */
  as_u32 pad;
};

/* Ring buffer record. A free event is this header alone. */
struct as_event {
  as_u32 kind;   /* enum as_event_kind */
  as_u32 tgid;   /* process id */
  as_u32 tid;    /* thread id */
  as_u16 fn;     /* entry code of the allocator called (AS_FN_KIND_MASK) */
  as_u16 flags;  /* enum as_event_flags */
  as_u64 ts_ns;  /* CLOCK_MONOTONIC (bpf_ktime_get_ns), nanoseconds */
  as_u64 addr;   /* allocation address */
  as_u64 size;   /* requested bytes */
  as_u64 offset; /* bytes before the sampled byte inside the allocation */
  as_u64 stack;  /* stack id (alloc events): an as_stack_event sent earlier names it */
};

/* A sampled allocation, with its process's name (its main thread's). */
struct as_alloc_event {
  struct as_event hdr;
  char comm[AS_COMM_LEN];
};

/* A cgroup v2 directory made (cgroup_mkdir): its id, as samples carry it,
 * and its path below the hierarchy's root, so that a sample taken in a
 * cgroup that is gone by the time userspace looks is still named. */
#define AS_CGROUP_PATH_LEN 256
struct as_cgroup_event {
  as_u32 kind; /* AS_EV_CGROUP, AS_EV_CGROUP_GONE */
  as_u32 len;  /* bytes of path, without its NUL */
  as_u64 id;
  char path[AS_CGROUP_PATH_LEN];
};

/* A stack, sent once: the id later events name it by, the mappings of its
 * frames, return addresses innermost first (the first is the allocator's
 * return into its direct caller). Ids cover the process instance (pid, start
 * time, exec count) and the entry point: no two programs share one. */
struct as_stack_event {
  as_u32 kind; /* AS_EV_STACK */
  as_u32 tgid;
  as_u16 fn;       /* entry code (AS_FN_KIND_MASK) */
  as_u16 stop;     /* enum as_stop: why the walk ended */
  as_u32 nframes;  /* valid entries in frames */
  as_u32 nvmas;    /* valid entries in vmas */
  as_u32 ns_tgid;  /* tgid in the process's own (innermost) PID namespace; 0 unknown */
  as_u64 id;       /* stack id */
  as_u64 cgroup;   /* the thread's cgroup v2 id (its directory's inode number) */
  as_u64 start_ns; /* when the process started, CLOCK_MONOTONIC ns (its leader's start_time) */
  as_u64 exec_id;  /* the leader's self_exec_id: each exec makes it higher */
  char comm[AS_COMM_LEN];
  struct as_vma vmas[AS_MAX_VMAS];
  as_u64 frames[AS_MAX_FRAMES]; /* user instruction pointers */
  /* Python frames (0 for other programs), innermost first; a stack sent
   * alone ends with the last valid one. */
  as_u32 npy;
  as_u32 py_cut;  /* 1: more Python frames than AS_MAX_PY_FRAMES */
  as_u64 py_ends; /* bit i: py[i] is the first frame one call of the evaluation loop ran */
  struct as_py_frame py[AS_MAX_PY_FRAMES];
};

/* A walk the kernel could not finish (AS_STOP_NO_TABLE: a file's table was
 * not loaded yet) follows its stack event: the registers of the frame it
 * stopped at (frames[nframes - 1]) and the stack above them, so that
 * userspace finishes it with the same step once it has the table. */
#define AS_DEFER_STACK_BYTES (32 * 1024)
struct as_deferred_walk {
  as_u64 ip, sp, bp; /* the stopped frame's registers */
  as_u64 stack_end;  /* end of the thread's stack mapping */
  as_u32 bp_lost;    /* as struct as_unwind_regs */
  as_u32 len;        /* stack bytes copied from sp (they follow) */
  /* Frames still to leave out, the stopped one first: `skip` of them, or (until_end != 0) every one
   * up to the first whose call lies in [until, until_end) or [also, also_end) (runtime addresses), and
   * those above it in either; own_found: one was met before the stop. */
  as_u64 until, until_end;
  as_u16 skip;
  as_u16 ip_exact; /* as struct as_unwind_regs */
  as_u32 steps; /* frames unwound before the stopped one (0: its pc is the probe's, not a return address) */
  as_u64 also, also_end;
  as_u32 own_found, pad;
};

/* An unwind met a file mapping without a table: userspace builds one from
 * the file behind [start, end) of process tgid. Sent once per file until
 * userspace clears the request. */
struct as_table_event {
  as_u32 kind; /* AS_EV_NEED_TABLE */
  as_u32 tgid;
  struct as_vma vma;
};

/* Process lifecycle: fork (tgid is the child, parent its parent), exec (the
 * new program's file), exit, and mmap of a new C library file (`name` its
 * file name). */
struct as_proc_event {
  as_u32 kind; /* enum as_event_kind */
  as_u32 tgid;
  union {
    as_u32 parent; /* fork: the parent's tgid */
    as_u32 held;   /* exec, mmap, exiting: 1 when stopped (SIGSTOP) until userspace continues it */
  };
  as_u32 dev; /* exec, mmap: the file's device, kernel encoding */
  as_u64 ts_ns;
  as_u64 ino;  /* exec, mmap: the file's inode */
  as_u64 addr; /* mmap: where the file was mapped */
  char comm[AS_COMM_LEN];
  char name[32];    /* mmap: the file's name, truncated */
  as_u32 ended;     /* exec, exit: AS_ENDED_* of the program that ended */
  as_u32 ruled_out; /* exec: 1 when a filter rules the new program out: none of it sampled or held */
  as_u32 fresh;     /* exec: 1 when its file was not seen before (examined, held if it could be) */
  as_u64 hold;      /* when held: the hold's stamp, its `held` value (a release names its hold) */
};

#define AS_ENDED_IN_PROCESS 1 /* as_proc_event.ended: sampled by its own probes (AS_PROC_IN_PROCESS) */

AS_STATIC_ASSERT(sizeof(struct as_event) == 56, "as_event layout");
AS_STATIC_ASSERT(sizeof(struct as_alloc_event) == 72, "as_alloc_event layout");
AS_STATIC_ASSERT(sizeof(struct as_vma) == 40, "as_vma layout");
AS_STATIC_ASSERT(sizeof(struct as_stack_event) ==
                     72 + 40 * AS_MAX_VMAS + 8 * AS_MAX_FRAMES + 16 + 16 * AS_MAX_PY_FRAMES,
                 "as_stack_event layout");
AS_STATIC_ASSERT(sizeof(struct as_table_event) == 8 + 40, "as_table_event layout");
AS_STATIC_ASSERT(sizeof(struct as_deferred_walk) == 88, "as_deferred_walk layout");
AS_STATIC_ASSERT(sizeof(struct as_proc_event) == 112, "as_proc_event layout");

#endif
