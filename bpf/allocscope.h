/* The ABI between the BPF programs and userspace: event layout, enums, limits.
 * Fixed-width types only; every size is pinned by a static assert. */
#ifndef ALLOCSCOPE_ABI_H
#define ALLOCSCOPE_ABI_H

#ifdef __bpf__
/* Loops in BPF code are unrolled: 6.1's verifier refuses a back-edge the
 * compiler laid out as a fall-through ("back-edge from insn"). */
#define AS_UNROLL _Pragma("unroll")
typedef __u8 as_u8;
typedef __u16 as_u16;
typedef __u32 as_u32;
typedef __u64 as_u64;
typedef __s64 as_s64;
typedef __s32 as_s32;
typedef __s16 as_s16;
typedef __s8 as_s8;
#else
#define AS_UNROLL
#include <stdint.h>
typedef uint8_t as_u8;
typedef uint16_t as_u16;
typedef uint32_t as_u32;
typedef uint64_t as_u64;
typedef int64_t as_s64;
typedef int32_t as_s32;
typedef int16_t as_s16;
typedef int8_t as_s8;
#endif

#ifdef __cplusplus
#define AS_STATIC_ASSERT static_assert
#else
#define AS_STATIC_ASSERT _Static_assert
#endif

/* The kfunc that tells a uprobe session's return from its entry takes no argument up to
 * Linux 6.18, the program's context later (7.3): libbpf refuses an extern unlike the kernel's,
 * so an object is built for each (AS_SESSION_KFUNC_CTX), and userspace opens the one that fits. */
#ifdef __bpf__
#ifdef AS_SESSION_KFUNC_CTX
extern bool bpf_session_is_return(void *ctx) __ksym __weak;
#define as_session_is_return(ctx) bpf_session_is_return(ctx)
#else
extern bool bpf_session_is_return(void) __ksym __weak;
#define as_session_is_return(ctx) bpf_session_is_return()
#endif
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
  AS_FN_EXIT = 10,       /* not an allocator: the C library's _exit (a Python process held there) */
  AS_FN_GO_MALLOC = 11,  /* Go's runtime.mallocgc: size in rax; its collector frees, never a call */
  AS_FN_GO_PROFILE = 12, /* Go's runtime.mProf_Malloc: a block its runtime sampled (as_go_profile) */
  AS_FN_GO_FREE = 13,    /* Go's runtime.freeSpecial: a sampled block's record freed by its sweeper */
  AS_FN_COUNT = 14,
};

/* Entry codes (the attach cookie, `fn` in events): the kind in the low byte,
 * how the arguments carry size and pointer; above it, userspace's index of
 * the named entry point (0: the C library's own of that kind). */
#define AS_FN_KIND_MASK 0xff
#define AS_COOKIE_GO_STACK_CHECK (1ULL << 32) /* Go's probe is on its stack check's jbe (see go.bpf.h) */
#define AS_COOKIE_GO_SHIFT 40 /* Go profile: its go_profiles slot; Go free: the kind, then its offset */
#define AS_FN_ENTRY_SHIFT 8
#define as_fn_kind(code) ((enum as_fn)((code)&AS_FN_KIND_MASK))

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

/* Verdicts in the `processes` map (system-wide probes consult it). */
enum as_process_verdict {
  AS_PROC_MEMBER = 1,         /* traced, and so are the descendants it forks (-p, -- CMD, --children) */
  AS_PROC_IGNORED = 2,        /* not traced (allocscope itself, or judged by a filter); forgotten at exec */
  AS_PROC_MEMBER_IGNORED = 3, /* a member whose program a filter rejected: a member again at exec */
  AS_PROC_ACCEPTED =
      4, /* (--all) its program accepted by a filter, whatever its threads' names; forgotten at exec */
};
/* OR'ed into a verdict (or alone): the process samples in process (it maps a file whose
 * otel_memory probes are attached), not through the system-wide allocator probes. Cleared at exec. */
#define AS_PROC_IN_PROCESS 0x80
#define AS_PROC_VERDICT_MASK 0x7f

enum as_event_flags {
  AS_EVF_LIVE_DROPPED = 1,  /* live map was full: this sample's free will not be seen */
  AS_EVF_UNTRACKED = 2,     /* live tracking is off (--no-free): no live entry, nothing dropped */
  AS_EVF_WEIGHTED = 4,      /* a USDT provider gave only a weight: `offset` holds it (weighted bytes) */
  AS_EVF_COLLECTED = 8,     /* a garbage-collected block (Go): no address, no free; alloc metrics only */
  AS_EVF_NO_OFFSET = 16,    /* the sampler (Go's runtime) did not say where its sampled byte was */
  AS_EVF_FREE_IN_RING = 32, /* the process sends this block's free through its ring: no live entry here */
};

/* In-process sampling (the preload library, or any program that fires the
 * OpenTelemetry memory-profiling probes): USDT probes fired only for sampled
 * blocks, otel_memory:alloc(ptr, size, weighted_bytes[, code, offset, rate])
 * and otel_memory:free(ptr). The preload library adds the last three: the entry
 * code (and flags below), the bytes before the sampled byte, its mean bytes
 * between samples (1: all). Providers of the first three: AS_EVF_WEIGHTED. */
#define AS_USDT_PROVIDER "otel_memory"
#define AS_USDT_FAST_PROVIDER "allocscope" /* the preload library's twins: preload/probe_sites.h */
#define AS_USDT_FULL_ARGS 6
/* The sampler's own frames atop a sampled stack: the full form fires from a
 * function its entry point called (two), the standard one in it (one). */
#define AS_USDT_OWN_FRAMES_FULL 2
#define AS_USDT_OWN_FRAMES 1
#define AS_USDT_UNTRACKED 0x10000 /* code: the sampler's set of blocks was full: no free will come */
/* code: its free comes through the ring allocscope handed the process */
#define AS_USDT_FREE_IN_RING 0x20000
#define AS_USDT_FREE_FORWARD 1 /* OR'ed into free's ptr: one the ring refused, passed on as it is */

#include "counters.h"

/* The live filter: live samples per hash slot, so that a free of an address
 * never sampled (nearly every free) skips the live map. Userspace, deleting
 * live keys itself, decrements the same slot. */
#define AS_LIVE_FILTER_BITS 20
#define AS_LIVE_FILTER_STRIDE 8 /* bytes between slots of the mmapped array (elements are 8-aligned) */

static inline as_u32 as_live_slot(as_u32 tgid, as_u64 addr) {
  as_u64 h = ((addr >> 4) ^ ((as_u64)tgid << 40)) * 0x9E3779B97F4A7C15ULL;
  return (as_u32)(h >> (64 - AS_LIVE_FILTER_BITS));
}

/* Key of the live map: one sampled, not yet freed allocation. */
struct as_live_key {
  as_u32 tgid, pad;
  as_u64 addr; /* address returned to the program */
};

/* Value of the live map. */
struct as_live_value {
  as_u64 ts_ns; /* allocation time (bpf_ktime_get_ns) */
  as_u64 size;  /* requested bytes (exact mode) */
  as_u64 stack; /* stack id (exact mode) */
};

/* ---- Unwinding ----------------------------------------------------------
 * Userspace compiles each binary's call frame information (.eh_frame,
 * .debug_frame, Go's pclntab) into rows sorted by pc for the kernel, which
 * unwinds sampled stacks itself (bpf/unwind.h). On x86-64 the CFA of code
 * that calls is rsp or rbp plus an offset (in PLT entries and realigned
 * frames, a known expression of them), the return address is at CFA - 8, and
 * later CFAs need only rbp. */
enum as_cfa_kind {
  AS_ROW_NONE = 0,      /* no unwind information here: the walk stops */
  AS_CFA_RSP = 1,       /* CFA = rsp + 8 * cfa_off */
  AS_CFA_RBP = 2,       /* CFA = rbp + 8 * cfa_off */
  AS_CFA_PLT = 3,       /* CFA = rsp + 8, + 8 more when (pc & 15) >= cfa_off */
  AS_CFA_DEREF_RBP = 4, /* CFA = *(rbp + 8 * cfa_off) */
  AS_ROW_END = 5,       /* the outermost frame (return address undefined) */
  AS_CFA_SIGNAL = 6,    /* a signal's return trampoline: the interrupted rsp at rsp + 8 * cfa_off, rip next */
};

#define AS_RBP_LOST (-128) /* as_unwind_row.rbp: the caller's rbp cannot be recovered */
/* One row: the rule from `pc` up to the next row's pc. */
struct as_unwind_row {
  as_u32 pc;      /* file offset of the first instruction it covers, bytes */
  as_s16 cfa_off; /* see enum as_cfa_kind, 8-byte units */
  as_u8 kind;     /* enum as_cfa_kind */
  as_s8 rbp; /* the caller's rbp saved at CFA (AS_CFA_SIGNAL: rsp) + 8 * rbp; 0: unchanged; AS_RBP_LOST */
};

/* A table as the kernel holds it, an array of rows:
 *   [0]                   pc = n, the number of rules
 *   [1]                   pc = p, the number of pages (2^AS_TABLE_PAGE_SHIFT bytes of file offsets)
 *   [2 .. 2 + p]          pc = the index among the rules of the first one whose pc is in that
 *                         page or later (p + 1 entries, the last = n)
 *   [3 + p .. 3 + p + n)  the rules, sorted by pc
 * The page index narrows the binary search to the rules of one page. */
#define AS_TABLE_HEAD 2
#define AS_TABLE_PAGE_SHIFT 12
#define AS_TABLE_MAX_ROWS (1u << 24)

/* Key of an unwind table: the file as the kernel's vma names it. */
struct as_file_key {
  as_u64 ino;
  as_u32 dev; /* kernel encoding (major << 20 | minor) */
  as_u32 pad;
};

/* Why a stack walk ended. */
enum as_stop {
  AS_STOP_NONE = 0,      /* (still walking) */
  AS_STOP_COMPLETE = 1,  /* reached the outermost frame: the stack is whole */
  AS_STOP_NO_INFO = 2,   /* code the binary's unwind information does not cover */
  AS_STOP_NO_TABLE = 3,  /* the binary's unwind table was not loaded yet (asked of userspace) */
  AS_STOP_BAD_FRAME = 4, /* a CFA that does not move up the thread's stack */
  AS_STOP_READ = 5,      /* stack memory could not be read */
  AS_STOP_BAD_IP = 6,    /* a return address outside any executable mapping */
  AS_STOP_DEPTH = 7,     /* AS_MAX_FRAMES frames */
  AS_STOP_VMA_BUSY = 8,  /* the mmap lock was taken: mappings could not be looked up */
  AS_STOP_VMAS = 9,      /* frames in more than AS_MAX_VMAS mappings */
};

#define AS_COMM_LEN 16
/* A Go program sampling its heap, in file addresses: mProf_Malloc's probe (pc less it: the bias),
 * MemProfileRate, mallocgc; args 1: (mp, p, size), a nil at mp + profstack (not 0) a dropped sample. */
#define AS_GO_MAX_PROGRAMS 256
struct as_go_profile {
  as_u64 probe, rate, mallocgc, mallocgc_end, args, calls, profstack; /* calls: the probe's, counted */
};
#define AS_MAX_HELD 1024 /* processes stopped at once while the files they map are examined */
/* Distinct mappings a stack's frames may lie in. */
#define AS_MAX_VMAS 16

/* ---- Python ---------------------------------------------------------------
 * CPython's frames (3.8 on), read from its thread state by the kernel and put
 * in place of the evaluation loop's by userspace. Their layout is per file
 * holding the runtime (python_files): a program (its exe_file), or a library
 * (libpython3.X.so) whose load bias is per process (python_processes). */
#define AS_MAX_PY_FRAMES 64
#define AS_PY_ABSENT 0xffff   /* an offset the version does not have */
#define AS_PY_FRAME_BYTES 128 /* frame fields lie in its first bytes */
#define AS_PY_MAX_THREADS 256 /* thread states searched for the sampled thread */
#define AS_PY_INSTR_UNKNOWN 0xffffffffu
#define AS_PY_NO_OWNER 0xff       /* owner_cstack of versions without entry frames */
#define AS_PY_MAX_PROCESSES 16384 /* python_processes' capacity */

/* A frame's instruction: a pointer into the code units (3.11 on), or f_lasti
 * (an int), the last one's byte offset (3.8, 3.9) or code unit (3.10). */
enum as_py_instr_kind { AS_PY_INSTR_POINTER = 0, AS_PY_INSTR_BYTE_OFFSET = 1, AS_PY_INSTR_UNIT_INDEX = 2 };

struct as_py_layout {
  as_u64 runtime;       /* _PyRuntime's virtual address in the file */
  as_u64 exec_vaddr;    /* the first executable segment's: the kernel's start_code less it is the load bias */
  as_u32 holder;        /* _PyRuntime: the GIL holder's thread state (AS_PY_ABSENT: none kept) */
  as_u32 interp_head;   /* _PyRuntime: the first interpreter */
  as_u16 threads_head;  /* PyInterpreterState: the newest thread state */
  as_u16 tstate_next;   /* PyThreadState: the next older one */
  as_u16 tstate_thread; /* ... its thread's pthread_t (the thread pointer, fsbase on x86-64) */
  as_u16 tstate_frame;  /* ... the innermost frame, or the CFrame holding it */
  as_u16 cframe_frame;  /* CFrame: the innermost frame (AS_PY_ABSENT: tstate_frame is the frame) */
  as_u16 frame_code;    /* _PyInterpreterFrame: its code object */
  as_u16 frame_previous;  /* ... its caller */
  as_u16 frame_instr;     /* ... the instruction it runs */
  as_u16 frame_owner;     /* ... who owns it (a byte) */
  as_u16 frame_entry;     /* ... (a byte) the first frame its evaluation loop call ran (AS_PY_ABSENT: none) */
  as_u16 code_first_line; /* PyCodeObject: co_firstlineno */
  as_u16 code_units;      /* ... co_code_adaptive, the instructions */
  as_u8 owner_cstack;     /* owner of the evaluation loop's entry frames (AS_PY_NO_OWNER: none) */
  as_u8 frame_bytes;      /* bytes of a frame its fields lie in (at most AS_PY_FRAME_BYTES) */
  as_u8 instr_kind;       /* enum as_py_instr_kind */
  as_u8 frame_per_call;   /* 1: every frame is a call of the evaluation loop of its own (3.8 to 3.10) */
  as_u8 pad[4];
  as_u64 exec_offset; /* exec_vaddr's file offset (a library's bias: map start - offset + it - exec_vaddr) */
};

/* A process running CPython from a library: its layout and load bias. */
struct as_py_process {
  struct as_py_layout layout;
  as_u64 bias;
};

/* One Python frame of a sampled stack. */
struct as_py_frame {
  as_u64 code;       /* the code object's address */
  as_u32 instr;      /* index of the code unit it runs (AS_PY_INSTR_UNKNOWN) */
  as_s32 first_line; /* the code object's co_firstlineno, read with it: a freed object's reuse shows */
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
   * up to the first whose call lies in [until, until_end) (runtime addresses), that one included. */
  as_u64 until, until_end;
  as_u16 skip;
  as_u16 ip_exact; /* as struct as_unwind_regs */
  as_u32 steps; /* frames unwound before the stopped one (0: its pc is the probe's, not a return address) */
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
/* A process's name and (with --unit) cgroup: what the filters judge, so
 * that the kernel can apply a judgement to every process of that name. */
struct as_name_key {
  char comm[AS_COMM_LEN];
  as_u64 cgroup; /* 0 unless the filter looks at cgroups */
};

struct as_unjudged_drops {
  as_u64 samples;
  as_u64 bytes;
};

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

/* known_files values: a file examined by userspace, or (a launched command's
 * C library, while every process that maps it samples in process) an
 * allocator whose probes wait for the first process that does not. */
#define AS_FILE_KNOWN 1
#define AS_FILE_DEFERRED 2
#define AS_FILE_PREPARED 3 /* a program each process is held for at exec (a Go program's rate set) */

/* Exact mode (rate 1) keeps its totals in the kernel, per stack id. */
#define AS_LIFETIME_BUCKETS 32
#define AS_LIFETIME_FIRST_LOG2 6 /* bucket 0: lifetimes below 2^7 ns; bucket i: [2^(i+6), 2^(i+7)) */
struct as_exact_totals {
  as_u64 allocs;      /* allocations */
  as_u64 alloc_bytes; /* their requested bytes */
  as_u64 frees;       /* of them, freed */
  as_u64 free_bytes;
  as_u32 lifetimes[AS_LIFETIME_BUCKETS]; /* freed allocations by lifetime (log2 buckets) */
};
/* Context of sweep_live, run by userspace: live entries it visited, deleted. */
struct as_sweep {
  as_u64 visited, deleted;
};

AS_STATIC_ASSERT(sizeof(struct as_live_key) == 16, "as_live_key layout");
AS_STATIC_ASSERT(sizeof(struct as_live_value) == 24, "as_live_value layout");
AS_STATIC_ASSERT(sizeof(struct as_unwind_row) == 8, "as_unwind_row layout");
AS_STATIC_ASSERT(sizeof(struct as_file_key) == 16, "as_file_key layout");
AS_STATIC_ASSERT(sizeof(struct as_event) == 56, "as_event layout");
AS_STATIC_ASSERT(sizeof(struct as_alloc_event) == 72, "as_alloc_event layout");
AS_STATIC_ASSERT(sizeof(struct as_vma) == 40, "as_vma layout");
AS_STATIC_ASSERT(sizeof(struct as_stack_event) ==
                     72 + 40 * AS_MAX_VMAS + 8 * AS_MAX_FRAMES + 16 + 16 * AS_MAX_PY_FRAMES,
                 "as_stack_event layout");
AS_STATIC_ASSERT(sizeof(struct as_py_layout) == 64, "as_py_layout layout");
AS_STATIC_ASSERT(sizeof(struct as_py_process) == 72, "as_py_process layout");
AS_STATIC_ASSERT(sizeof(struct as_py_frame) == 16, "as_py_frame layout");
AS_STATIC_ASSERT(sizeof(struct as_go_profile) == 56, "as_go_profile layout");
AS_STATIC_ASSERT(sizeof(struct as_table_event) == 8 + 40, "as_table_event layout");
AS_STATIC_ASSERT(sizeof(struct as_deferred_walk) == 64, "as_deferred_walk layout");
AS_STATIC_ASSERT(sizeof(struct as_proc_event) == 112, "as_proc_event layout");
AS_STATIC_ASSERT(sizeof(struct as_exact_totals) == 32 + 4 * AS_LIFETIME_BUCKETS, "as_exact_totals layout");
AS_STATIC_ASSERT(sizeof(struct as_sweep) == 16, "as_sweep layout");

#endif
