#!/usr/bin/env python3
"""What a launched command's program pays at its start: a shell starts
/bin/true N times, untraced, under `allocscope record` (the default: in
process, the frees ring asked for at a program's first sampled allocation)
and under `record --frees-trap` (no ring). Rounds interleave the three;
prints the median wall time a start.

  sudo bench/launched_starts.py --starts 300 --rounds 5
"""
import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def timed(argv):
    start = time.perf_counter()
    done = subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    if done.returncode != 0:
        sys.exit(f"{' '.join(argv)}: status {done.returncode}\n{done.stderr}")
    return time.perf_counter() - start


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--starts", type=int, default=300)
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args()
    loop = f"i=0; while [ $i -lt {args.starts} ]; do /bin/true; i=$((i+1)); done"
    allocscope = os.path.join(args.build, "allocscope")
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "starts.folded")
        configs = {
            "untraced": ["/bin/sh", "-c", loop],
            "allocscope record": [allocscope, "record", "-q", "-o", out, "--", "/bin/sh", "-c", loop],
            "allocscope record --frees-trap": [allocscope, "record", "-q", "--frees-trap", "-o", out, "--",
                                               "/bin/sh", "-c", loop],
        }
        times = {name: [] for name in configs}
        for _ in range(args.rounds):
            for name, argv in configs.items():
                times[name].append(timed(argv) / args.starts)
    print(f"| run | ms a start (median of {args.rounds}) |")
    print("|---|---:|")
    for name, t in times.items():
        print(f"| {name} | {statistics.median(t) * 1000:.2f} |")


if __name__ == "__main__":
    main()
