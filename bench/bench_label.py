"""Agreement of the hindsight labeller with the hand labels of the real-trace dev half.

For each corpus of ``real-labels/dev.json``: loop-vs-clean agreement over the traces
that are not ambiguous (target >= 90%), and exact onset over the hand-labelled loops
(target >= 80%). Traces come from ``scenarios.realsuite`` (converted per the labels'
rules, matched by the hash of their call list, ambiguous ones left out); the labeller
sees them without their labels.

    python bench/bench_label.py [--corpora ../shared/corpora] [--show-misses]
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from scenarios.labeling import propose  # noqa: E402
from scenarios.realsuite import load_suite  # noqa: E402


def default_corpora() -> Path:
    root = Path(__file__).resolve().parent.parent
    for cand in (root.parent / "shared" / "corpora", root.parent.parent / "shared" / "corpora"):
        if (cand / "real-labels" / "dev.json").exists():
            return cand
    return root.parent / "shared" / "corpora"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--corpora", type=Path, default=default_corpora())
    ap.add_argument("--show-misses", action="store_true", help="list every disagreement")
    a = ap.parse_args()
    load = load_suite("real-dev", a.corpora / "real")
    for m in load.problems:
        print(f"not used: {m}")
    t0 = time.perf_counter()
    rows: dict[str, dict[str, int]] = {}
    misses = []
    for ep in load.episodes:
        tools = ep.tool_nodes()
        onset = next((i for i, n in enumerate(tools) if n.label is not None and n.label.loop), None)
        loops, kind = onset is not None, (tools[onset].label.kind if onset is not None else None)
        _, prop = propose(ep)
        r = rows.setdefault(ep.meta["source"], {"traces": 0, "agree": 0, "loops": 0, "onset": 0, "fp": 0, "fn": 0})
        r["traces"] += 1
        r["agree"] += prop.loops == loops
        r["fp"] += prop.loops and not loops
        r["fn"] += loops and not prop.loops
        if loops:
            r["loops"] += 1
            r["onset"] += prop.onset == onset
        if prop.loops != loops or (loops and prop.onset != onset):
            misses.append((ep.id, loops, onset, kind, prop.onset, prop.kind, prop.evidence[:1]))
    secs = time.perf_counter() - t0
    print(f"{'corpus':<36} {'traces':>6} {'loop/clean':>10} {'loops':>5} {'onset':>7} {'FP':>3} {'FN':>3}")
    ok = True
    for src, r in rows.items():
        agree = r["agree"] / r["traces"] if r["traces"] else 1.0
        onset = r["onset"] / r["loops"] if r["loops"] else 1.0
        ok &= agree >= 0.9 and onset >= 0.8
        print(f"{src:<36} {r['traces']:>6} {agree:>10.1%} {r['loops']:>5} {onset:>7.1%} {r['fp']:>3} {r['fn']:>3}")
    print(f"labelled {len(load.episodes)} traces ({load.ambiguous} ambiguous left out) in {secs:.2f} s; targets (>= 90% loop/clean, >= 80% onset) "
          f"{'met' if ok else 'NOT met'} on every corpus")
    if a.show_misses:
        for m in misses:
            print("miss:", m)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
