/* Part of the ABI (allocscope.h): what the kernel's walk of CPython's frames
 * (bpf/python.bpf.h) is told of a runtime, and what it sends of each frame. */
#ifndef ALLOCSCOPE_ABI_PYTHON_H
#define ALLOCSCOPE_ABI_PYTHON_H

#include "abi/types.h"

/* ---- Python ---------------------------------------------------------------
 * CPython's frames (3.8 on), read from its thread state by the kernel and put
 * in place of the evaluation loop's by userspace. Their layout is per file
 * holding the runtime (python_files): a program (its exe_file), or a library
 * (libpython3.X.so) whose load bias is per process (python_processes). */
#define AS_MAX_PY_FRAMES 64
#define AS_PY_ABSENT 0xffff   /* an offset the version does not have */
#define AS_PY_FRAME_BYTES 128 /* frame fields lie in its first bytes */
#define AS_PY_MAX_THREADS 256 /* thread states searched for the sampled thread */
#define AS_PY_INSTR_UNKNOWN 0xffffffffu
#define AS_PY_NO_OWNER 0xff       /* owner_cstack of versions without entry frames */
#define AS_PY_MAX_PROCESSES 16384 /* python_processes' capacity */

/* A frame's instruction: a pointer into the code units (3.11 on), or f_lasti
 * (an int), the last one's byte offset (3.8, 3.9) or code unit (3.10). */
enum as_py_instr_kind { AS_PY_INSTR_POINTER = 0, AS_PY_INSTR_BYTE_OFFSET = 1, AS_PY_INSTR_UNIT_INDEX = 2 };

struct as_py_layout {
  as_u64 runtime;       /* _PyRuntime's virtual address in the file */
  as_u64 exec_vaddr;    /* the first executable segment's: the kernel's start_code less it is the load bias */
  as_u32 holder;        /* _PyRuntime: the GIL holder's thread state (AS_PY_ABSENT: none kept) */
  as_u32 interp_head;   /* _PyRuntime: the first interpreter */
  as_u16 threads_head;  /* PyInterpreterState: the newest thread state */
  as_u16 tstate_next;   /* PyThreadState: the next older one */
  as_u16 tstate_thread; /* ... its thread's pthread_t (the thread pointer, fsbase on x86-64) */
  as_u16 tstate_frame;  /* ... the innermost frame, or the CFrame holding it */
  as_u16 cframe_frame;  /* CFrame: the innermost frame (AS_PY_ABSENT: tstate_frame is the frame) */
  as_u16 frame_code;    /* _PyInterpreterFrame: its code object */
  as_u16 frame_previous;  /* ... its caller */
  as_u16 frame_instr;     /* ... the instruction it runs */
  as_u16 frame_owner;     /* ... who owns it (a byte) */
  as_u16 frame_entry;     /* ... (a byte) the first frame its evaluation loop call ran (AS_PY_ABSENT: none) */
  as_u16 code_first_line; /* PyCodeObject: co_firstlineno */
  as_u16 code_units;      /* ... co_code_adaptive, the instructions */
  as_u8 owner_cstack;     /* owner of the evaluation loop's entry frames and above (AS_PY_NO_OWNER: none) */
  as_u8 frame_bytes;      /* bytes of a frame its fields lie in (at most AS_PY_FRAME_BYTES) */
  as_u8 instr_kind;       /* enum as_py_instr_kind */
  as_u8 frame_per_call;   /* 1: every frame is a call of the evaluation loop of its own (3.8 to 3.10) */
  as_u16 code_filename;   /* PyCodeObject: co_filename (its address goes in the code's stamp) */
  as_u8 pad[2];
  as_u64 exec_offset; /* exec_vaddr's file offset (a library's bias: map start - offset + it - exec_vaddr) */
};

/* A process running CPython from a library: its layout and load bias. */
struct as_py_process {
  struct as_py_layout layout;
  as_u64 bias;
};

/* What a frame's code object is stamped with, read with its address: its
 * first line and its file name's address, so that a freed object's memory
 * reused by another code object shows, even where both begin at line 1 (as
 * every module's top level does). The line is spread by a multiplier, so
 * that the names of nearby files cannot cancel its change. */
#define AS_PY_CODE_STAMP(first_line, filename) \
  ((as_u32)(first_line)*0x9e3779b1u ^ (as_u32)((as_u64)(filename) >> 4) ^ (as_u32)((as_u64)(filename) >> 36))

/* One Python frame of a sampled stack. */
struct as_py_frame {
  as_u64 code;  /* the code object's address */
  as_u32 instr; /* index of the code unit it runs (AS_PY_INSTR_UNKNOWN) */
  as_u32 stamp; /* AS_PY_CODE_STAMP of the code object as the kernel read it */
};

AS_STATIC_ASSERT(sizeof(struct as_py_layout) == 64, "as_py_layout layout");
AS_STATIC_ASSERT(sizeof(struct as_py_process) == 72, "as_py_process layout");
AS_STATIC_ASSERT(sizeof(struct as_py_frame) == 16, "as_py_frame layout");

#endif
