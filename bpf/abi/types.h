/* Part of the ABI (allocscope.h): the fixed-width types both sides use, and
 * what the BPF side needs of its compiler and kernel to say them. */
#ifndef ALLOCSCOPE_ABI_TYPES_H
#define ALLOCSCOPE_ABI_TYPES_H

#ifdef __bpf__
/* Loops in BPF code are unrolled: 6.1's verifier refuses a back-edge the
 * compiler laid out as a fall-through ("back-edge from insn"). */
#define AS_UNROLL _Pragma("unroll")
typedef __u8 as_u8;
typedef __u16 as_u16;
typedef __u32 as_u32;
typedef __u64 as_u64;
typedef __s64 as_s64;
typedef __s32 as_s32;
typedef __s16 as_s16;
typedef __s8 as_s8;
#else
#define AS_UNROLL
#include <stdint.h>
typedef uint8_t as_u8;
typedef uint16_t as_u16;
typedef uint32_t as_u32;
typedef uint64_t as_u64;
typedef int64_t as_s64;
typedef int32_t as_s32;
typedef int16_t as_s16;
typedef int8_t as_s8;
#endif

#ifdef __cplusplus
#define AS_STATIC_ASSERT static_assert
#else
#define AS_STATIC_ASSERT _Static_assert
#endif

/* The kfunc that tells a uprobe session's return from its entry takes no argument up to
 * Linux 6.18, the program's context later (7.3): libbpf refuses an extern unlike the kernel's,
 * so an object is built for each (AS_SESSION_KFUNC_CTX), and userspace opens the one that fits. */
#ifdef __bpf__
#ifdef AS_SESSION_KFUNC_CTX
extern bool bpf_session_is_return(void *ctx) __ksym __weak;
#define as_session_is_return(ctx) bpf_session_is_return(ctx)
#else
extern bool bpf_session_is_return(void) __ksym __weak;
#define as_session_is_return(ctx) bpf_session_is_return()
#endif
#endif

#endif
