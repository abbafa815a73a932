"""Speed of ``loopbench inject``: seconds per 1,000 traces at 1k, 5k and 10k traces, and a linear fit.

The traces are the shipped ``real-dev`` traces (τ-bench and ReAct) replicated under new
ids (each replica draws its own injections: the draw is seeded by the trace id), every
kind injected once per trace, as ``loopbench inject`` does (``scenarios.inject``), the
paraphrases checked with the bundled model. Reading and writing the files is timed too, by the
wall clock and by the process's CPU time (on a shared machine the wall clock follows the load;
the CPU time, and its linear fit, is the figure to compare).

    python bench/bench_inject.py [--sizes 1000,5000,10000] [--kinds stale,paraphrased,...]
"""
from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from detectors.embedding_model import Embedder  # noqa: E402
from scenarios.inject import KINDS, inject_episodes, model_similarity  # noqa: E402
from scenarios.realsuite import load_real_suite  # noqa: E402
from scenarios.trace import read_trace, write_trace  # noqa: E402


def replicated(n: int) -> list:
    base = load_real_suite("real-dev")
    return [replace(base[i % len(base)], id=f"{base[i % len(base)].id}/r{i // len(base)}") for i in range(n)]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sizes", default="1000,5000,10000")
    ap.add_argument("--kinds", default=",".join(KINDS))
    args = ap.parse_args(argv)
    sizes = [int(s) for s in args.sizes.split(",")]
    kinds = args.kinds.split(",")
    model_similarity(Embedder())("warm up", ["the model"])  # load the model outside the timings
    print(f"load average before: {os.getloadavg()[0]:.2f}; kinds: {len(kinds)}")
    print("| traces | clean sources | episodes written | inject s | read+inject+write s | s per 1,000 traces "
          "| CPU s | CPU s per 1,000 traces |")
    print("|---|---|---|---|---|---|---|---|")
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for n in sizes:
            src = Path(tmp) / f"src{n}.jsonl"
            write_trace(src, replicated(n))
            c0, t0 = time.process_time(), time.perf_counter()
            eps = read_trace(src).episodes
            t1 = time.perf_counter()
            run = inject_episodes(eps, kinds, 0, similarity=model_similarity(Embedder()))
            t2 = time.perf_counter()
            write_trace(Path(tmp) / f"out{n}.jsonl", run.episodes)
            t3, c3 = time.perf_counter(), time.process_time()
            rows.append((n, t3 - t0, c3 - c0))
            print(f"| {n:,} | {run.sources:,} | {len(run.episodes):,} | {t2 - t1:.1f} | {t3 - t0:.1f} | "
                  f"{1000 * (t3 - t0) / n:.2f} | {c3 - c0:.1f} | {1000 * (c3 - c0) / n:.2f} |")
    if len(rows) >= 2:
        x = np.array([r[0] for r in rows], float)
        for what, col in (("wall", 1), ("CPU", 2)):
            y = np.array([r[col] for r in rows])
            slope, icpt = np.polyfit(x, y, 1)
            pred = slope * x + icpt
            r2 = 1 - ((y - pred) ** 2).sum() / max(((y - y.mean()) ** 2).sum(), 1e-12)
            print(f"linear fit ({what}): {1000 * slope:.2f} s per 1,000 traces + {icpt:.2f} s, R² = {r2:.4f}")
    print(f"load average after: {os.getloadavg()[0]:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
