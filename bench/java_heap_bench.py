#!/usr/bin/env python3
"""What sampling the Java heap costs a JVM that allocscope launches or
enters (-p): the JVM
samples its own heap (SampledObjectAlloc at --rate, through allocscope's
JVMTI agent), nearly free for an allocation not sampled. tests/workloads/
Alloc.java's two sites (byte arrays, then 40-byte objects in chains: a
small-object loop) timed by the program itself (its "loop_ns": the JVM's
start and allocscope's left out), untraced, under `allocscope record`,
under `record --no-java-heap` (the same recording without the agent: what
the agent alone adds) and started untraced then entered by `record -p`, in turn, round after round, so that every ratio is
of runs measured seconds apart on one machine. Medians. Prints markdown for
BENCHMARKS.md.

  sudo bench/java_heap_bench.py --build build            # 5 rounds
  sudo bench/java_heap_bench.py --build build --java /usr/lib/jvm/java-25-openjdk-amd64/bin/java
"""
import argparse
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time


def loop_seconds(argv):
    r = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if r.returncode != 0:
        sys.exit(f"{argv} failed ({r.returncode}): {r.stderr[-2000:]}")
    return loop_seconds_of(r.stdout)


def loop_seconds_of(out):
    m = re.search(r"loop_ns (\d+)", out)
    if not m:
        sys.exit(f"no loop time in the program's output: {out[-500:]}")
    return int(m.group(1)) / 1e9


def attached_loop_seconds(java, record, go):
    """`java` started untraced, waiting for `go`; `record -p` attached to it
    once it is 6 s old (a JVM before JDK 21 is entered 5 s after its start)
    and a second after it records; then let go. Its loop time."""
    jvm = subprocess.Popen(java + [go], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    started = time.monotonic()
    if not jvm.stdout.readline().startswith("ready"):
        sys.exit(f"{java}: not ready: {jvm.stderr.read()[-2000:]}")
    rec = subprocess.Popen(record + ["-p", str(jvm.pid)], stderr=subprocess.PIPE, text=True)
    for line in rec.stderr:
        if "recording" in line:
            break
    else:
        sys.exit(f"record -p {jvm.pid} did not start")
    time.sleep(max(1.0, 6.0 - (time.monotonic() - started)))
    open(go, "w").close()
    out, err = jvm.communicate()
    rec.stderr.read()
    if jvm.wait() != 0 or rec.wait() != 0:
        sys.exit(f"{java} under -p failed: {err[-2000:]}")
    os.remove(go)
    return loop_seconds_of(out)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", default="build")
    ap.add_argument("--java", default="java")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--rate", default="512KiB")
    args = ap.parse_args()
    allocscope = os.path.join(args.build, "allocscope")
    classes = os.path.join(args.build, "tests", "java")
    if not os.access(allocscope, os.X_OK) or not os.path.exists(os.path.join(classes, "Alloc.class")):
        sys.exit(f"build first (cmake --build {args.build})")
    scratch = tempfile.mkdtemp(prefix="java-heap-bench-")  # root writes here: no name another user could plant
    out = os.path.join(scratch, "out.pb.gz")
    record = [allocscope, "record", "-q", "--rate", args.rate, "-o", out]
    attach = [allocscope, "record", "--rate", args.rate, "-o", out]  # its "recording" line is awaited
    go = os.path.join(scratch, "go")
    workloads = [  # name, Alloc's arguments
        ("2 KB arrays, 200 MB", ["100000", "2000"]),
        ("small objects: 40-byte chains and 24-byte arrays, 2.7 GB", ["4000000", "8"]),
    ]
    print(f"| Alloc.java (loop time, median of {args.rounds}) | untraced | record | ratio | "
          "record --no-java-heap | ratio | agent alone | record -p | ratio |")
    print("|---|---|---|---|---|---|---|---|---|")
    for name, alloc_args in workloads:
        java = [args.java, "-Xms1g", "-Xmx1g", "-cp", classes, "Alloc"] + alloc_args
        plain, agent, native, attached = [], [], [], []
        for _ in range(args.rounds):
            plain.append(loop_seconds(java))
            agent.append(loop_seconds(record + ["--"] + java))
            native.append(loop_seconds(record + ["--no-java-heap", "--"] + java))
            attached.append(attached_loop_seconds(java, attach, go))
        p, a, n = statistics.median(plain), statistics.median(agent), statistics.median(native)
        t = statistics.median(attached)
        print(f"| {name} | {p:.3f} s | {a:.3f} s | {a / p:.2f}x | {n:.3f} s | {n / p:.2f}x | {a / n:.2f}x "
              f"| {t:.3f} s | {t / p:.2f}x |")
    shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    main()
