"""Wall time of ``loopbench run`` on the default suite with every detector, embedding included.

- cold: an empty embedding cache (``--embed-cache TMPDIR``): the model loads and every
  distinct call text of the suite is encoded;
- warm: the same command again on the now-filled cache: nothing is encoded unless the
  closed loop produces a text the open loop never had.

Targets (issue 18, 2 cores): cold <= 60 s, warm <= 30 s; the script says whether each is met
and prints the warm run's phases (generate, detectors, assemble) from its manifest.

Each run is a fresh process timed from outside (imports, generation, the pool, the
report all count). The load average is printed before and after each run, since other
work on the machine slows it. The script also says whether ``metrics.csv``,
``closed_metrics.csv`` and ``closed.csv`` are byte-identical between the two runs, and
lists the costliest (detector, mode) tasks of the warm run from its ``timings.csv``.

``--warm-only`` skips the cold run and times a run against the default cache
(``~/.cache/loopbench/embeddings``), after one untimed run that fills it.

``LOOPBENCH_EMBED_BACKEND`` (torch, onnx, onnx-int8) is passed on to the runs.

``--keep DIR`` keeps the run folders (``DIR/cold``, ``DIR/warm``) to compare with another
checkout's (``cmp``).

Run: python bench/bench_default_suite.py [--warm-only] [--workers N] [--keep DIR]
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
sys.path.insert(0, str(ROOT))  # this checkout's detectors, as the timed runs (cwd ROOT) use
COLD_TARGET_S = 60.0
WARM_TARGET_S = 30.0


def load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def cpu_children() -> float:
    """CPU seconds (user + system) of the finished child processes and their descendants."""
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ru.ru_utime + ru.ru_stime


def run(out: Path, cache: str | None, workers: int) -> float:
    cmd = [sys.executable, "-m", "sim.cli", "run", "--out", str(out), "--no-progress", "--workers", str(workers)]
    if cache:
        cmd += ["--embed-cache", cache]
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        sys.exit(f"loopbench failed ({proc.returncode}): {proc.stderr.strip()[-2000:]}")
    return wall


def timed(label: str, out: Path, cache: str | None, workers: int) -> float:
    before, cpu = load(), cpu_children()
    wall = run(out, cache, workers)
    # CPU seconds move much less than wall seconds with other work on the machine.
    print(f"{label:5s} {wall:7.1f} s wall  {cpu_children() - cpu:7.1f} s cpu   load average before: {before}   after: {load()}")
    return wall


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--warm-only", action="store_true")
    ap.add_argument("--workers", type=int, default=0, help="passed to loopbench run (0 = one per core)")
    ap.add_argument("--keep", type=Path, help="keep the run folders here instead of deleting them")
    args = ap.parse_args(argv)
    if args.keep is not None:
        args.keep.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix="loopbench-default-", dir=args.keep))
    from detectors.embedding_model import BACKEND_ENV, DEFAULT_BACKEND

    print(f"loopbench run (default suite, all detectors), workers={args.workers or 'one per core'}, cpus={os.cpu_count()}, "
          f"embedding backend {os.environ.get(BACKEND_ENV) or DEFAULT_BACKEND}")
    try:
        if args.warm_only:
            run(tmp / "fill", None, args.workers)
            warm = timed("warm", tmp / "warm", None, args.workers)
        else:
            cache = str(tmp / "cache")
            cold = timed("cold", tmp / "cold", cache, args.workers)
            warm = timed("warm", tmp / "warm", cache, args.workers)
            same = {f: (tmp / "cold" / f).read_bytes() == (tmp / "warm" / f).read_bytes()
                    for f in ("metrics.csv", "closed_metrics.csv", "closed.csv")}
            print(f"cold/warm ratio x{cold / warm:.1f}; identical cold vs warm: "
                  + ", ".join(f"{f} {'yes' if v else 'NO'}" for f, v in same.items()))
            print(f"cold target <= {COLD_TARGET_S:.0f} s: {'met' if cold <= COLD_TARGET_S else 'NOT met'} ({cold:.1f} s)")
        print(f"warm target <= {WARM_TARGET_S:.0f} s: {'met' if warm <= WARM_TARGET_S else 'NOT met'} ({warm:.1f} s)")
        phases = json.loads((tmp / "warm" / "manifest.json").read_text()).get("phase_seconds", {})
        print("warm run phases (s): " + ", ".join(f"{k} {v:.1f}" for k, v in phases.items())
              + " (then the scoreboard and the report)")
        with open(tmp / "warm" / "timings.csv", newline="") as fh:
            rows = sorted(csv.DictReader(fh), key=lambda r: -float(r["total_s"]))
        total = sum(float(r["total_s"]) for r in rows)
        print(f"warm run: detector task seconds summed over all tasks {total:.1f} s; costliest tasks:")
        for r in rows[:6]:
            print(f"  {r['detector']:16s} {r['mode']:6s} {float(r['total_s']):6.2f} s  p50 {r['p50_us']} us  "
                  f"model calls {r['model_calls']}")
    finally:
        if args.keep is None:
            shutil.rmtree(tmp, ignore_errors=True)
        else:
            print(f"run folders kept in {tmp}")


if __name__ == "__main__":
    main()
