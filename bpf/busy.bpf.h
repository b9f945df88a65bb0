/* Busy processes: the allocating calls that trapped, per process, for the
 * recordings that enter a process once its traps cost it too much (--all,
 * the agent). Included by allocscope.bpf.c after state.bpf.h. */
#ifndef ALLOCSCOPE_BUSY_BPF_H
#define ALLOCSCOPE_BUSY_BPF_H

/* Entering busy processes (count_busy): tgid -> allocating calls that
 * trapped, added a batch at a time by each thread, read and deleted by
 * userspace, which enters a process whose traps cost it more than its
 * rule allows. Capacity: the process table's. */
const volatile bool count_busy = false;
#define AS_BUSY_BATCH 256
struct {
  __uint(type, BPF_MAP_TYPE_HASH);
  __uint(max_entries, 1);
  __type(key, __u32);
  __type(value, __u64);
} busy SEC(".maps");

/* One more allocating call trapped on this thread: each AS_BUSY_BATCH of
 * them are added to its process's count if it is recorded (an entered one
 * too: a count for it says its breakpoints came back). */
static __always_inline void count_call(struct thread_state *st) {
  if (!count_busy || ++st->calls < AS_BUSY_BATCH) return;
  st->calls = 0;
  __u32 tgid = bpf_get_current_pid_tgid() >> 32;
  if (!process_traced(tgid, true)) return;
  __u64 batch = AS_BUSY_BATCH, *n = bpf_map_lookup_elem(&busy, &tgid);
  if (!n && bpf_map_update_elem(&busy, &tgid, &batch, BPF_NOEXIST) == 0) return;
  if (!n) n = bpf_map_lookup_elem(&busy, &tgid); /* another thread's insert came first */
  if (n)
    __sync_fetch_and_add(n, batch);
  else
    count(AS_CNT_BUSY_FULL);
}

#endif
