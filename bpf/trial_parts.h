/* SPDX-License-Identifier: GPL-2.0 */
/* The parts of a sampled trial, timed inside the programs: a bench-only
 * build (cmake -DALLOCSCOPE_TRIAL_PARTS=ON) sums the nanoseconds between
 * marks per part and CPU; bench/trial_cost.py --parts reads them. Timing
 * from outside (the kernel's run time with a piece removed) drowns in this
 * VM's noise. In a normal build the marks are nothing. A part of
 * allocscope.bpf.c's one translation unit. */
#pragma once

enum as_part {
  AS_PART_LAST,       /* slot 0: the time of the last mark */
  AS_PART_MARK,       /* one mark's own cost: two marks in a row */
  AS_PART_ENTRY,      /* arguments, process filter */
  AS_PART_WALK_SETUP, /* task storages, the stack's end */
  AS_PART_WALK,       /* the frames */
  AS_PART_WALK_END,   /* counters, namespace, cgroup, name */
  AS_PART_PYTHON,     /* the Python check */
  AS_PART_SEND,       /* the stack's event, unless sent */
  AS_PART_LIVE,       /* event reserved, live insert */
  AS_PART_EVENT,      /* the event filled and submitted */
  AS_PART_FREE,       /* a whole free */
  AS_PART_TRIALS,     /* how many trials, and frees, were timed */
  AS_PART_FREES,
  AS_PART_COPIES, /* the walk's copies of the stack, and those that failed */
  AS_PART_COPY_FAILS,
  AS_PART_COUNT,
};

#ifdef AS_TRIAL_PARTS
struct {
  __uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
  __uint(max_entries, AS_PART_COUNT);
  __type(key, __u32);
  __type(value, __u64);
} trial_parts SEC(".maps");

/* Adds the time since the last mark to `part` (none for AS_PART_LAST: a
 * start), then restarts the clock after its own look-ups. A program runs
 * on one CPU (migration is off), so the per-CPU clock is its own unless
 * another run preempts it: the bench runs one thread. */
static __always_inline void as_part(__u32 part) {
  __u64 now = bpf_ktime_get_ns();
  __u32 zero = 0;
  __u64 *last = bpf_map_lookup_elem(&trial_parts, &zero);
  __u64 *slot = bpf_map_lookup_elem(&trial_parts, &part);
  if (!last || !slot) return;
  if (part != AS_PART_LAST) *slot += now - *last;
  *last = bpf_ktime_get_ns();
}

static __always_inline void as_part_count(__u32 part) {
  __u64 *slot = bpf_map_lookup_elem(&trial_parts, &part);
  if (slot) *slot += 1;
}
static __always_inline long as_part_read(void *dst, __u32 len, const void *addr) {
  long rc = bpf_probe_read_user(dst, len, addr);
  as_part_count(AS_PART_COPIES);
  if (rc) as_part_count(AS_PART_COPY_FAILS);
  return rc;
}
#define AS_PART(p) as_part(p)
#define AS_PART_COUNT_ONE(p) as_part_count(p)
#define AS_PART_READ(dst, len, addr) as_part_read(dst, len, addr)
#else
#define AS_PART_READ(dst, len, addr) bpf_probe_read_user(dst, len, addr)
#define AS_PART(p) \
  do {             \
  } while (0)
#define AS_PART_COUNT_ONE(p) \
  do {                       \
  } while (0)
#endif
