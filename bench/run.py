#!/usr/bin/env python3
"""Overhead benchmark: every configuration side by side, in interleaved rounds
on this machine, as ns per malloc+free pair measured inside malloc_bench
(attach time excluded). Prints markdown tables for BENCHMARKS.md.

  sudo bench/run.py [--build DIR] [--reps N] [--pairs N] [--smoke]

--smoke: a few thousand pairs, one round, a configuration of each kind
(attached, a forced fallback, preloaded, launched), no peers: proves the
script works.
"""
import argparse
import atexit
import os
import resource
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def wait_for(stream, text, timeout):
    """Reads lines from a pipe until one contains text; returns all lines read."""
    deadline = time.time() + timeout
    seen = []
    while time.time() < deadline:
        line = stream.readline()
        if not line:
            break
        seen.append(line)
        if text in line:
            return seen
    raise RuntimeError(f"timed out waiting for {text!r}: {''.join(seen)[-2000:]}")


class Bench:
    """malloc_bench (or cxx_workload) started with --wait."""

    def __init__(self, argv, prefix=()):
        self.proc = subprocess.Popen(list(prefix) + argv + ["--wait"], stdout=subprocess.PIPE,
                                     stderr=subprocess.DEVNULL, text=True)
        wait_for(self.proc.stdout, "ready", 60)
        self.pid = self.proc.pid
        if prefix:  # a launcher (heaptrack): find the benchmark itself
            name = os.path.basename(argv[0])[:15]
            out = subprocess.run(["pgrep", "-n", "-x", name], capture_output=True, text=True)
            self.pid = int(out.stdout.split()[0])

    def run(self, keys=("ns_per_pair", "ms"), signal_it=True):
        if signal_it:
            os.kill(self.pid, signal.SIGUSR1)
        out, _ = self.proc.communicate(timeout=1800)
        for line in out.splitlines():
            key, _, value = line.partition(" ")
            if key in keys:
                return float(value)
        raise RuntimeError("no result from the benchmark: " + out)


def allocscope_tracer(binary, options, forced=""):
    """`forced`: --force-fallback's value, a kernel's fallback paths run here."""
    def attach(pid):
        argv = [binary, "record", "-p", str(pid), "-o", "/dev/null"] + options
        if forced:
            argv += ["--force-fallback", forced]
        p = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        wait_for(p.stderr, "recording process", 60)
        return p
    return attach


def memleak_tracer(pid):
    p = subprocess.Popen(["memleak-bpfcc", "-p", str(pid)], stdout=subprocess.PIPE,
                         stderr=subprocess.STDOUT, text=True)
    wait_for(p.stdout, "Attaching to pid", 300)
    return p


def measure(config, bench_argv):
    """One run of one configuration: the benchmark's figure, and the tracer's rusage."""
    bench = Bench(bench_argv, config.get("prefix", ()))
    try:
        tracer = config["attach"](bench.pid) if config.get("attach") else None
    except BaseException:
        bench.proc.kill()  # left waiting, it would be in every later recording of the machine
        bench.proc.wait()
        raise
    value = bench.run()
    usage = None
    if tracer:
        if config.get("stop"):  # runs until told (memleak)
            tracer.send_signal(signal.SIGINT)
        try:
            _, status, usage = os.wait4(tracer.pid, 0)  # allocscope ends when the benchmark exits
        except ChildProcessError:
            status = 0
        if status != 0 and not config.get("stop"):
            raise RuntimeError(f"{config['name']}: the tracer failed (status {status})")
        tracer.returncode = 0
    return value, usage


# What Debian 12's 6.1 kernel lacks of the optional features (its matrix row).
FALLBACKS_6_1 = "uprobe_session,uprobe_multi,nop_emulation"


SMOKE = {"untraced", "floor: null probes, placed", "floor: null probes, malloc family only",
         "allocscope (live tracking)",
         "allocscope -p (default: entered, in process)", "fallback: Debian 12's 6.1 paths", "preload library, no tracer",
         "allocscope record (default)"}


def configurations(build, smoke):
    allocscope = os.path.join(build, "allocscope")
    # Attached with the probes (--no-inject): what these rows measure; the
    # default -p (entered, in process) has its own row.
    a = lambda *opts: allocscope_tracer(allocscope, ["--no-inject"] + list(opts))
    probes = lambda forced, *opts: allocscope_tracer(allocscope, ["--no-inject"] + list(opts), forced)
    launch = lambda *opts: (allocscope, "record", "-q", "-o", "/dev/null") + opts + ("--",)
    preload = os.path.join(build, "liballocscope-preload.so")
    configs = [
        {"name": "untraced"},
        {"name": "floor: null probes, placed", "attach": a("--null-probes")},
        {"name": "floor: null probes, all on entry", "attach": a("--null-probes", "--naive-placement")},
        {"name": "floor: null probes, malloc family only", "attach": a("--null-probes", "--no-free")},
        {"name": "allocscope --no-free", "attach": a("--no-free")},
        {"name": "allocscope (live tracking)", "attach": a()},
        {"name": "allocscope -p (default: entered, in process)", "attach": allocscope_tracer(allocscope, [])},
        {"name": "allocscope --probe-mode classic", "attach": a("--probe-mode", "classic")},
        {"name": "allocscope --rate 1", "attach": a("--rate", "1")},
        # Each fallback path, forced on this kernel (--force-fallback).
        {"name": "fallback: no uprobe sessions", "attach": probes("uprobe_session")},
        {"name": "fallback: no uprobe_multi", "attach": probes("uprobe_multi")},
        {"name": "fallback: no push emulation", "attach": probes("push_emulation")},
        {"name": "fallback: no nop emulation", "attach": probes("nop_emulation")},
        {"name": "fallback: Debian 12's 6.1 paths", "attach": probes(FALLBACKS_6_1)},
        {"name": "fallback: Debian 12's 6.1 paths, --rate 1",
         "attach": probes(FALLBACKS_6_1, "--rate", "1")},
        # In process (record --preload): the countdown runs in the program.
        {"name": "preload library, no tracer", "prefix": ("env", "LD_PRELOAD=" + preload)},
        {"name": "allocscope --preload", "prefix": launch("--preload")},
        # record's default for a launched command (in process: trials trap
        # into BPF, frees of sampled blocks go through a ring) beside its
        # frees trapping too, and the path without BPF (trials through the
        # ring, no trap): issue 51's mallocbench ratio.
        {"name": "allocscope record (default)", "prefix": launch()},
        {"name": "allocscope record --frees-trap", "prefix": launch("--frees-trap")},
        {"name": "allocscope record --no-bpf", "prefix": launch("--no-bpf")},
        {"name": "allocscope --preload --rate 1", "prefix": launch("--preload", "--rate", "1")},
    ]
    if smoke:  # one of each way to run a configuration, and the floors the tables divide by
        return [c for c in configs if c["name"] in SMOKE]
    if shutil.which("memleak-bpfcc"):
        configs.append({"name": "BCC memleak-bpfcc -p", "attach": memleak_tracer, "stop": True})
    if shutil.which("heaptrack"):
        # Its record goes to a directory of our own (no name another user could make first).
        out = tempfile.mkdtemp(prefix="allocscope-bench-")
        atexit.register(shutil.rmtree, out, True)
        configs.append({"name": "heaptrack", "prefix": ("heaptrack", "-o", os.path.join(out, "ht"))})
    return configs


ONLY = []


def selected(configs):
    return [c for c in configs if c["name"] == "untraced" or not ONLY or any(w in c["name"] for w in ONLY)]


def overhead_table(build, reps, pairs, threads_list, smoke):
    bench = os.path.join(build, "bench", "malloc_bench")
    configs = selected(configurations(build, smoke))
    results = {}
    for rnd in range(reps):  # interleaved rounds: drift hits every configuration alike
        for threads in threads_list:
            for c in configs:
                argv = [bench, "--threads", str(threads), "--pairs", str(pairs)]
                value, _ = measure(c, argv)
                results.setdefault((c["name"], threads), []).append(value)
                print(f"  round {rnd + 1}/{reps} {threads}t {c['name']}: {value:.1f} ns", file=sys.stderr)
    print(f"\nmalloc_bench, {pairs} malloc+free pairs per thread, {reps} runs each; ns per pair")
    print("\n| configuration | threads | median | min | max | x untraced | overhead ns | x floor overhead |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for threads in threads_list:
        base = statistics.median(results[("untraced", threads)])
        def overhead_of(name):  # 0 when --only left it out: then no ratio to it
            v = results.get((name, threads))
            return statistics.median(v) - base if v else 0
        floor = overhead_of("floor: null probes, placed")
        floor_malloc = overhead_of("floor: null probes, malloc family only")
        for c in configs:
            v = results[(c["name"], threads)]
            med = statistics.median(v)
            over = med - base
            ref = floor_malloc if "--no-free" in c["name"] else floor
            ratio = f"{over / ref:.2f}" if c["name"] != "untraced" and ref > 0 else ""
            print(f"| {c['name']} | {threads} | {med:.0f} | {min(v):.0f} | {max(v):.0f} | {med / base:.1f} "
                  f"| {over:.0f} | {ratio} |")


ALLOCATORS = [("glibc", None), ("jemalloc", "libjemalloc.so.2"), ("tcmalloc", "libtcmalloc_minimal.so.4"),
              ("mimalloc", "libmimalloc.so.2")]


def allocator_table(build, reps, pairs, smoke):
    """Each allocator preloaded into malloc_bench: untraced, its probe floor, allocscope."""
    bench = os.path.join(build, "bench", "malloc_bench")
    a = lambda *opts: allocscope_tracer(os.path.join(build, "allocscope"), list(opts))
    kinds = [("untraced", None), ("floor", a("--null-probes")), ("allocscope", a()), ("--preload", None)]
    launch = (os.path.join(build, "allocscope"), "record", "-q", "--preload", "-o", "/dev/null", "--")
    allocators = [(n, f) for n, f in ALLOCATORS if not f or os.path.exists("/usr/lib/x86_64-linux-gnu/" + f)]
    results = {}
    for rnd in range(reps):
        for name, lib in allocators:
            prefix = ("env", "LD_PRELOAD=/usr/lib/x86_64-linux-gnu/" + lib) if lib else ()
            for kind, attach in kinds:
                config = {"name": kind, "attach": attach,
                          "prefix": launch + prefix if kind == "--preload" else prefix}
                value, _ = measure(config, [bench, "--threads", "1", "--pairs", str(pairs)])
                results.setdefault((name, kind), []).append(value)
                print(f"  round {rnd + 1}/{reps} {name} {kind}: {value:.1f} ns", file=sys.stderr)
    print(f"\nmalloc_bench on each allocator (LD_PRELOAD), 1 thread, {pairs} pairs, {reps} runs each; "
          "ns per malloc+free pair, medians")
    print("\n| allocator | untraced | floor: null probes | allocscope | --preload | floor overhead "
          "| allocscope overhead | x floor overhead | --preload x untraced |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for name, _ in allocators:
        base, floor, traced, inproc = (statistics.median(results[(name, k)]) for k, _ in kinds)
        ratio = (traced - base) / (floor - base) if floor > base else float("nan")
        print(f"| {name} | {base:.0f} | {floor:.0f} | {traced:.0f} | {inproc:.0f} | {floor - base:.0f} "
              f"| {traced - base:.0f} | {ratio:.2f} | {inproc / base:.2f} |")


def userspace_cost(build, smoke):
    """allocscope's own CPU and memory while the target allocates fast."""
    bench = os.path.join(build, "bench", "malloc_bench")
    pairs = 20000 if smoke else 3000000
    argv = [bench, "--threads", "2", "--pairs", str(pairs), "--size", "1024"]
    b = Bench(argv)
    tracer = allocscope_tracer(os.path.join(build, "allocscope"), [])(b.pid)
    start = time.time()
    ns = b.run()
    _, _, usage = os.wait4(tracer.pid, 0)
    wall = time.time() - start
    seconds = ns * pairs / 1e9
    gbps = 2 * pairs * 1024 / seconds / 1e9
    cpu = usage.ru_utime + usage.ru_stime
    print("\nallocscope's own cost, default rate, malloc_bench --size 1024 on 2 threads")
    print("\n| target allocation rate | allocscope CPU (user+sys) | recording wall time | CPU share of one core | max RSS |")
    print("|---:|---:|---:|---:|---:|")
    print(f"| {gbps:.2f} GB/s | {cpu:.3f} s | {wall:.2f} s | {100 * cpu / wall:.2f} % | {usage.ru_maxrss / 1024:.1f} MiB |")


def process_scaling(build, reps, smoke):
    """Per-pair cost with 1, 10 and 100 traced processes (one thread each):
    probes per process (-p) against one system-wide probe set (--all -p)."""
    bench = os.path.join(build, "bench", "malloc_bench")
    allocscope = os.path.join(build, "allocscope")
    counts = [1, 3] if smoke else [1, 10, 100]
    pairs = 20000 if smoke else 200000
    # Probes are what these rows measure: -p and --all enter a busy process otherwise.
    modes = {"untraced": None, "per-process": ["--no-inject"], "system-wide": ["--all", "--no-inject"]}
    results = {}
    for _ in range(reps):
        for n in counts:
            for mode, extra in modes.items():
                benches = [Bench([bench, "--pairs", str(pairs)]) for _ in range(n)]
                tracer = None
                if extra is not None:
                    pids = ",".join(str(b.pid) for b in benches)
                    tracer = subprocess.Popen([allocscope, "record", "-p", pids, "-o", "/dev/null"] + extra,
                                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
                    wait_for(tracer.stderr, "recording process", 120)
                for b in benches:
                    os.kill(b.pid, signal.SIGUSR1)
                values = [b.run(("cpu_ns_per_pair",), signal_it=False) for b in benches]
                if tracer:
                    tracer.wait(timeout=120)
                results.setdefault((n, mode), []).append(statistics.median(values))
    print(f"\nprocesses traced at once, malloc_bench 1 thread each, {pairs} pairs; median across processes of "
          "the CPU ns per pair (thread CPU time, so time-sharing the 2 CPUs does not count)")
    print("\n| processes | untraced | -p (per-process probes) | overhead ns | --all -p (system-wide) | overhead ns |")
    print("|---:|---:|---:|---:|---:|---:|")
    for n in counts:
        u = statistics.median(results[(n, "untraced")])
        p = statistics.median(results[(n, "per-process")])
        w = statistics.median(results[(n, "system-wide")])
        print(f"| {n} | {u:.0f} | {p:.0f} | {p - u:.0f} | {w:.0f} | {w - u:.0f} |")


def cxx_table(build, reps, smoke):
    work = os.path.join(build, "bench", "cxx_workload")
    configs = selected([c for c in configurations(build, smoke) if "floor" not in c["name"] or "placed" in c["name"]])
    rounds = "1" if smoke else "10"
    results = {}
    for _ in range(reps):
        for c in configs:
            value, _ = measure(c, [work, "--rounds", rounds])
            results.setdefault(c["name"], []).append(value)
    print(f"\ncxx_workload (maps of strings and vectors, {rounds} rounds), ms")
    print("\n| configuration | median ms | min | max | x untraced |\n|---|---:|---:|---:|---:|")
    base = statistics.median(results["untraced"])
    for c in configs:
        v = results[c["name"]]
        print(f"| {c['name']} | {statistics.median(v):.0f} | {min(v):.0f} | {max(v):.0f} "
              f"| {statistics.median(v) / base:.1f} |")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--pairs", type=int, default=1000000)
    ap.add_argument("--smoke", action="store_true")
    ap.add_argument("--only", default="",
                    help="overhead and cxx sections: only the configurations whose name contains one of these "
                         "comma-separated words (untraced is always run)")
    ap.add_argument("--sections", default="overhead,allocators,cxx,processes,userspace,aggregation",
                    help="comma-separated subset of: overhead,allocators,cxx,processes,userspace,aggregation")
    args = ap.parse_args()
    sections = set(args.sections.split(","))
    global ONLY
    ONLY = [w for w in args.only.split(",") if w]
    if args.smoke:
        args.reps, args.pairs = 1, 20000
    if os.geteuid() != 0:
        print("bench/run.py needs root (it loads BPF programs)", file=sys.stderr)
        sys.exit(1 if os.environ.get("ALLOCSCOPE_REQUIRE_BPF") else 77)
    kernel = os.uname().release
    print(f"kernel {kernel}, {os.cpu_count()} CPUs, glibc {os.confstr('CS_GNU_LIBC_VERSION')}")
    if "overhead" in sections:
        overhead_table(args.build, args.reps, args.pairs, [1] if args.smoke else [1, 2], args.smoke)
    if "allocators" in sections:
        allocator_table(args.build, args.reps, args.pairs, args.smoke)
    if "cxx" in sections:
        cxx_table(args.build, 1 if args.smoke else max(3, args.reps // 2), args.smoke)
    if "processes" in sections:
        process_scaling(args.build, 1 if args.smoke else 3, args.smoke)
    if "userspace" in sections:
        userspace_cost(args.build, args.smoke)
    if "aggregation" in sections:
        print("\nuserspace aggregation (bench/profile_bench)\n")
        sys.stdout.flush()
        subprocess.run([os.path.join(args.build, "bench", "profile_bench")] + (["--smoke"] if args.smoke else []),
                       check=True)


if __name__ == "__main__":
    main()
