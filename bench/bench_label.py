"""Agreement of the hindsight labeller with the hand labels of the real-trace dev half.

For each corpus of ``real-labels/dev.json``: loop-vs-clean agreement over the traces
that are not ambiguous (target >= 90%), and exact onset over the hand-labelled loops
(target >= 80%). Traces are found by the hash of their call list (``bench/dev_traces.py``).

    python bench/bench_label.py [--corpora ../shared/corpora] [--show-misses]
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from dev_traces import load_dev  # noqa: E402

from scenarios.labeling import propose  # noqa: E402


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
    found, missing = load_dev(a.corpora / "real-labels" / "dev.json", a.corpora / "real")
    for m in missing:
        print(f"not found: {m}")
    t0 = time.perf_counter()
    rows: dict[str, dict[str, int]] = {}
    misses = []
    for t, ep in found:
        _, prop = propose(ep)
        r = rows.setdefault(t["source"], {"traces": 0, "agree": 0, "loops": 0, "onset": 0, "fp": 0, "fn": 0, "ambiguous": 0})
        if t["ambiguous"]:
            r["ambiguous"] += 1
            continue
        r["traces"] += 1
        r["agree"] += prop.loops == t["loops"]
        r["fp"] += prop.loops and not t["loops"]
        r["fn"] += t["loops"] and not prop.loops
        if t["loops"]:
            r["loops"] += 1
            r["onset"] += prop.onset == t["onset"]
        if prop.loops != t["loops"] or (t["loops"] and prop.onset != t["onset"]):
            misses.append((t["source"], t["trace_key"] if t["trace_key"] is not None else t["file"], t["loops"], t["onset"],
                           t["kind"], prop.onset, prop.kind, prop.evidence[:1]))
    secs = time.perf_counter() - t0
    print(f"{'corpus':<36} {'traces':>6} {'loop/clean':>10} {'loops':>5} {'onset':>7} {'FP':>3} {'FN':>3} {'amb':>3}")
    ok = True
    for src, r in rows.items():
        agree = r["agree"] / r["traces"] if r["traces"] else 1.0
        onset = r["onset"] / r["loops"] if r["loops"] else 1.0
        ok &= agree >= 0.9 and onset >= 0.8
        print(f"{src:<36} {r['traces']:>6} {agree:>10.1%} {r['loops']:>5} {onset:>7.1%} {r['fp']:>3} {r['fn']:>3} {r['ambiguous']:>3}")
    print(f"labelled {len(found)} traces in {secs:.2f} s; targets (>= 90% loop/clean, >= 80% onset) "
          f"{'met' if ok else 'NOT met'} on every corpus")
    if a.show_misses:
        for m in misses:
            print("miss:", m)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
