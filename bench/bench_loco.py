"""Leave-one-corpus-out on real-dev: every detector's dev figures beside its held-out ones.

Runs ``loopbench run --suite real-dev --corpus DIR`` once (the product path; Who&When's
Magentic-One and CaptainAgent come from the local corpora) or reads a saved run folder
(``--run DIR``, seconds), then computes the protocol with ``sim.report.crossval`` — the same
code as ``loopbench report RUN --cv corpus`` — and prints, per detector and corpus and pooled:

- **dev**: the run as it is (each detector at the values it shipped with, which were derived
  on these very traces);
- **in-sample** (score only): the threshold chosen on all corpora, the scored one included;
- **LOCO**: the threshold chosen on the other corpora, scored on the held-out one; a detector
  that declares which corpora its rules were written from (``progress_guard``) is scored on
  each held-out corpus without those rules, as ``loopbench report --cv corpus`` does
  (``--keep-rules``: with them, its LOCO figures are then its dev ones);

each as score / recall / early rate / FAR / recall − FAR, the threshold both ways, then the
pair's held-out paired bootstrap intervals (A − B) per corpus and pooled. ``--cv-param``
also chooses a non-threshold default per fold (``sim.tuning.loco``: each value re-simulated
over the run's episodes), as ``loopbench report --cv corpus --cv-param`` does.

    python bench/bench_loco.py [--run RUN_DIR | --out RUN_DIR] [--corpus DIR] [--detectors a,b]
                               [--pair progress_guard,exact] [--cv-param DET.PARAM=V1,V2 ...]
                               [--keep-rules] [--deploy] [--rounds 1000] [--seed 0]
"""
from __future__ import annotations

import argparse
import subprocess
import sys
import time
from pathlib import Path
from typing import Sequence

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from sim.report.analysis import load_runs  # noqa: E402
from sim.config.spec import DetectorSpec  # noqa: E402
from sim.report.crossval import POOLED, check_run, corpus_cv  # noqa: E402
from sim.report.cv_deploy import SHOWN as DEPLOY_SHOWN, cell_text, heldout_deploy  # noqa: E402
from sim.tuning.loco import cv_grids, parse_cv_params, rule_grids  # noqa: E402

#: Where the shared corpora sit beside a checkout (main) or a worktree (one level deeper).
CORPUS_CANDIDATES = (ROOT.parent / "shared" / "corpora" / "real", ROOT.parent.parent / "shared" / "corpora" / "real")
SHOWN = (("score_standard", "score", 1, False), ("recall", "recall", 2, False), ("early_rate", "early", 3, False),
         ("false_alarm_rate", "FAR", 3, False), ("recall_minus_far", "R−FAR", 3, False))


def default_corpus() -> Path:
    """The corpora beside this checkout (or beside the worktree's parent); the first place
    looked when neither is there, for the error message."""
    return next((p for p in CORPUS_CANDIDATES if p.is_dir()), CORPUS_CANDIDATES[0])


def _run(out: Path, corpus: Path | None, detectors: str | None, extra: Sequence[str] = (), say: bool = True) -> Path:
    """``loopbench run --suite real-dev`` (with ``--corpus`` when given: Who&When's corpora)."""
    cmd = ([sys.executable, "-m", "sim.cli", "run", "--suite", "real-dev", "--no-progress", "--no-report", "--force",
            "--out", str(out)] + (["--corpus", str(corpus)] if corpus is not None else [])
           + (["--detectors", detectors] if detectors else []) + list(extra))
    if say:
        print("$ loopbench " + " ".join(cmd[3:]), flush=True)
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=None if say else subprocess.PIPE, text=True)
    if proc.returncode:
        sys.exit(f"bench_loco: loopbench {' '.join(cmd[3:])} failed (exit {proc.returncode})"
                 + (f":\n{proc.stderr.strip()[-2000:]}" if proc.stderr else ""))
    if say:
        print(f"run: {time.perf_counter() - t0:.1f} s", flush=True)
    return out


def _f(v, digits: int) -> str:
    return "–" if v is None else f"{v:.{digits}f}"


def _ci(r, key: str, digits: int = 1) -> str:
    if r is None or r[key] is None:
        return "–"
    mark = " ≠0" if r[key + "_lo"] is not None and (r[key + "_lo"] > 0 or r[key + "_hi"] < 0) else ""
    return f"{r[key]:+.{digits}f} [{_f(r[key + '_lo'], digits)}, {_f(r[key + '_hi'], digits)}]{mark}"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--run", type=Path, help="A saved real-dev run folder (skip the run).")
    ap.add_argument("--out", type=Path, default=Path("runs/bench-loco"), help="Where to write the run when not --run.")
    ap.add_argument("--corpus", type=Path, default=None, help="Local copy of the corpora (Who&When). [default: ../shared]")
    ap.add_argument("--detectors", default=None, help="Comma-separated detectors. [default: all in the run]")
    ap.add_argument("--pair", default="progress_guard,exact", help="A,B: held-out A − B with paired intervals.")
    ap.add_argument("--cv-param", action="append", default=[],
                    help="DETECTOR.PARAM=V1,V2,...: a default also chosen per fold, re-simulated per value (repeatable).")
    ap.add_argument("--keep-rules", action="store_true",
                    help="Keep every detector's rules in held out (default: each corpus is scored without the rules "
                         "written from it).")
    ap.add_argument("--deploy", action="store_true",
                    help="Also what the pair does to runs (successful runs stopped halting at once and as configured, "
                         "failed-run calls saved, loops caught, nudges per 100 clean calls), each dev and held out, "
                         "per corpus and pooled (what loopbench report --cv corpus writes to cv_deploy.csv).")
    ap.add_argument("--rounds", type=int, default=1000)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    a, b = args.pair.split(",")
    if args.run is None:
        corpus = args.corpus or default_corpus()
        if not corpus.is_dir():
            sys.exit(f"bench_loco: {corpus}: no corpora there (pass --corpus DIR, or --run RUN_DIR)")
        run_dir = _run(args.out, corpus, args.detectors)
    else:
        run_dir = args.run
    t0 = time.perf_counter()
    data = load_runs([run_dir])
    dets = args.detectors.split(",") if args.detectors else None
    grids = {}
    if args.cv_param:
        grids = cv_grids(run_dir, data.specs, parse_cv_params(args.cv_param, data.specs), data.delta,
                         corpora=None if args.keep_rules else check_run(data))
        print(f"--cv-param: {', '.join(f'{d} {g.param} ({len(g.values)} cells)' for d, g in grids.items())} "
              f"re-simulated in {time.perf_counter() - t0:.1f} s")
    if not args.keep_rules:
        t1, notes = time.perf_counter(), []
        held = rule_grids(data, set(grids), notes)
        for n in notes:
            print(f"note: {n}")
        if held:
            print(f"rules held out: {', '.join(f'{d} ({len(g.values) - 1} corpora)' for d, g in held.items())}, "
                  f"re-simulated in {time.perf_counter() - t1:.1f} s")
        grids = {**grids, **held}
    cv = corpus_cv(data, rounds=args.rounds, seed=args.seed, reference=b, detectors=dets, grids=grids or None)
    seconds = time.perf_counter() - t0
    n_eps = data.outcomes["episode"].nunique()
    print(f"run folder: {run_dir} ({n_eps} episodes; corpora: {', '.join(cv.corpora)})")
    print(f"leave-one-corpus-out: {args.rounds} bootstrap rounds (seed {args.seed}), {seconds:.1f} s\n")
    head = (["detector", "corpus", "value dev→in-sample→LOCO"] + [f"dev {n}" for _, n, _, _ in SHOWN] + ["in-sample score"]
            + [f"LOCO {n}" for _, n, _, _ in SHOWN])
    print("| " + " | ".join(head) + " |")
    print("|" + "---|" * len(head))
    for det in cv.detectors():
        for corpus in cv.corpora + [POOLED]:
            rows = {m: cv.get(det, corpus, m) for m, *_ in SHOWN}
            r0 = rows["score_standard"]
            thr = ("–" if not r0["param"] else
                   f"{r0['param']} {r0['value_as_run']}→{r0['value_in_sample']}→{r0['value_heldout'] or '(per corpus)'}")
            cells = ([_f(rows[m]["as_run"], d) for m, _, d, _ in SHOWN] + [_f(r0["in_sample"], 1)]
                     + [_f(rows[m]["heldout"], d) for m, _, d, _ in SHOWN])
            print(f"| {det} | {corpus} | {thr} | " + " | ".join(cells) + " |")
    if cv.reference and a in cv.detectors():
        print(f"\nheld-out {a} − {b}, paired bootstrap 95% intervals (≠0: the interval excludes 0)")
        print("| corpus | Δ score | Δ recall | Δ FAR | Δ recall−FAR |")
        print("|---|---|---|---|---|")
        for corpus in cv.corpora + [POOLED]:
            cells = [_ci(cv.get(a, corpus, m), "vs_reference", d) for m, d in
                     (("score_standard", 1), ("recall", 3), ("false_alarm_rate", 3), ("recall_minus_far", 3))]
            print(f"| {corpus} | " + " | ".join(cells) + " |")
        ahead = [c for c in cv.corpora if (cv.get(a, c)["vs_reference"] or 0) > 0]
        pooled = cv.get(a, POOLED)
        excl = pooled["vs_reference_lo"] is not None and (pooled["vs_reference_lo"] > 0 or pooled["vs_reference_hi"] < 0)
        print(f"\n{a} ahead of {b} (held-out score) on {len(ahead)} of {len(cv.corpora)} corpora"
              f"{' (' + ', '.join(ahead) + ')' if ahead else ''}; pooled {_ci(pooled, 'vs_reference')}: the interval "
              f"{'excludes' if excl else 'does not exclude'} 0.")
    if args.deploy:
        t1 = time.perf_counter()
        pair = [d for d in (a, b) if d in data.detectors]
        rows, notes = heldout_deploy(data, cv, grids or None, lambda d: DetectorSpec(d, *data.specs[d]).build(),
                                     rounds=args.rounds, seed=args.seed, detectors=pair)
        for n in notes:
            print(f"note: {n}")
        print(f"\nWhat {' and '.join(pair)} do to runs, dev (as run) and held out (as leave-one-corpus-out scored "
              f"each corpus), sim.report.cv_deploy, {time.perf_counter() - t1:.1f} s; 95% intervals")
        head = [f"{d}, {side}" for d in pair for side in ("dev", "held out")]
        print("| corpus | measure | " + " | ".join(head) + " |")
        print("|---|---|" + "---|" * len(head))
        for corpus in cv.corpora + [POOLED]:
            for action, metric, what, scale in DEPLOY_SHOWN:
                cells = []
                for d in pair:
                    r = next((x for x in rows if (x["detector"], x["corpus"], x["action"], x["metric"])
                              == (d, corpus, action, metric)), None)
                    for side in ("dev", "heldout"):
                        cell = cell_text(r, side, scale)
                        if r is not None and r[side] is not None:
                            k = 100 if scale == "%" else 1
                            cell += f" [{k * r[side + '_lo']:.1f}, {k * r[side + '_hi']:.1f}]"
                        cells.append(cell)
                print(f"| {corpus} | {what} | " + " | ".join(cells) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
