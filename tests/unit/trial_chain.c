// A call chain without frame pointers (built as unwind_chain.c is) whose
// innermost function does what the preload library does at a sampled
// trial when there is no BPF: captures its registers and writes them with
// the top of its stack into a shared ring (preload/trial_record.h). It
// also takes glibc's backtrace at the same place, the walk to compare with.
#define _GNU_SOURCE
#include <execinfo.h>
#include <stdint.h>

#include "abi/preload/trial_record.h"
#include "chain_fn.h"

struct trial_chain {
  struct as_ring_header* ring;
  uint64_t stack_end;
  void* backtrace[128];
  int depth;
  int written;
};

CHAIN_FN void trial_chain_inner(struct trial_chain* c) {
  struct as_trial_alloc t = {0};
  AS_CAPTURE_REGS(t.walk.ip, t.walk.sp, t.walk.bp);
  t.walk.stack_end = c->stack_end;
  t.walk.skip = 0;
  t.addr = 0x1000;
  t.size = 64;
  c->written = as_trial_write_alloc(c->ring, 7, &t);
  c->depth = backtrace(c->backtrace, 128);
}

CHAIN_FN int trial_chain_middle(struct trial_chain* c, int n) {
  volatile char pad[48];
  pad[n & 31] = (char)n;
  __asm__ volatile("mov %0, %%rbp" : : "r"((long)n * 7) : "rbp");  // rbp a number, as without frame pointers
  trial_chain_inner(c);
  return pad[n & 31] + n;
}

CHAIN_FN int trial_chain_outer(struct trial_chain* c, int n) {
  volatile char pad[200];
  pad[n & 127] = 1;
  int r = trial_chain_middle(c, n + 1);
  return r + pad[n & 127];
}
