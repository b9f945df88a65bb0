/* Part of the ABI (allocscope.h): unwind tables as the kernel holds them, the
 * key of a file, and why a walk ends. */
#ifndef ALLOCSCOPE_ABI_UNWIND_ROWS_H
#define ALLOCSCOPE_ABI_UNWIND_ROWS_H

#include "abi/types.h"

/* ---- Unwinding ----------------------------------------------------------
 * Userspace compiles each binary's call frame information (.eh_frame,
 * .debug_frame, Go's pclntab) into rows sorted by pc for the kernel, which
 * unwinds sampled stacks itself (bpf/unwind.h). On x86-64 the CFA of code
 * that calls is rsp or rbp plus an offset (in PLT entries and realigned
 * frames, a known expression of them), the return address is at CFA - 8, and
 * later CFAs need only rbp. */
enum as_cfa_kind {
  AS_ROW_NONE = 0,      /* no unwind information here: the walk stops */
  AS_CFA_RSP = 1,       /* CFA = rsp + 8 * cfa_off */
  AS_CFA_RBP = 2,       /* CFA = rbp + 8 * cfa_off */
  AS_CFA_PLT = 3,       /* CFA = rsp + 8, + 8 more when (pc & 15) >= cfa_off */
  AS_CFA_DEREF_RBP = 4, /* CFA = *(rbp + 8 * cfa_off) */
  AS_ROW_END = 5,       /* the outermost frame (return address undefined) */
  AS_CFA_SIGNAL = 6,    /* a signal's return trampoline: the interrupted rsp at rsp + 8 * cfa_off, rip next */
};

#define AS_RBP_LOST (-128) /* as_unwind_row.rbp: the caller's rbp cannot be recovered */
/* One row: the rule from `pc` up to the next row's pc. */
struct as_unwind_row {
  as_u32 pc;      /* file offset of the first instruction it covers, bytes */
  as_s16 cfa_off; /* see enum as_cfa_kind, 8-byte units */
  as_u8 kind;     /* enum as_cfa_kind */
  as_s8 rbp; /* the caller's rbp saved at CFA (AS_CFA_SIGNAL: rsp) + 8 * rbp; 0: unchanged; AS_RBP_LOST */
};

/* A table as the kernel holds it, an array of rows:
 *   [0]                   pc = n, the number of rules
 *   [1]                   pc = p, the number of pages (2^AS_TABLE_PAGE_SHIFT bytes of file offsets)
 *   [2 .. 2 + p]          pc = the index among the rules of the first one whose pc is in that
 *                         page or later (p + 1 entries, the last = n)
 *   [3 + p .. 3 + p + n)  the rules, sorted by pc
 * The page index narrows the binary search to the rules of one page. */
#define AS_TABLE_HEAD 2
#define AS_TABLE_PAGE_SHIFT 12
#define AS_TABLE_MAX_ROWS (1u << 24)

/* Key of an unwind table: the file as the kernel's vma names it. */
struct as_file_key {
  as_u64 ino;
  as_u32 dev; /* kernel encoding (major << 20 | minor) */
  as_u32 pad;
};

/* Why a stack walk ended. */
enum as_stop {
  AS_STOP_NONE = 0,      /* (still walking) */
  AS_STOP_COMPLETE = 1,  /* reached the outermost frame: the stack is whole */
  AS_STOP_NO_INFO = 2,   /* code the binary's unwind information does not cover */
  AS_STOP_NO_TABLE = 3,  /* the binary's unwind table was not loaded yet (asked of userspace) */
  AS_STOP_BAD_FRAME = 4, /* a CFA that does not move up the thread's stack */
  AS_STOP_READ = 5,      /* stack memory could not be read */
  AS_STOP_BAD_IP = 6,    /* a return address outside any executable mapping */
  AS_STOP_DEPTH = 7,     /* AS_MAX_FRAMES frames */
  AS_STOP_VMA_BUSY = 8,  /* the mmap lock was taken: mappings could not be looked up */
  AS_STOP_VMAS = 9,      /* frames in more than AS_MAX_VMAS mappings */
};

AS_STATIC_ASSERT(sizeof(struct as_unwind_row) == 8, "as_unwind_row layout");
AS_STATIC_ASSERT(sizeof(struct as_file_key) == 16, "as_file_key layout");

#endif
