#!/usr/bin/env python3
"""What a process start costs under allocscope: the wall time of `sh -c true`
(a fork, an exec, the loader, the C library, an exit) and of a short
allocating job started in a cgroup of its own, untraced and under each
tracer, the tracers taken in turn and each followed by an untraced round, so
that every ratio is of two rounds measured a few seconds apart on one
machine. Programs run before the first round, so every file is one the
tracer has seen (what a busy host starts all day). Prints markdown for
BENCHMARKS.md.

  sudo bench/process_start.py                  # 200 starts a round, 3 rounds
  sudo bench/process_start.py --runs 50 --rounds 1
"""
import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from agent_soak import cgroup2_root, free_port, job_cgroup  # noqa: E402


class Jobs:
    """Starts commands and times each from fork to reaped exit."""

    def __init__(self, cgroups):
        self.parent = tempfile.mkdtemp(prefix="allocscope-starts-", dir=cgroup2_root()) if cgroups else None
        self.serial = 0

    def time_one(self, argv):
        self.serial += 1
        cg, join = job_cgroup(self.parent, self.serial)
        start = time.perf_counter()
        status = subprocess.call(argv, preexec_fn=join, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        took = time.perf_counter() - start
        if cg:
            os.rmdir(cg)
        if status != 0:
            sys.exit(f"{argv} failed: {status}")
        return took

    def close(self):
        if self.parent:
            os.rmdir(self.parent)


class Tracer:
    """One allocscope process watching the machine, started and ready, or nothing."""

    def __init__(self, build, argv, ready):
        self.argv, self.ready, self.build = argv, ready, build
        self.proc = None
        self.log = None

    def __enter__(self):
        if not self.argv:
            return self
        self.log = tempfile.TemporaryFile(mode="w+")
        self.proc = subprocess.Popen([os.path.join(self.build, "allocscope"), *self.argv],
                                     stdout=subprocess.DEVNULL, stderr=self.log)
        deadline = time.time() + 120
        while True:
            self.log.seek(0)
            if self.ready in self.log.read():
                return self
            if self.proc.poll() is not None or time.time() > deadline:
                self.log.seek(0)
                sys.exit(f"{self.argv} did not start:\n{self.log.read()}")
            time.sleep(0.1)

    def __exit__(self, *exc):
        if self.proc:
            self.proc.terminate()
            self.proc.wait(timeout=120)
            self.log.seek(0)
            self.text = self.log.read()


def tracers(build):
    agent = ["agent", "--listen", f"127.0.0.1:{free_port()}"]
    return [
        ("agent", agent, "probes attached"),
        ("agent --rate 1", agent + ["--rate", "1"], "probes attached"),
        ("record --all", ["record", "--all", "-o", "/dev/null"], "recording every process"),
        ("record --all --no-hold", ["record", "--all", "--no-hold", "-o", "/dev/null"], "recording every process"),
    ]


def round_of(jobs, argv, runs):
    return [jobs.time_one(argv) for _ in range(runs)]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--runs", type=int, default=200, help="starts per round")
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    workloads = [
        ("sh -c true", ["/bin/sh", "-c", "true"], False),
        ("allocating job, own cgroup", [os.path.join(args.build, "tests", "alloc_sites"), "--threads", "1",
                                        "--scale-pct", "1"], True),
    ]
    results = {}  # (workload, tracer) -> [traced medians], [untraced medians]
    for wname, argv, cgroups in workloads:
        jobs = Jobs(cgroups)
        try:
            round_of(jobs, argv, 20)  # warm: every file seen, caches full
            for _ in range(args.rounds):
                for tname, targv, ready in tracers(args.build):
                    with Tracer(args.build, targv, ready):
                        round_of(jobs, argv, 10)  # the tracer's first sight of the files: held, not timed
                        traced = round_of(jobs, argv, args.runs)
                    untraced = round_of(jobs, argv, args.runs)
                    t, u = results.setdefault((wname, tname), ([], []))
                    t.append(statistics.median(traced))
                    u.append(statistics.median(untraced))
                    print(f"{wname}, {tname}: {statistics.median(traced) * 1e3:.2f} ms vs "
                          f"{statistics.median(untraced) * 1e3:.2f} ms untraced", file=sys.stderr, flush=True)
        finally:
            jobs.close()
    print(f"\nMedian wall time of one start ({args.runs} a round, {args.rounds} rounds; each traced round "
          "beside an untraced one):\n")
    print("| workload | tracer | untraced (ms) | traced (ms) | ratio |")
    print("|---|---|---:|---:|---:|")
    for (wname, tname), (t, u) in results.items():
        tm, um = statistics.median(t), statistics.median(u)
        print(f"| {wname} | {tname} | {um * 1e3:.2f} | {tm * 1e3:.2f} | {tm / um:.2f}x |")


if __name__ == "__main__":
    try:
        main()
    finally:
        subprocess.run(["pkill", "-TERM", "-f", "allocscope agent --listen 127.0.0.1:"], check=False)
