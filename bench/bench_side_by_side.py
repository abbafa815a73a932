"""Two (or more) ``loopbench run`` side by side: under that load, no healthy task is killed.

Each run is the default command (default suite, every detector, default check limit and
hard kill) in its own process, all started at once, so the machine carries twice the
work it was sized for. The script then reads every run folder and counts the episodes
that failed with a time-limit message: the per-check alarm ("took longer than"), the
pool's hard kill ("could not be interrupted ... killed") or a dead worker ("worker died",
"worker exited"). The expected count is 0. It also says whether the runs' ``metrics.csv``
and ``closed.csv`` are byte-identical (same seed, so they must be), and prints each run's
wall time and the load average.

Run: python bench/bench_side_by_side.py [--runs 2] [--suite quick] [-- EXTRA RUN ARGS]
"""
from __future__ import annotations

import argparse
import csv
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
#: Failure messages that mean a time limit or the pool, not the detector's own logic, ended a task.
KILL_MARKS = ("took longer than", "could not be interrupted", "worker died", "worker exited", "worker sent no result")


def limit_failures(out: Path) -> dict[str, int]:
    """Episodes per (file, detector) whose error is a time-limit or killed-worker message."""
    found: dict[str, int] = {}
    for name in ("episodes.csv", "closed.csv"):
        path = out / name
        if not path.exists():
            continue
        with open(path, newline="") as fh:
            for row in csv.DictReader(fh):
                if any(mark in (row.get("error") or "") for mark in KILL_MARKS):
                    key = f"{name}:{row['detector']}"
                    found[key] = found.get(key, 0) + 1
    return found


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=2)
    ap.add_argument("--suite", default=None, help="default: the default suite")
    ap.add_argument("extra", nargs="*", help="more arguments for loopbench run (after --)")
    args = ap.parse_args(argv)
    tmp = Path(tempfile.mkdtemp(prefix="loopbench-side-by-side-"))
    base = [sys.executable, "-c", "from sim.cli import main; main()", "run", "--no-progress", *args.extra]
    if args.suite:
        base += ["--suite", args.suite]
    print(f"{args.runs} runs side by side: {' '.join(base[3:])}; cpus={os.cpu_count()}, "
          f"load average before: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    procs = []
    t0 = time.perf_counter()
    for i in range(args.runs):
        out = tmp / f"run{i}"
        procs.append((out, subprocess.Popen([*base, "--out", str(out)], cwd=ROOT, stdout=subprocess.DEVNULL,
                                            stderr=subprocess.PIPE, text=True)))
    failed = False
    for out, p in procs:
        _, err = p.communicate()
        wall = time.perf_counter() - t0
        print(f"{out.name}: exit {p.returncode}, finished after {wall:.1f} s")
        if p.returncode != 0:
            failed = True
            print(err.strip()[-2000:])
    print(f"load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    total = 0
    for out, _ in procs:
        bad = limit_failures(out)
        total += sum(bad.values())
        print(f"{out.name}: episodes failed by a time limit or a killed worker: {sum(bad.values())}"
              + (f" {bad}" if bad else ""))
    first = procs[0][0]
    for name in ("metrics.csv", "closed.csv"):
        same = all((out / name).exists() and (out / name).read_bytes() == (first / name).read_bytes()
                   for out, _ in procs)
        print(f"{name} identical across the runs: {'yes' if same else 'NO'}")
    print(f"run folders: {tmp}")
    if failed or total:
        sys.exit(1)


if __name__ == "__main__":
    main()
