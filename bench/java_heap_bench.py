#!/usr/bin/env python3
"""What sampling the Java heap costs a JVM that allocscope launches: the JVM
samples its own heap (SampledObjectAlloc at --rate, through allocscope's
JVMTI agent), nearly free for an allocation not sampled. tests/workloads/
Alloc.java's two sites (byte arrays, then 40-byte objects in chains: a
small-object loop) timed by the program itself (its "loop_ns": the JVM's
start and allocscope's left out), untraced, under `allocscope record` and
under `record --no-java-heap` (the same recording without the agent: what
the agent alone adds), in turn, round after round, so that every ratio is
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


def loop_seconds(argv):
    r = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if r.returncode != 0:
        sys.exit(f"{argv} failed ({r.returncode}): {r.stderr[-2000:]}")
    m = re.search(r"loop_ns (\d+)", r.stdout)
    if not m:
        sys.exit(f"{argv}: no loop time in its output: {r.stdout[-500:]}")
    return int(m.group(1)) / 1e9


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
    workloads = [  # name, Alloc's arguments
        ("2 KB arrays, 200 MB", ["100000", "2000"]),
        ("small objects: 40-byte chains and 24-byte arrays, 2.7 GB", ["4000000", "8"]),
    ]
    print(f"| Alloc.java (loop time, median of {args.rounds}) | untraced | record | ratio | "
          "record --no-java-heap | ratio | agent alone |")
    print("|---|---|---|---|---|---|---|")
    for name, alloc_args in workloads:
        java = [args.java, "-Xms1g", "-Xmx1g", "-cp", classes, "Alloc"] + alloc_args
        plain, agent, native = [], [], []
        for _ in range(args.rounds):
            plain.append(loop_seconds(java))
            agent.append(loop_seconds(record + ["--"] + java))
            native.append(loop_seconds(record + ["--no-java-heap", "--"] + java))
        p, a, n = statistics.median(plain), statistics.median(agent), statistics.median(native)
        print(f"| {name} | {p:.3f} s | {a:.3f} s | {a / p:.2f}x | {n:.3f} s | {n / p:.2f}x | {a / n:.2f}x |")
    shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    main()
