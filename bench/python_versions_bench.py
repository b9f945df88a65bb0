#!/usr/bin/env python3
"""What Python frames cost, version by version: each interpreter (Debian's
python3.11, and pyenv's 3.8 to 3.13, whose runtime is libpython3.X.so) runs
the same allocation workload (tests/workloads/python_sites.py) untraced,
under allocscope's default (launched: sampled in process, CPython's own
allocator wrapped), with --preload spelled out, and through the C library's
probes alone (--probes) at two rates. The two --probes rates give the cost
of one sampled trial with its Python frames: the difference of wall times
over the difference of samples taken (rounds run in turn, medians).

  sudo bench/python_versions_bench.py [--build DIR] [--rounds N] [--scale-pct N]
"""
import argparse
import glob
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from python_bench import timed  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SITES = os.path.join(ROOT, "tests", "workloads", "python_sites.py")


def interpreters():
    found = [("Debian 3.11 (in the program)", "/usr/bin/python3.11")] if os.path.exists("/usr/bin/python3.11") else []
    root = os.environ.get("PYENV_ROOT", os.path.expanduser("~/.pyenv"))
    newest = {}
    for d in glob.glob(os.path.join(root, "versions", "3.*.*")):
        m = re.fullmatch(r"3\.(\d+)\.(\d+)", os.path.basename(d))
        if not m or not 8 <= int(m[1]) <= 13:
            continue
        minor, patch = int(m[1]), int(m[2])
        path = os.path.join(d, "bin", f"python3.{minor}")
        if os.access(path, os.X_OK) and (minor not in newest or newest[minor][0] < patch):
            newest[minor] = (patch, path)
    for minor in sorted(newest):
        found.append((f"pyenv 3.{minor} (libpython)", newest[minor][1]))
    return found


def samples(path):
    with open(path) as f:
        return json.load(f)["counters"]["samples"]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--scale-pct", default="200")
    args = ap.parse_args()
    bin = os.path.join(args.build, "allocscope")
    rates = ("512KiB", "8KiB")
    print("| interpreter | untraced | allocscope | --preload | --probes | --probes --rate 8KiB | ns per sampled trial |")
    print("|---|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory() as work:
        out = os.path.join(work, "out.json")
        for name, python in interpreters():
            program = [python, SITES, "--scale-pct", args.scale_pct]
            record = lambda *extra: [bin, "record", "-q", *extra, "-o", out, "--"] + program
            configs = {
                "untraced": program,
                "allocscope": record(),
                "--preload": record("--preload"),
                "--probes": record("--probes", "--rate", rates[0]),
                "--probes 8KiB": record("--probes", "--rate", rates[1]),
            }
            times = {c: [] for c in configs}
            counted = {c: [] for c in ("--probes", "--probes 8KiB")}
            for _ in range(args.rounds):
                for c, argv in configs.items():
                    times[c].append(timed(argv))
                    if c in counted:
                        counted[c].append(samples(out))
            t = {c: statistics.median(v) for c, v in times.items()}
            s = {c: statistics.median(v) for c, v in counted.items()}
            extra = s["--probes 8KiB"] - s["--probes"]
            trial = (t["--probes 8KiB"] - t["--probes"]) / extra * 1e9 if extra > 0 else float("nan")
            base = t["untraced"]
            cells = [f"{base:.2f} s"] + [f"{t[c]:.2f} s ({t[c] / base:.2f}x)" for c in list(configs)[1:]]
            print(f"| {name} | " + " | ".join(cells) + f" | {trial:,.0f} ({extra:,.0f} more samples) |", flush=True)


if __name__ == "__main__":
    main()
