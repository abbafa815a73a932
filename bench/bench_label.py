"""Agreement of the hindsight labeller with the hand labels of the real-trace dev half.

For each corpus of ``real-labels/dev.json``: loop-vs-clean agreement over the traces
that are not ambiguous (target >= 90%), and exact onset over the hand-labelled loops
(target >= 80%). Traces come from ``scenarios.realsuite`` (converted per the labels'
rules, matched by the hash of their call list, ambiguous ones left out); the labeller
sees them without their labels.

``--loco`` adds leave-one-corpus-out: for each corpus, the labeller's thresholds
(``scenarios.labeling.THRESHOLDS``) are chosen from a small grid on the *other* corpora
(best mean exact-onset rate over those corpora, then best loop/clean agreement, then the
grid point nearest the shipped values) and the held-out corpus is scored with them. The
shipped values were set on all of the dev half, so the plain figures are in-sample; the
LOCO figures are what a corpus the thresholds never saw gets.

    python bench/bench_label.py [--corpora ../shared/corpora] [--show-misses] [--loco]
"""
from __future__ import annotations

import argparse
import itertools
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from scenarios import labeling  # noqa: E402
from scenarios.labeling import propose, thresholds  # noqa: E402
from scenarios.realsuite import label_onset, load_suite  # noqa: E402

#: The LOCO grid: each threshold's candidates (the shipped value among them).
GRID = {
    "PARAPHRASE_JACCARD": (0.4, 0.5, 0.6),
    "LONG_PARAPHRASE_JACCARD": (0.3, 0.35, 0.45),
    "NOISE_SHARE": (0.05, 0.1, 0.2),
    "PLACE_NOISE_SHARE": (0.1, 0.15, 0.25),
}


def default_corpora() -> Path:
    root = Path(__file__).resolve().parent.parent
    for cand in (root.parent / "shared" / "corpora", root.parent.parent / "shared" / "corpora"):
        if (cand / "real-labels" / "dev.json").exists():
            return cand
    return root.parent / "shared" / "corpora"


def verdicts(episodes) -> list[tuple[bool, int | None]]:
    """The labeller's (loops, onset) per episode, with the thresholds now in force."""
    out = []
    for ep in episodes:
        _, prop = propose(ep)
        out.append((prop.loops, prop.onset))
    return out


def tally(episodes, got, truth) -> dict[str, dict[str, int]]:
    """Per corpus: traces, loop/clean agreements, hand loops, exact onsets, FP, FN."""
    rows: dict[str, dict[str, int]] = {}
    for ep, (loops_p, onset_p), onset in zip(episodes, got, truth):
        r = rows.setdefault(ep.meta["source"], {"traces": 0, "agree": 0, "loops": 0, "onset": 0, "fp": 0, "fn": 0})
        loops = onset is not None
        r["traces"] += 1
        r["agree"] += loops_p == loops
        r["fp"] += loops_p and not loops
        r["fn"] += loops and not loops_p
        if loops:
            r["loops"] += 1
            r["onset"] += onset_p == onset
    return rows


def rates(r: dict[str, int]) -> tuple[float, float]:
    return (r["agree"] / r["traces"] if r["traces"] else 1.0), (r["onset"] / r["loops"] if r["loops"] else 1.0)


def print_table(rows: dict[str, dict[str, int]], title: str) -> bool:
    print(title)
    print(f"{'corpus':<36} {'traces':>6} {'loop/clean':>10} {'loops':>5} {'onset':>7} {'FP':>3} {'FN':>3}")
    ok = True
    for src, r in rows.items():
        agree, onset = rates(r)
        ok &= agree >= 0.9 and onset >= 0.8
        print(f"{src:<36} {r['traces']:>6} {agree:>10.1%} {r['loops']:>5} {onset:>7.1%} {r['fp']:>3} {r['fn']:>3}")
    total = {k: sum(r[k] for r in rows.values()) for k in ("traces", "agree", "loops", "onset", "fp", "fn")}
    agree, onset = rates(total)
    print(f"{'all (pooled)':<36} {total['traces']:>6} {agree:>10.1%} {total['loops']:>5} {onset:>7.1%} "
          f"{total['fp']:>3} {total['fn']:>3}")
    return ok


def loco(episodes, truth) -> None:
    """Leave one corpus out: thresholds chosen on the other corpora, scored on the held-out one."""
    names = list(GRID)
    shipped = tuple(getattr(labeling, k) for k in names)
    points = list(itertools.product(*(GRID[k] for k in names)))
    t0 = time.perf_counter()
    results = {}
    for point in points:
        with thresholds(**dict(zip(names, point))):
            results[point] = tally(episodes, verdicts(episodes), truth)
    print(f"LOCO grid: {len(points)} threshold settings x {len(episodes)} traces in {time.perf_counter() - t0:.1f} s")

    def distance(point) -> float:
        return sum(abs(a - b) / b for a, b in zip(point, shipped))

    held: dict[str, dict[str, int]] = {}
    for corpus in results[shipped]:
        def train_key(point):
            others = [rates(r) for src, r in results[point].items() if src != corpus]
            return (sum(o for _, o in others) / len(others), sum(a for a, _ in others) / len(others), -distance(point))
        best = max(points, key=train_key)
        held[corpus] = results[best][corpus]
        chosen = ", ".join(f"{k}={v}" for k, v in zip(names, best))
        print(f"  {corpus}: chosen on the other corpora: {chosen}")
    ok = print_table(held, "leave-one-corpus-out (each corpus scored with thresholds chosen on the others):")
    print(f"LOCO targets (>= 90% loop/clean, >= 80% onset) {'met' if ok else 'NOT met'} on every corpus")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--corpora", type=Path, default=default_corpora())
    ap.add_argument("--show-misses", action="store_true", help="list every disagreement")
    ap.add_argument("--loco", action="store_true", help="also leave one corpus out, thresholds chosen on the others")
    a = ap.parse_args()
    load = load_suite("real-dev", a.corpora / "real")
    for m in load.problems:
        print(f"not used: {m}")
    episodes = load.episodes
    truth = [label_onset(ep) for ep in episodes]
    t0 = time.perf_counter()
    got = verdicts(episodes)
    secs = time.perf_counter() - t0
    ok = print_table(tally(episodes, got, truth), "shipped thresholds (set on the whole dev half: in-sample):")
    print(f"labelled {len(episodes)} traces ({load.ambiguous} ambiguous left out) in {secs:.2f} s; targets (>= 90% loop/clean, >= 80% onset) "
          f"{'met' if ok else 'NOT met'} on every corpus")
    if a.show_misses:
        for ep, (loops_p, onset_p), onset in zip(episodes, got, truth):
            if loops_p != (onset is not None) or (onset is not None and onset_p != onset):
                kind = ep.tool_nodes()[onset].label.kind if onset is not None else None
                print("miss:", (ep.id, onset is not None, onset, kind, onset_p))
    if a.loco:
        loco(episodes, truth)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
