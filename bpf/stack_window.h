/* Reads of the walked stack, through a window copied a few KiB at a time: a
 * user read costs as much for 4 KiB as for 8 bytes (the access checks
 * dominate), and a walk reads upwards. Compiled into the BPF program and
 * into the unit tests, which check the very code that runs.
 *
 * A copy fails whole if any page of it is missing, and the main thread's
 * stack often has one never touched: the kernel's random gap between the
 * start-up arrays and the strings above them, which the last frames of a
 * walk lie just below. A window that cannot be copied is therefore cut at
 * its first page's end; else every read near the stack's top would try the
 * whole copy again (a walk of 30 frames took 70 us instead of 4).
 *
 * The includer defines AS_READ_USER(dst, len, addr): copy `len` bytes of
 * the walked thread's memory at `addr` to `dst`, 0 on success. */
#ifndef ALLOCSCOPE_STACK_WINDOW_H
#define ALLOCSCOPE_STACK_WINDOW_H

#include "allocscope.h"

#ifndef AS_INLINE
#define AS_INLINE static inline
#endif

#define AS_STACK_WINDOW 4096
#define AS_PAGE 4096

struct stack_window {
  as_u64 base;  /* user address of bytes[0] */
  as_u64 len;   /* valid bytes; 0: empty */
  as_u64 limit; /* end of the thread's stack: copies stop there */
  as_u8 bytes[AS_STACK_WINDOW + 8];
};

/* 8 bytes of the thread's memory at `addr`, 0 on success. */
AS_INLINE int as_window_read(struct stack_window *w, as_u64 addr, as_u64 *out) {
  if (addr < w->base || addr - w->base > w->len || w->len - (addr - w->base) < 8) {
    as_u64 base = addr & ~7ULL, len = AS_STACK_WINDOW;
    if (w->limit > base && w->limit - base < len) len = w->limit - base;
    as_u64 in_page = AS_PAGE - (base & (AS_PAGE - 1)); /* 8 at least: base is aligned */
    if (len < 8 || (AS_READ_USER(w->bytes, len, base) != 0 &&
                    (len <= in_page || AS_READ_USER(w->bytes, (len = in_page), base) != 0))) {
      w->len = 0; /* outside the stack, or its page missing: this word alone */
      return AS_READ_USER(out, 8, addr);
    }
    w->base = base;
    w->len = len;
  }
  __builtin_memcpy(out, w->bytes + ((addr - w->base) & (AS_STACK_WINDOW - 1)), 8);
  return 0;
}

#endif
