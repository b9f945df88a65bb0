#!/usr/bin/env python3
"""A real program against heaptrack's exact record: Debian's clang (built
without frame pointers) compiles a template-heavy C++ file (bench/clang_heavy.cpp)
untraced, under heaptrack, and under allocscope (default rate, 64 KiB, exact
mode); prints side by side totals, calls, inuse at exit, the peak (record
--peak against heaptrack's replayed events), top functions (direct
and cumulative), heaptrack's top stacks frame for frame with allocscope's
estimate of each, drops, truncation and wall time.

  sudo bench/clang_vs_heaptrack.py [--build DIR] [--runs CONFIGS] [--keep DIR]

Needs clang (clang++-14 or clang++), heaptrack and zstd.
"""
import argparse
import collections
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SOURCE = os.path.join(ROOT, "bench", "clang_heavy.cpp")
CONFIGS = {
    "default": [],
    "64KiB": ["--rate", "64KiB"],
    "exact": ["--rate", "1"],
    "preload": ["--preload"],
    "preload-exact": ["--preload", "--rate", "1"],
}


def find_clang():
    for name in ("clang++-14", "clang++"):
        path = shutil.which(name)
        if path:
            return path
    sys.exit("clang++ not found (apt install clang)")


def cc1_command(clang, workdir):
    """The -cc1 command clang's driver would run: the compiler proper."""
    out = subprocess.run([clang, "-std=c++17", "-O1", "-###", "-c", SOURCE, "-o", os.path.join(workdir, "out.o")],
                         capture_output=True, text=True, check=True).stderr
    line = next(l for l in out.splitlines() if '"-cc1"' in l)
    return shlex.split(line)


def timed(argv, **kw):
    t0 = time.monotonic()
    proc = subprocess.run(argv, **kw)
    return time.monotonic() - t0, proc


# ---- heaptrack's record --------------------------------------------------------

def parse_heaptrack(path):
    """Totals, inuse at exit and per-stack bytes and calls from heaptrack's
    data file (strings 's', instruction pointers 'i', traces 't', allocation
    infos 'a', allocations '+', frees '-'; numbers in hex)."""
    strings, ips, traces, infos = [""], [None], [(0, 0)], []
    calls = collections.Counter()
    freed = collections.Counter()
    events = []  # ("+" or "-", allocation info) in the order heaptrack saw them
    text = subprocess.run(["zstdcat", path], capture_output=True, text=True, check=True).stdout
    for line in text.splitlines():
        tag, _, rest = line.partition(" ")
        if tag == "s":
            strings.append(ALIASES.get(rest.partition(" ")[2], rest.partition(" ")[2]))
        elif tag == "i":
            f = rest.split()
            ips.append(int(f[2], 16) if len(f) > 2 else 0)  # function string (outermost of inlines last: keep first)
        elif tag == "t":
            ip, parent = rest.split()
            traces.append((int(ip, 16), int(parent, 16)))
        elif tag == "a":
            size, trace = rest.split()
            infos.append((int(size, 16), int(trace, 16)))
        elif tag in ("+", "-"):
            info = int(rest, 16)
            (calls if tag == "+" else freed)[info] += 1
            events.append((tag, info))
    stacks = collections.defaultdict(lambda: [0, 0, 0])  # frames -> bytes, calls, inuse bytes

    def frames_of(trace):
        out = []
        while trace:
            ip, trace = traces[trace]
            fn = ips[ip] if ip < len(ips) else 0
            out.append(strings[fn] if fn else "??")
        return tuple(reversed(out))  # root first

    cache = {}
    for info, n in calls.items():
        size, trace = infos[info]
        if trace not in cache:
            cache[trace] = frames_of(trace)
        s = stacks[cache[trace]]
        s[0] += size * n
        s[1] += n
        s[2] += size * (n - freed.get(info, 0))
    return stacks, peak_of(events, infos, cache)


def peak_of(events, infos, frames_of_trace):
    """heaptrack's peak: the most bytes live at once (events replayed in
    order), and the bytes live per stack at that moment."""
    live = best = at = 0
    for i, (kind, info) in enumerate(events):
        live += infos[info][0] if kind == "+" else -infos[info][0]
        if live > best:
            best, at = live, i
    held = collections.Counter()
    for kind, info in events[: at + 1]:
        held[info] += 1 if kind == "+" else -1
    by_stack = collections.Counter()
    for info, n in held.items():
        size, trace = infos[info]
        by_stack[frames_of_trace.get(trace, ("??",))] += size * n
    return best, by_stack


# ---- allocscope's recording ----------------------------------------------------

def parse_peak(binary, pprof, workdir):
    """allocscope's --peak profile: total in use and its interval, bytes by stack."""
    peak = pprof.replace(".pb.gz", ".peak.pb.gz")
    if not os.path.exists(peak):
        return None
    stacks, _, totals = parse_allocscope(binary, peak, workdir)
    return totals["inuse_space"], collections.Counter({k: v[2] for k, v in stacks.items()})


def recorded_paths(binary, pprof, workdir):
    """How a recording recorded (its summary says so only with -v): the
    "paths" of its report's JSON, e.g. {"sampling": "in process (1 process)"}."""
    out = os.path.join(workdir, "paths.json")
    subprocess.run([binary, "report", pprof, "--format", "json", "-o", out], check=True)
    with open(out) as f:
        return json.load(f).get("paths", {})


def parse_allocscope(binary, pprof, workdir):
    out = os.path.join(workdir, "report.json")
    subprocess.run([binary, "report", pprof, "--format", "json", "-o", out], check=True)
    with open(out) as f:
        d = json.load(f)
    stacks = {}
    for s in d["stacks"]:
        # Root first: drop the allocator called (heaptrack's stacks end at its
        # caller); unnamed frames ("module+0x...") are heaptrack's "??".
        frames = tuple("??" if UNNAMED.match(f) else f for f in s["frames"][:-1])
        old = stacks.get(frames, [0, 0, 0])
        stacks[frames] = [o + v for o, v in zip(old, (s["alloc_space"]["estimate"], s["alloc_objects"]["estimate"],
                                                        s["inuse_space"]["estimate"]))]
    return stacks, d["counters"], d["totals"]


# ---- comparisons ---------------------------------------------------------------

GARBAGE = ("[heap]", "[anon]", "[unknown]", "[stack]")
# One function, two names: heaptrack shows the local symbol, allocscope the exported one.
ALIASES = {"__libc_start_main_impl": "__libc_start_main"}
UNNAMED = re.compile(r"^\S+\+0x[0-9a-f]+$")


def by_function(stacks, cumulative):
    out = collections.Counter()
    for frames, (bytes_, _, _) in stacks.items():
        if not frames:
            continue
        if cumulative:
            for f in set(frames):
                out[f] += bytes_
        else:
            out[frames[-1]] += bytes_
    return out


def share(stacks, pred):
    total = sum(v[0] for v in stacks.values()) or 1
    return sum(v[0] for k, v in stacks.items() if pred(k)) / total


def short(name, n=70):
    return name if len(name) <= n else name[: n - 3] + "..."


def report(truth, peak, runs, walls):
    names = list(runs)
    print("## clang -cc1 on bench/clang_heavy.cpp: heaptrack against allocscope\n")
    header = "| | heaptrack | " + " | ".join(names) + " |"
    print(header)
    print("|---" * (len(names) + 2) + "|")
    t_bytes = sum(v[0] for v in truth.values())
    t_calls = sum(v[1] for v in truth.values())
    t_inuse = sum(v[2] for v in truth.values())

    def row(label, t, f):
        print(f"| {label} | {t} | " + " | ".join(f(n) for n in names) + " |")

    def rel(est, true):
        return f"{est / 1e6:,.1f} MB ({(est / true - 1) * 100:+.1f} %)" if true else f"{est / 1e6:,.1f} MB"

    row("wall time", f"{walls['heaptrack']:.1f} s ({walls['heaptrack'] / walls['untraced']:.2f}x)",
        lambda n: f"{walls[n]:.1f} s ({walls[n] / walls['untraced']:.2f}x)")
    row("bytes allocated", f"{t_bytes / 1e6:,.1f} MB", lambda n: rel(runs[n][2]["alloc_space"]["estimate"], t_bytes))
    row("calls", f"{t_calls:,}", lambda n: f"{runs[n][2]['alloc_objects']['estimate']:,.0f} "
        f"({(runs[n][2]['alloc_objects']['estimate'] / t_calls - 1) * 100:+.1f} %)")
    row("inuse at exit", f"{t_inuse / 1e6:,.1f} MB", lambda n: rel(runs[n][2]["inuse_space"]["estimate"], t_inuse))
    row("95 % interval of bytes", "", lambda n: "[{:,.0f}; {:,.0f}] MB".format(
        *(x / 1e6 for x in runs[n][2]["alloc_space"]["interval"])))
    row("samples", "", lambda n: f"{runs[n][1].get('samples', 0):,}")
    row("drops (ringbuf, stack lost, exact full)", "", lambda n: "{}, {}, {}".format(
        runs[n][1].get("dropped_ringbuf", 0), runs[n][1].get("dropped_stack_lost", 0),
        runs[n][1].get("dropped_exact_full", 0)))
    row("bytes under [truncated]", f"{share(truth, lambda k: False) * 100:.1f} %",
        lambda n: f"{share(runs[n][0], lambda k: '[truncated]' in k) * 100:.1f} %")
    row("bytes under garbage frames", f"{share(truth, lambda k: any(g in f for f in k for g in GARBAGE)) * 100:.1f} %",
        lambda n: f"{share(runs[n][0], lambda k: any(g in f for f in k for g in GARBAGE)) * 100:.1f} %")
    row("`main` cumulative", f"{share(truth, lambda k: 'main' in k) * 100:.1f} %",
        lambda n: f"{share(runs[n][0], lambda k: 'main' in k) * 100:.1f} %")
    peak_bytes, peak_stacks = peak
    row("peak heap (most live at once)", f"{peak_bytes / 1e6:,.1f} MB",
        lambda n: "{} [{:,.1f}; {:,.1f}]".format(rel(runs[n][3][0]["estimate"], peak_bytes),
                                                *(x / 1e6 for x in runs[n][3][0]["interval"]))
        if runs[n][3] else "-")
    print("\n### Top 5 functions (allocator's caller) at the peak: bytes live then\n")
    print("| function | heaptrack | " + " | ".join(names) + " |")
    print("|---" * (len(names) + 2) + "|")
    direct = lambda stacks: collections.Counter({f: sum(v for k, v in stacks.items() if k and k[-1] == f)
                                                 for f in {k[-1] for k in stacks if k}})
    t_peak = direct(peak_stacks)
    e_peak = {n: direct(runs[n][3][1]) if runs[n][3] else collections.Counter() for n in names}
    for fn, b in t_peak.most_common(5):
        cells = [f"{(e_peak[n].get(fn, 0) / b - 1) * 100:+.1f} %" if b else "-" for n in names]
        print(f"| `{short(fn)}` | {b / 1e6:,.1f} MB | " + " | ".join(cells) + " |")
    for cumulative in (False, True):
        kind = "cumulative" if cumulative else "direct (allocator's caller)"
        print(f"\n### Top 10 functions, {kind}: bytes (allocscope's error against heaptrack)\n")
        t = by_function(truth, cumulative)
        ests = {n: by_function(runs[n][0], cumulative) for n in names}
        print("| function | heaptrack | " + " | ".join(names) + " |")
        print("|---" * (len(names) + 2) + "|")
        for fn, b in t.most_common(10):
            cells = [f"{(ests[n].get(fn, 0) / b - 1) * 100:+.1f} %" for n in names]
            print(f"| `{short(fn)}` | {b / 1e6:,.1f} MB | " + " | ".join(cells) + " |")
    print("\n### heaptrack's top 10 stacks (bytes), frame for frame\n")
    print("| # | depth | heaptrack | " + " | ".join(names) + " |")
    print("|---" * (len(names) + 3) + "|")
    top = sorted(truth.items(), key=lambda kv: -kv[1][0])[:10]
    for i, (frames, (b, _, _)) in enumerate(top, 1):
        cells = []
        for n in names:
            est = runs[n][0].get(frames)
            cells.append(f"{(est[0] / b - 1) * 100:+.1f} %" if est else "missing")
        print(f"| {i} | {len(frames)} | {b / 1e6:,.1f} MB | " + " | ".join(cells) + " |")
    for i, (frames, _) in enumerate(top[:3], 1):
        print(f"\nStack {i}, leaf first: " + " <- ".join(short(f, 40) for f in reversed(frames[-6:])) + " <- ...")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--runs", default="default,64KiB,exact", help="allocscope configurations, comma separated")
    ap.add_argument("--keep", help="keep the recordings in this directory")
    ap.add_argument("--reuse", action="store_true", help="report on the recordings --keep holds, without running")
    args = ap.parse_args()
    binary = os.path.join(args.build, "allocscope")
    if not shutil.which("heaptrack") or not shutil.which("zstdcat"):
        sys.exit("heaptrack and zstd are needed (apt install heaptrack zstd)")
    workdir = args.keep or tempfile.mkdtemp(prefix="allocscope-clang-")
    os.makedirs(workdir, exist_ok=True)
    cc1 = cc1_command(find_clang(), workdir)
    walls_file = os.path.join(workdir, "walls.json")
    walls = json.load(open(walls_file)) if args.reuse else {}
    ht = os.path.join(workdir, "heaptrack")
    if not args.reuse:
        walls["untraced"], _ = timed(cc1, check=True)
        walls["heaptrack"], _ = timed(["heaptrack", "-o", ht] + cc1, check=True, stdout=subprocess.DEVNULL)
    truth, peak = parse_heaptrack(ht + ".zst")
    runs = {}
    for name in args.runs.split(","):
        out = os.path.join(workdir, name + ".pb.gz")
        if not args.reuse:
            walls[name], _ = timed([binary, "record", "-q", "--peak", "-o", out] + CONFIGS[name] + ["--"] + cc1,
                                   check=True)
        runs[name] = parse_allocscope(binary, out, workdir) + (parse_peak(binary, out, workdir),)
    with open(walls_file, "w") as f:
        json.dump(walls, f)
    report(truth, peak, runs, walls)
    if not args.keep:
        shutil.rmtree(workdir)


if __name__ == "__main__":
    main()
