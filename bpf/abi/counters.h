/* Part of the ABI (allocscope.h includes it): the kernel's counters, one
 * per-CPU slot each, summed by userspace. */
#ifndef ALLOCSCOPE_COUNTERS_H
#define ALLOCSCOPE_COUNTERS_H

/* Per-CPU counters, summed by userspace. */
enum as_counter {
  AS_CNT_SAMPLES = 0,           /* sampled trials that returned an address (exact mode: every allocation) */
  AS_CNT_FREES = 1,             /* frees of live-tracked samples */
  AS_CNT_RINGBUF_DROPS = 2,     /* samples lost because the ring buffer was full */
  AS_CNT_LIVE_FULL = 3,         /* samples not tracked live: live map full */
  AS_CNT_STACK_DROPS = 4,       /* stacks not sent (ring buffer full): their samples are lost */
  AS_CNT_NESTED = 5,            /* allocator calls made inside another one, not counted */
  AS_CNT_FAILED_ALLOCS = 6,     /* sampled trials whose allocation returned NULL */
  AS_CNT_RETURNS = 7,           /* runs of the return program */
  AS_CNT_FILTERED = 8,          /* sampled trials of processes not traced (system-wide probes) */
  AS_CNT_PROC_DROPS = 9,        /* process events (fork, exec, exit, mmap) lost: ring buffer full */
  AS_CNT_PROC_TABLE_FULL = 10,  /* forked children not followed: process table full */
  AS_CNT_EXACT_FULL = 11,       /* exact mode: allocations not counted, the stack totals map was full */
  AS_CNT_EXACT_FULL_BYTES = 12, /* ... and their bytes */
  AS_CNT_DROPPED_BYTES = 13,    /* requested bytes of the samples lost to a full ring buffer */
  AS_CNT_TABLE_REQUESTS = 14,   /* unwind tables asked of userspace */
  AS_CNT_FREE_DROPS = 15,       /* frees of live samples not sent (ring buffer full): inuse is high */
  /* Why unwinds ended, one per sampled stack (enum as_stop order). */
  AS_CNT_STOP_FIRST = 16,
  AS_CNT_LIVE_FULL_BYTES = 26,  /* requested bytes of the samples AS_CNT_LIVE_FULL counts */
  AS_CNT_FREE_DROPS_BYTES = 27, /* requested bytes of the blocks AS_CNT_FREE_DROPS counts */
  AS_CNT_FRAMES = 28,           /* frames the kernel's walks found */
  AS_CNT_ROW_MISSES = 29,       /* of them, looked up in a table (not in the thread's row cache) */
  AS_CNT_USDT_RATE = 30,        /* in-process samples taken at another rate than the session's: not counted */
  AS_CNT_LIVE_SHARE = 31,       /* samples not tracked live: their process held its share of the live map */
  AS_CNT_LIVE_SHARE_BYTES = 32, /* ... and their requested bytes */
  AS_CNT_HOLDS = 33,            /* processes stopped until a file they mapped was examined */
  AS_CNT_HOLD_REFUSED = 34,     /* ... not stopped: held processes' table full, signal failed, or map busy */
  AS_CNT_UNJUDGED_DROPS = 35,   /* of AS_CNT_RINGBUF_DROPS, those of processes no filter had judged yet */
  AS_CNT_UNJUDGED_DROPS_BYTES = 36, /* ... and their bytes */
  AS_CNT_PY_STACKS = 37,            /* sampled stacks of Python processes with Python frames */
  AS_CNT_PY_NO_THREAD = 38, /* ... without: the thread has no Python thread state (or it was not found) */
  AS_CNT_PY_FRAMES = 39,    /* Python frames the kernel's walks found */
  AS_CNT_PY_DEPTH = 40,     /* Python stacks cut at AS_MAX_PY_FRAMES */
  AS_CNT_CGROUP_DROPS = 41, /* cgroups made whose path the full ring buffer did not take */
  AS_CNT_NOT_DEFERRED = 42, /* walks short of a table sent cut short: the ring buffer was half full */
  AS_CNT_PY_PROCESSES_FULL = 43, /* processes running a CPython library not walked: table full */
  AS_CNT_GO_RATE = 44, /* blocks Go's runtime sampled at a MemProfileRate not the session's: not counted */
  AS_CNT_HOLD_RELAYS = 45, /* parents that stopped themselves with a held child (su, sudo): held with it */
  AS_CNT_TRAPS = 46,       /* runs of the programs on uprobes (each a trap into the kernel, sampled or not) */
  AS_CNT_BUSY_FULL = 47,   /* batches of allocator calls not counted to their process: busy table full */
  AS_CNT_ENTRIES_MARKED = 48, /* processes entered that marked themselves (their library's probe) */
  AS_CNT_COUNT = 49,
};

#endif
