"""Starts tracemalloc between two of allocscope's entries, for its tests.

Prints "ready", then at each SIGUSR1: starts tracemalloc ("tracing"); makes
COUNT small bytes objects in small_objects() and prints "made COUNT SIZE"
(SIZE as CPython's allocator is asked); stops tracemalloc, makes them
again and prints "done".
"""
import signal
import sys
import tracemalloc

COUNT = 200000


def small_objects():
    return [bytes(100) for _ in range(COUNT)]


signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGUSR1})
print("ready", flush=True)
signal.sigwait({signal.SIGUSR1})
tracemalloc.start()
print("tracing", flush=True)
signal.sigwait({signal.SIGUSR1})
kept = small_objects()
print("made", COUNT, sys.getsizeof(bytes(100)), flush=True)
signal.sigwait({signal.SIGUSR1})
tracemalloc.stop()
kept = small_objects()
print("done", flush=True)
