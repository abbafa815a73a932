"""Transfer of the synthetic verdicts to real traces: every detector on real-dev and on the default suite.

Real side: the ``real-dev`` suite (shipped τ-bench + ReAct, plus Who&When when the corpora
are found), replayed open loop through every registered detector with the official scorer
(halt at the first alarm, Δ = 5) into a run folder. Synthetic side: an existing run
folder's ``metrics.csv`` (``--synthetic DIR``), or a fresh ``run --mode open`` of the
default suite. Prints per detector the real recall, early rate, false-alarm rate and
standard composite next to the synthetic composite, both rankings, Kendall's τ, where
each suite's top pick lands in the other, and the paired-bootstrap interval of
composite(A) − composite(B) on real traces (``--pair A,B``; default progress_guard,exact).

    python bench/bench_transfer.py [--synthetic RUN_DIR] [--corpus DIR] [--detectors a,b] [--out DIR]
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
from scenarios.realsuite import load_suite  # noqa: E402
from sim.execute.replay import replay  # noqa: E402
from sim.config.spec import DetectorSpec  # noqa: E402
from sim.scoring.outcomes import Outcome, load_profiles  # noqa: E402
from sim.transfer import all_rows, transfer  # noqa: E402
from sim.scoring.uncertainty import Bootstrap, episode_totals  # noqa: E402

DEFAULT_CORPUS = ROOT / ".." / "shared" / "corpora" / "real"


def _read_csv(path: Path) -> list[dict]:
    with open(path, newline="", encoding="utf-8") as fh:
        return list(csv.DictReader(fh))


def synthetic_metrics(run_dir: Path | None, detectors: list[str]) -> tuple[list[dict], str]:
    if run_dir is None:
        run_dir = Path(tempfile.mkdtemp(prefix="transfer-syn-"))
        cmd = [sys.executable, "-c", "from sim.cli import main; main()", "run", "--mode", "open", "--no-progress",
               "--detectors", ",".join(detectors), "--out", str(run_dir)]
        print("synthetic:", " ".join(cmd[3:]), flush=True)
        subprocess.run(cmd, cwd=ROOT, check=True, stdout=subprocess.DEVNULL)
    return _read_csv(run_dir / "metrics.csv"), str(run_dir)


def _outcome(row: dict) -> Outcome:
    def num(v):
        return None if v in (None, "") else int(float(v))

    return Outcome(row["episode"], row["family"], row["unit"], row["outcome"], num(row["onset"]),
                   num(row["first_alarm"]), num(row["delay"]), row["late"] == "True", row["error"] or None)


def paired_interval(real_dir: Path, a: str, b: str, rounds: int = 2000) -> tuple[float, float, float]:
    """composite_standard(a) − composite_standard(b) on the real run, with its paired 95% interval."""
    _, profiles = load_profiles()
    rows = _read_csv(real_dir / "episodes.csv")
    fams = {}
    for r in rows:
        fams[r["episode"]] = r["family"]
    keys = sorted(fams)
    index = {k: i for i, k in enumerate(keys)}
    boot = Bootstrap(keys, [fams[k] for k in keys], rounds=rounds)
    data = {d: episode_totals([_outcome(r) for r in rows if r["detector"] == d], index) for d in (a, b)}
    row = next(r for r in boot.paired(data, profiles, ["score_standard"]) if r["metric"] == "score_standard")
    return row["diff"], row["lo"], row["hi"]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--synthetic", type=Path, help="an existing run folder of the default suite (open loop)")
    ap.add_argument("--corpus", type=Path, default=DEFAULT_CORPUS,
                    help="the real corpora, for the Who&When traces (default ../shared/corpora/real; skipped if absent)")
    ap.add_argument("--detectors", default=",".join(available()))
    ap.add_argument("--out", type=Path, help="run folder for the real replay (default: a temporary folder)")
    ap.add_argument("--pair", default="progress_guard,exact", help="A,B for the paired bootstrap of composites")
    args = ap.parse_args()
    detectors = [d for d in args.detectors.split(",") if d]

    corpus = args.corpus if args.corpus and args.corpus.is_dir() else None
    load = load_suite("real-dev", corpus)
    for p in load.problems:
        print(f"unmatched label: {p}")
    fams = sorted({e.family for e in load.episodes})
    print(f"real-dev: {len(load.episodes)} episodes ({', '.join(fams)}), {load.matched} labels matched, "
          f"{load.ambiguous} ambiguous left out, {load.unmatched} unmatched"
          + (f"; not loaded without corpora: {load.skipped_sources}" if load.skipped_sources else ""))
    real_dir = args.out or Path(tempfile.mkdtemp(prefix="transfer-real-"))
    replay(load.episodes, [DetectorSpec(d, d) for d in detectors], real_dir, ["real-dev"], progress=False)
    real = _read_csv(real_dir / "metrics.csv")
    syn, syn_dir = synthetic_metrics(args.synthetic, detectors)
    print(f"real run: {real_dir}\nsynthetic run: {syn_dir}\n")

    t = transfer(all_rows(syn, "score_standard"), all_rows(real, "score_standard"))
    real_all = {r["detector"]: r for r in real if r["family"] == "all"}
    syn_all = all_rows(syn, "score_standard")

    def f(v, digits=3):
        return "-" if v in (None, "") else f"{float(v):.{digits}f}"

    print("| detector | synthetic composite (rank) | real composite (rank) | real recall | real early | real FAR | Δ rank |")
    print("|---|---|---|---|---|---|---|")
    for d in sorted(t.detectors, key=lambda d: t.rank_b[d]):
        r = real_all[d]
        print(f"| {d} | {f(syn_all[d], 1)} ({t.rank_a[d]}) | {f(r['score_standard'], 1)} ({t.rank_b[d]}) | "
              f"{f(r['recall'])} | {f(r['early_rate'])} | {f(r['false_alarm_rate'])} | {t.rank_a[d] - t.rank_b[d]:+d} |")
    print(f"\nKendall tau (synthetic vs real, {len(t.detectors)} detectors): {f(t.tau)}")
    print(f"synthetic top pick: {t.top_a} (rank {t.rank_b[t.top_a]} on real)")
    print(f"real top pick: {t.top_b} (rank {t.rank_a[t.top_b]} on synthetic)")
    print(f"same top pick: {t.same_top}")

    print("\nper family (real):")
    for fam in fams:
        print(f"  {fam}: " + ", ".join(
            f"{r['detector']} rec {f(r['recall'], 2)} early {f(r['early_rate'], 2)} FAR {f(r['false_alarm_rate'], 2)}"
            for r in real if r["family"] == fam and r["detector"] in args.pair.split(",")))
    a, b = args.pair.split(",")
    if a in detectors and b in detectors:
        diff, lo, hi = paired_interval(real_dir, a, b)
        print(f"\npaired bootstrap (real, 2000 rounds, stratified by family): composite_standard({a}) - "
              f"composite_standard({b}) = {diff:.2f}, 95% interval [{lo:.2f}, {hi:.2f}]")


if __name__ == "__main__":
    main()
