/* The ABI between the BPF programs and userspace: event layout, enums, limits.
 * Fixed-width types only; every size is pinned by a static assert. */
#ifndef ALLOCSCOPE_ABI_H
#define ALLOCSCOPE_ABI_H

#ifdef __bpf__
typedef __u8 as_u8;
typedef __u16 as_u16;
typedef __u32 as_u32;
typedef __u64 as_u64;
typedef __s64 as_s64;
#else
#include <stdint.h>
typedef uint8_t as_u8;
typedef uint16_t as_u16;
typedef uint32_t as_u32;
typedef uint64_t as_u64;
typedef int64_t as_s64;
#endif

#ifdef __cplusplus
#define AS_STATIC_ASSERT static_assert
#else
#define AS_STATIC_ASSERT _Static_assert
#endif

/* perf's default kernel.perf_event_max_stack. */
#define AS_MAX_FRAMES 127

/* Allocator entry points, in the order userspace attaches them. */
enum as_fn {
  AS_FN_MALLOC = 0,
  AS_FN_CALLOC = 1,
  AS_FN_REALLOC = 2,
  AS_FN_REALLOCARRAY = 3,
  AS_FN_POSIX_MEMALIGN = 4,
  AS_FN_ALIGNED_ALLOC = 5,
  AS_FN_MEMALIGN = 6,
  AS_FN_VALLOC = 7,
  AS_FN_PVALLOC = 8,
  AS_FN_FREE = 9,
  AS_FN_COUNT = 10,
};

enum as_event_kind {
  AS_EV_ALLOC = 1, /* a sampled allocation returned: struct as_alloc_event */
  AS_EV_FREE = 2,  /* a sampled (live-tracked) address was freed: struct as_event */
  AS_EV_FORK = 3,  /* a traced process forked: struct as_proc_event */
  AS_EV_EXEC = 4,  /* a traced process ran a new program: struct as_proc_event */
  AS_EV_EXIT = 5,  /* a traced process's last thread exited: struct as_proc_event */
  AS_EV_MMAP = 6,  /* a traced process mapped a C library not seen before: struct as_proc_event */
};

/* Verdicts in the `processes` map (system-wide probes consult it). */
enum as_process_verdict {
  AS_PROC_MEMBER = 1,  /* traced, and so are the descendants it forks (-p, -- CMD, --children) */
  AS_PROC_IGNORED = 2, /* not traced (allocscope itself, or judged by a filter); forgotten at exec */
  AS_PROC_MEMBER_IGNORED = 3, /* a member whose program a filter rejected: a member again at exec */
};

enum as_event_flags {
  AS_EVF_LIVE_DROPPED = 1, /* live map was full: this sample's free will not be seen */
  AS_EVF_STACK_FAILED = 2, /* bpf_get_stack failed: no frames */
  AS_EVF_SNAPSHOT = 4,     /* a struct as_stack_snapshot follows the frames */
  AS_EVF_UNTRACKED = 8,    /* live tracking is off (--no-free): no live entry, nothing dropped */
};

/* DWARF unwinding: the most user stack a sample may copy. */
#define AS_MAX_STACK_BYTES (64 * 1024)
#define AS_DWARF_REGS 17

/* Per-CPU counters, summed by userspace. */
enum as_counter {
  AS_CNT_SAMPLES = 0,        /* sampled trials that returned an address */
  AS_CNT_FREES = 1,          /* frees of live-tracked samples */
  AS_CNT_RINGBUF_DROPS = 2,  /* events lost because the ring buffer was full */
  AS_CNT_LIVE_FULL = 3,      /* samples not tracked live: live map full */
  AS_CNT_STACK_FAIL = 4,     /* samples whose user stack could not be read */
  AS_CNT_NESTED = 5,         /* allocator calls made inside another one, not counted */
  AS_CNT_FAILED_ALLOCS = 6,  /* sampled trials whose allocation returned NULL */
  AS_CNT_RETURNS = 7,        /* runs of the return program */
  AS_CNT_FILTERED = 8,       /* sampled trials of processes not traced (system-wide probes) */
  AS_CNT_PROC_DROPS = 9,     /* process events (fork, exec, exit, mmap) lost: ring buffer full */
  AS_CNT_PROC_TABLE_FULL = 10, /* forked children not followed: process table full */
  AS_CNT_VMA_MISSES = 11,    /* frames whose mapping the kernel could not read (mmap lock busy) */
  AS_CNT_COUNT = 12,
};

/* The live filter: counters of live samples per hash slot, which lets a
 * free of an address never sampled (nearly every free) skip the live map.
 * Userspace, deleting live keys itself, decrements the same slot. */
#define AS_LIVE_FILTER_BITS 20

static inline as_u32 as_live_slot(as_u32 tgid, as_u64 addr) {
  as_u64 h = ((addr >> 4) ^ ((as_u64)tgid << 40)) * 0x9E3779B97F4A7C15ULL;
  return (as_u32)(h >> (64 - AS_LIVE_FILTER_BITS));
}

/* Key of the live map: one sampled, not yet freed allocation. */
struct as_live_key {
  as_u32 tgid;
  as_u32 pad;
  as_u64 addr; /* address returned to the program */
};

/* Ring buffer record. A free event is this header alone. */
struct as_event {
  as_u32 kind;     /* enum as_event_kind */
  as_u32 tgid;     /* process id */
  as_u32 tid;      /* thread id */
  as_u16 fn;       /* enum as_fn that made the allocation */
  as_u16 flags;    /* enum as_event_flags */
  as_u64 ts_ns;    /* CLOCK_MONOTONIC (bpf_ktime_get_ns), nanoseconds */
  as_u64 addr;     /* allocation address */
  as_u64 size;     /* requested bytes */
  as_u64 offset;   /* bytes before the sampled byte inside the allocation */
  as_u32 nframes;  /* valid entries in the frames that follow (alloc events) */
  as_u32 pad;
};

#define AS_COMM_LEN 16
/* Distinct mappings an alloc event names for its frames. */
#define AS_MAX_VMAS 8

/* A mapping holding some of an event's frames, read by the kernel at sample
 * time: frames of processes that are gone by the time userspace looks can
 * still be tied to their file. */
struct as_vma {
  as_u64 start, end; /* runtime address range */
  as_u64 pgoff;      /* file offset of start, bytes */
  as_u64 ino;        /* inode of the mapped file; 0: anonymous */
  as_u32 dev;        /* device of the file, kernel encoding (major << 20 | minor) */
  as_u32 pad;
};

/* An alloc event: the process's name, the mappings of its frames, return
 * addresses innermost first; the first is the allocator's return into its
 * direct caller. */
struct as_alloc_event {
  struct as_event hdr;
  char comm[AS_COMM_LEN];
  as_u32 nvmas; /* valid entries in vmas */
  as_u32 pad;
  struct as_vma vmas[AS_MAX_VMAS];
  as_u64 frames[AS_MAX_FRAMES]; /* user instruction pointers */
};

/* Process lifecycle: fork (tgid is the child, parent its parent), exec (the
 * new program's file), exit, and mmap of a new C library file (`name` its
 * file name). */
struct as_proc_event {
  as_u32 kind;   /* enum as_event_kind */
  as_u32 tgid;
  as_u32 parent; /* fork: the parent's tgid */
  as_u32 dev;    /* exec, mmap: the file's device, kernel encoding */
  as_u64 ts_ns;
  as_u64 ino;    /* exec, mmap: the file's inode */
  as_u64 addr;   /* mmap: where the file was mapped */
  char comm[AS_COMM_LEN];
  char name[32]; /* mmap: the file's name, truncated */
};


/* Registers and the top of the user stack at the allocator's return (the
 * caller's state), for unwinding with call frame information; `len` stack
 * bytes from `sp` upwards follow. Registers in DWARF x86-64 order: rax, rdx,
 * rcx, rbx, rsi, rdi, rbp, rsp, r8-r15, rip. */
struct as_stack_snapshot {
  as_u64 regs[AS_DWARF_REGS]; /* register values */
  as_u64 sp;                  /* user address of the first stack byte */
  as_u32 len;                 /* stack bytes copied, bytes */
  as_u32 pad;
};

AS_STATIC_ASSERT(sizeof(struct as_stack_snapshot) == 8 * AS_DWARF_REGS + 16, "as_stack_snapshot layout");
AS_STATIC_ASSERT(sizeof(struct as_live_key) == 16, "as_live_key layout");
AS_STATIC_ASSERT(sizeof(struct as_event) == 56, "as_event layout");
AS_STATIC_ASSERT(sizeof(struct as_vma) == 40, "as_vma layout");
AS_STATIC_ASSERT(sizeof(struct as_alloc_event) == 56 + 24 + 40 * AS_MAX_VMAS + 8 * AS_MAX_FRAMES,
                 "as_alloc_event layout");
AS_STATIC_ASSERT(sizeof(struct as_proc_event) == 88, "as_proc_event layout");

#endif
