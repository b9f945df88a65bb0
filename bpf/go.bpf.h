/* SPDX-License-Identifier: GPL-2.0 */
/* Go's heap: entry probes on runtime.mallocgc. A part of allocscope.bpf.c's
 * one translation unit, included there after the allocator programs. */
#pragma once

/* Entry of Go's runtime.mallocgc(size, type, needzero): the same countdown,
 * nothing more on the fast path. Under Go's register ABI (1.17 on) the size
 * is in rax. Its block has no free to see (the collector reclaims it) and
 * its address is not needed: no return probe, which in Go would also break
 * on stacks the runtime moves. The walk starts at mallocgc's own entry (its
 * frame skipped, named by the code). A goroutine may move between threads,
 * but the countdown is memoryless: each call is sampled with probability
 * 1 - exp(-size / rate) whichever thread's countdown it meets. */
static __always_inline void go_malloc(struct pt_regs *ctx, __u64 cookie) {
  __u64 size = ctx->ax, offset = 0;
  __u32 fn = cookie & 0xffff;
  if (size == 0) return; /* Go's zero-size allocations share one address */
  /* On the stack check's jbe (AS_COOKIE_GO_STACK_CHECK), taken (CF or ZF):
   * morestack grows the stack or preempts the goroutine, then the call
   * restarts from its entry, and is counted then. */
  if ((cookie & AS_COOKIE_GO_STACK_CHECK) && (ctx->flags & 0x41)) return;
  struct thread_state *st = thread_state(true);
  if (!st) return;
  if (sample_rate > 1 && !countdown_fires(st, size, &offset)) return;
  /* Never sampled in process: a process whose C allocations are is traced here. */
  if (!process_traced(bpf_get_current_pid_tgid() >> 32, true)) {
    count(AS_CNT_FILTERED);
    return;
  }
  emit_alloc(ctx, fn, size, offset, 0, AS_EVF_COLLECTED, 1);
}

SEC("uprobe")
int go_malloc_classic(struct pt_regs *ctx) {
  as_no_private_stack(ctx, tail_classic);
  go_malloc(ctx, bpf_get_attach_cookie(ctx));
  return 0;
}

/* The same through a uprobe_multi link (kernels with sessions). */
SEC("uprobe")
int go_malloc_multi(struct pt_regs *ctx) {
  as_no_private_stack(ctx, tail_multi);
  go_malloc(ctx, bpf_get_attach_cookie(ctx));
  return 0;
}
