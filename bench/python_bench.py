#!/usr/bin/env python3
"""What Python frames cost on real Python programs from Debian: each program
untraced, under tracemalloc (1 frame, and 25), and under allocscope's paths
(the default, which samples in process with CPython's own allocator wrapped;
--probes, the C library's allocator only, as an attached process is sampled).
Prints per program, as it is done, the median wall time of rounds run in
turn and its ratio to untraced (--probes: one run), then what allocscope
itself takes to start and stop (record -- /bin/true), which every
allocscope column includes.

  sudo bench/python_bench.py [--build DIR] [--rounds N] [--programs a,b] [--configs a,b]

Needs python3-pygments, python3-sphinx and libpython3.11-testsuite.
"""
import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import launched_vs_heaptrack as launched  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PYTHON = "/usr/bin/python3.11"


def pygments_workload(work):
    argv = launched.python_workload(work)  # 1 MiB of the standard library highlighted to HTML
    return [PYTHON, *argv[1:]]


def sphinx_workload(work):
    docs = os.path.join(work, "docs")
    os.makedirs(docs, exist_ok=True)
    modules = ["argparse", "collections", "email.message", "json", "pathlib", "statistics", "typing", "difflib"]
    with open(os.path.join(docs, "conf.py"), "w") as f:
        f.write("project = 'bench'\nextensions = ['sphinx.ext.autodoc']\n")
    with open(os.path.join(docs, "index.rst"), "w") as f:
        f.write("Bench\n=====\n\n.. toctree::\n\n" + "".join(f"   {m}\n" for m in modules))
    for m in modules:
        with open(os.path.join(docs, f"{m}.rst"), "w") as f:
            f.write(f"{m}\n{'=' * len(m)}\n\n.. automodule:: {m}\n   :members:\n   :undoc-members:\n")
    out = os.path.join(work, "html")
    # -E: every document read again (no saved environment), so each run does the same work.
    return [PYTHON, "-m", "sphinx", "-q", "-E", "-b", "html", docs, out]


def testsuite_workload(work):
    tests = ["test_json", "test_difflib", "test_statistics"]
    return [PYTHON, "-m", "test", "-q", *tests]


PROGRAMS = {"pygments": pygments_workload, "sphinx": sphinx_workload, "python3 -m test": testsuite_workload}


def configs(build):
    bin = os.path.join(build, "allocscope")
    record = lambda *extra: lambda out: [bin, "record", "-q", *extra, "-o", out, "--"]
    return {
        "untraced": None,
        "tracemalloc": "-X tracemalloc=1",
        "tracemalloc 25": "-X tracemalloc=25",
        "allocscope": record(),
        "allocscope --probes": record("--probes"),
    }


# Through probes every malloc traps (several microseconds a call on this kind
# of VM): one run. Exact mode is slower still and not run.
ONCE = ("allocscope --probes",)


def timed(argv):
    t0 = time.monotonic()
    proc = subprocess.run(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    if proc.returncode != 0:
        sys.exit(f"{argv[:8]} failed ({proc.returncode}): {proc.stderr[-2000:]}")
    return time.monotonic() - t0


def command(config, program, out):
    if config is None:
        return program
    if isinstance(config, str):  # tracemalloc: an option of the interpreter
        return [program[0], *config.split(), *program[1:]]
    return config(out) + program


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--programs", default=",".join(PROGRAMS))
    ap.add_argument("--configs", help="comma-separated columns (untraced always)")
    args = ap.parse_args()
    cfgs = configs(args.build)
    if args.configs:
        keep = set(args.configs.split(",")) | {"untraced", "allocscope"}
        cfgs = {c: v for c, v in cfgs.items() if c in keep}
    print("| program | " + " | ".join(cfgs) + " |")
    print("|---" * (len(cfgs) + 1) + "|")
    with tempfile.TemporaryDirectory() as work:
        out = os.path.join(work, "out.json")
        for name in args.programs.split(","):
            program = PROGRAMS[name](work)
            times = {c: [] for c in cfgs}
            for r in range(args.rounds):
                for c, cfg in cfgs.items():
                    if c in ONCE and r > 0:
                        continue
                    times[c].append(timed(command(cfg, program, out)))
            base = statistics.median(times["untraced"])
            cells = []
            for c in cfgs:
                t = statistics.median(times[c])
                cells.append(f"{t:.2f} s" if c == "untraced" else f"{t:.2f} s ({t / base:.2f}x)")
            print(f"| {name} | " + " | ".join(cells) + " |", flush=True)
        fixed = statistics.median(timed(cfgs["allocscope"](out) + ["/bin/true"]) for _ in range(args.rounds))
        print(f"\nallocscope record -- /bin/true: {fixed:.2f} s (start and stop, in every allocscope column)")


if __name__ == "__main__":
    main()
