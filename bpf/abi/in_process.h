/* Part of the ABI (allocscope.h): the USDT probes of in-process sampling,
 * which the BPF programs of bpf/inprocess.bpf.h read. */
#ifndef ALLOCSCOPE_ABI_IN_PROCESS_H
#define ALLOCSCOPE_ABI_IN_PROCESS_H

/* In-process sampling (the preload library, or any program that fires the
 * OpenTelemetry memory-profiling probes): USDT probes fired only for sampled
 * blocks, otel_memory:alloc(ptr, size, weighted_bytes[, code, offset, rate])
 * and otel_memory:free(ptr). The preload library adds the last three: the entry
 * code (and flags below), the bytes before the sampled byte, its mean bytes
 * between samples (1: all). Providers of the first three: AS_EVF_WEIGHTED. */
#define AS_USDT_PROVIDER "otel_memory"
#define AS_USDT_FAST_PROVIDER "allocscope" /* the preload library's twins: preload/probe_sites.h */
#define AS_USDT_FULL_ARGS 6
/* The sampler's own frames atop a sampled stack: the full form fires from a
 * function its entry point called (two), the standard one in it (one). */
#define AS_USDT_OWN_FRAMES_FULL 2
#define AS_USDT_OWN_FRAMES 1
#define AS_USDT_UNTRACKED 0x10000 /* code: the sampler's set of blocks was full: no free will come */
/* code: its free comes through the ring allocscope handed the process */
#define AS_USDT_FREE_IN_RING 0x20000
#define AS_USDT_FREE_FORWARD 1 /* OR'ed into free's ptr: one the ring refused, passed on as it is */

#endif
