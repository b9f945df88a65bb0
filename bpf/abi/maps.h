/* Part of the ABI (allocscope.h): the keys and values of the maps both sides
 * read and write (processes, live blocks, names, files, exact totals). */
#ifndef ALLOCSCOPE_ABI_MAPS_H
#define ALLOCSCOPE_ABI_MAPS_H

#include "abi/events.h"
#include "abi/types.h"

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

#define AS_MAX_HELD 1024 /* processes stopped at once while the files they map are examined */
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
AS_STATIC_ASSERT(sizeof(struct as_exact_totals) == 32 + 4 * AS_LIFETIME_BUCKETS, "as_exact_totals layout");
AS_STATIC_ASSERT(sizeof(struct as_sweep) == 16, "as_sweep layout");

#endif
