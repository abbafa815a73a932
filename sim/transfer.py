"""Transfer between two runs (SPEC §10): do the synthetic suite's verdicts hold on real traces?

Both runs rank their detectors by one metric of the ``all`` row (default: the standard
composite); transfer is Kendall's τ between the two rankings over the detectors both
runs scored, plus where each run's top pick lands in the other's ranking.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Mapping, Sequence


def ranking(values: Mapping[str, float | None]) -> list[str]:
    """Detectors best first (higher is better); undefined values last; ties by name."""
    return sorted(values, key=lambda d: (values[d] is None or values[d] != values[d],
                                         -(values[d] or 0.0), d))


def kendall_tau(a: Mapping[str, float], b: Mapping[str, float]) -> float | None:
    """Kendall's τ-b between two scorings of the same items (ties counted as neither).

    None with fewer than two common items, or when one side is all ties.
    """
    items = sorted(set(a) & set(b))
    conc = disc = ties_a = ties_b = 0
    for i, x in enumerate(items):
        for y in items[i + 1:]:
            da, db = a[x] - a[y], b[x] - b[y]
            if da == 0 and db == 0:
                continue
            if da == 0:
                ties_a += 1
            elif db == 0:
                ties_b += 1
            elif (da > 0) == (db > 0):
                conc += 1
            else:
                disc += 1
    denom = math.sqrt((conc + disc + ties_a) * (conc + disc + ties_b))
    return (conc - disc) / denom if denom else None


@dataclass(frozen=True)
class Transfer:
    metric: str
    detectors: list[str]  # scored by both runs
    rank_a: dict[str, int]  # 1-based
    rank_b: dict[str, int]
    tau: float | None
    top_a: str
    top_b: str

    @property
    def same_top(self) -> bool:
        return self.top_a == self.top_b


def transfer(a: Mapping[str, float | None], b: Mapping[str, float | None], metric: str = "score_standard") -> Transfer:
    """Rankings of the detectors both ``a`` and ``b`` score (metric values, higher is better)."""
    common = sorted(d for d in set(a) & set(b) if a[d] is not None and b[d] is not None)
    if not common:
        raise ValueError("the two runs have no detector scored in both")
    ra, rb = ranking({d: a[d] for d in common}), ranking({d: b[d] for d in common})
    return Transfer(metric, common, {d: i + 1 for i, d in enumerate(ra)}, {d: i + 1 for i, d in enumerate(rb)},
                    kendall_tau({d: a[d] for d in common}, {d: b[d] for d in common}), ra[0], rb[0])


def all_rows(rows: Sequence[Mapping], metric: str) -> dict[str, float | None]:
    """detector -> ``metric`` of its ``all`` row, from metrics.csv rows (strings or numbers)."""
    out: dict[str, float | None] = {}
    for r in rows:
        if r.get("family") != "all":
            continue
        v = r.get(metric)
        try:
            out[str(r["detector"])] = None if v in (None, "") else float(v)
        except (TypeError, ValueError):
            out[str(r["detector"])] = None
    return out
