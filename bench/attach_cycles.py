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
import shutil
import subprocess
import sys
import tempfile
import time

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


class Redis:
    name = "redis-server"

    def __init__(self, tmp):
        self.port = "6392"
        self.proc = subprocess.Popen(["redis-server", "--port", self.port, "--save", "", "--appendonly", "no",
                                      "--dir", tmp], stdout=subprocess.DEVNULL)
        time.sleep(1)
        self.pid, self.children = self.proc.pid, False
        for i in range(500):
            self.cli("SET", f"known:{i}", hashlib.sha256(str(i).encode()).hexdigest() * 4)

    def cli(self, *args):
        return subprocess.run(["redis-cli", "-p", self.port] + list(args), capture_output=True, check=True).stdout

    def load(self):
        return subprocess.Popen(["redis-benchmark", "-p", self.port, "-t", "set,get,lpush,lpop", "-d", "256",
                                 "-c", "20", "-n", "100000000", "-q"], stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL)

    def served(self):
        return b"".join(self.cli("GET", f"known:{i}") for i in range(500))

    def stop(self):
        self.proc.terminate()
        self.proc.wait()


class PythonHttp:
    name = "python3 -m http.server"

    def __init__(self, tmp):
        with open(os.path.join(tmp, "page.bin"), "wb") as f:
            f.write(os.urandom(200_000))
        self.proc = subprocess.Popen(["python3", "-m", "http.server", "8094", "--bind", "127.0.0.1"], cwd=tmp,
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(1.5)
        self.pid, self.children = self.proc.pid, False

    def load(self):
        return subprocess.Popen(["sh", "-c", "while :; do curl -s -o /dev/null http://127.0.0.1:8094/page.bin; done"])

    def served(self):
        return subprocess.run(["curl", "-s", "http://127.0.0.1:8094/page.bin"], capture_output=True).stdout

    def stop(self):
        self.proc.terminate()
        self.proc.wait()


class Nginx:
    name = "nginx"

    def __init__(self, tmp):
        root = os.path.join(tmp, "www")
        os.makedirs(root)
        with open(os.path.join(root, "page.bin"), "wb") as f:
            f.write(os.urandom(100_000))
        conf = os.path.join(tmp, "nginx.conf")
        with open(conf, "w") as f:
            f.write(f"""worker_processes 2; daemon off; pid {tmp}/nginx.pid; error_log {tmp}/error.log;
events {{ worker_connections 1024; }}
http {{ access_log off; server {{ listen 127.0.0.1:8095; root {root}; }} }}
""")
        self.proc = subprocess.Popen(["nginx", "-c", conf, "-p", tmp], stdout=subprocess.DEVNULL,
                                     stderr=subprocess.DEVNULL)
        time.sleep(1)
        self.pid, self.children = self.proc.pid, True

    def load(self):
        return subprocess.Popen(["wrk", "-t", "2", "-c", "20", "-d", "100000", "http://127.0.0.1:8095/page.bin"],
                                stdout=subprocess.DEVNULL)

    def served(self):
        return subprocess.run(["curl", "-s", "http://127.0.0.1:8095/page.bin"], capture_output=True).stdout

    def stop(self):
        self.proc.terminate()
        self.proc.wait()


class Postgres:
    name = "postgres"

    def __init__(self, tmp):
        self.dir = os.path.join(tmp, "pg")
        os.makedirs(os.path.join(self.dir, "sock"))
        for d in (self.dir, os.path.join(self.dir, "sock")):
            shutil.chown(d, "postgres")
        bindir = "/usr/lib/postgresql/15/bin"
        subprocess.run(["runuser", "-u", "postgres", "--", f"{bindir}/initdb", "-D", f"{self.dir}/data"],
                       check=True, capture_output=True)
        self.proc = subprocess.Popen(["runuser", "-u", "postgres", "--", f"{bindir}/postgres", "-D",
                                      f"{self.dir}/data", "-k", f"{self.dir}/sock", "-p", "5446", "-c",
                                      "listen_addresses="], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        while not os.path.exists(f"{self.dir}/sock/.s.PGSQL.5446"):
            time.sleep(0.1)
        self.run(["pgbench", "-i", "-s", "2"])
        self.pid = int(subprocess.run(["pgrep", "-P", str(self.proc.pid)], capture_output=True,
                                      text=True).stdout.split()[0])
        self.children = True

    def run(self, argv):
        return subprocess.run(["runuser", "-u", "postgres", "--"] + argv[:1] + ["-h", f"{self.dir}/sock", "-p",
                              "5446"] + argv[1:] + ["postgres"], capture_output=True, check=True).stdout

    def load(self):
        return subprocess.Popen(["runuser", "-u", "postgres", "--", "pgbench", "-h", f"{self.dir}/sock", "-p", "5446",
                                 "-S", "-c", "4", "-T", "100000", "postgres"], stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL)

    def served(self):
        return self.run(["psql", "-Atc", "select sum(abalance), count(*), md5(string_agg(aid::text, ',' order by aid)) "
                         "from pgbench_accounts where aid < 5000"])

    def stop(self):
        self.proc.terminate()
        self.proc.wait()


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
                for _ in range(args.cycles):
                    argv = [allocscope, "record", "-q", "-p", str(server.pid), "-d", "200ms", "-o",
                            os.path.join(tmp, "out.pb.gz")] + (["--children"] if server.children else [])
                    r = subprocess.run(argv, capture_output=True, text=True)
                    if r.returncode != 0 or server.proc.poll() is not None:
                        errors.append(r.stderr[-500:])
                        break
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
