"""Memory of path-local state on branching trees: proportional to nodes, not nodes × depth.

Open-loop replay keeps one detector state per tree node (every branch extends its
parent's). This script builds those states for

  (a) a linear chain of N calls (depth N), and
  (b) a bushy tree of N calls (each node has 2 or 3 children, depth about log N),

at N = 1,000 / 2,500 / 5,000 / 10,000, and measures with ``tracemalloc`` the memory the
N states retain together (calls and observations are built before measuring, so only
detector state counts). Every call is distinct (the worst case for a map of seen
calls), one in ten repeats an earlier one. It prints bytes per node, a least-squares
fit of bytes against nodes with its R² and the ratio of the largest to the smallest
bytes/node (about 1 for linear growth), and the same for a naive baseline that copies
a whole ``dict`` of signature counts per node, the way the seed extends a path. The
naive chain is quadratic, so it is measured only up to 2,500 nodes.

Run: python bench/bench_memory.py [--sizes 1000,2500,5000,10000] [--detectors a,b]
"""
from __future__ import annotations

import argparse
import gc
import random
import sys
import tracemalloc
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from detectors.protocol import Observation, ToolCall  # noqa: E402
from detectors.registry import make_detector  # noqa: E402
from detectors.signature import exact_signature  # noqa: E402

DETECTORS = {
    "exact": {}, "normalized": {}, "progress_guard": {"semantic": False}, "no_progress": {}, "layered": {},
    "openhands": {}, "openhands_sdk": {}, "openclaw": {}, "gemini_cli": {}, "cline": {}, "goose": {},
}
NAIVE_CHAIN_MAX = 2500


def tree(n: int, shape: str, seed: int = 0) -> list[tuple[int, ToolCall, Observation]]:
    """``(parent index or -1, call, observation)`` in an order where parents come first."""
    rng = random.Random(seed)
    out = []
    parents: list[int] = []
    frontier = [-1]
    for i in range(n):
        if shape == "chain":
            parent = i - 1
        else:  # breadth first: each node takes 2 or 3 children
            if not parents:
                parents = [p for p in frontier for _ in range(rng.choice((2, 3)))]
                frontier = []
            parent = parents.pop(0)
            frontier.append(i)
        j = rng.randrange(i) if i and rng.random() < 0.1 else i  # one call in ten repeats an earlier one
        call = ToolCall("read_file", {"path": f"src/pkg_{j % 97}/module_{j}.py", "lines": [1, 200]}, f"c{i}")
        obs = Observation(f"module_{j} defines function fn_{j} and class Widget{j}; imports pkg_{j % 97} util_{j % 13}")
        out.append((parent, call, obs))
    return out


def depth_of(nodes) -> int:
    depth = [0] * len(nodes)
    for i, (p, _, _) in enumerate(nodes):
        depth[i] = depth[p] + 1 if p >= 0 else 1
    return max(depth)


def retained(build) -> int:
    """Bytes still allocated after ``build()`` whose result is kept alive while measuring."""
    gc.collect()
    tracemalloc.start()
    base = tracemalloc.get_traced_memory()[0]
    kept = build()
    gc.collect()
    size = tracemalloc.get_traced_memory()[0] - base
    tracemalloc.stop()
    del kept
    return size


def detector_states(name: str, params: dict, nodes) -> list:
    det = make_detector(name, **params)
    start = det.start()
    states = []
    for parent, call, obs in nodes:
        state = states[parent] if parent >= 0 else start
        states.append(det.record(state, call, det.check(state, call), obs))
    return states


def naive_states(nodes) -> list:
    """The seed's way: a new dict of signature counts per node, copied from its parent's."""
    states: list[dict] = []
    for parent, call, _ in nodes:
        d = dict(states[parent]) if parent >= 0 else {}
        sig = exact_signature(call.tool, call.args)
        d[sig] = d.get(sig, 0) + 1
        states.append(d)
    return states


def fit(xs: list[int], ys: list[int]) -> tuple[float, float, float]:
    """Slope, intercept and R² of the least-squares line."""
    n = len(xs)
    mx, my = sum(xs) / n, sum(ys) / n
    sxx = sum((x - mx) ** 2 for x in xs)
    sxy = sum((x - mx) * (y - my) for x, y in zip(xs, ys))
    slope = sxy / sxx if sxx else 0.0
    icpt = my - slope * mx
    ss_res = sum((y - (slope * x + icpt)) ** 2 for x, y in zip(xs, ys))
    ss_tot = sum((y - my) ** 2 for y in ys)
    return slope, icpt, 1.0 - ss_res / ss_tot if ss_tot else 1.0


def verdict(sizes: list[int], total: list[int]) -> str:
    if len(sizes) < 2:
        return ""
    slope, _, r2 = fit(sizes, total)
    per = [t / n for t, n in zip(total, sizes)]
    growth = per[-1] / per[0]
    kind = "linear" if growth < 1.5 else "SUPERLINEAR"
    return f"slope {slope:,.0f} B/node, R2 {r2:.4f}, bytes/node {sizes[-1]:,} vs {sizes[0]:,}: x{growth:.2f} -> {kind}"


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="1000,2500,5000,10000")
    ap.add_argument("--detectors", default=",".join(DETECTORS))
    args = ap.parse_args(argv)
    sizes = [int(s) for s in args.sizes.split(",")]
    names = [d for d in args.detectors.split(",") if d]
    for shape in ("chain", "bushy"):
        trees = {n: tree(n, shape) for n in sizes}
        print(f"\n== {shape}: depth at {sizes[-1]:,} nodes = {depth_of(trees[sizes[-1]]):,} ==")
        head = "".join(f"{n:>11,}" for n in sizes)
        print(f"{'state':16s}{head}   (bytes/node)   growth            ratio to naive at each size")
        naive = {}
        for n in sizes:
            if shape == "chain" and n > NAIVE_CHAIN_MAX:
                continue
            naive[n] = retained(lambda: naive_states(trees[n]))
        row = "".join(f"{naive[n] / n:>11,.0f}" if n in naive else f"{'(skip)':>11s}" for n in sizes)
        print(f"{'naive dict copy':16s}{row}   {verdict(list(naive), list(naive.values()))}")
        for name in names:
            total = {n: retained(lambda: detector_states(name, DETECTORS.get(name, {}), trees[n])) for n in sizes}
            row = "".join(f"{total[n] / n:>11,.0f}" for n in sizes)
            ratios = " ".join(f"{total[n] / naive[n]:.3f}" for n in sizes if n in naive)
            print(f"{name:16s}{row}   {verdict(sizes, list(total.values()))}   naive ratio: {ratios}")
    if shape == "bushy":
        print("\n(naive chain beyond 2,500 nodes is not measured: it is quadratic, ~N²/2 dict entries)")


if __name__ == "__main__":
    main()
