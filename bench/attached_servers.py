#!/usr/bin/env python3
"""Servers from Debian under their own load generators, untraced, under
`record -p` (the process entered: sampled in process) and under
`record -p --no-inject` (its allocator probed), in interleaved rounds: the
throughput of each and its ratio to untraced, and how long an entry held
the thread it borrowed. Prints markdown for BENCHMARKS.md.

  sudo bench/attached_servers.py [--build DIR] [--rounds N] [--servers redis,postgres,nginx] [--agent]

redis-server under redis-benchmark (SET, GET, LPUSH, LPOP of 256 bytes, 20
clients), PostgreSQL 15 under pgbench -S (4 clients; -p the postmaster
--children: its backends are forked), nginx (-p the master --children, 2
workers) under wrk on a 4 KiB page. With --agent, redis-server under
`allocscope agent -p` (entered), `agent -p --no-inject`, `agent --no-inject`
(every process probed) and `agent` (every process, the busy server entered:
measured after a first load, in which it is).
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


def beside(argv, ready, load, server, stop):
    """Runs the load while `argv` records the server (once it has said `ready`, then
    stopped by signal `stop`); the throughput and what it said before the load."""
    proc = subprocess.Popen(argv, stderr=subprocess.PIPE, text=True)
    seen = []
    for line in proc.stderr:
        seen.append(line)
        if ready in line:
            break
    value = load(server)
    proc.send_signal(stop)
    rest = proc.communicate(timeout=300)[1]
    if proc.returncode != 0:
        raise RuntimeError("".join(seen) + rest)
    return value, "".join(seen)


def recorded(allocscope, server, load, extra, tmp):
    """Runs the load while allocscope records the server; (throughput, entry pauses in ms)."""
    argv = [allocscope, "record", "-v", "-o", os.path.join(tmp, "out.pb.gz"), "-p", str(server.pid)]
    if server.children:
        argv.append("--children")
    value, seen = beside(argv + extra, "recording process", load, server, signal.SIGINT)
    return value, [float(m) for m in re.findall(r"library (?:loaded|woken) in ([0-9.]+) ms", seen)]


def agent_recorded(allocscope, server, load, extra, settle=False):
    """Runs the load while the agent records (its log's start line read first); the throughput.
    `settle`: a first load unmeasured, in which a busy process is entered (the steady state)."""
    argv = [allocscope, "agent", "--listen", "127.0.0.1:6071"] + extra
    measured = (lambda s: (load(s), load(s))[1]) if settle else load
    return beside(argv, "recording:", measured, server, signal.SIGTERM)[0]


def agent_table(allocscope, rounds):
    """redis-server under the agent: -p (entered), -p --no-inject, every process probed
    (--no-inject), and every process (measured after a first load, in which the busy server is
    entered)."""
    print("\n| server | untraced | `agent -p` (entered) | ratio | `agent -p --no-inject` | ratio | `agent --no-inject` (every process) | ratio | `agent` (busy ones entered) | ratio |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory() as tmp:
        os.chmod(tmp, 0o755)
        start, load, name, unit = KINDS["redis"]
        server = start(tmp)
        try:
            load(server)  # warm
            runs = {"plain": [], "entered": [], "probed": [], "all": [], "busy": []}
            pid = str(server.pid)
            for _ in range(rounds):
                runs["plain"].append(load(server))
                runs["entered"].append(agent_recorded(allocscope, server, load, ["-p", pid]))
                runs["probed"].append(agent_recorded(allocscope, server, load, ["-p", pid, "--no-inject"]))
                runs["all"].append(agent_recorded(allocscope, server, load, ["--no-inject"]))
                runs["busy"].append(agent_recorded(allocscope, server, load, [], settle=True))
            u, e, p, a, b = (statistics.median(runs[k]) for k in ("plain", "entered", "probed", "all", "busy"))
            print(f"| {name} | {u:,.0f} {unit} | {e:,.0f} | {u / e:.2f}x | {p:,.0f} | {u / p:.2f}x | "
                  f"{a:,.0f} | {u / a:.2f}x | {b:,.0f} | {u / b:.2f}x |", flush=True)
        finally:
            server.stop()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--servers", default="redis,postgres,nginx")
    ap.add_argument("--agent", action="store_true", help="also redis-server under the agent")
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
    if args.agent:
        agent_table(allocscope, args.rounds)


if __name__ == "__main__":
    sys.exit(main())
