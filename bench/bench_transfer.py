"""Transfer: does the default synthetic suite rank detectors as the labelled real traces do?

Runs (or reads) a default-suite run and a real-dev run, both through ``loopbench run``
(the product path), and prints both rankings by the standard composite with Kendall's τ-b
(sim.report.transfer, the same as ``loopbench report --transfer``), the top picks, real
recall / early / false-alarm rate per detector, and the paired bootstrap of one pair's
composite on the real traces (sim.scoring.uncertainty, stratified by family).

    python bench/bench_transfer.py [--synthetic RUN_DIR] [--real RUN_DIR] [--corpus DIR]
                                   [--detectors a,b] [--pair progress_guard,exact]
"""
from __future__ import annotations

import argparse
import csv
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from detectors.registry import available  # noqa: E402
from sim.numbers import as_bool, as_float  # noqa: E402
from sim.report.transfer import run_scores, summary_text, transfer  # noqa: E402
from sim.scoring.outcomes import Outcome, load_profiles  # noqa: E402
from sim.scoring.uncertainty import Bootstrap, episode_totals  # noqa: E402

DEFAULT_CORPUS = ROOT / ".." / "shared" / "corpora" / "real"


def _read_csv(path: Path) -> list[dict]:
    with open(path, newline="", encoding="utf-8") as fh:
        return list(csv.DictReader(fh))


def _run(args: list[str], out: Path) -> Path:
    cmd = [sys.executable, "-m", "sim.cli", "run", "--mode", "open", "--no-progress", "--out", str(out), *args]
    print("$ loopbench " + " ".join(cmd[3:]), flush=True)
    subprocess.run(cmd, cwd=ROOT, check=True, stdout=subprocess.DEVNULL)
    return out


def _outcome(row: dict) -> Outcome:
    def num(v):
        f = as_float(v)
        return None if f is None else int(f)

    return Outcome(row["episode"], row["family"], row["unit"], row["outcome"], num(row["onset"]),
                   num(row["first_alarm"]), num(row["delay"]), as_bool(row["late"]) is True, row["error"] or None)


def paired_interval(real_dir: Path, a: str, b: str, rounds: int = 2000) -> tuple[float, float, float]:
    """composite_standard(a) − composite_standard(b) on the real run, with its paired 95% interval."""
    _, profiles = load_profiles()
    rows = _read_csv(real_dir / "episodes.csv")
    fams = {r["episode"]: r["family"] for r in rows}
    keys = sorted(fams)
    index = {k: i for i, k in enumerate(keys)}
    boot = Bootstrap(keys, [fams[k] for k in keys], rounds=rounds)
    data = {d: episode_totals([_outcome(r) for r in rows if r["detector"] == d], index) for d in (a, b)}
    row = next(r for r in boot.paired(data, profiles, ["score_standard"]) if r["metric"] == "score_standard")
    return row["diff"], row["lo"], row["hi"]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--synthetic", type=Path, help="an existing default-suite run folder (else one is run)")
    ap.add_argument("--real", type=Path, help="an existing real-dev run folder (else one is run)")
    ap.add_argument("--corpus", type=Path, default=DEFAULT_CORPUS,
                    help="the real corpora, for the Who&When traces (default ../shared/corpora/real; skipped if absent)")
    ap.add_argument("--detectors", default=",".join(available()))
    ap.add_argument("--pair", default="progress_guard,exact", help="A,B for the paired bootstrap of composites")
    args = ap.parse_args()
    dets = ["--detectors", args.detectors]
    work = Path(tempfile.mkdtemp(prefix="transfer-"))
    corpus = ["--corpus", str(args.corpus.resolve())] if args.corpus and args.corpus.is_dir() else []
    real_dir = args.real or _run(["--suite", "real-dev", *corpus, *dets], work / "real")
    syn_dir = args.synthetic or _run(dets, work / "synthetic")
    print(f"synthetic run: {syn_dir}\nreal run: {real_dir}\n")
    rows, summary = transfer(run_scores(syn_dir), run_scores(real_dir))
    real_all = {r["detector"]: r for r in _read_csv(real_dir / "metrics.csv") if r["family"] == "all"}

    def f(v, digits=3):
        v = as_float(v)
        return "-" if v is None else f"{v:.{digits}f}"

    print("| detector | synthetic score (rank) | real score (rank) | real recall | real early | real FAR | rank change |")
    print("|---|---|---|---|---|---|---|")
    for r in sorted(rows, key=lambda r: r["real_rank"]):
        m = real_all[r["detector"]]
        print(f"| {r['detector']} | {r['synthetic_score']:.1f} ({r['synthetic_rank']}) | {r['real_score']:.1f} "
              f"({r['real_rank']}) | {f(m['recall'])} | {f(m['early_rate'])} | {f(m['false_alarm_rate'])} | "
              f"{r['rank_change']:+d} |")
    print()
    print(summary_text(summary))
    a, b = args.pair.split(",")
    if a in real_all and b in real_all:
        diff, lo, hi = paired_interval(real_dir, a, b)
        print(f"paired bootstrap (real, 2000 rounds, clustered by episode, stratified by family): "
              f"score_standard({a}) - score_standard({b}) = {diff:.2f}, 95% interval [{lo:.2f}, {hi:.2f}]")


if __name__ == "__main__":
    main()
