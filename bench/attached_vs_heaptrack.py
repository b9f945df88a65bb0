#!/usr/bin/env python3
"""Servers from Debian attached while they run, each started afresh twice
and put through the same fixed load: once under `heaptrack -p` (its exact
record, the truth) and once under `allocscope record -p` (the process
entered, sampled in process). Prints, per server, allocated bytes and calls
and the bytes in use when it ended against heaptrack's, whether each
sampled 95 % interval covers heaptrack's figure, and the functions that
allocated most by both. Markdown, for BENCHMARKS.md.

  sudo bench/attached_vs_heaptrack.py [--build DIR] [--servers redis,http] [--requests N] [--rate R]

redis-server under redis-benchmark (SET, GET, LPUSH, LPOP of 256 bytes, 20
clients, N requests of each); `python3 -m http.server` fetched N/100 times
by curl. Two runs of a server differ a little (its timers, the order of
clients): the table says so where the figures part. Needs heaptrack (and
its gdb) and zstd.
"""
import argparse
import os
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import servers  # noqa: E402
from clang_vs_heaptrack import by_function, parse_allocscope, parse_heaptrack, recorded_paths  # noqa: E402
from run import wait_for  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def redis(tmp, requests):
    server = servers.Redis(tmp, 6391)
    return server, lambda: subprocess.run(server.benchmark(requests), capture_output=True, check=True)


def http(tmp, requests):
    server = servers.PythonHttp(tmp, 8095, 16384)
    loop = f"for i in $(seq {max(1, requests // 100)}); do curl -s -o /dev/null {server.url}; done"
    return server, lambda: subprocess.run(["sh", "-c", loop], check=True)


SERVERS = {"redis": redis, "http": http}


def record(tool_argv, ready, make, requests):
    """One fresh server, `tool_argv` + its pid attached until it ends, the load between."""
    tmp = tempfile.mkdtemp(prefix="allocscope-bench-")
    server, load = make(tmp, requests)
    argv = [a.replace("PID", str(server.pid)).replace("TMP", tmp) for a in tool_argv]
    tool = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=tmp)
    try:
        wait_for(tool.stdout, ready, 120)
        load()
    finally:
        server.stop()
    out, _ = tool.communicate(timeout=600)
    return tmp, out


def compare(name, make, binary, requests, rate):
    # heaptrack -p writes heaptrack.NAME.PID.zst where it runs (it takes no -o then).
    ht_dir, _ = record(["heaptrack", "-p", "PID"], "injection finished", make, requests)
    files = [os.path.join(ht_dir, f) for f in os.listdir(ht_dir) if f.startswith("heaptrack.") and f.endswith(".zst")]
    truth = parse_heaptrack(max(files, key=os.path.getsize))[0]
    as_dir, summary = record([binary, "record", "-p", "PID", "--rate", rate, "-o", "TMP/as.pb.gz"],
                             "recording process", make, requests)
    stacks, counters, totals = parse_allocscope(binary, os.path.join(as_dir, "as.pb.gz"), as_dir)
    entered = recorded_paths(binary, os.path.join(as_dir, "as.pb.gz"), as_dir).get("sampling") == \
        "in process (1 process entered)"
    shutil.rmtree(ht_dir)
    shutil.rmtree(as_dir)
    print(f"\n### {name}: {'entered' if entered else 'NOT entered'}, --rate {rate}\n")
    print("| what | heaptrack -p | allocscope -p | off by | 95 % interval covers it |")
    print("|---|---:|---:|---:|---|")
    for metric, index, label in (("alloc_space", 0, "bytes allocated"), ("alloc_objects", 1, "calls"),
                                 ("inuse_space", 2, "bytes in use at the end")):
        t = sum(v[index] for v in truth.values())
        est, (lo, hi) = totals[metric]["estimate"], totals[metric]["interval"]
        off = f"{(est / t - 1) * 100:+.2f} %" if t else "-"
        print(f"| {label} | {t:,.0f} | {est:,.0f} | {off} | {'yes' if lo <= t <= hi else 'no'} |")
    print("\n| function (cumulative bytes) | heaptrack -p | allocscope -p | off by |")
    print("|---|---:|---:|---:|")
    ht_fn, as_fn = by_function(truth, True), by_function(stacks, True)
    for fn, t in ht_fn.most_common(12):
        est = as_fn.get(fn, 0)
        print(f"| `{fn[:60]}` | {t:,.0f} | {est:,.0f} | {(est / t - 1) * 100:+.1f} % |")
    print(f"\nallocscope counters: samples {counters.get('samples', 0)}, ring frees "
          f"{counters.get('ring_frees', 0)}, drops: ringbuf {counters.get('dropped_ringbuf', 0)}, "
          f"stack lost {counters.get('dropped_stack_lost', 0)}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--servers", default=",".join(SERVERS), help="comma separated, of: " + ", ".join(SERVERS))
    ap.add_argument("--requests", type=int, default=100000)
    ap.add_argument("--rate", default="64KiB")
    args = ap.parse_args()
    for tool in ("heaptrack", "gdb", "zstdcat", "redis-server", "curl"):
        if not shutil.which(tool):
            sys.exit(f"{tool} is needed (apt install heaptrack gdb zstd redis-server curl)")
    binary = os.path.join(args.build, "allocscope")
    for name in args.servers.split(","):
        print(f"bench: {name} ...", file=sys.stderr, flush=True)
        compare(name, SERVERS[name], binary, args.requests, args.rate)


if __name__ == "__main__":
    main()
