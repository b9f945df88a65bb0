// A call chain without frame pointers (built -O2 -fomit-frame-pointer
// -fno-optimize-sibling-calls, see tests/CMakeLists.txt) whose innermost
// function takes the snapshot the BPF side takes at an allocator's return:
// the registers as they are just after a call returns, and the stack from
// the stack pointer upwards. dwarf_unwinder_test.cpp declares the same struct.
#define _GNU_SOURCE
#include <stdint.h>
#include <string.h>
#include <ucontext.h>

#include "chain_fn.h"

struct unwind_chain_capture {
  uint64_t regs[17];   // DWARF order: rax rdx rcx rbx rsi rdi rbp rsp r8..r15 rip
  uint64_t sp;         // address of the first byte copied
  uint8_t* stack;      // the caller's buffer
  uint64_t capacity;   // its size in bytes
  uint64_t stack_top;  // end of the stack mapping: nothing is copied from beyond it
  uint64_t size;       // bytes copied
};

CHAIN_FN void unwind_chain_inner(struct unwind_chain_capture* c) {
  ucontext_t uc;
  memset(&uc, 0, sizeof uc);
  // glibc's getcontext stores the callee-saved registers, rsp as it is after
  // the return and rip = the return address: the state a uretprobe sees.
  // rax, r10 and r11 stay zero, as the caller-saved registers do not matter.
  getcontext(&uc);
  const greg_t* g = uc.uc_mcontext.gregs;
  static const int order[17] = {REG_RAX, REG_RDX, REG_RCX, REG_RBX, REG_RSI, REG_RDI,
                                REG_RBP, REG_RSP, REG_R8,  REG_R9,  REG_R10, REG_R11,
                                REG_R12, REG_R13, REG_R14, REG_R15, REG_RIP};
  for (int i = 0; i < 17; ++i) c->regs[i] = (uint64_t)g[order[i]];
  // Only this frame's locals (uc) change between getcontext and the copy;
  // the saved registers and return addresses above them do not.
  c->sp = c->regs[7];
  uint64_t n = c->stack_top > c->sp ? c->stack_top - c->sp : 0;
  if (n > c->capacity) n = c->capacity;
  // Byte by byte, not memcpy: the copy reads across the callers' frames on
  // purpose, which AddressSanitizer's memcpy would call an underflow (this
  // file is built without its instrumentation).
  const volatile unsigned char* from = (const volatile unsigned char*)(uintptr_t)c->sp;
  for (uint64_t i = 0; i < n; ++i) c->stack[i] = from[i];
  c->size = n;
}

CHAIN_FN int unwind_chain_middle(struct unwind_chain_capture* c, int n) {
  volatile char pad[48];
  pad[n & 31] = (char)n;
  // Code built without frame pointers uses rbp as a general register: here
  // it holds a number, not a frame address, while the functions below run.
  // GCC saves and restores the caller's rbp and describes that in the CFI.
  __asm__ volatile("mov %0, %%rbp" : : "r"((long)n * 7) : "rbp");
  unwind_chain_inner(c);
  return pad[n & 31] + n;  // work after the call: no tail call
}

CHAIN_FN int unwind_chain_outer(struct unwind_chain_capture* c, int n) {
  volatile char pad[200];
  pad[n & 127] = 1;
  int r = unwind_chain_middle(c, n + 1);
  return r + pad[n & 127];
}
