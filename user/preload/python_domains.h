/* CPython's own allocator, counted in process: in a Python program the
 * preload library wraps the object and memory domains (PyMem_SetAllocator,
 * as tracemalloc does), so that objects CPython serves from its own arenas
 * (up to 512 bytes: most of them) are counted like the C library's
 * allocations, with the same countdown (sampler.h). A domain's calls into
 * the C library (larger blocks) run inside the wrapper and are not counted
 * again. Wrapped at run time too, in an interpreter allocscope enters. */
#ifndef ALLOCSCOPE_PYTHON_DOMAINS_H
#define ALLOCSCOPE_PYTHON_DOMAINS_H

/* In a Python program (the interpreter's symbols are the executable's), the
 * domains are wrapped before its runtime starts: CPython keeps allocators
 * set before then, unless PYTHONMALLOC or -X dev choose others. Called once,
 * by the library's constructor. */
void as_wrap_python_domains(void) __attribute__((visibility("hidden")));

/* An interpreter found running (the library injected into it, attached):
 * its domains wrapped from now on, and given back at the detach, by one
 * thread of the library's that takes the GIL (PyGILState_Ensure) and does
 * the latest of these wishes; returns at once. Only CPython 3.7 on, of the
 * GIL's builds (a free-threaded one's domains can be set only before it
 * starts), neither finalizing: otherwise its small objects stay uncounted,
 * as allocscope says. */
void as_python_attach_running(void) __attribute__((visibility("hidden")));
void as_python_detach_running(void) __attribute__((visibility("hidden")));

#endif
