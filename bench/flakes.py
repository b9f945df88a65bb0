#!/usr/bin/env python3
"""Runs the fast tier's tests (./dev.sh check-tests) round after round, some
rounds beside CPU hogs, and prints how often each test failed: the evidence
that a red run means a defect, not chance or load. Every round also has a
light churn of short processes beside it (a program started every 0.2 s, as
on any server): the tests record the whole machine, and must hold with it.

  sudo bench/flakes.py --rounds 50 --loaded 10          # 40 idle rounds, then 10 beside 2 hogs
  sudo bench/flakes.py --rounds 5 --loaded 5 --hogs 2   # every round loaded
  sudo bench/flakes.py --churn 0                        # no process churn

The build must exist (./dev.sh build). Per round it reads the JUnit files
check_tests writes (build/check-unit.xml, build/check-integration.xml); a
round with failures keeps them as build/flakes-round-N-*.xml.
"""

import argparse
import collections
import os
import shutil
import subprocess
import sys
import time
import xml.etree.ElementTree as ET

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
JUNIT = ("check-unit.xml", "check-integration.xml")


def start_hogs(n):
    # A busy loop each, at the tests' priority: a machine doing other work.
    return [subprocess.Popen(["sha256sum", "/dev/zero"], stdout=subprocess.DEVNULL) for _ in range(n)]


def stop_hogs(hogs):
    for h in hogs:
        h.kill()
        h.wait()


def start_churn(period):
    """A short program every `period` seconds (none for 0), in a session of its own."""
    if period <= 0:
        return None
    loop = f"while :; do /bin/true; sleep {period}; done"
    return subprocess.Popen(["/bin/sh", "-c", loop], start_new_session=True, stdout=subprocess.DEVNULL)


def stop_churn(churn):
    if churn:
        os.killpg(churn.pid, 9)
        churn.wait()


def results(build):
    """(test name, passed) for every test of the round's JUnit files."""
    out = []
    for name in JUNIT:
        path = os.path.join(build, name)
        if not os.path.exists(path):
            continue
        for case in ET.parse(path).getroot().iter("testcase"):
            failed = case.get("status") == "fail" or case.find("failure") is not None
            out.append((case.get("name"), not failed))
    return out


def run_round(build, hogs, churn_period):
    for name in JUNIT:
        path = os.path.join(build, name)
        if os.path.exists(path):
            os.remove(path)
    running, churn = start_hogs(hogs), start_churn(churn_period)
    start = time.monotonic()
    try:
        env = dict(os.environ, BUILD_DIR=build)
        subprocess.run(["./dev.sh", "check-tests"], cwd=ROOT, env=env, stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL)
    finally:
        stop_hogs(running)
        stop_churn(churn)
    return results(os.path.join(ROOT, build)), time.monotonic() - start


def keep_failures(build, round_number):
    """Keeps a failed round's JUnit files (their failure messages) beside the build."""
    for name in JUNIT:
        path = os.path.join(ROOT, build, name)
        if os.path.exists(path):
            shutil.copy(path, os.path.join(ROOT, build, f"flakes-round-{round_number}-{name}"))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=50, help="rounds in all")
    ap.add_argument("--loaded", type=int, default=10, help="of them, the last ones run beside the hogs")
    ap.add_argument("--hogs", type=int, default=2, help="CPU hogs in a loaded round")
    ap.add_argument("--churn", type=float, default=0.2,
                    help="seconds between the short programs started beside every round (0: none)")
    ap.add_argument("--build", default="build", help="build directory, relative to the tree")
    a = ap.parse_args()
    if a.rounds < 1 or not 0 <= a.loaded <= a.rounds or a.hogs < 0 or a.churn < 0:
        ap.error("need rounds >= 1, 0 <= loaded <= rounds, hogs >= 0, churn >= 0")
    runs = collections.Counter()
    fails = {"idle": collections.Counter(), "loaded": collections.Counter()}
    for i in range(a.rounds):
        kind = "loaded" if i >= a.rounds - a.loaded else "idle"
        res, seconds = run_round(a.build, a.hogs if kind == "loaded" else 0, a.churn)
        if not res:
            sys.exit(f"round {i + 1}: no test results (is {a.build} built?)")
        bad = [n for n, ok in res if not ok]
        if bad:
            keep_failures(a.build, i + 1)
        for n, ok in res:
            runs[n] += 1
            if not ok:
                fails[kind][n] += 1
        print(f"round {i + 1:3d} ({kind}): {len(res)} tests, {len(bad)} failed, {seconds:.0f} s"
              + (": " + ", ".join(bad) if bad else ""), flush=True)
    idle, loaded = a.rounds - a.loaded, a.loaded
    failed = sorted(set(fails["idle"]) | set(fails["loaded"]))
    churn = f"a program every {a.churn:g} s" if a.churn > 0 else "no process churn"
    print(f"\n{len(runs)} tests, {idle} idle rounds, {loaded} rounds beside {a.hogs} CPU hogs; {churn}")
    if not failed:
        print("no test failed")
        return
    print(f"{'test':70} {'idle':>8} {'loaded':>8}")
    for n in failed:
        print(f"{n:70} {fails['idle'][n]:>4}/{idle:<3} {fails['loaded'][n]:>4}/{loaded:<3}")
    sys.exit(1)


if __name__ == "__main__":
    main()
