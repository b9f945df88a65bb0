/* SPDX-License-Identifier: GPL-2.0 */
/* Go's heap: entry probes on runtime.mallocgc, or, in a program whose
 * runtime samples its own heap, on what that sampling calls. A part of allocscope.bpf.c's
 * one translation unit, included there after the allocator programs. */
#pragma once

/* Whether an allocator specialized by size (Go 1.27) was called by
 * mallocgc's table (its entry's return address lies in mallocgc): that
 * call was counted at mallocgc's own probe. At the entry, or on the stack
 * check just after it, [sp] is the return address. */
static __always_inline bool called_by_mallocgc(struct pt_regs *ctx, __u64 cookie) {
  __u64 ret = 0, len = (cookie >> AS_COOKIE_GO_SIZED_LEN_SHIFT) & 0xffff;
  __u64 mallocgc = ctx->ip + (__u64)((__s64)cookie >> AS_COOKIE_GO_SHIFT);
  if (bpf_probe_read_user(&ret, sizeof(ret), (void *)ctx->sp) != 0) return false;
  return ret - 1 - mallocgc < len; /* the call lies in it */
}

/* Entry of Go's runtime.mallocgc(size, type, needzero): the same countdown,
 * nothing more on the fast path. Under Go's register ABI (1.17 on) the size
 * is in rax. Its block has no free to see (the collector reclaims it) and
 * its address is not needed: no return probe, which in Go would also break
 * on stacks the runtime moves. The walk starts at mallocgc's own entry (its
 * frame skipped, named by the code). A goroutine may move between threads,
 * but the countdown is memoryless: each call is sampled with probability
 * 1 - exp(-size / rate) whichever thread's countdown it meets. Also on
 * Go 1.27's allocators specialized by size (AS_COOKIE_GO_SIZED): the
 * compiler calls them for a small new(T) or make of a constant size. */
static __always_inline void go_malloc(struct pt_regs *ctx, __u64 cookie) {
  __u64 size = ctx->ax, offset = 0;
  __u32 fn = cookie & 0xffff;
  if (size == 0) return; /* Go's zero-size allocations share one address */
  /* On the stack check's jbe (AS_COOKIE_GO_STACK_CHECK), taken (CF or ZF):
   * morestack grows the stack or preempts the goroutine, then the call
   * restarts from its entry, and is counted then. */
  if ((cookie & AS_COOKIE_GO_STACK_CHECK) && (ctx->flags & 0x41)) return;
  if ((cookie & AS_COOKIE_GO_SIZED) && called_by_mallocgc(ctx, cookie)) return;
  struct thread_state *st = thread_state(true);
  if (!st) return;
  if (sample_rate > 1 && !countdown_fires(st, size, &offset)) return;
  /* Never sampled in process: a process whose C allocations are is traced here. */
  if (!process_traced(bpf_get_current_pid_tgid() >> 32, true)) {
    count(AS_CNT_FILTERED);
    return;
  }
  struct own_frames own = {.count = 1};
  emit_alloc(ctx, fn, size, offset, 0, AS_EVF_COLLECTED, &own);
}

/* Each Go probe's program twice: for a classic uprobe link and for a
 * uprobe_multi link (kernels with sessions), each with its own tail-call
 * map (see as_no_private_stack). */
#define AS_GO_PROGRAMS(name)                \
  SEC("uprobe")                             \
  int name##_classic(struct pt_regs *ctx) { \
    as_no_private_stack(ctx, tail_classic); \
    count(AS_CNT_TRAPS);                    \
    name(ctx, bpf_get_attach_cookie(ctx));  \
    return 0;                               \
  }                                         \
  SEC("uprobe")                             \
  int name##_multi(struct pt_regs *ctx) {   \
    as_no_private_stack(ctx, tail_multi);   \
    count(AS_CNT_TRAPS);                    \
    name(ctx, bpf_get_attach_cookie(ctx));  \
    return 0;                               \
  }

AS_GO_PROGRAMS(go_malloc)

/* The Go programs whose runtime's own samples are taken (userspace fills
 * a slot per program; the probes' cookies name it). */
struct {
  __uint(type, BPF_MAP_TYPE_ARRAY);
  __uint(max_entries, AS_GO_MAX_PROGRAMS);
  __type(key, __u32);
  __type(value, struct as_go_profile);
} go_profiles SEC(".maps");

/* Entry of runtime.mProf_Malloc: Go's runtime sampled block p of `size`
 * bytes, at MemProfileRate (a countdown per P of the same law as ours), and
 * records it for its heap profile; its sweeper calls freeSpecial when the
 * block is collected. Each such block is taken as sampled here at the
 * session's rate when MemProfileRate equals it, or (MemProfileRate 1: every
 * block) when the thread's countdown fires; another rate is counted out. No
 * per-call cost: only sampled blocks reach this. The walk leaves out the
 * runtime's frames down to mallocgc's, or to those of an allocator
 * specialized by size (Go 1.27; named by the code). */
static __always_inline void go_profile(struct pt_regs *ctx, __u64 cookie) {
  if ((cookie & AS_COOKIE_GO_STACK_CHECK) && (ctx->flags & 0x41)) return; /* restarts: see go_malloc */
  __u32 slot = (cookie >> AS_COOKIE_GO_SHIFT) & 0xffff;
  struct as_go_profile *g = bpf_map_lookup_elem(&go_profiles, &slot);
  if (!g || !g->probe) return;
  __sync_fetch_and_add(&g->calls, 1);
  __u64 bias = ctx->ip - g->probe, rate = 0, offset = 0;
  __u64 ax = ctx->ax, bx = ctx->bx, cx = ctx->cx;
  barrier_var(ax); /* read each: a pointer chosen into the context is refused */
  barrier_var(bx);
  barrier_var(cx);
  __u64 p = g->args ? bx : ax, size = g->args ? cx : bx, profstack = 0;
  if (!p || !size || bpf_probe_read_user(&rate, sizeof(rate), (void *)(bias + g->rate)) != 0) return;
  if (rate == 1 && sample_rate > 1) {
    struct thread_state *st = thread_state(true);
    if (!st || !countdown_fires(st, size, &offset)) return;
  } else if (rate != sample_rate) {
    count(AS_CNT_GO_RATE);
    return;
  }
  /* The runtime keeps no record of a block sampled while its m is being
   * made (its start): no free of it will come either. */
  if (g->profstack &&
      (bpf_probe_read_user(&profstack, sizeof(profstack), (void *)(ax + g->profstack)) != 0 || !profstack))
    return;
  __u32 tgid = bpf_get_current_pid_tgid() >> 32;
  if (!process_traced(tgid, true)) {
    count(AS_CNT_FILTERED);
    return;
  }
  /* A call entered twice (a probe on the entry, before the stack check:
   * morestack restarts it) is one block: the first entry tracks it. On the
   * stack check a call is seen once, and an entry is a block whose free
   * was not seen, its address now reused: freed here. */
  struct as_live_key key = {.tgid = tgid, .addr = p};
  if (bpf_map_lookup_elem(&live, &key)) {
    if (!(cookie & AS_COOKIE_GO_STACK_CHECK)) return;
    free_address(p);
  }
  struct own_frames own = {.until = bias + g->mallocgc,
                           .until_end = bias + g->mallocgc_end,
                           .also = bias + g->sized,
                           .also_end = g->sized_end ? bias + g->sized_end : 0};
  emit_alloc(ctx, AS_FN_GO_MALLOC, size, offset, p, rate == 1 ? 0 : AS_EVF_NO_OFFSET, &own);
}

/* Entry of runtime.freeSpecial(s, p, size): a special record of block p
 * is freed with it; a profile record's block was sampled by the runtime.
 * The cookie holds that kind's value and the byte offset of special.kind. */
static __always_inline void go_free(struct pt_regs *ctx, __u64 cookie) {
  __u8 kind = 0;
  __u64 s = ctx->ax, at = (cookie >> (AS_COOKIE_GO_SHIFT + 8)) & 0xff;
  if (bpf_probe_read_user(&kind, 1, (void *)(s + at)) != 0) return;
  if (kind == ((cookie >> AS_COOKIE_GO_SHIFT) & 0xff)) free_address(ctx->bx);
}

AS_GO_PROGRAMS(go_profile)
AS_GO_PROGRAMS(go_free)
