/* Entry codes (bpf/allocscope.h) of the C++ operators the preload library
 * interposes: (index in user/probe/allocator_entries.cpp's table + 1) << 8 |
 * kind. A unit test checks them against that table. The C family reports
 * the plain kind, as the C library's own entry points do. */
#ifndef ALLOCSCOPE_PRELOAD_ENTRY_CODES_H
#define ALLOCSCOPE_PRELOAD_ENTRY_CODES_H

#include "allocscope.h"

#define AS_ENTRY_CODE(index, kind) ((((index) + 1) << AS_FN_ENTRY_SHIFT) | (kind))

#define AS_CODE_NEW AS_ENTRY_CODE(14, AS_FN_MALLOC)                 /* _Znwm */
#define AS_CODE_NEW_ARRAY AS_ENTRY_CODE(15, AS_FN_MALLOC)           /* _Znam */
#define AS_CODE_NEW_NOTHROW AS_ENTRY_CODE(16, AS_FN_MALLOC)         /* _ZnwmRKSt9nothrow_t */
#define AS_CODE_NEW_ARRAY_NOTHROW AS_ENTRY_CODE(17, AS_FN_MALLOC)   /* _ZnamRKSt9nothrow_t */
#define AS_CODE_NEW_ALIGNED AS_ENTRY_CODE(18, AS_FN_MALLOC)         /* _ZnwmSt11align_val_t */
#define AS_CODE_NEW_ARRAY_ALIGNED AS_ENTRY_CODE(19, AS_FN_MALLOC)   /* _ZnamSt11align_val_t */
#define AS_CODE_NEW_ALIGNED_NOTHROW AS_ENTRY_CODE(20, AS_FN_MALLOC) /* _ZnwmSt11align_val_tRKSt9nothrow_t */
#define AS_CODE_NEW_ARRAY_ALIGNED_NOTHROW \
  AS_ENTRY_CODE(21, AS_FN_MALLOC) /* _ZnamSt11align_val_tRKSt9nothrow_t */

/* CPython's allocator domains (user/preload/python_domains.h). */
#define AS_CODE_PYMEM_MALLOC AS_ENTRY_CODE(100, AS_FN_MALLOC)   /* PyMem_Malloc */
#define AS_CODE_PYMEM_CALLOC AS_ENTRY_CODE(101, AS_FN_CALLOC)   /* PyMem_Calloc */
#define AS_CODE_PYMEM_REALLOC AS_ENTRY_CODE(102, AS_FN_REALLOC) /* PyMem_Realloc */
#define AS_CODE_PYOBJ_MALLOC AS_ENTRY_CODE(103, AS_FN_MALLOC)   /* PyObject_Malloc */
#define AS_CODE_PYOBJ_CALLOC AS_ENTRY_CODE(104, AS_FN_CALLOC)   /* PyObject_Calloc */
#define AS_CODE_PYOBJ_REALLOC AS_ENTRY_CODE(105, AS_FN_REALLOC) /* PyObject_Realloc */

/* A Java object the JVM sampled (user/preload/jvm_agent.c). */
#define AS_CODE_JAVA_NEW AS_ENTRY_CODE(106, AS_FN_MALLOC) /* new */

#endif
