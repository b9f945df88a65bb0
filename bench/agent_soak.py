#!/usr/bin/env python3
"""The always-on agent over a long run, as a busy container host would keep
it: short processes started all the time, each in a cgroup of its own that
is removed when it ends, scraped like Prometheus and Parca would. One agent
samples (the default rate), another counts every call (--rate 1); both watch
the same processes. Prints markdown for BENCHMARKS.md and draws each agent's
resident memory over time (SVG).

  sudo bench/agent_soak.py --minutes 30                 # both agents
  sudo bench/agent_soak.py --minutes 5 --modes exact    # one

At the end every byte is accounted for: each agent's per-program allocated
counters against the workloads' exact bytes (each variant measured once
beforehand with `record --rate 1`; they are deterministic), the exact agent
to the byte, the sampling one within its standard error, and every drop
counter printed. Flat means: resident memory in the last minute within 10 %
of minute 10's.
"""
import argparse
import gzip
import math
import os
import random
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import plot  # noqa: E402  (bench/plot.py: standard-library SVG)

TICK = os.sysconf("SC_CLK_TCK")
PROGRAMS = ("alloc_sites", "cxx_sites", "deep_cxx")
# Workload variants, picked at random per run: (program, arguments).
VARIANTS = [("alloc_sites", ["--threads", "1", "--scale-pct", "1"]),
            ("alloc_sites", ["--threads", "3", "--scale-pct", "1"]),
            ("cxx_sites", ["--scale-pct", "1"]), ("deep_cxx", ["--churn", "2000"])]
WEIGHTS = [4, 2, 1, 2]
SAMPLED_RATE = 512 * 1024  # the agent's default


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def cpu_seconds(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK  # utime + stime


def status_mib(pid, field):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(field):
                return int(line.split()[1]) / 1024
    return 0


def fetch(url):
    start = time.perf_counter()
    with urllib.request.urlopen(url, timeout=120) as r:
        body = r.read()
    return time.perf_counter() - start, body


def varint(buf, i):
    value = shift = 0
    while True:
        b = buf[i]
        i += 1
        value |= (b & 0x7F) << shift
        shift += 7
        if b < 0x80:
            return value, i


def fields(buf):
    """(field number, wire type, value) of a protobuf message: ints, or bytes when length-delimited."""
    i = 0
    while i < len(buf):
        key, i = varint(buf, i)
        wire = key & 7
        if wire == 0:
            v, i = varint(buf, i)
        elif wire == 2:
            n, i = varint(buf, i)
            v, i = buf[i:i + n], i + n
        elif wire in (1, 5):
            size = 8 if wire == 1 else 4
            v, i = buf[i:i + size], i + size
        else:
            raise ValueError(f"wire type {wire}")
        yield key >> 3, wire, v


def pprof_total(body, kind="alloc_space"):
    """The sum of one sample type over a pprof profile (gzip'd protobuf: profile.proto)."""
    data = gzip.decompress(body) if body[:2] == b"\x1f\x8b" else body
    strings, types, samples = [], [], []
    for number, wire, v in fields(data):
        if number == 6:
            strings.append(v.decode())
        elif number == 1:
            types.append(next((x for n, _, x in fields(v) if n == 1), 0))
        elif number == 2:
            values = []
            for n, w, x in fields(v):
                if n == 2 and w == 2:
                    j = 0
                    while j < len(x):
                        value, j = varint(x, j)
                        values.append(value)
                elif n == 2:
                    values.append(x)
            samples.append(values)
    index = [strings[t] for t in types].index(kind)
    return sum(values[index] for values in samples)


def metric(text, series):
    for line in text.splitlines():
        if line.startswith(series + " "):
            return float(line.split()[-1])
    return 0.0


def counters(text):
    """allocscope_recording_events_total{name="X"} V -> {X: V}"""
    out = {}
    for line in text.splitlines():
        if line.startswith('allocscope_recording_events_total{name="'):
            name = line.split('"')[1]
            out[name] = float(line.split()[-1])
    return out


def cgroup2_root():
    with open("/proc/self/mountinfo") as f:
        for line in f:
            fields = line.split()
            if fields[fields.index("-") + 1] == "cgroup2":
                return fields[4]
    sys.exit("no cgroup v2 hierarchy mounted")


def exact_bytes(build, program, argv):
    """What one run allocates, counted by `record --rate 1` (no sampling)."""
    with tempfile.TemporaryDirectory() as d:
        out = os.path.join(d, "run.folded")
        subprocess.run([os.path.join(build, "allocscope"), "record", "--rate", "1", "-q", "-o", out, "--",
                        os.path.join(build, "tests", program), *argv],
                       check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        with open(out) as f:
            return sum(int(line.rsplit(" ", 1)[1]) for line in f if line.strip())


class Agent:
    def __init__(self, build, name, extra):
        self.name, self.port = name, free_port()
        # Its log goes to a private file (a pipe left unread would block it).
        self.log = tempfile.TemporaryFile(mode="w+")
        self.proc = subprocess.Popen(
            [os.path.join(build, "allocscope"), "agent", "--listen", f"127.0.0.1:{self.port}",
             "--comm", "^(" + "|".join(PROGRAMS) + ")$", *extra], stderr=self.log)
        deadline = time.time() + 120
        while True:
            self.log.seek(0)
            if "probes attached" in self.log.read():
                break
            if self.proc.poll() is not None or time.time() > deadline:
                self.log.seek(0)
                sys.exit(f"{name} did not start:\n{self.log.read()}")
            time.sleep(0.1)
        self.samples = []  # (minute, rss MiB, anonymous MiB, stacks, processes forgotten, cgroups forgotten)
        self.scrape_time = self.scrape_cpu = 0.0
        self.scrapes = 0
        self.allocated = []  # the allocs profile's alloc_space total at each scrape
        self.decreases = 0  # scrapes whose cumulative profile held less than the one before

    def url(self, path):
        return f"http://127.0.0.1:{self.port}{path}"

    def scrape(self, profile):
        before = cpu_seconds(self.proc.pid)
        took, text = fetch(self.url("/metrics"))
        if profile:
            t, body = fetch(self.url("/debug/pprof/allocs"))
            took += t
            total = pprof_total(body)
            # A cumulative profile never goes down (scrapers take deltas).
            self.decreases += bool(self.allocated) and total < self.allocated[-1]
            self.allocated.append(total)
        self.scrape_cpu += cpu_seconds(self.proc.pid) - before
        self.scrape_time += took
        self.scrapes += 1
        return text.decode()

    def observe(self, minute):
        text = fetch(self.url("/metrics"))[1].decode()
        c = counters(text)
        self.samples.append((minute, status_mib(self.proc.pid, "VmRSS:"), status_mib(self.proc.pid, "RssAnon:"),
                             metric(text, "allocscope_agent_stacks"), c.get("agent_processes_forgotten", 0),
                             c.get("cgroups_forgotten", 0)))


def job_cgroup(parent, serial):
    """A new cgroup below `parent` (None: none) and the preexec_fn that joins it: the child joins
    before its exec, so its first allocation is there."""
    if not parent:
        return None, None
    cg = os.path.join(parent, f"job{serial}")
    os.mkdir(cg)
    return cg, lambda: open(os.path.join(cg, "cgroup.procs"), "w").write("0")


class Churn:
    """Keeps `parallel` workload runs going, each in a new cgroup removed after it."""

    def __init__(self, build, parallel, cgroups):
        self.build, self.parallel = build, parallel
        self.parent = None
        if cgroups:
            self.parent = tempfile.mkdtemp(prefix="allocscope-soak-", dir=cgroup2_root())
        self.running, self.runs, self.serial = [], {}, 0

    def step(self):
        still = []
        for p, cg in self.running:
            if p.poll() is None:
                still.append((p, cg))
                continue
            if p.returncode != 0:
                sys.exit(f"a workload failed: {p.args} -> {p.returncode}")
            if cg:
                os.rmdir(cg)
        self.running = still
        while len(self.running) < self.parallel:
            variant = random.choices(range(len(VARIANTS)), WEIGHTS)[0]
            program, argv = VARIANTS[variant]
            self.serial += 1
            cg, join = job_cgroup(self.parent, self.serial)
            p = subprocess.Popen([os.path.join(self.build, "tests", program), *argv], preexec_fn=join,
                                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            self.running.append((p, cg))
            self.runs[variant] = self.runs.get(variant, 0) + 1

    def finish(self):
        while self.running:
            self.step_without_new()
            time.sleep(0.01)
        if self.parent:
            os.rmdir(self.parent)

    def step_without_new(self):
        parallel, self.parallel = self.parallel, 0
        self.step()
        self.parallel = parallel

    def total(self):
        return sum(self.runs.values())


def settled_metrics(agent, programs):
    """/metrics once the agent has read every event (two answers alike, further apart than the
    second in which it shares answers)."""
    last = None
    for _ in range(30):
        time.sleep(1.2)
        text = fetch(agent.url("/metrics"))[1].decode()
        now = [metric(text, f'allocscope_program_allocated_bytes_total{{comm="{c}"}}') for c in programs]
        if now == last:
            return text
        last = now
    return text


def account(agent, exact, truth_by_program, text):
    """Prints the agent's per-program totals against the truth; returns the worst |z| (sampled)
    or the largest difference in bytes (exact)."""
    c = counters(text)
    print(f"\n{agent.name}: allocated bytes per program, against the workloads' exact bytes\n")
    print("| program | truth | agent | difference | z |")
    print("|---|---|---|---|---|")
    worst = 0.0
    for program in PROGRAMS:
        truth = truth_by_program.get(program, 0)
        got = metric(text, f'allocscope_program_allocated_bytes_total{{comm="{program}"}}')
        # Sampling each byte with probability 1/rate, weighed by the rate:
        # variance about truth x rate (an upper bound for blocks below the rate).
        sd = math.sqrt(truth * SAMPLED_RATE) if not exact and truth else 0
        z = (got - truth) / sd if sd else 0
        worst = max(worst, abs(got - truth) if exact else abs(z))
        print(f"| {program} | {truth:,.0f} | {got:,.0f} | {got - truth:+,.0f} | {'' if exact else f'{z:.2f}'} |")
    drops = {k: v for k, v in c.items() if (k.startswith("dropped") or "lost" in k or "full" in k) and v}
    print(f"\ncounters of what was dropped or lost, non-zero: {drops or 'none'}")
    print("forgotten: " + ", ".join(f"{k} {c.get(k, 0):,.0f}" for k in
                                    ("agent_processes_forgotten", "cgroups_forgotten")))
    return worst


def growth(samples, minutes):
    """Resident memory in the last minute against minute 10's (medians of the readings)."""
    mid = [s[1] for s in samples if 10 <= s[0] < 11] or [samples[len(samples) // 3][1]]
    end = [s[1] for s in samples if s[0] >= minutes - 1]
    return statistics.median(mid), statistics.median(end)


def table(agent):
    print(f"\n{agent.name}\n")
    print("| minute | agent RSS (MiB) | of which anonymous | stacks held | processes forgotten | cgroups forgotten |")
    print("|---|---|---|---|---|---|")
    shown = -1
    for s in agent.samples:
        if int(s[0]) > shown and int(s[0]) % 3 == 0:
            shown = int(s[0])
            print("| %.0f | %.0f | %.0f | %.0f | %.0f | %.0f |" % s)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--minutes", type=float, default=30)
    ap.add_argument("--modes", default="sampled,exact", help="sampled, exact or both (comma-separated)")
    ap.add_argument("--parallel", type=int, default=4, help="workload runs at once")
    ap.add_argument("--scrape-every", type=float, default=15, help="seconds between scrapes (each agent)")
    ap.add_argument("--max-stacks", type=int, default=65536)
    ap.add_argument("--no-cgroups", action="store_true", help="run the workloads in this cgroup")
    ap.add_argument("--svg", default=os.path.join(ROOT, "bench", "plots", "agent-soak-rss.svg"))
    args = ap.parse_args()
    modes = args.modes.split(",")

    truth_of_variant = [exact_bytes(args.build, p, a) for p, a in VARIANTS]
    agents = {m: Agent(args.build, f"{m} agent" + (" (--rate 1)" if m == "exact" else " (512 KiB)"),
                       ["--max-stacks", str(args.max_stacks)] + (["--rate", "1"] if m == "exact" else []))
              for m in modes}
    churn = Churn(args.build, args.parallel, not args.no_cgroups)
    start = time.time()
    end = start + args.minutes * 60
    next_scrape = next_observe = start
    try:
        while time.time() < end:
            churn.step()
            now = time.time()
            if now >= next_observe:  # every 10 s: resident memory, between scrapes
                next_observe = now + 10
                for a in agents.values():
                    a.observe((now - start) / 60)
                minute = (now - start) / 60
                if int(minute * 6) % 6 == 0:
                    print(f"minute {minute:.0f}: {churn.total()} runs, " + ", ".join(
                        f"{a.name} {a.samples[-1][1]:.0f} MiB" for a in agents.values()),
                        file=sys.stderr, flush=True)
            if now >= next_scrape:
                next_scrape = now + args.scrape_every
                for a in agents.values():
                    a.scrape(True)
            time.sleep(0.005)
        churn.finish()
    finally:
        for p, _ in churn.running:
            p.kill()
    elapsed = time.time() - start

    truth = {}
    for variant, n in churn.runs.items():
        program = VARIANTS[variant][0]
        truth[program] = truth.get(program, 0) + n * truth_of_variant[variant]
    print(f"{churn.total()} runs in {elapsed / 60:.1f} min ({churn.total() / elapsed:.1f} new processes "
          f"a second{', each in a new cgroup' if churn.parent else ''}); "
          f"{sum(truth.values()) / 1e9:,.1f} GB allocated")
    lines = []
    for mode, a in agents.items():
        table(a)
        text = settled_metrics(a, PROGRAMS)
        worst = account(a, mode == "exact", truth, text)
        mid, last = growth(a.samples, args.minutes)
        cpu = cpu_seconds(a.proc.pid)
        print(f"\nRSS at minute 10 {mid:.0f} MiB, in the last minute {last:.0f} MiB ({(last / mid - 1) * 100:+.1f} %); "
              f"agent CPU {cpu:.0f} s ({cpu / elapsed * 100:.1f} % of one core); a scrape (/metrics and "
              f"every process's allocs profile) {a.scrape_time / max(1, a.scrapes) * 1000:.0f} ms, "
              f"{a.scrape_cpu / max(1, a.scrapes) * 1000:.0f} ms of agent CPU; "
              + (f"largest difference {worst:,.0f} bytes" if mode == "exact" else f"largest |z| {worst:.2f}"))
        final = pprof_total(fetch(a.url("/debug/pprof/allocs"))[1])
        counted = sum(metric(text, f'allocscope_program_allocated_bytes_total{{comm="{c}"}}') for c in PROGRAMS)
        print(f"cumulative allocs profile: went down at {a.decreases} of {len(a.allocated)} scrapes; at the end "
              f"{final:,.0f} bytes against the programs' counters' {counted:,.0f}")
        lines.append((a.name, [(s[0], s[1]) for s in a.samples]))
    svg = plot.time_chart(
        "allocscope agent: resident memory over a soak",
        f"{churn.total():,} short processes in {elapsed / 60:.0f} minutes "
        f"({churn.total() / elapsed:.1f} a second), "
        + ("each in a cgroup of its own, " if churn.parent else "")
        + f"scraped every {args.scrape_every:.0f} s (/metrics and every process's allocation profile); "
        "RSS read every 10 s between scrapes.",
        "minutes", "agent RSS, MiB", lines)
    os.makedirs(os.path.dirname(args.svg), exist_ok=True)
    with open(args.svg, "w") as f:
        f.write(str(svg))
    print(f"\nplot: {os.path.relpath(args.svg, ROOT)}")


if __name__ == "__main__":
    try:
        main()
    finally:  # never leave an agent (and its probes) behind
        subprocess.run(["pkill", "-TERM", "-f", "allocscope agent --listen 127.0.0.1:"], check=False)
