/* The ABI between the BPF programs and userspace, one part per subject in
 * bpf/abi/: event layouts, map keys and values, counters, unwind rows,
 * in-process probes, one part per runtime. Fixed-width types only; every
 * size is pinned by a static assert. The preload library's records and
 * entry points (bpf/abi/preload/) are its wire to allocscope, beside it. */
#ifndef ALLOCSCOPE_ABI_H
#define ALLOCSCOPE_ABI_H

#include "abi/counters.h"
#include "abi/entries.h"
#include "abi/events.h"
#include "abi/go.h"
#include "abi/in_process.h"
#include "abi/maps.h"
#include "abi/python.h"
#include "abi/types.h"
#include "abi/unwind_rows.h"

#endif
