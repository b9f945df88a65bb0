/* One step of a user stack unwind from a compiled call frame information row
 * (struct as_unwind_row), compiled both into the BPF program and into the
 * unit tests, so that the tests check the very code that runs.
 *
 * The includer defines AS_READ_U64(mem, addr, out): read 8 bytes of the
 * unwound thread's memory at `addr` into `*out`, 0 on success; `mem` is the
 * caller's context for reads (unused in the kernel). */
#ifndef ALLOCSCOPE_UNWIND_H
#define ALLOCSCOPE_UNWIND_H

#include "allocscope.h"

#ifndef AS_INLINE
#define AS_INLINE static inline
#endif

/* The registers an x86-64 unwind needs: the rest are never the base of a
 * CFA in code that calls (see as_unwind_row). */
struct as_unwind_regs {
  as_u64 ip; /* exact pc in frame 0, else a return address */
  as_u64 sp;
  as_u64 bp;
  as_u32 bp_lost;  /* the caller's rbp is unknown (an expression or undefined rule) */
  as_u32 ip_exact; /* ip is where a signal interrupted the frame, not a return address */
};

/* The frame-pointer rule as a row: CFA = rbp + 16, return address at CFA - 8,
 * the caller's rbp at CFA - 16. */
AS_INLINE struct as_unwind_row as_frame_pointer_row(void) {
  struct as_unwind_row r = {0, 2, AS_CFA_RBP, -2};
  return r;
}

/* The canonical frame address of a frame in `row`'s state; 0 when it cannot
 * be computed. */
AS_INLINE as_u64 as_row_cfa(const struct as_unwind_row *row, const struct as_unwind_regs *r, void *mem) {
  as_s64 off = (as_s64)row->cfa_off * 8;
  as_u64 deref = 0;
  switch (row->kind) {
    case AS_CFA_RSP:
      return r->sp + off;
    case AS_CFA_RBP:
      return r->bp_lost ? 0 : r->bp + off;
    case AS_CFA_PLT: /* a PLT entry: 8 more once its push has run */
      return r->sp + 8 + ((r->ip & 15) >= (as_u64)row->cfa_off ? 8 : 0);
    case AS_CFA_DEREF_RBP: /* a realigned frame: the CFA saved below rbp */
      if (r->bp_lost || AS_READ_U64(mem, r->bp + off, &deref) != 0) return 0;
      return deref;
  }
  return 0;
}

/* Leaves a signal handler through its return trampoline: the interrupted
 * frame's registers are in the signal frame the kernel pushed (struct
 * ucontext at rsp). Its pc is exact: no call before it. */
AS_INLINE int as_signal_step(const struct as_unwind_row *row, struct as_unwind_regs *r, as_u64 stack_end,
                             void *mem) {
  as_u64 at = r->sp + (as_s64)row->cfa_off * 8, sp = 0, ip = 0, bp = 0;
  if (AS_READ_U64(mem, at, &sp) != 0 || AS_READ_U64(mem, at + 8, &ip) != 0 ||
      AS_READ_U64(mem, r->sp + (as_s64)row->rbp * 8, &bp) != 0)
    return AS_STOP_READ;
  /* Handlers on an alternate stack (sigaltstack) end here too. */
  if (sp <= r->sp || sp > stack_end || ip == 0) return AS_STOP_BAD_FRAME;
  r->ip = ip;
  r->sp = sp;
  r->bp = bp;
  r->bp_lost = 0;
  r->ip_exact = 1;
  return AS_STOP_NONE;
}

/* Moves `r` to the caller's frame. `stack_end` bounds the thread's stack:
 * every CFA lies above the previous stack pointer and at most at
 * stack_end, so a walk through bad rules or garbage ends at once. */
AS_INLINE int as_unwind_step(const struct as_unwind_row *row, struct as_unwind_regs *r, as_u64 stack_end,
                             void *mem) {
  if (row->kind == AS_ROW_END) return AS_STOP_COMPLETE;
  if (row->kind == AS_ROW_NONE) return AS_STOP_NO_INFO;
  if (row->kind == AS_CFA_SIGNAL) return as_signal_step(row, r, stack_end, mem);
  as_u64 cfa = as_row_cfa(row, r, mem);
  if (cfa <= r->sp || cfa > stack_end || (cfa & 7) != 0) return AS_STOP_BAD_FRAME;
  as_u64 ra = 0, bp = r->bp;
  if (AS_READ_U64(mem, cfa - 8, &ra) != 0) return AS_STOP_READ;
  as_u32 bp_lost = r->bp_lost;
  if (row->rbp == AS_RBP_LOST) {
    bp_lost = 1;
  } else if (row->rbp != 0) {
    if (AS_READ_U64(mem, cfa + (as_s64)row->rbp * 8, &bp) != 0) return AS_STOP_READ;
    bp_lost = 0;
  }
  if (ra == 0) /* the outermost frame of code that ends its chain with 0 */
    return AS_STOP_COMPLETE;
  r->ip = ra;
  r->sp = cfa;
  r->bp = bp;
  r->bp_lost = bp_lost;
  r->ip_exact = 0;
  return AS_STOP_NONE;
}

/* Searches a table in the kernel's layout (see AS_TABLE_HEAD). The
 * includer defines AS_TABLE_AT(table, i): a pointer to element i, or 0. */

/* The rule covering file offset `off` (the last with pc <= off), 0 if none. */
AS_INLINE const struct as_unwind_row *as_table_find(void *table, as_u64 off) {
  const struct as_unwind_row *n_row = AS_TABLE_AT(table, 0), *p_row = AS_TABLE_AT(table, 1);
  if (!n_row || !p_row || n_row->pc == 0 || p_row->pc == 0) return 0;
  as_u32 n = n_row->pc, pages = p_row->pc, rules = AS_TABLE_HEAD + pages + 1;
  as_u64 page = off >> AS_TABLE_PAGE_SHIFT;
  if (page >= pages) page = pages - 1;
  const struct as_unwind_row *first = AS_TABLE_AT(table, AS_TABLE_HEAD + (as_u32)page);
  const struct as_unwind_row *next = AS_TABLE_AT(table, AS_TABLE_HEAD + (as_u32)page + 1);
  if (!first || !next) return 0;
  /* The answer is the last rule before the page's first, or one in it. */
  as_u32 lo = first->pc, hi = next->pc; /* rules [lo, hi) start in the page */
  if (off >> AS_TABLE_PAGE_SHIFT >= pages) hi = n;
  lo = lo > 0 ? lo - 1 : 0;
  if (hi > n || lo >= hi) return 0;
  /* Last rule in [lo, hi) with pc <= off: at most log2(AS_TABLE_MAX_ROWS) steps. */
  AS_UNROLL
  for (int i = 0; i < 25; i++) {
    if (hi - lo <= 1) break;
    as_u32 mid = lo + (hi - lo) / 2;
    const struct as_unwind_row *r = AS_TABLE_AT(table, rules + mid);
    if (!r) return 0;
    if (r->pc <= off)
      lo = mid;
    else
      hi = mid;
  }
  const struct as_unwind_row *r = AS_TABLE_AT(table, rules + lo);
  return r && r->pc <= off ? r : 0;
}

#endif
