/* SPDX-License-Identifier: GPL-2.0 */
/* In-process sampling: the USDT probes otel_memory:alloc and
 * otel_memory:free (bpf/allocscope.h, AS_USDT_*), fired by the preload
 * library or by any program that samples its own allocations. The process
 * decided what to sample; here only its stack is walked and the block
 * tracked, as for a sampled uprobe. A part of allocscope.bpf.c's one
 * translation unit, included there after the uprobe path. */
#pragma once

static __always_inline __u64 usdt_arg(struct pt_regs *ctx, __u64 n) {
  long v = 0;
  if (bpf_usdt_arg(ctx, n, &v) != 0) return 0;
  return (__u64)v;
}

SEC("usdt")
int usdt_alloc(struct pt_regs *ctx) {
  as_no_private_stack(ctx, tail_classic);
  count(AS_CNT_TRAPS);
  AS_PART(AS_PART_LAST);
  AS_PART(AS_PART_MARK);
  __u64 addr = usdt_arg(ctx, 0), size = usdt_arg(ctx, 1), weight = usdt_arg(ctx, 2);
  __u32 fn = AS_FN_MALLOC;
  __u64 offset = 0;
  __u16 flags = 0;
  struct own_frames own = {.count = AS_USDT_OWN_FRAMES};
  if (!addr) return 0;
  if (!process_traced(bpf_get_current_pid_tgid() >> 32, true)) {
    count(AS_CNT_FILTERED);
    return 0;
  }
  if (bpf_usdt_arg_cnt(ctx) >= AS_USDT_FULL_ARGS) {
    __u64 code = usdt_arg(ctx, 3);
    /* The statistics assume one rate: a process sampling at another
     * (its ALLOCSCOPE_RATE) is counted out, and said so. */
    if (usdt_arg(ctx, 5) != (sample_rate <= 1 ? 1 : sample_rate)) {
      count(AS_CNT_USDT_RATE);
      return 0;
    }
    fn = code & 0xffff;
    if (code & AS_USDT_UNTRACKED) flags |= AS_EVF_LIVE_DROPPED;
    /* Its free comes to userspace through the process's ring: no trap
     * for it, and no live entry here to delete. (Exact mode keeps its
     * totals here: it takes every free.) */
    if ((code & AS_USDT_FREE_IN_RING) && sample_rate > 1) flags |= AS_EVF_FREE_IN_RING;
    offset = usdt_arg(ctx, 4);
    own.count = AS_USDT_OWN_FRAMES_FULL;
  } else {
    /* Only a weight: userspace checks it against the session's rate.
     * Exact mode cannot use such samples. */
    if (sample_rate <= 1) {
      count(AS_CNT_USDT_RATE);
      return 0;
    }
    flags |= AS_EVF_WEIGHTED;
    offset = weight;
  }
  AS_PART(AS_PART_ENTRY);
  emit_alloc(ctx, fn, size, offset, addr, flags, &own);
  return 0;
}

SEC("usdt")
int usdt_free(struct pt_regs *ctx) {
  as_no_private_stack(ctx, tail_classic);
  count(AS_CNT_TRAPS);
  AS_PART(AS_PART_LAST);
  __u64 addr = usdt_arg(ctx, 0);
  if (addr & AS_USDT_FREE_FORWARD)
    forward_free(addr & ~(__u64)AS_USDT_FREE_FORWARD);
  else
    free_address(addr);
  AS_PART(AS_PART_FREE);
  AS_PART_COUNT_ONE(AS_PART_FREES);
  return 0;
}

/* allocscope:entered, fired by the library allocscope loaded into a running
 * process once it took the allocator's slots: from then on the process
 * samples itself, and its allocator probes pass it by. Marked here, at
 * that moment, not by userspace before or after the library's attach
 * call, whose length (a few milliseconds; more under emulation) would
 * leave the process's allocations uncounted or counted twice. Only for
 * this allocscope's library (its argument: the allocscope's pid, as it
 * sees itself). */
const volatile __u32 owner_tgid = 0;

SEC("usdt")
int usdt_entered(struct pt_regs *ctx) {
  if (!filter_processes || usdt_arg(ctx, 0) != owner_tgid) return 0;
  __u32 tgid = bpf_get_current_pid_tgid() >> 32;
  __u8 *v = bpf_map_lookup_elem(&processes, &tgid);
  __u8 marked = (v ? *v : 0) | AS_PROC_IN_PROCESS;
  if (bpf_map_update_elem(&processes, &tgid, &marked, BPF_ANY) != 0)
    count(AS_CNT_PROC_TABLE_FULL);
  else
    count(AS_CNT_ENTRIES_MARKED);
  return 0;
}
