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

``--backend NAME`` (or ``LOOPBENCH_EMBED_BACKEND``: torch, torch-bf16, onnx, onnx-int8, openvino-bf16) is
passed on to the runs; the backend printed is the one they resolve to (``openvino-bf16`` falls back to
``onnx`` on a CPU without bfloat16 arithmetic).

``--warm-runs N`` (3) times the warm run N times and judges the warm target on their median:
this machine's speed drifts by a quarter from one run to the next, and one run decides
nothing. Every run's time is printed, and every warm run's ``metrics.csv`` is compared with
the first run's.

``--fresh-install`` measures a new user's first run, as the README's first command makes it:
a new virtual environment, ``pip install -c constraints.txt -e '.[embedding]'`` into it (timed;
``--extras`` names other extras, ``--no-compile`` adds pip's flag of that name), then the cold
run with that environment's Python and an empty ONNX directory (``LOOPBENCH_ONNX_DIR``), so
the model's graph is written as on a new machine. pip's own download cache is used as usual:
the install figure is unpacking, byte-compiling and linking, not downloading
(``PIP_NO_CACHE_DIR=1`` in the environment measures the downloads too).

``--keep DIR`` keeps the run folders (``DIR/cold``, ``DIR/warm``, ``DIR/warm-2`` ...) to compare
with another checkout's (``cmp``).

Run: python bench/bench_default_suite.py [--warm-only | --fresh-install [--extras embedding] [--no-compile]] [--warm-runs N]
       [--workers N] [--keep DIR] [--backend NAME]
"""
from __future__ import annotations

import argparse
import csv
import json
import os
import resource
import shutil
import statistics
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


def run(out: Path, cache: str | None, workers: int, python: str = sys.executable) -> float:
    cmd = [python, "-m", "sim.cli", "run", "--out", str(out), "--no-progress", "--workers", str(workers)]
    if cache:
        cmd += ["--embed-cache", cache]
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        sys.exit(f"loopbench failed ({proc.returncode}): {proc.stderr.strip()[-2000:]}")
    return wall


def timed(label: str, out: Path, cache: str | None, workers: int, python: str = sys.executable) -> float:
    before, cpu = load(), cpu_children()
    wall = run(out, cache, workers, python)
    # CPU seconds move much less than wall seconds with other work on the machine.
    print(f"{label:5s} {wall:7.1f} s wall  {cpu_children() - cpu:7.1f} s cpu   load average before: {before}   after: {load()}")
    return wall


def fresh_install(venv: Path, extras: str, compile_all: bool = True) -> tuple[str, float]:
    """A new virtual environment with this checkout installed as the README installs it;
    prints the install's wall and CPU seconds and returns the environment's Python and the wall seconds."""
    before, cpu = load(), cpu_children()
    t0 = time.perf_counter()
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    python = str(venv / "bin" / "python")
    flags = [] if compile_all else ["--no-compile"]
    proc = subprocess.run([python, "-m", "pip", "install", "-q", "--disable-pip-version-check", *flags,
                           "-c", "constraints.txt", "-e", f".[{extras}]"], cwd=ROOT, capture_output=True, text=True)
    if proc.returncode != 0:
        sys.exit(f"pip install failed ({proc.returncode}): {proc.stderr.strip()[-2000:]}")
    wall = time.perf_counter() - t0
    print(f"install {wall:5.1f} s wall  {cpu_children() - cpu:7.1f} s cpu   (a new venv, pip install {' '.join(flags + [''])}"
          f"-c constraints.txt -e '.[{extras}]'; load average before: {before})")
    # The backend the runs resolve to in that environment (its extras decide what falls back).
    backend = subprocess.run([python, "-c", "from detectors.embedding_model import resolve_backend; print(resolve_backend())"],
                             cwd=ROOT, capture_output=True, text=True).stdout.strip()
    print(f"embedding backend in the new venv: {backend or 'unknown'}")
    return python, wall


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--warm-only", action="store_true")
    ap.add_argument("--fresh-install", action="store_true",
                    help="time a new venv's pip install first, then run everything in that venv")
    ap.add_argument("--extras", default="embedding", help="the extras --fresh-install installs (default: embedding)")
    ap.add_argument("--no-compile", action="store_true", help="--fresh-install with pip's --no-compile")
    ap.add_argument("--workers", type=int, default=0, help="passed to loopbench run (0 = one per core)")
    ap.add_argument("--warm-runs", type=int, default=3, help="warm runs timed; the target is judged on their median")
    ap.add_argument("--keep", type=Path, help="keep the run folders here instead of deleting them")
    ap.add_argument("--backend", help="the embedding backend of the runs (LOOPBENCH_EMBED_BACKEND)")
    args = ap.parse_args(argv)
    if args.warm_runs < 1:
        ap.error("--warm-runs must be at least 1")
    if args.warm_only and args.fresh_install:
        ap.error("--warm-only and --fresh-install exclude each other: a fresh install has no warm cache")
    if (args.no_compile or args.extras != "embedding") and not args.fresh_install:
        ap.error("--no-compile and --extras go with --fresh-install")
    if args.keep is not None:
        args.keep.mkdir(parents=True, exist_ok=True)
    from detectors.embedding_model import BACKEND_ENV, ONNX_DIR_ENV, resolve_backend

    if args.backend:
        os.environ[BACKEND_ENV] = args.backend  # the runs inherit it
    try:
        backend = resolve_backend()
    except ValueError as exc:
        ap.error(str(exc))
    tmp = Path(tempfile.mkdtemp(prefix="loopbench-default-", dir=args.keep))
    print(f"loopbench run (default suite, all detectors), workers={args.workers or 'one per core'}, cpus={os.cpu_count()}, "
          f"embedding backend {backend}")
    try:
        python = sys.executable
        if args.fresh_install:
            python, install_s = fresh_install(tmp / "venv", args.extras, compile_all=not args.no_compile)
            os.environ[ONNX_DIR_ENV] = str(tmp / "onnx")  # the graph is written as on a new machine
        warm_dirs = [tmp / ("warm" if i == 0 else f"warm-{i + 1}") for i in range(args.warm_runs)]
        if args.warm_only:
            first = tmp / "fill"
            run(first, None, args.workers)
            warms = [timed("warm", d, None, args.workers) for d in warm_dirs]
        else:
            first = tmp / "cold"
            cache = str(tmp / "cache")
            cold = timed("cold", first, cache, args.workers, python)
            warms = [timed("warm", d, cache, args.workers, python) for d in warm_dirs]
            same = {f: (first / f).read_bytes() == (tmp / "warm" / f).read_bytes()
                    for f in ("metrics.csv", "closed_metrics.csv", "closed.csv")}
            print(f"cold/warm ratio x{cold / statistics.median(warms):.1f}; identical cold vs warm: "
                  + ", ".join(f"{f} {'yes' if v else 'NO'}" for f, v in same.items()))
            print(f"cold target <= {COLD_TARGET_S:.0f} s: {'met' if cold <= COLD_TARGET_S else 'NOT met'} ({cold:.1f} s)")
            if args.fresh_install:
                print(f"first run from a fresh checkout: install {install_s:.1f} s + cold run {cold:.1f} s = "
                      f"{install_s + cold:.1f} s")
        if len(warm_dirs) > 1:
            differ = [d.name for d in warm_dirs if (d / "metrics.csv").read_bytes() != (first / "metrics.csv").read_bytes()]
            print(f"every warm run's metrics.csv identical to the first run's: {'yes' if not differ else 'NO: ' + ', '.join(differ)}")
        warm = statistics.median(warms)
        print(f"warm target <= {WARM_TARGET_S:.0f} s: {'met' if warm <= WARM_TARGET_S else 'NOT met'} "
              f"(median {warm:.1f} s of {len(warms)}: {', '.join(f'{w:.1f}' for w in warms)})")
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
