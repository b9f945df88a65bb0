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
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def wait_port_file(path, timeout=20):
    deadline = time.time() + timeout
    while time.time() < deadline:
        if os.path.exists(path):
            return
        time.sleep(0.1)
    raise RuntimeError(f"{path} never appeared")


class Redis:
    name, unit = "redis-server", "requests/s"

    def __init__(self, tmp):
        self.port = "6391"
        self.proc = subprocess.Popen(["redis-server", "--port", self.port, "--save", "", "--appendonly", "no",
                                      "--dir", tmp], stdout=subprocess.DEVNULL)
        time.sleep(1)
        self.pids = [self.proc.pid]
        self.children = False

    def load(self):
        out = subprocess.run(["redis-benchmark", "-p", self.port, "-t", "set,get,lpush,lpop", "-d", "256", "-c",
                              "20", "-n", "60000", "-q"], capture_output=True, text=True).stdout
        rates = [float(m) for m in re.findall(r"([0-9.]+) requests per second", out.replace("\r", "\n"))]
        return statistics.mean(rates)

    def stop(self):
        self.proc.terminate()
        self.proc.wait()


class Postgres:
    name, unit = "postgres (pgbench -S)", "tps"

    def __init__(self, tmp):
        self.dir = os.path.join(tmp, "pg")
        os.makedirs(os.path.join(self.dir, "sock"))
        shutil.chown(self.dir, "postgres")
        shutil.chown(os.path.join(self.dir, "sock"), "postgres")
        bindir = "/usr/lib/postgresql/15/bin"
        subprocess.run(["runuser", "-u", "postgres", "--", f"{bindir}/initdb", "-D", f"{self.dir}/data"],
                       check=True, capture_output=True)
        self.proc = subprocess.Popen(["runuser", "-u", "postgres", "--", f"{bindir}/postgres", "-D",
                                      f"{self.dir}/data", "-k", f"{self.dir}/sock", "-p", "5445", "-c",
                                      "listen_addresses="], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wait_port_file(f"{self.dir}/sock/.s.PGSQL.5445")
        self.pgbench(["-i", "-s", "5"])
        postmaster = subprocess.run(["pgrep", "-P", str(self.proc.pid)], capture_output=True, text=True)
        self.pids = [int(postmaster.stdout.split()[0])]
        self.children = True

    def pgbench(self, args):
        return subprocess.run(["runuser", "-u", "postgres", "--", "pgbench", "-h", f"{self.dir}/sock", "-p", "5445"] +
                              args + ["postgres"], capture_output=True, text=True, check=True).stdout

    def load(self):
        out = self.pgbench(["-S", "-c", "4", "-j", "2", "-T", "8"])
        return float(re.search(r"tps = ([0-9.]+)", out).group(1))

    def stop(self):
        self.proc.terminate()
        self.proc.wait()


class Nginx:
    name, unit = "nginx (wrk, 4 KiB page)", "requests/s"

    def __init__(self, tmp):
        root = os.path.join(tmp, "www")
        os.makedirs(root)
        with open(os.path.join(root, "index.html"), "w") as f:
            f.write("x" * 4096)
        conf = os.path.join(tmp, "nginx.conf")
        with open(conf, "w") as f:
            f.write(f"""worker_processes 2; daemon off; pid {tmp}/nginx.pid; error_log {tmp}/error.log;
events {{ worker_connections 1024; }}
http {{ access_log off; server {{ listen 127.0.0.1:8093; root {root}; }} }}
""")
        self.proc = subprocess.Popen(["nginx", "-c", conf, "-p", tmp], stdout=subprocess.DEVNULL,
                                     stderr=subprocess.DEVNULL)
        time.sleep(1)
        self.pids = [self.proc.pid]
        self.children = True

    def load(self):
        out = subprocess.run(["wrk", "-t", "2", "-c", "20", "-d", "8", "http://127.0.0.1:8093/"],
                             capture_output=True, text=True).stdout
        return float(re.search(r"Requests/sec:\s+([0-9.]+)", out).group(1))

    def stop(self):
        self.proc.terminate()
        self.proc.wait()


def recorded(allocscope, server, extra, tmp):
    """Runs the load while allocscope records the server; (throughput, entry pauses in ms)."""
    argv = [allocscope, "record", "-v", "-o", os.path.join(tmp, "out.pb.gz")]
    for pid in server.pids:
        argv += ["-p", str(pid)]
    if server.children:
        argv.append("--children")
    rec = subprocess.Popen(argv + extra, stderr=subprocess.PIPE, text=True)
    seen = []
    for line in rec.stderr:
        seen.append(line)
        if "recording process" in line:
            break
    value = server.load()
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
    kinds = {"redis": Redis, "postgres": Postgres, "nginx": Nginx}
    print(f"kernel {os.uname().release}, {args.rounds} interleaved rounds, medians\n")
    print("| server | untraced | `record -p` (entered) | ratio | `--no-inject` (probes) | ratio | entry held a thread (ms) |")
    print("|---|---|---|---|---|---|---|")
    for key in args.servers.split(","):
        with tempfile.TemporaryDirectory() as tmp:
            os.chmod(tmp, 0o755)
            server = kinds[key](tmp)
            try:
                server.load()  # warm
                plain, entered, probed, pauses = [], [], [], []
                for _ in range(args.rounds):
                    plain.append(server.load())
                    value, p = recorded(allocscope, server, [], tmp)
                    entered.append(value)
                    pauses += p
                    probed.append(recorded(allocscope, server, ["--no-inject"], tmp)[0])
                u, e, p = (statistics.median(x) for x in (plain, entered, probed))
                held = f"{statistics.median(pauses):.1f} median, {max(pauses):.1f} max" if pauses else "-"
                print(f"| {server.name} | {u:,.0f} {server.unit} | {e:,.0f} | {u / e:.2f}x | {p:,.0f} | "
                      f"{u / p:.2f}x | {held} |", flush=True)
            finally:
                server.stop()


if __name__ == "__main__":
    sys.exit(main())
