#!/usr/bin/env python3
"""What sampling Go's heap costs a Go program, each way allocscope reads it:
from the runtime's own sampling (probes on runtime.mProf_Malloc and
runtime.freeSpecial, met once per sampled block: programs that link
runtime/pprof, and those with memory profiling linked out, whose rate
allocscope sets as they start), or at every runtime.mallocgc call (one
trap per allocation: --go-heap-calls, exact mode, --no-inject for those
with memory profiling linked out). Each
program untraced and under `allocscope record` each way, taken in turn,
round after round, so that every ratio is of runs measured seconds apart
on one machine:

  * go_heap (tests/workloads/go_heap.go, links runtime/pprof) and go_sites
    (tests/workloads/go_sites.go, does not): allocation loops, their own
    loop time (what the probes add, allocscope's start and end left out);
  * Debian's gofmt -l over two trees of Go's own sources: a real program's
    wall time, allocscope's start (about 0.4 s) included.

Prints markdown for BENCHMARKS.md.

  sudo bench/go_heap_bench.py --build build           # 5 rounds
  sudo bench/go_heap_bench.py --build build --rounds 1 --iterations 100000
"""
import argparse
import os
import re
import statistics
import subprocess
import shutil
import sys
import tempfile
import time

GOFMT = "/usr/lib/go/bin/gofmt"
GO_TREES = ["/usr/lib/go/src/net", "/usr/lib/go/src/runtime"]  # no test data that fails to parse


def timed(argv, own_time):
    """Seconds: the loop's own figure (stderr "loop N ns") or the wall time."""
    start = time.perf_counter()
    r = subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    wall = time.perf_counter() - start
    if r.returncode != 0:
        sys.exit(f"{argv} failed ({r.returncode}): {r.stderr[-2000:]}")
    if not own_time:
        return wall
    m = re.search(r"^loop (\d+) ns$", r.stderr, re.M)
    if not m:
        sys.exit(f"{argv}: no loop time in its output")
    return int(m.group(1)) / 1e9


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", default="build")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--iterations", type=int, default=400000, help="go_sites. loop (400000: 516,000 allocations); go_heap runs half as many")
    ap.add_argument("--rate", default="512KiB")
    args = ap.parse_args()
    allocscope = os.path.join(args.build, "allocscope")
    sites = os.path.join(args.build, "tests", "go_sites")
    heap = os.path.join(args.build, "tests", "go_heap")
    for f in (allocscope, sites, heap, GOFMT):
        if not os.access(f, os.X_OK):
            sys.exit(f"{f} missing: build first (cmake --build {args.build}), install golang-go")
    scratch = tempfile.mkdtemp(prefix="go-heap-bench-")  # root writes here: no name another user could plant
    out = os.path.join(scratch, "out.folded")
    record = [allocscope, "record", "-q", "--rate", args.rate, "-o", out]
    runtime_way, calls_way = record + ["--"], record + ["--go-heap-calls", "--"]
    programs = [  # name, argv, its own loop time
        ("go_heap, loop time", [heap, str(args.iterations // 2)], True),
        ("go_sites (no runtime/pprof), loop time", [sites, str(args.iterations)], True),
        ("gofmt -l net runtime (Go's sources; no runtime/pprof), wall time", [GOFMT, "-l"] + GO_TREES, False),
    ]
    print(f"| program | untraced (median of {args.rounds}) | runtime's sampling | ratio | mallocgc calls | ratio |")
    print("|---|---|---|---|---|---|")
    for name, argv, own in programs:
        plain, runtime, calls = [], [], []
        for _ in range(args.rounds):
            plain.append(timed(argv, own))
            runtime.append(timed(runtime_way + argv, own))
            calls.append(timed(calls_way + argv, own))
        p, r, c = statistics.median(plain), statistics.median(runtime), statistics.median(calls)
        print(f"| {name} | {p:.3f} s | {r:.3f} s | {r / p:.2f}x | {c:.3f} s | {c / p:.2f}x |")
    shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    main()
