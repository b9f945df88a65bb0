#!/usr/bin/env python3
"""Five real programs from Debian launched as a user would: untraced, under
heaptrack and under allocscope's paths (the default, which samples in process
where it can; --probes; exact mode, which probes by default). Prints, per
program as it is done, the cost (wall time over untraced: the median of
rounds run in turn; exact mode once, over the median untraced run)
and the truth (allocated bytes, calls and bytes in use at exit against
heaptrack's exact record; whether each sampled 95 % interval covers it).

  sudo bench/launched_vs_heaptrack.py [--build DIR] [--rounds N] [--programs a,b] [--configs a,b]
                                      [--no-exact a,b] [--keep DIR]

Needs heaptrack, zstd, sqlite3, git, python3-pygments (Debian's python3),
g++ and clang-format.
"""
import argparse
import glob
import json
import os
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from clang_vs_heaptrack import parse_allocscope, parse_heaptrack, recorded_paths  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CONFIGS = {
    "default": [],
    "--probes": ["--probes"],
    "exact": ["--rate", "1"],
    # No BPF at all: the path an ordinary user gets (as root, --no-bpf takes the very same one).
    "--no-bpf": ["--no-bpf"],
    "--no-bpf exact": ["--no-bpf", "--rate", "1"],
}
ONCE = ("exact", "--no-bpf exact")  # slow: one run


# ---- workloads: each makes its inputs in `work` and returns its command -------

def sqlite_workload(work):
    script = os.path.join(work, "load.sql")
    with open(script, "w") as f:
        f.write("""PRAGMA journal_mode=OFF; PRAGMA synchronous=OFF;
CREATE TABLE t(id INTEGER PRIMARY KEY, k INTEGER, name TEXT, v REAL);
WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 400000)
INSERT INTO t SELECT i, i % 997, printf('name-%08d-%s', i, hex(randomblob(8))), i * 0.5 FROM n;
CREATE INDEX tk ON t(k); CREATE INDEX tn ON t(name);
CREATE TABLE g AS SELECT k, count(*) c, sum(v) s, group_concat(substr(name, 1, 6)) names FROM t GROUP BY k;
SELECT count(*), sum(g.c) FROM t JOIN g ON t.k = g.k WHERE t.id % 7 = 0;
UPDATE t SET name = name || '-x' WHERE k < 300;
DELETE FROM t WHERE k > 700;
SELECT k, count(*) FROM t GROUP BY k ORDER BY 2 DESC LIMIT 3;
""")
    db = os.path.join(work, "db.sqlite")
    return ["sqlite3", db, f".read {script}"]


def git_workload(work):
    repo = os.path.join(work, "repo")
    if not os.path.isdir(repo):
        subprocess.run(["git", "init", "-q", repo], check=True)
        env = dict(os.environ, GIT_AUTHOR_NAME="b", GIT_AUTHOR_EMAIL="b@b", GIT_COMMITTER_NAME="b",
                   GIT_COMMITTER_EMAIL="b@b")
        sources = sorted(glob.glob(os.path.join(ROOT, "user", "*", "*.cpp")))
        for i in range(40):  # 40 commits, each changing every file a little
            for j, src in enumerate(sources):
                with open(src) as s, open(os.path.join(repo, f"f{j}.cpp"), "w") as d:
                    d.write(f"// revision {i}\n" + s.read() + f"\n// {i * j}\n")
            subprocess.run(["git", "-C", repo, "add", "-A"], check=True, env=env)
            subprocess.run(["git", "-C", repo, "commit", "-qm", f"r{i}"], check=True, env=env)
    return ["git", "-C", repo, "pack-objects", "--all", "--revs", "--stdout", "-q"]


def python_workload(work):
    source = os.path.join(work, "source.py")
    with open(source, "w") as out:
        for path in sorted(glob.glob("/usr/lib/python3.11/*.py")):
            if out.tell() > 1 << 20:
                break
            out.write(open(path).read())
    code = ("import sys, pygments, pygments.lexers, pygments.formatters;"
            "src = open(sys.argv[1]).read();"
            "out = pygments.highlight(src, pygments.lexers.PythonLexer(), pygments.formatters.HtmlFormatter());"
            "print(len(out))")
    return ["/usr/bin/python3", "-c", code, source]  # PYTHONMALLOC=malloc: see timed()


def cc1plus_workload(work):
    out = os.path.join(work, "heavy.s")
    argv = ["g++", "-std=c++17", "-O1", "-###", "-S", os.path.join(ROOT, "bench", "clang_heavy.cpp"), "-o", out]
    err = subprocess.run(argv, capture_output=True, text=True, check=True).stderr
    line = next(l for l in err.splitlines() if "/cc1plus " in l)
    return shlex.split(line)


def clang_format_workload(work):
    big = os.path.join(work, "big.cpp")
    with open(big, "w") as out:
        sources = sorted(glob.glob(os.path.join(ROOT, "user", "*", "*.cpp")))
        while out.tell() < 5 << 19:  # 2.5 MB
            for src in sources:
                out.write(open(src).read())
    return ["clang-format", big]


PROGRAMS = {
    "sqlite3": sqlite_workload,
    "git pack-objects": git_workload,
    "python3 (malloc)": python_workload,
    "cc1plus": cc1plus_workload,
    "clang-format": clang_format_workload,
}


# ---- running -------------------------------------------------------------------

# heaptrack follows no exec: every command is the program itself, its input
# in its arguments and its output thrown away here.
ENV = dict(os.environ, PYTHONMALLOC="malloc")


def timed(argv, before=None, may_fail=False):
    """Wall time and stderr; a time of None when a run that may fail did
    (heaptrack cannot record every program: cc1plus ends in std::bad_alloc)."""
    if before:
        before()
    t0 = time.monotonic()
    proc = subprocess.run(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                          text=True, env=ENV)
    if proc.returncode != 0:
        if may_fail:
            print(f"bench: {argv[0]} failed ({proc.returncode}): {proc.stderr.strip()[-300:]}", file=sys.stderr)
            return None, proc.stderr
        sys.exit(f"{argv[:6]} failed ({proc.returncode}): {proc.stderr[-2000:]}")
    return time.monotonic() - t0, proc.stderr


def reset(work):
    """Each run starts from the same state: sqlite3's database made anew."""
    db = os.path.join(work, "db.sqlite")
    if os.path.exists(db):
        os.remove(db)


def run_program(name, make, binary, rounds, work, exact):
    command = make(work)
    commands = {"untraced": command,
                "heaptrack": ["heaptrack", "-o", os.path.join(work, "ht")] + command}
    configs = {c: o for c, o in CONFIGS.items() if exact or c not in ONCE}
    for config, options in configs.items():
        out = os.path.join(work, config.replace(" ", "_") + ".pb.gz")
        commands[config] = [binary, "record", "-o", out] + options + ["--"] + command
    ratios = {c: [] for c in commands if c != "untraced"}
    summaries = {}
    untraced = []
    for round_ in range(rounds):
        for ht in glob.glob(os.path.join(work, "ht*")):
            os.remove(ht)
        walls = {}
        for config, argv in commands.items():
            if config in ONCE and round_ > 0:
                continue
            walls[config], summaries[config] = timed(argv, lambda: reset(work), may_fail=config == "heaptrack")
        untraced.append(walls["untraced"])
        for c in walls:
            if c != "untraced" and c not in ONCE and walls[c] is not None:
                ratios[c].append(walls[c] / walls["untraced"])
        for c in ONCE:
            if c in walls:
                ratios[c].append(walls[c])
    base = statistics.median(untraced)
    for c in ONCE:
        if c in ratios:
            ratios[c] = [ratios[c][0] / base]
    files = glob.glob(os.path.join(work, "ht*.zst"))
    # heaptrack writes one file per process: the workload's is the largest.
    truth = parse_heaptrack(max(files, key=os.path.getsize))[0] if ratios["heaptrack"] else None
    recorded = {}
    for config in configs:
        out = os.path.join(work, config.replace(" ", "_") + ".pb.gz")
        recorded[config] = parse_allocscope(binary, out, work)
        summaries[config] = recorded_paths(binary, out, work).get("sampling", "?")
    return {c: statistics.median(r) for c, r in ratios.items() if r}, truth, recorded, summaries


def sampling_line(sampling):
    return sampling


def report(results):
    names = list(CONFIGS)
    print("### Cost: wall time over untraced (median of rounds)\n")
    print("| program | heaptrack | " + " | ".join(names) + " |")
    print("|---" * (len(names) + 2) + "|")
    for program, (cost, _, _, _) in results.items():
        ht = f"{cost['heaptrack']:.2f}x" if "heaptrack" in cost else "failed"
        print(f"| {program} | {ht} | " +
              " | ".join(f"{cost[n]:.2f}x" if n in cost else "-" for n in names) + " |")
    print("\n### Truth against heaptrack: allocated bytes, calls, in use at exit\n")
    print("| program | what | heaptrack | " + " | ".join(names) + " |")
    print("|---" * (len(names) + 3) + "|")
    for program, (_, truth, recorded, _) in results.items():
        if truth is None:
            print(f"| {program} | - | heaptrack failed: no truth | " + " | ".join("-" for _ in names) + " |")
            continue
        t = {"alloc_space": sum(v[0] for v in truth.values()), "alloc_objects": sum(v[1] for v in truth.values()),
             "inuse_space": sum(v[2] for v in truth.values())}
        for metric, label in (("alloc_space", "bytes"), ("alloc_objects", "calls"), ("inuse_space", "in use")):
            cells = []
            for n in names:
                if n not in recorded:
                    cells.append("-")
                    continue
                totals = recorded[n][2][metric]
                est, (lo, hi) = totals["estimate"], totals["interval"]
                covered = "" if "exact" in n else (" ✓" if lo <= t[metric] <= hi else " ✗")
                cells.append(f"{(est / t[metric] - 1) * 100:+.3f} %{covered}" if t[metric] else f"{est:,.0f}")
            print(f"| {program} | {label} | {t[metric]:,.0f} | " + " | ".join(cells) + " |")
    print("\n### How each recording sampled, and what it dropped\n")
    for program, (_, _, recorded, summaries) in results.items():
        for n in recorded:
            c = recorded[n][1]
            print(f"* {program}, {n}: {sampling_line(summaries[n])}; drops: ringbuf "
                  f"{c.get('dropped_ringbuf', 0)}, stack lost {c.get('dropped_stack_lost', 0)}, exact full "
                  f"{c.get('dropped_exact_full', 0)}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--programs", default=",".join(PROGRAMS), help="comma separated, of: " + ", ".join(PROGRAMS))
    ap.add_argument("--configs", default=",".join(CONFIGS), help="comma separated, of: " + ", ".join(CONFIGS))
    ap.add_argument("--no-exact", default="", help="programs run without exact mode (comma separated)")
    ap.add_argument("--keep", help="keep inputs and recordings in this directory")
    args = ap.parse_args()
    for tool in ("heaptrack", "zstdcat", "sqlite3", "git", "g++", "clang-format"):
        if not shutil.which(tool):
            sys.exit(f"{tool} is needed (apt install heaptrack zstd sqlite3 git g++ clang-format python3-pygments)")
    binary = os.path.join(args.build, "allocscope")
    chosen = args.configs.split(",")
    for c in list(CONFIGS):
        if c not in chosen:
            del CONFIGS[c]
    results = {}
    for name in args.programs.split(","):
        work = args.keep and os.path.join(args.keep, name.split()[0]) or tempfile.mkdtemp(prefix="allocscope-bench-")
        os.makedirs(work, exist_ok=True)
        print(f"bench: {name} ...", file=sys.stderr, flush=True)
        results[name] = run_program(name, PROGRAMS[name], binary, args.rounds, work,
                                    name not in args.no_exact.split(","))
        if not args.keep:
            shutil.rmtree(work)
        report({name: results[name]})
        sys.stdout.flush()
    if len(results) > 1:
        print("\n## All programs\n")
        report(results)


if __name__ == "__main__":
    main()
