/* Part of the ABI (allocscope.h): what Go's probes (bpf/go.bpf.h) are told of
 * a Go program: the bits of their cookie, and the program's own sampling. */
#ifndef ALLOCSCOPE_ABI_GO_H
#define ALLOCSCOPE_ABI_GO_H

#include "abi/types.h"

/* Above an entry code's bits in a Go probe's cookie. */
#define AS_COOKIE_GO_STACK_CHECK (1ULL << 32) /* Go's probe is on its stack check's jbe (see go.bpf.h) */
#define AS_COOKIE_GO_SHIFT 40 /* Go profile: its go_profiles slot; Go free: the kind, then its offset */
/* Go malloc on an allocator specialized by size (Go 1.27): a call from mallocgc's table is counted
 * there. mallocgc's entry lies (signed) bits 40-63 bytes from the probe, its length in bits 16-31. */
#define AS_COOKIE_GO_SIZED (1ULL << 33)
#define AS_COOKIE_GO_SIZED_LEN_SHIFT 16

/* A Go program sampling its heap, in file addresses: mProf_Malloc's probe (pc less it: the bias),
 * MemProfileRate, mallocgc, its allocators specialized by size (0: none); args 1: (mp, p, size), a nil
 * at mp + profstack (not 0) a dropped sample. */
#define AS_GO_MAX_PROGRAMS 256
struct as_go_profile {
  as_u64 probe, rate, mallocgc, mallocgc_end, args, calls, profstack; /* calls: the probe's, counted */
  as_u64 sized, sized_end;
};

AS_STATIC_ASSERT(sizeof(struct as_go_profile) == 72, "as_go_profile layout");

#endif
