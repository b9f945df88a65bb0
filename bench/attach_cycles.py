#!/usr/bin/env python3
"""Servers entered and left again and again while they serve load: after N
`record -p -d` cycles each still serves byte for byte what it served
before, runs (no crash, no restart), holds the descriptors it held and no
tracer. Prints one line per server and exits 1 on any difference.

  sudo bench/attach_cycles.py [--build DIR] [--cycles N] [--servers redis,http,nginx,postgres]

redis-server under redis-benchmark (its keys read back with redis-cli),
`python3 -m http.server` under a curl loop, nginx (its master --children)
under wrk, PostgreSQL under pgbench (its postmaster --children; a query's
result read back).
"""
import argparse
import hashlib
import os
import subprocess
import sys
import tempfile
import time

import servers

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def fds(pid):
    return sorted(os.listdir(f"/proc/{pid}/fd"))


def tracer(pid):
    for task in os.listdir(f"/proc/{pid}/task"):
        with open(f"/proc/{pid}/task/{task}/status") as f:
            for line in f:
                if line.startswith("TracerPid:") and line.split()[1] != "0":
                    return int(line.split()[1])
    return 0


class Redis(servers.Redis):
    def __init__(self, tmp):
        super().__init__(tmp, 6392)
        for i in range(500):
            self.cli("SET", f"known:{i}", hashlib.sha256(str(i).encode()).hexdigest() * 4)

    def load(self):
        return subprocess.Popen(self.benchmark(100000000), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    def served(self):
        return b"".join(self.cli("GET", f"known:{i}") for i in range(500))


class PythonHttp(servers.PythonHttp):
    def __init__(self, tmp):
        super().__init__(tmp, 8094, 200_000)

    def load(self):
        # Ends by itself once the server does (a curl that fails ends the loop).
        return subprocess.Popen(["sh", "-c", f"while curl -sf -o /dev/null {self.url}; do :; done"])

    def served(self):
        return subprocess.run(["curl", "-s", self.url], capture_output=True).stdout


class Nginx(servers.Nginx):
    def __init__(self, tmp):
        super().__init__(tmp, 8095, 100_000)

    def load(self):
        return subprocess.Popen(["wrk", "-t", "2", "-c", "20", "-d", "100000", self.url], stdout=subprocess.DEVNULL)

    def served(self):
        return subprocess.run(["curl", "-s", self.url], capture_output=True).stdout


class Postgres(servers.Postgres):
    def __init__(self, tmp):
        super().__init__(tmp, 5446)

    def load(self):
        return subprocess.Popen(self.client_argv(["pgbench", "-S", "-c", "4", "-T", "100000"]),
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    def served(self):
        return self.client(["psql", "-Atc", "select sum(abalance), count(*), md5(string_agg(aid::text, ',' "
                            "order by aid)) from pgbench_accounts where aid < 5000"])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--cycles", type=int, default=100)
    ap.add_argument("--servers", default="redis,http,nginx,postgres")
    args = ap.parse_args()
    allocscope = os.path.join(args.build, "allocscope")
    kinds = {"redis": Redis, "http": PythonHttp, "nginx": Nginx, "postgres": Postgres}
    failed = False
    for key in args.servers.split(","):
        with tempfile.TemporaryDirectory() as tmp:
            os.chmod(tmp, 0o755)
            server = kinds[key](tmp)
            try:
                before, held = server.served(), fds(server.pid)
                load = server.load()
                start, errors = time.time(), []
                try:
                    for _ in range(args.cycles):
                        argv = [allocscope, "record", "-q", "-p", str(server.pid), "-d", "200ms", "-o",
                                os.path.join(tmp, "out.pb.gz")] + (["--children"] if server.children else [])
                        r = subprocess.run(argv, capture_output=True, text=True)
                        if r.returncode != 0 or server.proc.poll() is not None:
                            errors.append(r.stderr[-500:])
                            break
                finally:
                    load.terminate()
                    load.wait()
                time.sleep(0.5)
                same = server.served() == before
                alive = server.proc.poll() is None
                fds_same = alive and fds(server.pid) == held
                traced = alive and tracer(server.pid)
                ok = same and alive and fds_same and not traced and not errors
                failed |= not ok
                print(f"{server.name}: {args.cycles} cycles under load in {time.time() - start:.0f} s: "
                      f"served {'the same' if same else 'DIFFERENT'} bytes, {'running' if alive else 'GONE'}, "
                      f"descriptors {'as before' if fds_same else 'CHANGED'}, tracer {traced or 'none'}"
                      + (f"; errors: {errors}" if errors else ""), flush=True)
            finally:
                server.stop()
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
