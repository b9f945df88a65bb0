/* CPython's own allocator, counted in process: in a Python program the
 * preload library wraps the object and memory domains (PyMem_SetAllocator,
 * as tracemalloc does), so that objects CPython serves from its own arenas
 * (up to 512 bytes: most of them) are counted like the C library's
 * allocations, with the same countdown (sampler.h). A domain's calls into
 * the C library (larger blocks) run inside the wrapper and are not counted
 * again. */
#ifndef ALLOCSCOPE_PYTHON_DOMAINS_H
#define ALLOCSCOPE_PYTHON_DOMAINS_H

/* In a Python program (the interpreter's symbols are the executable's), the
 * domains are wrapped before its runtime starts: CPython keeps allocators
 * set before then, unless PYTHONMALLOC or -X dev choose others. Called once,
 * by the library's constructor. */
void as_wrap_python_domains(void) __attribute__((visibility("hidden")));

#endif
