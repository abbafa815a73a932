"""Realism check of injected loops: can a simple classifier tell them from hand-labelled ones?

Loop onsets injected into the clean traces of ``real-dev`` (``scenarios.inject``, every loop
kind, one injection per trace and kind) against the hand-labelled loop onsets of the same
corpora. Features: position (index and share of the trace), gap back to the re-issued call,
tool (one-hot), argument and result sizes (``scenarios.inject_realism``). Prints the
cross-validated AUC of a logistic regression (5 folds x 10 shuffles; 0.5 = chance), per
corpus, per injected kind, and each feature's own AUC with the two groups' means.

    python bench/bench_inject_realism.py [--seed 0] [--corpus ../shared/corpora/real]

``--corpus`` adds the Who&When corpora (read from the local copy, never shipped).
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from scenarios.inject import LOOP_KINDS, META_KEY, clean_reason, inject_episodes, onset_of  # noqa: E402
from scenarios.inject_realism import NUMERIC, cross_validated_auc, design, feature_aucs  # noqa: E402
from scenarios.inject_realism import onset_of as describe  # noqa: E402
from scenarios.realsuite import load_real_suite  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seed", type=int, default=0, help="injection seed")
    ap.add_argument("--corpus", default=None, help="local corpora folder: adds the Who&When traces")
    ap.add_argument("--repeats", type=int, default=10, help="cross-validation shuffles")
    args = ap.parse_args(argv)
    t0 = time.perf_counter()
    problems: list[str] = []
    real = load_real_suite("real-dev", args.corpus, problems)
    clean = [ep for ep in real if clean_reason(ep) is None]
    run = inject_episodes(clean, LOOP_KINDS, args.seed)
    rows, y, kinds = [], [], []
    for ep in real:
        on = onset_of(ep)
        if on is not None:
            rows.append(describe(ep, on, ep.family))
            y.append(0)
            kinds.append("real")
    for ep in run.episodes:
        meta = ep.meta[META_KEY]
        rows.append(describe(ep, meta["onset"], meta["source_family"]))
        y.append(1)
        kinds.append(meta["kind"])
    y_arr = np.array(y)
    x, names = design(rows)
    print(f"real-dev: {len(real)} traces ({len(clean)} clean sources); hand-labelled loop onsets {int((y_arr == 0).sum())}, "
          f"injected {int(y_arr.sum())} (seed {args.seed}); {time.perf_counter() - t0:.1f} s to build")
    mean, sd = cross_validated_auc(x, y_arr, repeats=args.repeats, seed=args.seed)
    print(f"\nAUC, injected vs hand-labelled onsets, all features (logistic regression, 5-fold CV x {args.repeats}): "
          f"{mean:.3f} ± {sd:.3f}")
    numeric_only = cross_validated_auc(x[:, :len(NUMERIC)], y_arr, repeats=args.repeats, seed=args.seed)
    print(f"AUC without the tool columns: {numeric_only[0]:.3f} ± {numeric_only[1]:.3f}")
    # The corpora's shares differ (most hand-labelled loops are ReAct's, most clean sources
    # τ-bench's): a corpus-matched sample of the injected onsets takes that away.
    rng = np.random.default_rng(args.seed)
    real_share = {c: sum(1 for r, t in zip(rows, y) if t == 0 and r.source == c) / int((y_arr == 0).sum())
                  for c in {r.source for r in rows}}
    avail = {c: [i for i, (r, t) in enumerate(zip(rows, y)) if t == 1 and r.source == c] for c in real_share}
    total = min(len(avail[c]) / s for c, s in real_share.items() if s > 0)
    keep = [i for i, t in enumerate(y) if t == 0]
    for c, s in real_share.items():
        keep += list(rng.choice(avail[c], size=int(round(total * s)), replace=False)) if s > 0 else []
    keep_arr = np.array(sorted(keep))
    xm, _ = design([rows[i] for i in keep_arr])
    m, s = cross_validated_auc(xm, y_arr[keep_arr], repeats=args.repeats, seed=args.seed)
    print(f"AUC on a corpus-matched sample ({int(y_arr[keep_arr].sum())} injected onsets in the hand-labelled "
          f"loops' corpus shares): {m:.3f} ± {s:.3f}")
    print("\nper corpus (its own onsets only):")
    print("| corpus | real | injected | AUC |")
    print("|---|---|---|---|")
    for corpus in sorted({r.source for r in rows}):
        idx = np.array([r.source == corpus for r in rows])
        if len(set(y_arr[idx])) < 2 or min((y_arr[idx] == 0).sum(), y_arr[idx].sum()) < 5:
            print(f"| {corpus} | {int((y_arr[idx] == 0).sum())} | {int(y_arr[idx].sum())} | – (too few) |")
            continue
        xc, _ = design([r for r, k in zip(rows, idx) if k])
        m, s = cross_validated_auc(xc, y_arr[idx], repeats=args.repeats, seed=args.seed)
        print(f"| {corpus} | {int((y_arr[idx] == 0).sum())} | {int(y_arr[idx].sum())} | {m:.3f} ± {s:.3f} |")
    print("\nper injected kind (that kind's onsets against all hand-labelled ones):")
    print("| kind | injected | AUC |")
    print("|---|---|---|")
    for kind in LOOP_KINDS:
        idx = np.array([k in (kind, "real") for k in kinds])
        n = int(sum(k == kind for k in kinds))
        if n < 5:
            print(f"| {kind} | {n} | – (too few) |")
            continue
        m, s = cross_validated_auc(x[idx], y_arr[idx], repeats=args.repeats, seed=args.seed)
        print(f"| {kind} | {n} | {m:.3f} ± {s:.3f} |")
    print("\neach feature alone (AUC folded to >= 0.5) and the groups' means:")
    print("| feature | AUC | mean real | mean injected |")
    print("|---|---|---|---|")
    for name, a in sorted(feature_aucs(x, y_arr, names).items(), key=lambda kv: -kv[1]):
        i = names.index(name)
        print(f"| {name} | {a:.3f} | {x[y_arr == 0, i].mean():.3f} | {x[y_arr == 1, i].mean():.3f} |")
    for p in problems[:5]:
        print(f"label not used: {p}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
