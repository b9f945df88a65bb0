/* Reads of the walked stack, through a window copied up to a page at a
 * time: a user read costs as much for 4 KiB as for 8 bytes (the access
 * checks dominate), and a walk reads upwards.
 *
 * A window never crosses a page. A copy fails whole if any page of it is
 * missing, and a failed copy is a page fault the kernel turns away: about
 * 6 us on this VM, more than the rest of a trial. The main thread's stack
 * often has a page never touched (the kernel's random gap between the
 * start-up arrays and the strings above them) just above a walk's last
 * frames; a window reaching into it failed once or twice a trial. Within
 * its page, a window fails only when the walk itself reads a missing page.
 * Compiled into the BPF program and into the unit tests, which check the
 * very code that runs.
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

/* 8 bytes of the thread's memory at `addr`, 0 on success. A window is the
 * rest of addr's page; its size comes from a mask alone, a bound even 6.1's
 * verifier follows. An 8-byte aligned word never straddles a page; others,
 * and words of a page the stack's end cuts (only a guessed end is not a
 * page's), are read alone. */
AS_INLINE int as_window_read(struct stack_window *w, as_u64 addr, as_u64 *out) {
  if (addr < w->base || addr - w->base > w->len || w->len - (addr - w->base) < 8) {
    as_u64 len = AS_PAGE - (addr & (AS_PAGE - 1));
    if ((addr & 7) || w->limit <= addr || w->limit - addr < len) {
      w->len = 0; /* outside the stack: this word alone */
      return AS_READ_USER(out, 8, addr);
    }
    if (AS_READ_USER(w->bytes, len, addr) != 0) {
      w->len = 0; /* its page is missing: so is the word */
      return -1;
    }
    w->base = addr;
    w->len = len;
  }
  __builtin_memcpy(out, w->bytes + ((addr - w->base) & (AS_STACK_WINDOW - 1)), 8);
  return 0;
}

#endif
