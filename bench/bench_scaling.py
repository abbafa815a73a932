"""Throughput and scaling of ``loopbench run``: episodes per second, linear growth, both cores.

1. Throughput: the default suite (1x) with ``--workers 1``; from ``timings.csv``,
   episodes per second of each detector in open loop (replaying the recorded episodes)
   and closed loop (simulating them with the detector in the loop), and for all of them
   together (episodes x detectors / summed detector seconds).
2. Both cores: the same run with the default ``--workers 0``: wall time, speed-up over
   one process, CPU seconds per wall second, and whether ``metrics.csv`` (and the other
   result files) are byte-identical to the one-process run.
3. Scaling: wall time at 1x, 4x and 16x the default suite's episodes per family
   (``--episodes 40/160/640``), default workers, with a least-squares line of wall time
   against episodes (slope, intercept, R²) and seconds per 1,000 episodes at each size.

4. With ``--ray``: the default suite on ``--engine ray`` (a private local Ray instance),
   wall time against the local pool, and whether the results are byte-identical.

Fast detectors only, so it finishes in a few minutes: ``exact,normalized,cline,no_progress``
(override with ``--detectors``). Each run is a fresh ``loopbench`` process, timed from
outside, so generation, the pool and writing the run folder all count.

Run: python bench/bench_scaling.py [--detectors ...] [--multiples 1,4,16] [--ray]
"""
from __future__ import annotations

import argparse
import csv
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_memory import fit  # noqa: E402  (the same least-squares line)
FAST = "exact,normalized,cline,no_progress"
FILES = ("metrics.csv", "episodes.csv", "calls.csv", "closed.csv", "closed_metrics.csv")


def loopbench(out: Path, *extra: str) -> tuple[float, float, dict]:
    """Run ``loopbench run`` in a fresh process: (wall s, CPU s of the process tree, --json summary)."""
    exe = [sys.executable, "-m", "sim.cli", "run", "--out", str(out), "--no-progress", "--json", *extra]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    proc = subprocess.run(exe, cwd=ROOT, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode != 0:
        sys.exit(f"loopbench failed ({proc.returncode}): {proc.stderr.strip()[-2000:]}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu, json.loads(proc.stdout)


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--detectors", default=FAST)
    ap.add_argument("--multiples", default="1,4,16")
    ap.add_argument("--base-episodes", type=int, default=40, help="the default suite's episodes per family")
    ap.add_argument("--ray", action="store_true", help="also time --engine ray on a local Ray instance")
    args = ap.parse_args(argv)
    print(f"load average at start: {' '.join(f'{x:.2f}' for x in os.getloadavg())}; cpus: {os.cpu_count()}; "
          f"detectors: {args.detectors}")
    tmp = Path(tempfile.mkdtemp(prefix="loopbench-scaling-"))
    try:
        common = ("--detectors", args.detectors, "--embed-cache", "off")
        one_wall, one_cpu, one = loopbench(tmp / "w1", *common, "--workers", "1")
        n_eps = one["episodes"]
        print(f"\n1. throughput, one process, default suite ({n_eps} episodes): wall {one_wall:.1f} s")
        with open(tmp / "w1" / "timings.csv", newline="") as fh:
            rows = list(csv.DictReader(fh))
        print(f"   {'detector':14s} {'open ep/s':>10s} {'closed ep/s':>12s}")
        totals = {"open": 0.0, "closed": 0.0}
        by = {}
        for r in rows:
            by.setdefault(r["detector"], {})[r["mode"]] = float(r["total_s"])
            totals[r["mode"]] += float(r["total_s"])
        for det, t in by.items():
            print(f"   {det:14s} {n_eps / t['open']:10,.0f} {n_eps / t['closed']:12,.0f}")
        k = len(by)
        print(f"   {'all (' + str(k) + ')':14s} {k * n_eps / totals['open']:10,.0f} {k * n_eps / totals['closed']:12,.0f}"
              f"   (detector-episodes per second)")
        print(f"   whole run: {n_eps / one_wall:,.0f} episodes/s with {k} detectors in both modes, one process")

        pool_wall, pool_cpu, _ = loopbench(tmp / "w0", *common)
        same = {f: (tmp / "w0" / f).read_bytes() == (tmp / "w1" / f).read_bytes() for f in FILES}
        print(f"\n2. default workers (0 = one per core): wall {pool_wall:.1f} s vs {one_wall:.1f} s in one process "
              f"-> speed-up x{one_wall / pool_wall:.2f}; CPU/wall {pool_cpu / pool_wall:.2f} (one process: "
              f"{one_cpu / one_wall:.2f})")
        print(f"   results identical to --workers 1: {'yes' if all(same.values()) else 'NO'} "
              f"({', '.join(f + ('=' if v else '!=') for f, v in same.items())})")

        mults = [int(m) for m in args.multiples.split(",")]
        xs, ys = [], []
        print(f"\n3. scaling, default workers: {'multiple':>8s} {'episodes':>9s} {'wall s':>8s} {'s/1k ep':>8s}")
        for m in mults:
            if m == 1:
                wall, eps = pool_wall, n_eps
            else:
                wall, _, summ = loopbench(tmp / f"x{m}", *common, "--episodes", str(args.base_episodes * m))
                eps = summ["episodes"]
                shutil.rmtree(tmp / f"x{m}", ignore_errors=True)
            xs.append(eps)
            ys.append(wall)
            print(f"   {'':11s}{m:>8d}x {eps:9,d} {wall:8.1f} {1000 * wall / eps:8.2f}")
        slope, icpt, r2 = fit(xs, ys)
        print(f"   linear fit: wall = {slope * 1000:.2f} s per 1,000 episodes x episodes + {icpt:.1f} s; R2 = {r2:.4f} "
              f"({'linear' if r2 >= 0.99 else 'NOT linear'}: target R2 >= 0.99)")

        if args.ray:
            # A private local Ray instance on this machine: what the sharding costs, and that the
            # results do not depend on the engine. A cluster is the point of Ray; this is its floor.
            ray_wall, _, _ = loopbench(tmp / "ray", *common, "--engine", "ray", "--ray-address", "local")
            same = {f: (tmp / "ray" / f).read_bytes() == (tmp / "w1" / f).read_bytes() for f in FILES}
            print(f"\n4. --engine ray (local instance, {os.cpu_count()} CPUs, default suite): wall {ray_wall:.1f} s "
                  f"vs {pool_wall:.1f} s local pool (Ray start-up included)")
            print(f"   results identical to --workers 1: {'yes' if all(same.values()) else 'NO'} "
                  f"({', '.join(f + ('=' if v else '!=') for f, v in same.items())})")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
        print(f"\nload average at end: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
