"""Allocation sites of known sizes in Python functions, for allocscope's tests.

Each site calls build() -> allocate(), which makes `count` bytes objects of
one length: objects of up to 512 bytes come from CPython's own allocator,
larger ones from the C library's calloc. Two sites keep their objects, two
drop them. At the end the workload prints its truth as one JSON line (per
site: objects, bytes each as the allocator is asked, kept or not; and the
line each function's frame is at when it allocates) and leaves
with os._exit, so the kept objects are still allocated when it ends.

  python3 python_sites.py [--scale-pct N] [--wait] [--hold]
  --wait: print "ready", run the sites at SIGUSR1; --hold: after the truth,
  wait for another SIGUSR1 before leaving, and print the functions its
  object and memory allocators had before "ready" and at the end (a tracer
  that wrapped them at run time has given them back).
  --await-wrapped: at that SIGUSR1, first wait (10 s at most) until the
  allocators are not those of the start; --await-given-back: at the last
  SIGUSR1, until they are those of the start again.
"""
import json
import os
import signal
import sys
import time

kept = []


def allocate(size, count):
    out = []
    for _ in range(count):
        out.append(bytes(size))  # line:allocate (the allocating statement)
    return out


def build(size, count):
    return allocate(size, count)  # line:build


def small_kept(count):
    kept.append(build(73, count))  # line:small_kept


def small_freed(count):
    build(233, count)  # line:small_freed


def large_kept(count):
    kept.append(build(3033, count))  # line:large_kept


def large_freed(count):
    build(1533, count)  # line:large_freed


def allocators():
    """The malloc of the object and memory domains (PyMem_GetAllocator)."""
    import ctypes

    class Allocator(ctypes.Structure):
        _fields_ = [(name, ctypes.c_void_p) for name in ("ctx", "malloc", "calloc", "realloc", "free")]

    get = ctypes.pythonapi.PyMem_GetAllocator
    get.argtypes = [ctypes.c_int, ctypes.POINTER(Allocator)]
    get.restype = None
    out = []
    for domain in (2, 1):  # PYMEM_DOMAIN_OBJ, PYMEM_DOMAIN_MEM
        a = Allocator()
        get(domain, ctypes.byref(a))
        out.append(hex(a.malloc or 0))
    return " ".join(out)


def await_allocators(wanted, want_same):
    """Polls until the allocators are (or are not) `wanted`, 10 s at most."""
    for _ in range(1000):
        if (allocators() == wanted) == want_same:
            return
        time.sleep(0.01)


SITES = [(small_kept, 73, 100000, True), (small_freed, 233, 100000, False),
         (large_kept, 3033, 25000, True), (large_freed, 1533, 25000, False)]


def main(argv):
    scale = int(argv[argv.index("--scale-pct") + 1]) if "--scale-pct" in argv else 100
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGUSR1})  # a signal before sigwait waits
    before = allocators() if "--hold" in argv else ""
    if "--wait" in argv:
        print("ready", flush=True)
        signal.sigwait({signal.SIGUSR1})
    if "--await-wrapped" in argv:
        await_allocators(before, False)
    truth = {}
    for site, length, count, keep in SITES:
        n = count * scale // 100
        site(n)
        truth[site.__name__] = {"objects": n, "size": sys.getsizeof(bytes(length)), "kept": keep}
    # Where each function's frame stands when it allocates: its marked line.
    lines, marker = {}, "# " + "line:"  # not a marker itself
    for number, text in enumerate(open(__file__), 1):
        if marker in text:
            lines[text.split(marker)[1].split()[0]] = number
    truth["lines"] = lines
    print(json.dumps(truth), flush=True)
    if "--hold" in argv:
        signal.sigwait({signal.SIGUSR1})
        if "--await-given-back" in argv:
            await_allocators(before, True)
        print("allocators before", before, flush=True)
        print("allocators after", allocators(), flush=True)
    os._exit(0)


main(sys.argv)
