"""Does the suite's blip share hold on the corpora it was not derived from?

Half the loops of the synthetic suites are blips (every looping family's ``blip_share``, 0.5: a
redundant call or two, then the agent goes back to work) because half the labelled real loops
are. This script checks that rule as the project adopts any rule, leaving one corpus out:

1. it scores ``real-dev`` (with the Who&When corpora) and reads the severity of every labelled
   loop: per corpus the loops and the blips, and for each corpus the share of the *other* ones;
2. it runs the synthetic suite with ``blip_share`` 0 (every loop runs to the end), at the pooled
   share and at each leave-one-corpus-out share (every looping family that has blips), and
   reports each against the real run (``loopbench report SYN --transfer REAL``);
3. it prints, per corpus, Kendall τ-b between the synthetic ranking and that corpus's held-out
   ranking (thresholds chosen on the other corpora) with no blips and with the share derived
   without the corpus — the rule judged only where it was not derived — and pooled at every share.

    python bench/bench_blip_share.py [--corpus DIR] [--suite default] [--episodes N]
                                     [--detectors a,b] [--rounds 1000] [--out DIR]
"""
from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from bench_heldout import num, read_rows, run_loopbench  # noqa: E402
from bench_loco import default_corpus  # noqa: E402
from scenarios.base import FAMILIES, loop_families  # noqa: E402
from scenarios.suites import Suite, load_suite  # noqa: E402
from sim.report.transfer import tau_text  # noqa: E402
from sim.tuning.toml_out import toml_key, toml_value  # noqa: E402

WHO = "bench_blip_share"  # names this script in a failure's one line


def real_blips(run: Path) -> dict[str, tuple[int, int]]:
    """Corpus -> (labelled loops, blips among them), from a real run's episodes.csv (the
    severity is the labels', the same for every detector: the first one's rows are read)."""
    rows = read_rows(run / "episodes.csv")
    first = rows[0]["detector"] if rows else None
    out: dict[str, list[int]] = {}
    for r in rows:
        if r["detector"] == first and r["onset"] != "":
            n = out.setdefault(r["family"], [0, 0])
            n[0] += 1
            n[1] += r["severity"] == "blip"
    return {c: (n[0], n[1]) for c, n in sorted(out.items())}


def shares(counts: dict[str, tuple[int, int]]) -> tuple[float, dict[str, float]]:
    """The pooled blip share and, per corpus, the share of the other corpora (two decimals: a
    family parameter, not a fit)."""
    loops, blips = sum(n for n, _ in counts.values()), sum(b for _, b in counts.values())
    loo = {c: round((blips - b) / (loops - n), 2) for c, (n, b) in counts.items() if loops > n}
    return round(blips / loops, 2), loo


def suite_toml(suite: Suite, share: float) -> str:
    """``suite`` as a suite file, open loop, with ``blip_share`` set to ``share`` in every looping
    family that has blips (its other family parameters kept)."""
    lines = [f"name = {toml_value(f'{suite.name}-blips-{share:g}')}", f"seed = {suite.seed}",
             f"episodes = {suite.episodes}", 'mode = "open"', f"families = {toml_value(list(suite.families))}"]
    if suite.family_weights:
        lines += ["", "[family_weights]"] + [f"{toml_key(f)} = {toml_value(w)}" for f, w in suite.family_weights.items()]
    looping = set(loop_families())
    for fam in suite.families:
        params = dict(suite.family_params.get(fam, {}))
        if fam in looping and float(FAMILIES[fam].defaults.get("blip_share", 0) or 0) > 0:
            params["blip_share"] = share
        if params:
            lines += ["", f"[family_params.{toml_key(fam)}]"] + [f"{toml_key(k)} = {toml_value(v)}" for k, v in params.items()]
    return "\n".join(lines) + "\n"


def transfer_at(share: float, suite: Suite, real: Path, out: Path, detectors: str | None, rounds: int) -> dict[str, dict]:
    """Run the suite at ``share`` and report it against ``real``: transfer_cv.csv by corpus."""
    path = out / f"suite-{share:g}.toml"
    path.write_text(suite_toml(suite, share), encoding="utf-8")
    run = out / f"synthetic-{share:g}"
    run_loopbench(["run", "--suite", str(path), "--out", str(run), "--no-progress", "--no-report", "--force"]
                  + (["--detectors", detectors] if detectors else []), WHO)
    run_loopbench(["report", str(run), "--transfer", str(real), "--rounds", str(rounds)], WHO)
    cv = run / "transfer_cv.csv"
    if not cv.is_file():
        sys.exit(f"bench_blip_share: {real} has fewer than two corpora: nothing to hold out")
    return {r["corpus"]: r for r in read_rows(cv)}


def _tau(row: dict | None, col: str) -> str:
    if row is None:
        return "–"
    return tau_text(num(row.get(col)), num(row.get(f"{col}_lo")), num(row.get(f"{col}_hi")))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--corpus", type=Path, default=None, help="the real corpora [default: ../shared/corpora/real]")
    ap.add_argument("--suite", default="default", help="the synthetic suite [default: default]")
    ap.add_argument("--episodes", type=int, default=None, help="episodes per family [default: the suite's]")
    ap.add_argument("--detectors", default=None, help="comma-separated [default: every registered detector]")
    ap.add_argument("--rounds", type=int, default=1000, help="bootstrap rounds of the τ-b intervals")
    ap.add_argument("--out", type=Path, default=None, help="where the runs go [default: a temporary folder]")
    args = ap.parse_args(argv)
    corpus = args.corpus or default_corpus()
    suite = load_suite(args.suite)
    if args.episodes:
        suite.episodes = args.episodes
    with tempfile.TemporaryDirectory() as tmp:
        out = args.out or Path(tmp)
        out.mkdir(parents=True, exist_ok=True)
        t0 = time.perf_counter()
        real = out / "real-dev"
        run_loopbench(["run", "--suite", "real-dev", "--corpus", str(corpus), "--out", str(real), "--no-progress",
                       "--no-report", "--force"] + (["--detectors", args.detectors] if args.detectors else []), WHO)
        counts = real_blips(real)
        pooled, loo = shares(counts)
        print("\nLabelled real loops and their blips (a redundant call or two, then the agent moved on):\n")
        print("| corpus | loops | blips | share | share of the other corpora |\n|---|---|---|---|---|")
        for c, (n, b) in counts.items():
            print(f"| {c} | {n} | {b} | {b / n:.2f} | {loo.get(c, float('nan')):.2f} |")
        print(f"| pooled | {sum(n for n, _ in counts.values())} | {sum(b for _, b in counts.values())} | {pooled:.2f} | |\n")
        by_share = {s: transfer_at(s, suite, real, out, args.detectors, args.rounds)
                    for s in sorted({0.0, pooled, *loo.values()})}
        print(f"\nKendall τ-b of suite `{suite.name}` ({suite.episodes} episodes per family) against each corpus "
              f"held out (thresholds chosen on the other corpora; in brackets the 95% bootstrap interval over the "
              f"real traces), with no blips and with the share derived without that corpus:\n")
        print("| corpus | no blips | share without it | τ-b there | change |\n|---|---|---|---|---|")
        for c in counts:
            if c not in loo:
                continue
            zero, there = by_share[0.0].get(c), by_share[loo[c]].get(c)
            change = ("–" if not (zero and there and zero["tau_heldout"] and there["tau_heldout"])
                      else f"{float(there['tau_heldout']) - float(zero['tau_heldout']):+.2f}")
            print(f"| {c} | {_tau(zero, 'tau_heldout')} | {loo[c]:.2f} | {_tau(there, 'tau_heldout')} | {change} |")
        print("\nPooled, every share run (as run: the thresholds each run used; held out: leave-one-corpus-out; "
              "both held out: the synthetic side leave-one-family-out too):\n")
        print("| blip_share | τ-b as run | held out | both held out |\n|---|---|---|---|")
        for s, rows in by_share.items():
            p = rows.get("pooled")
            print(f"| {s:g} | {_tau(p, 'tau_as_run')} | {_tau(p, 'tau_heldout')} | {_tau(p, 'tau_both_heldout')} |")
        print(f"\n{time.perf_counter() - t0:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
