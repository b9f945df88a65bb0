#!/usr/bin/env python3
"""The sampled trial's cost, by its parts (issue 51). bench/trial_depth runs
malloc/free pairs of 4 KiB at a stack depth of 10, 30 and 100 frames with
the preload library, every allocation sampled (rate 2 bytes): each pair is
one sampled trial (the alloc probe: countdown, stack walk, event) and the
free of a tracked block (the free probe, its event). Per depth, in turn,
rounds of:

  preload     the library counting, nobody listening (no trap): the floor
  null probe  bpftrace's empty programs on the same two USDT probes: the trap
  fp, dwarf   allocscope record --unwind fp / dwarf (frees through the ring)
  trap        allocscope record --unwind dwarf --frees-trap (frees trap too)

With the kernel's BPF statistics on (kernel.bpf_stats_enabled, restored
after), the time inside allocscope's usdt_alloc and usdt_free programs is
read per run while the workload holds; over the depths a line through it
splits the walk into a fixed part and a part per frame. Prints medians.

  sudo bench/trial_cost.py [--build DIR] [--rounds N] [--depths 10,30,100] [--pairs N]

With --parts, from a build configured with -DALLOCSCOPE_TRIAL_PARTS=ON (a
bench-only build whose programs time their own parts, bpf/trial_parts.h):
the nanoseconds of each part of a sampled trial, inside the program, per
depth and unwinder, besides the cost of one mark (subtract it per part).

Needs bpftool and bpftrace (for the null probe; without it that row is "-").
"""
import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RATE = "2"  # bytes: every 4 KiB allocation is a sampled trial


def workload(build, depth, pairs):
    return [os.path.join(build, "bench", "trial_depth"), "--depth", str(depth), "--pairs", str(pairs), "--hold"]


def read_pair_ns(proc):
    """The workload's figure; it then holds until its stdin closes."""
    for line in proc.stdout:
        if line.startswith("cpu_ns_per_pair"):
            return float(line.split()[1])
    raise RuntimeError("no figure from trial_depth: " + (proc.stderr.read() if proc.stderr else ""))


def bpf_program_ns(names):
    """run_time_ns and run_cnt of the live programs of these names."""
    out = json.loads(subprocess.run(["bpftool", "prog", "show", "-j"], capture_output=True, text=True,
                                    check=True).stdout)
    got = {}
    for p in out:
        if p.get("name") in names and p.get("run_cnt"):
            ns, cnt = got.get(p["name"], (0, 0))
            got[p["name"]] = (ns + p.get("run_time_ns", 0), cnt + p["run_cnt"])
    return got


def run_held(argv, env=None, stats=False, while_held=None):
    """Runs argv (whose last process is trial_depth --hold); its ns a pair,
    and while it holds, the BPF programs' time (stats) or while_held()."""
    proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, env=env)
    try:
        ns = read_pair_ns(proc)
        if while_held:
            return ns, while_held()
        progs = bpf_program_ns({"usdt_alloc", "usdt_free"}) if stats else {}
    finally:
        proc.stdin.close()
        proc.wait(timeout=120)
    return ns, progs


def preload_env(build):
    return dict(os.environ, LD_PRELOAD=os.path.join(build, "liballocscope-preload.so"), ALLOCSCOPE_RATE=RATE)


class NullProbe:
    """bpftrace's empty programs on the library's two USDT probes."""

    def __init__(self, build):
        lib = os.path.join(build, "liballocscope-preload.so")
        script = f"usdt:{lib}:otel_memory:alloc {{ }} usdt:{lib}:otel_memory:free {{ }}"
        self.proc = subprocess.Popen(["bpftrace", "-e", script], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                     text=True)
        said = ""
        while "Attaching" not in said:  # after any warning (RLIMIT_MEMLOCK's, harmless)
            line = self.proc.stdout.readline()
            if not line:
                raise RuntimeError("bpftrace: " + said)
            said += line
        time.sleep(0.5)

    def close(self):
        self.proc.terminate()
        self.proc.wait(timeout=30)


def one_round(build, depth, pairs, out):
    wl = workload(build, depth, pairs)
    row = {"preload": run_held(wl, preload_env(build))[0]}
    if shutil.which("bpftrace"):
        probe = NullProbe(build)
        try:
            row["null probe"] = run_held(wl, preload_env(build))[0]
        finally:
            probe.close()
    # The frees of sampled blocks go through the process's ring (no trap)
    # unless --frees-trap: "trap" is dwarf with them trapping, as before.
    for name, options in (("fp", ["--unwind", "fp"]), ("dwarf", ["--unwind", "dwarf"]),
                          ("trap", ["--unwind", "dwarf", "--frees-trap"])):
        argv = [os.path.join(build, "allocscope"), "record", "-q", "--rate", RATE] + options + ["-o", out, "--"] + wl
        ns, progs = run_held(argv, stats=True)
        row[name] = ns
        for prog, (t, n) in progs.items():  # the free's program: a pair's share (most frees never trap)
            row[f"{name} {prog}"] = t / (n if prog == "usdt_alloc" else pairs)
    return row


# bpf/trial_parts.h's enum as_part, in order (slot 0 is the clock).
PARTS = ["(clock)", "one mark", "entry: arguments, filter", "walk set-up: storages, stack end", "walk: the frames",
         "walk end: counters, namespace, cgroup, name", "python check", "stack event unless sent",
         "event reserved, live insert", "event filled, submitted", "free (whole)", "trials", "frees", "stack copies",
         "failed copies"]


def read_parts():
    """Sums of bpf/trial_parts.h's per-CPU slots, by part name."""
    out = subprocess.run(["bpftool", "map", "dump", "name", "trial_parts", "-j"], capture_output=True, text=True)
    if out.returncode != 0:
        raise RuntimeError("no trial_parts map: configure the build with -DALLOCSCOPE_TRIAL_PARTS=ON")
    sums = [0] * len(PARTS)
    for entry in json.loads(out.stdout):
        e = entry.get("formatted", entry)
        key = e["key"]
        if isinstance(key, list):  # raw bytes, little-endian
            key = int.from_bytes(bytes(int(b, 16) for b in key), "little")
        for v in e["values"]:
            val = v["value"]
            if isinstance(val, list):
                val = int.from_bytes(bytes(int(b, 16) for b in val), "little")
            if key < len(sums):
                sums[key] += int(val)
    return sums


def parts_round(build, depth, pairs, out):
    """Per part, ns a trial (a free for the free's part), both unwinders."""
    row = {}
    for unwind in ("fp", "dwarf"):
        argv = [os.path.join(build, "allocscope"), "record", "-q", "--rate", RATE, "--unwind", unwind, "-o", out,
                "--"] + workload(build, depth, pairs)
        sums = run_held(argv, while_held=read_parts)[1]
        trials, frees = sums[PARTS.index("trials")], sums[PARTS.index("frees")]
        for i, name in enumerate(PARTS[1:PARTS.index("trials")], 1):
            n = frees if name.startswith("free") else trials
            row[f"{unwind} {name}"] = sums[i] / n if n else float("nan")
        for name in ("stack copies", "failed copies"):
            row[f"{unwind} {name}"] = sums[PARTS.index(name)] / trials if trials else float("nan")
    return row


def report_parts(depths, medians):
    print("### A sampled trial by its parts, timed inside the program (ns, medians)\n")
    print("Each part's figure includes about one mark's cost (its first row).\n")
    print("| part | " + " | ".join(f"{u} @{d}" for u in ("fp", "dwarf") for d in depths) + " |")
    print("|---" * (1 + 2 * len(depths)) + "|")
    for name in PARTS[1:PARTS.index("trials")] + ["stack copies", "failed copies"]:
        fmt = ",.2f" if "copies" in name else ",.0f"
        cells = [f"{medians[d].get(f'{u} {name}', float('nan')):{fmt}}" for u in ("fp", "dwarf") for d in depths]
        print(f"| {name} | " + " | ".join(cells) + " |")


def slope(xs, ys):
    mx, my = statistics.mean(xs), statistics.mean(ys)
    b = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sum((x - mx) ** 2 for x in xs)
    return my - b * mx, b


def report(depths, medians):
    print("### A sampled trial's cost, ns (medians): a pair is one sampled malloc and its tracked free\n")
    print("| depth | preload (no trap) | null probe: traps | fp: pair | fp: in BPF alloc | fp: in BPF free "
          "| dwarf: pair | dwarf: in BPF alloc | dwarf: in BPF free | dwarf, frees trapping: pair "
          "| ...: in BPF free |")
    print("|---" * 11 + "|")
    for d in depths:
        m = medians[d]
        base = m["preload"]

        def over(k):
            return f"+{m[k] - base:,.0f}" if k in m else "-"

        def own(k):
            return f"{m[k]:,.0f}" if k in m else "-"

        print(f"| {d} | {base:,.0f} | {over('null probe')} | {over('fp')} | {own('fp usdt_alloc')} | "
              f"{own('fp usdt_free')} | {over('dwarf')} | {own('dwarf usdt_alloc')} | {own('dwarf usdt_free')} | "
              f"{over('trap')} | {own('trap usdt_free')} |")
    print("\n### The walk, from the BPF time over depth (a line through the depths)\n")
    for unwind in ("fp", "dwarf"):
        key = f"{unwind} usdt_alloc"
        if all(key in medians[d] for d in depths) and len(depths) > 1:
            fixed, per = slope(depths, [medians[d][key] for d in depths])
            print(f"* {unwind}: {fixed:,.0f} ns a trial besides the walk, {per:,.1f} ns a frame")
    d = depths[len(depths) // 2]
    m = medians[d]
    if "null probe" in m and "dwarf usdt_alloc" in m:
        traps = m["null probe"] - m["preload"]
        for key, what in (("trap", "frees trapping"), ("dwarf", "frees through the ring")):
            trap = traps if key == "trap" else traps / 2
            bpf = m[f"{key} usdt_alloc"] + m.get(f"{key} usdt_free", 0)
            rest = m[key] - m["preload"] - trap - bpf
            print(f"* at depth {d}, dwarf, {what}: traps {trap:,.0f} ns, in BPF {bpf:,.0f} ns, the rest "
                  f"{rest:,.0f} ns (the probes' own work beyond an empty program's, the ring, and the reader"
                  " on the other core)")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--depths", default="10,30,100")
    ap.add_argument("--pairs", type=int, default=200000)
    ap.add_argument("--parts", action="store_true", help="time the parts inside the program (a parts build)")
    args = ap.parse_args()
    if os.geteuid() != 0:
        sys.exit("run as root: it loads BPF and turns the kernel's BPF statistics on")
    if not shutil.which("bpftool"):
        sys.exit("bpftool is needed (apt install bpftool)")
    depths = [int(d) for d in args.depths.split(",")]
    stats_path = "/proc/sys/kernel/bpf_stats_enabled"
    with open(stats_path) as f:
        was = f.read().strip()
    rows = {d: [] for d in depths}
    with tempfile.TemporaryDirectory(prefix="allocscope-trial-") as tmp:
        out = os.path.join(tmp, "trial.pb.gz")
        try:
            with open(stats_path, "w") as f:
                f.write("1")
            for r in range(args.rounds):
                for d in depths:
                    rows[d].append((parts_round if args.parts else one_round)(args.build, d, args.pairs, out))
                print(f"bench: round {r + 1} of {args.rounds}", file=sys.stderr, flush=True)
        finally:
            with open(stats_path, "w") as f:
                f.write(was)
    medians = {d: {k: statistics.median(r[k] for r in rows[d] if k in r) for k in rows[d][0]} for d in depths}
    (report_parts if args.parts else report)(depths, medians)


if __name__ == "__main__":
    main()
