#!/usr/bin/env python3
"""The always-on agent over a long run: process churn with changing stacks,
scraped like a backend would, its own RSS and CPU reported over time, and
its cost per scrape and per GB allocated. Prints markdown for BENCHMARKS.md.

  sudo bench/agent_soak.py [--build DIR] [--minutes M] [--scrape-every S]

The workloads run under `allocscope agent --comm` (all their allocations
sampled at the default rate); the scrape loop fetches /metrics and
/debug/pprof/allocs, as Prometheus and Parca would.
"""
import argparse
import os
import random
import socket
import subprocess
import sys
import time
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TICK = os.sysconf("SC_CLK_TCK")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def cpu_seconds(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK  # utime + stime


def rss_mib(pid, field="VmRSS:"):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(field):
                return int(line.split()[1]) / 1024
    return 0


def fetch(url):
    start = time.perf_counter()
    with urllib.request.urlopen(url, timeout=60) as r:
        body = r.read()
    return time.perf_counter() - start, body


def metric(text, series):
    for line in text.splitlines():
        if line.startswith(series + " "):
            return float(line.split()[-1])
    return 0.0


def churn(build):
    """One short run of a workload picked at random: new processes, new stacks."""
    tests = os.path.join(build, "tests")
    pick = random.choice(["alloc_sites", "cxx_sites", "deep_cxx"])
    argv = [os.path.join(tests, pick)]
    if pick == "alloc_sites":
        argv += ["--threads", str(random.randint(1, 3)), "--scale-pct", "1"]
    return subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--minutes", type=float, default=10)
    ap.add_argument("--scrape-every", type=float, default=5)
    ap.add_argument("--max-stacks", type=int, default=65536)
    ap.add_argument("--no-profile", action="store_true", help="scrape /metrics only")
    args = ap.parse_args()
    port = free_port()
    agent = subprocess.Popen(
        [os.path.join(args.build, "allocscope"), "agent", "--listen", f"127.0.0.1:{port}",
         "--comm", "^(alloc_sites|cxx_sites|deep_cxx)$", "--max-stacks", str(args.max_stacks)],
        stderr=subprocess.PIPE, text=True)
    for line in agent.stderr:
        if "probes attached" in line:
            break
    base = f"http://127.0.0.1:{port}"
    start = time.time()
    end = start + args.minutes * 60
    running, runs = [], 0
    next_scrape = next_report = start
    scrape_cpu = scrape_time = 0.0
    scrapes = 0
    rows = []
    print("| minute | runs | stacks | agent RSS (MiB) | of which anonymous | anonymous just after a scrape "
          "| agent CPU (s) | allocated (GB, est.) | processes forgotten |")
    print("|---|---|---|---|---|---|---|---|---|")
    while time.time() < end:
        running = [p for p in running if p.poll() is None]
        while len(running) < 2:
            running.append(churn(args.build))
            runs += 1
        now = time.time()
        if now >= next_scrape:
            next_scrape = now + args.scrape_every
            # Resident memory between scrapes (a scrape's own pages are
            # purged within a second), and at its peak just after one.
            rss, anon = rss_mib(agent.pid), rss_mib(agent.pid, "RssAnon:")
            before = cpu_seconds(agent.pid)
            t1, text = fetch(base + "/metrics")
            t2 = 0 if args.no_profile else fetch(base + "/debug/pprof/allocs")[0]
            scrape_cpu += cpu_seconds(agent.pid) - before
            scrape_time += t1 + t2
            scrapes += 1
            text = text.decode()
            allocated = sum(metric(text, f'allocscope_program_allocated_bytes_total{{comm="{c}"}}')
                            for c in ("alloc_sites", "cxx_sites", "deep_cxx"))
            forgotten = metric(text, 'allocscope_recording_events_total{name="agent_processes_forgotten"}')
            if now >= next_report:
                next_report = now + 60
                row = ((now - start) / 60, runs, metric(text, "allocscope_agent_stacks"), rss, anon,
                       rss_mib(agent.pid, "RssAnon:"), cpu_seconds(agent.pid), allocated / 1e9, forgotten)
                rows.append(row)
                print("| %.0f | %d | %.0f | %.0f | %.0f | %.0f | %.1f | %.1f | %.0f |" % row, flush=True)
        time.sleep(0.01)
    for p in running:
        p.wait()
    cpu = cpu_seconds(agent.pid)
    stacks = metric(fetch(base + "/metrics")[1].decode(), "allocscope_agent_stacks")
    print()
    print(f"| request (at {stacks:.0f} stacks) | response time (ms) | agent CPU (ms) | bytes |")
    print("|---|---|---|---|")
    for path in ("/metrics", "/comm/alloc_sites/debug/pprof/allocs", "/debug/pprof/allocs",
                 "/flamegraph?metric=alloc_space"):
        before, took, size = cpu_seconds(agent.pid), 0.0, 0
        for _ in range(5):
            t, body = fetch(base + path)
            took, size = took + t, len(body)
        print(f"| `{path}` | {took / 5 * 1000:.0f} | {(cpu_seconds(agent.pid) - before) / 5 * 1000:.0f} | {size} |")
    agent.terminate()
    agent.wait()
    allocated = rows[-1][7] if rows else 0
    print()
    print(f"{runs} workload runs in {args.minutes:.0f} min; agent CPU {cpu:.1f} s "
          f"({cpu / (args.minutes * 60) * 100:.1f} % of one core), "
          f"{cpu / allocated if allocated else 0:.2f} CPU s per GB allocated (sampled at 512 KiB); "
          f"a scrape (/metrics + the allocs profile of every process) {scrape_time / max(1, scrapes) * 1000:.0f} ms, "
          f"{scrape_cpu / max(1, scrapes) * 1000:.0f} ms of agent CPU; "
          f"RSS {min(r[3] for r in rows):.0f}-{max(r[3] for r in rows):.0f} MiB")


if __name__ == "__main__":
    try:
        sys.exit(main())
    finally:  # never leave an agent (and its probes) behind
        subprocess.run(["pkill", "-TERM", "-f", "allocscope agent --listen 127.0.0.1:"], check=False)
