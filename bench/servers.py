"""Servers from Debian started for a benchmark, each in a temporary directory
of its own, on a port of its own: what bench/attached_servers.py and
bench/attach_cycles.py record. Each has `pid` (what `record -p` names),
`children` (whether `--children` goes with it: its workers are forked),
`proc` and `stop()`."""
import os
import shutil
import subprocess
import time

PG_BIN = "/usr/lib/postgresql/15/bin"


def write_page(directory, page_bytes):
    """page.bin in `directory`: what the HTTP servers serve, random bytes."""
    with open(os.path.join(directory, "page.bin"), "wb") as f:
        f.write(os.urandom(page_bytes))


class Redis:
    name = "redis-server"
    children = False

    def __init__(self, tmp, port):
        self.port = str(port)
        self.proc = subprocess.Popen(["redis-server", "--port", self.port, "--save", "", "--appendonly", "no",
                                      "--dir", tmp], stdout=subprocess.DEVNULL)
        time.sleep(1)
        self.pid = self.proc.pid

    def cli(self, *args):
        return subprocess.run(["redis-cli", "-p", self.port] + list(args), capture_output=True, check=True).stdout

    def benchmark(self, requests):
        return ["redis-benchmark", "-p", self.port, "-t", "set,get,lpush,lpop", "-d", "256", "-c", "20", "-n",
                str(requests), "-q"]

    def stop(self):
        self.proc.terminate()
        self.proc.wait()


class Postgres:
    name = "postgres"
    children = True

    def __init__(self, tmp, port):
        self.port = str(port)
        self.dir = os.path.join(tmp, "pg")
        os.makedirs(os.path.join(self.dir, "sock"))
        for d in (self.dir, os.path.join(self.dir, "sock")):
            shutil.chown(d, "postgres")
        subprocess.run(["runuser", "-u", "postgres", "--", f"{PG_BIN}/initdb", "-D", f"{self.dir}/data"],
                       check=True, capture_output=True)
        self.proc = subprocess.Popen(["runuser", "-u", "postgres", "--", f"{PG_BIN}/postgres", "-D",
                                      f"{self.dir}/data", "-k", f"{self.dir}/sock", "-p", self.port, "-c",
                                      "listen_addresses="], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        while not os.path.exists(f"{self.dir}/sock/.s.PGSQL.{self.port}"):
            time.sleep(0.1)
        self.client(["pgbench", "-i", "-s", "5"])
        # runuser's child: the postmaster
        self.pid = int(subprocess.run(["pgrep", "-P", str(self.proc.pid)], capture_output=True,
                                      text=True).stdout.split()[0])

    def client_argv(self, argv):
        """A client program (pgbench, psql) as postgres, on this server, with `argv` after its name."""
        return (["runuser", "-u", "postgres", "--", argv[0], "-h", f"{self.dir}/sock", "-p", self.port] + argv[1:] +
                ["postgres"])

    def client(self, argv):
        return subprocess.run(self.client_argv(argv), capture_output=True, check=True, text=True).stdout

    def stop(self):
        self.proc.terminate()
        self.proc.wait()


class Nginx:
    name = "nginx"
    children = True

    def __init__(self, tmp, port, page_bytes):
        root = os.path.join(tmp, "www")
        os.makedirs(root)
        write_page(root, page_bytes)
        conf = os.path.join(tmp, "nginx.conf")
        with open(conf, "w") as f:
            f.write(f"""worker_processes 2; daemon off; pid {tmp}/nginx.pid; error_log {tmp}/error.log;
events {{ worker_connections 1024; }}
http {{ access_log off; server {{ listen 127.0.0.1:{port}; root {root}; }} }}
""")
        self.url = f"http://127.0.0.1:{port}/page.bin"
        self.proc = subprocess.Popen(["nginx", "-c", conf, "-p", tmp], stdout=subprocess.DEVNULL,
                                     stderr=subprocess.DEVNULL)
        time.sleep(1)
        self.pid = self.proc.pid

    def stop(self):
        self.proc.terminate()
        self.proc.wait()


class PythonHttp:
    name = "python3 -m http.server"
    children = False

    def __init__(self, tmp, port, page_bytes):
        write_page(tmp, page_bytes)
        self.url = f"http://127.0.0.1:{port}/page.bin"
        self.proc = subprocess.Popen(["python3", "-m", "http.server", str(port), "--bind", "127.0.0.1"], cwd=tmp,
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(1.5)
        self.pid = self.proc.pid

    def stop(self):
        self.proc.terminate()
        self.proc.wait()
