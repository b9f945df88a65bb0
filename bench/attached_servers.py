#!/usr/bin/env python3
"""Servers from Debian under their own load generators, untraced, under
`record -p` (the process entered: sampled in process) and under
`record -p --no-inject` (its allocator probed), in interleaved rounds: the
throughput of each and its ratio to untraced, and how long an entry held
the thread it borrowed. Prints markdown for BENCHMARKS.md.

  sudo bench/attached_servers.py [--build DIR] [--rounds N] [--servers redis,postgres,nginx]

redis-server under redis-benchmark (SET, GET, LPUSH, LPOP of 256 bytes, 20
clients), PostgreSQL 15 under pgbench -S (4 clients; -p the postmaster
--children: its backends are forked), nginx (-p the master --children, 2
workers) under wrk on a 4 KiB page.
"""
import argparse
import os
import re
import signal
import statistics
import subprocess
import sys
import tempfile

import servers

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def redis_load(server):
    out = subprocess.run(server.benchmark(60000), capture_output=True, text=True).stdout
    rates = [float(m) for m in re.findall(r"([0-9.]+) requests per second", out.replace("\r", "\n"))]
    return statistics.mean(rates)


def postgres_load(server):
    out = server.client(["pgbench", "-S", "-c", "4", "-j", "2", "-T", "8"])
    return float(re.search(r"tps = ([0-9.]+)", out).group(1))


def nginx_load(server):
    out = subprocess.run(["wrk", "-t", "2", "-c", "20", "-d", "8", server.url], capture_output=True,
                         text=True).stdout
    return float(re.search(r"Requests/sec:\s+([0-9.]+)", out).group(1))


# key: (what starts it, its load, the load's name, its unit)
KINDS = {
    "redis": (lambda tmp: servers.Redis(tmp, 6391), redis_load,
              "redis-server (redis-benchmark: SET, GET, LPUSH, LPOP of 256 B, 20 clients)", "requests/s"),
    "postgres": (lambda tmp: servers.Postgres(tmp, 5445), postgres_load, "postgres 15 (pgbench -S, 4 clients)",
                 "tps"),
    "nginx": (lambda tmp: servers.Nginx(tmp, 8093, 4096), nginx_load, "nginx (wrk, 4 KiB page, 2 workers)",
              "requests/s"),
}


def recorded(allocscope, server, load, extra, tmp):
    """Runs the load while allocscope records the server; (throughput, entry pauses in ms)."""
    argv = [allocscope, "record", "-v", "-o", os.path.join(tmp, "out.pb.gz"), "-p", str(server.pid)]
    if server.children:
        argv.append("--children")
    rec = subprocess.Popen(argv + extra, stderr=subprocess.PIPE, text=True)
    seen = []
    for line in rec.stderr:
        seen.append(line)
        if "recording process" in line:
            break
    value = load(server)
    rec.send_signal(signal.SIGINT)
    rest = rec.communicate(timeout=300)[1]
    if rec.returncode != 0:
        raise RuntimeError("".join(seen) + rest)
    pauses = [float(m) for m in re.findall(r"library (?:loaded|woken) in ([0-9.]+) ms", "".join(seen))]
    return value, pauses


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--servers", default="redis,postgres,nginx")
    args = ap.parse_args()
    allocscope = os.path.join(args.build, "allocscope")
    print(f"kernel {os.uname().release}, {args.rounds} interleaved rounds, medians\n")
    print("| server | untraced | `record -p` (entered) | ratio | `--no-inject` (probes) | ratio | entry held a thread (ms) |")
    print("|---|---|---|---|---|---|---|")
    for key in args.servers.split(","):
        with tempfile.TemporaryDirectory() as tmp:
            os.chmod(tmp, 0o755)
            start, load, name, unit = KINDS[key]
            server = start(tmp)
            try:
                load(server)  # warm
                plain, entered, probed, pauses = [], [], [], []
                for _ in range(args.rounds):
                    plain.append(load(server))
                    value, p = recorded(allocscope, server, load, [], tmp)
                    entered.append(value)
                    pauses += p
                    probed.append(recorded(allocscope, server, load, ["--no-inject"], tmp)[0])
                u, e, p = (statistics.median(x) for x in (plain, entered, probed))
                held = f"{statistics.median(pauses):.1f} median, {max(pauses):.1f} max" if pauses else "-"
                print(f"| {name} | {u:,.0f} {unit} | {e:,.0f} | {u / e:.2f}x | {p:,.0f} | "
                      f"{u / p:.2f}x | {held} |", flush=True)
            finally:
                server.stop()


if __name__ == "__main__":
    sys.exit(main())
