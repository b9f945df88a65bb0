/* The preload library's USDT probe sites, each probe twice:
 *
 * - otel_memory:alloc and otel_memory:free, sdt.h's sites: one-byte nops,
 *   which every kernel emulates in the trap (~1 us and up a sample) and
 *   none rewrites. Not sdt.h's 5-byte nop that Linux 6.18 rewrites into a
 *   call: the trampoline page it calls is not inherited by fork, and a
 *   forked child that reaches the site jumps into nothing (SIGSEGV, seen
 *   on 6.18.44).
 * - allocscope:alloc and allocscope:free, their twins (same arguments) on
 *   a 10-byte nop. Linux 7.x rewrites a uprobe there into `lea
 *   -0x80(%rsp),%rsp; call` to a trampoline that makes a system call,
 *   after its first hit, and forked children keep the trampoline: a
 *   sampled call then costs a call and a system call, not a trap. Older
 *   kernels refuse a probe on this nop (its %cs prefix); allocscope
 *   attaches these only where it found the kernel rewrites them safely
 *   (its feature optimized_uprobes), the otel_memory ones elsewhere.
 *
 * Each site fires only while its probe is attached (its semaphore raised);
 * otel_memory's also while no semaphore is up, for tracers that raise none.
 * The sites are sampler.c's, which defines the semaphores (AS_SEMAPHORE);
 * the fast path reads them (AS_PROBES_ATTACHED). */
#pragma once

#include <stdint.h>

#define _SDT_HAS_SEMAPHORES 1
/* Arguments in registers (or constants): the forms every USDT reader knows
 * (libbpf 1.1 reads no %rip-relative memory). */
#define STAP_SDT_ARG_CONSTRAINT nr
#include <sys/sdt.h>

/* Raised by the kernel while a tracer is attached to the probe. */
#define AS_SEMAPHORE(provider, name) \
  __extension__ unsigned short provider##_##name##_semaphore __attribute__((unused, section(".probes")))
#define AS_SEMAPHORE_DECL(provider, name) \
  extern unsigned short provider##_##name##_semaphore __attribute__((visibility("hidden")))
AS_SEMAPHORE_DECL(otel_memory, alloc);
AS_SEMAPHORE_DECL(otel_memory, free);
AS_SEMAPHORE_DECL(allocscope, alloc);
AS_SEMAPHORE_DECL(allocscope, free);
AS_SEMAPHORE_DECL(allocscope, entered); /* inject.c's: the library took its slots */

/* sdt.h's note (type 3 "stapsdt": the site, the base, the semaphore,
 * provider, name, arguments), so every USDT reader reads it, for a site
 * aligned to 16 bytes: the nop never straddles a page, which the kernel
 * cannot rewrite at once. */
#define AS_NOP10_PROBE_ASM(provider, name, args)                            \
  ".ifndef _.stapsdt.base\n"                                                \
  ".pushsection .stapsdt.base,\"aG\",\"progbits\",.stapsdt.base,comdat\n"   \
  ".weak _.stapsdt.base\n"                                                  \
  ".hidden _.stapsdt.base\n"                                                \
  "_.stapsdt.base: .space 1\n"                                              \
  ".size _.stapsdt.base, 1\n"                                               \
  ".popsection\n"                                                           \
  ".endif\n"                                                                \
  ".p2align 4\n"                                                            \
  "990: .byte 0x66, 0x2e, 0x0f, 0x1f, 0x84, 0x00, 0x00, 0x00, 0x00, 0x00\n" \
  ".pushsection .note.stapsdt,\"?\",\"note\"\n"                             \
  ".balign 4\n"                                                             \
  ".4byte 992f-991f, 994f-993f, 3\n"                                        \
  "991: .asciz \"stapsdt\"\n"                                               \
  "992: .balign 4\n"                                                        \
  "993: .8byte 990b\n"                                                      \
  ".8byte _.stapsdt.base\n"                                                 \
  ".8byte " #provider "_" #name                                             \
  "_semaphore\n"                                                            \
  ".asciz \"" #provider                                                     \
  "\"\n"                                                                    \
  ".asciz \"" #name                                                         \
  "\"\n"                                                                    \
  ".asciz \"" args                                                          \
  "\"\n"                                                                    \
  "994: .balign 4\n"                                                        \
  ".popsection\n"

/* Anyone listening to sampled allocations through a probe. */
#define AS_PROBES_ATTACHED() (otel_memory_alloc_semaphore | allocscope_alloc_semaphore)

#define AS_FIRE_ALLOC(p, size, weight, code, offset, rate)                                              \
  do {                                                                                                  \
    if (allocscope_alloc_semaphore)                                                                     \
      __asm__ __volatile__(AS_NOP10_PROBE_ASM(allocscope, alloc, "8@%0 8@%1 8@%2 8@%3 8@%4 8@%5")::"r"( \
                               (uint64_t)(uintptr_t)(p)),                                               \
                           "r"((uint64_t)(size)), "r"((uint64_t)(weight)), "r"((uint64_t)(code)),       \
                           "r"((uint64_t)(offset)), "r"((uint64_t)(rate)));                             \
    if (otel_memory_alloc_semaphore || !allocscope_alloc_semaphore)                                     \
      STAP_PROBE6(otel_memory, alloc, p, size, weight, code, offset, rate);                             \
  } while (0)

#define AS_FIRE_FREE(p)                                                                                  \
  do {                                                                                                   \
    if (allocscope_free_semaphore)                                                                       \
      __asm__ __volatile__(AS_NOP10_PROBE_ASM(allocscope, free, "8@%0")::"r"((uint64_t)(uintptr_t)(p))); \
    if (otel_memory_free_semaphore || !allocscope_free_semaphore) STAP_PROBE1(otel_memory, free, p);     \
  } while (0)
