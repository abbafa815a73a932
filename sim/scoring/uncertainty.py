"""Confidence intervals for the scorer's metrics: a stratified cluster bootstrap (SPEC §5).

The resampling unit is the **episode** (the cluster: a branching episode's looping paths
move together, so the interval reflects episode-level variation), and resampling is
**stratified by family**: each round draws, within every family, as many episodes as the
family has, with replacement. The family mix of the suite is therefore the same in every
round; what varies is which episodes represent each family. (Resampling whole families
instead would make the ``all`` interval mostly about which families the suite happens to
contain, and a per-family interval impossible.)

Every metric the scorer reports as a ratio of counts is a function of per-episode totals
(:data:`FIELDS`), so one round is a weighted sum ``W @ X`` with ``W`` the round's
multinomial counts per episode. All detectors share the same ``W``: a paired difference is
the difference of two detectors' metrics in the same round, which is exactly 0 for a
detector against itself. Median delay is not a ratio of sums and gets no interval here;
mean delay does.

Rounds are deterministic given ``seed`` (a ``numpy.random.Generator``). Outcomes pooled
from several run folders (several simulator seeds) are simply more episodes of each family.
"""
from __future__ import annotations

import warnings
from itertools import combinations
from typing import Iterable, Mapping, Sequence

import numpy as np

from sim.scoring.outcomes import DELTA, Outcome, ScoringUnits, composite_from_totals, nab_credit
from sim.numbers import as_float

#: Per-episode totals every bootstrapped metric is computed from.
FIELDS = ("clean", "fp", "looping", "tp", "miss", "early", "credit", "delay_sum", "nl_calls", "nl_alarms")
_F = {f: i for i, f in enumerate(FIELDS)}

#: The metrics :func:`metrics_from_totals` returns (open loop).
OPEN_METRICS = ("false_alarm_rate", "miss_rate", "early_rate", "mean_delay", "alarms_per_1k")

ROUNDS = 1000
SEED = 0
LEVEL = 0.95


def episode_totals(outcomes: Iterable[Outcome], keys: Mapping[str, int], delta: int = DELTA,
                   advisory: Mapping[str, tuple[int, int]] | None = None) -> np.ndarray:
    """An ``(episodes × FIELDS)`` array of one detector's outcomes, rows in ``keys`` order.

    ``advisory`` maps an episode to (non-loop calls, alarms on them) for ``alarms_per_1k``.
    Unlabelled outcomes count nowhere.
    """
    x = np.zeros((len(keys), len(FIELDS)))
    for o in outcomes:
        r = keys[o.episode]
        k = o.outcome
        if k in ("tn", "fp"):
            x[r, _F["clean"]] += 1
            x[r, _F["fp"]] += k == "fp"
        elif k in ("tp", "miss", "early"):
            x[r, _F["looping"]] += 1
            x[r, _F[k]] += 1
            if k == "tp":
                x[r, _F["credit"]] += nab_credit(o.delay or 0, delta)
                x[r, _F["delay_sum"]] += o.delay or 0
    for eid, (calls, alarms) in (advisory or {}).items():
        if eid in keys:
            x[keys[eid], _F["nl_calls"]] += calls
            x[keys[eid], _F["nl_alarms"]] += alarms
    return x


def advisory_counts(units: Mapping[str, ScoringUnits], nodes: Sequence[str], episodes: Sequence[str],
                    label_loop: Sequence, alarm: Sequence[bool]) -> dict[str, tuple[int, int]]:
    """(non-loop judged calls, alarms on them) per labelled episode, from calls.csv columns.

    The same rule as :func:`sim.scoring.outcomes.advisory_rate`: labelled episodes only, calls
    before ``scored_from`` and loop-labelled calls left out.
    """
    judged = {eid: {n for n, _ in u.clean} for eid, u in units.items() if u.labelled}
    out: dict[str, list[int]] = {}
    for n, e, lab, a in zip(nodes, episodes, label_loop, alarm):
        j = judged.get(e)
        if j is None or n not in j or lab is not False:
            continue
        c = out.setdefault(e, [0, 0])
        c[0] += 1
        c[1] += bool(a)
    return {e: (c[0], c[1]) for e, c in out.items()}


def _div(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return np.divide(a, b, out=np.full(np.broadcast(a, b).shape, np.nan), where=b > 0)


def metrics_from_totals(t: np.ndarray, profiles: Mapping[str, Mapping[str, float]]) -> dict[str, np.ndarray]:
    """The scorer's ratio metrics from totals ``t[..., FIELDS]`` (any leading axes); NaN when undefined."""
    g = {f: t[..., i] for i, f in enumerate(FIELDS)}
    out = {
        "false_alarm_rate": _div(g["fp"], g["clean"]),
        "miss_rate": _div(g["miss"], g["looping"]),
        "early_rate": _div(g["early"], g["looping"]),
        "mean_delay": _div(g["delay_sum"], g["tp"]),
        "alarms_per_1k": 1000.0 * _div(g["nl_alarms"], g["nl_calls"]),
    }
    for name, w in profiles.items():
        out[f"score_{name}"] = score_from_totals(t, w)
    return out


def score_from_totals(t: np.ndarray, weights: Mapping[str, float]) -> np.ndarray:
    """The composite of one profile from totals ``t[..., FIELDS]``, NaN where nothing was judged:
    :func:`metrics_from_totals`'s score alone, for callers that pick by it over many resamples."""
    g = {f: t[..., _F[f]] for f in ("credit", "miss", "early", "looping", "fp", "clean")}
    judged = (g["clean"] + g["looping"]) > 0
    s = composite_from_totals(g["credit"], g["miss"], g["early"], g["looping"], g["fp"], g["clean"], weights)
    return np.where(judged, s, np.nan)


def bootstrap_weights(strata: Sequence[str], rounds: int = ROUNDS, seed: int = SEED) -> np.ndarray:
    """``(rounds × units)`` resampling counts: within each stratum, draw its size with replacement.

    Deterministic given ``seed``; strata are visited in sorted order so the draw does not
    depend on the order units are listed in within the input beyond their own positions.
    """
    strata = np.asarray(strata)
    rng = np.random.Generator(np.random.PCG64(seed))
    w = np.zeros((rounds, len(strata)), dtype=np.int32)
    for s in sorted(set(strata.tolist())):
        idx = np.flatnonzero(strata == s)
        n = len(idx)
        draws = rng.integers(0, n, size=(rounds, n))
        flat = (draws + np.arange(rounds)[:, None] * n).ravel()
        w[:, idx] = np.bincount(flat, minlength=rounds * n).reshape(rounds, n)
    return w


def percentile_interval(samples: np.ndarray, level: float = LEVEL, axis: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """The percentile interval of bootstrap ``samples`` (NaN rounds ignored)."""
    a = (1.0 - level) / 2.0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # an all-NaN slice gives NaN, on purpose
        lo, hi = np.nanquantile(samples, [a, 1.0 - a], axis=axis)
    return lo, hi


def kappa_interval(pairs: Sequence[tuple[bool, bool]], rounds: int = ROUNDS, seed: int = SEED,
                   level: float = LEVEL) -> tuple[float, float] | None:
    """The percentile interval of Cohen's κ between two labellings, ``pairs`` = (A loops, B loops)
    per trace, the traces resampled with replacement; rounds where κ is undefined (every
    resampled trace of one class) are left out. None without a trace."""
    from scenarios.label_agreement import cohen_kappa

    if not pairs:
        return None
    cells = np.array([[a and b, a and not b, b and not a, not (a or b)] for a, b in pairs], dtype=float)
    counts = bootstrap_weights(["all"] * len(pairs), rounds, seed) @ cells  # (rounds, 4)
    with np.errstate(divide="ignore", invalid="ignore"):
        k = cohen_kappa(*counts.T)
    k[~np.isfinite(k)] = np.nan
    lo, hi = percentile_interval(k, level)
    return (float(lo) + 0.0, float(hi) + 0.0) if np.isfinite(lo) and np.isfinite(hi) else None  # + 0.0: no "-0.00"


class Bootstrap:
    """Shared resamples for every detector scored on the same episodes.

    ``keys`` are the episode ids (the clusters), ``families`` their strata. Build once,
    then ask for :meth:`intervals` and :meth:`paired`; every detector uses the same rounds.
    """

    def __init__(self, keys: Sequence[str], families: Sequence[str], *, rounds: int = ROUNDS, seed: int = SEED,
                 level: float = LEVEL):
        self.keys = list(keys)
        self.index = {k: i for i, k in enumerate(self.keys)}
        self.families = np.asarray(families)
        self.rounds = rounds
        self.seed = seed
        self.level = level
        self.weights = bootstrap_weights(self.families, rounds, seed).astype(float)
        self.groups = {f: np.flatnonzero(self.families == f) for f in sorted(set(self.families.tolist()))}
        self._blocks = {f: np.ascontiguousarray(self.weights[:, idx]) for f, idx in self.groups.items()}

    def totals(self, x: np.ndarray, family: str = "all") -> tuple[np.ndarray, np.ndarray]:
        """(point totals, per-round totals) of a ``(units × …)`` array for one family or all."""
        if family == "all":
            w, xs = self.weights, x
        else:
            w, xs = self._blocks[family], x[self.groups[family]]
        flat = np.ascontiguousarray(xs).reshape(len(xs), -1)
        return flat.sum(0).reshape(x.shape[1:]), (w @ flat).reshape((self.rounds,) + x.shape[1:])

    def family_totals(self, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Per-family (point ``(F, …)``, rounds ``(R, F, …)``) totals, families in ``self.groups`` order."""
        parts = [self.totals(x, f) for f in self.groups]
        return np.stack([p for p, _ in parts]), np.stack([r for _, r in parts], axis=1)

    def intervals(self, data: Mapping[str, np.ndarray], profiles: Mapping[str, Mapping[str, float]],
                  metrics_fn=None) -> list[dict]:
        """Rows ``detector, family, metric, value, lo, hi`` for every family and ``all``."""
        fn = metrics_fn or (lambda t: metrics_from_totals(t, profiles))
        rows = []
        fams = ["all"] + list(self.groups)
        for det, x in data.items():
            fp, fr = self.family_totals(x)
            ap, ar = self.totals(x)
            point = np.concatenate([ap[None], fp])  # (1 + F, k)
            rounds = np.concatenate([ar[:, None], fr], axis=1)  # (R, 1 + F, k)
            pm, rm = fn(point), fn(rounds)
            names = list(pm)
            lo, hi = percentile_interval(np.stack([rm[n] for n in names], axis=-1), self.level)  # (1 + F, M)
            for fi, fam in enumerate(fams):
                for mi, name in enumerate(names):
                    value = as_float(pm[name][fi])
                    if value is not None:
                        rows.append({"detector": det, "family": fam, "metric": name, "value": value,
                                     "lo": as_float(lo[fi, mi]), "hi": as_float(hi[fi, mi])})
        return rows

    def paired(self, data: Mapping[str, np.ndarray], profiles: Mapping[str, Mapping[str, float]],
               metrics: Sequence[str], metrics_fn=None) -> list[dict]:
        """Rows ``detector_a, detector_b, metric, diff, lo, hi``: a − b in the same rounds (family ``all``)."""
        fn = metrics_fn or (lambda t: metrics_from_totals(t, profiles))
        cache = {}
        for det, x in data.items():
            point, rounds = self.totals(x)
            cache[det] = (fn(point), fn(rounds))
        rows = []
        for a, b in combinations(list(data), 2):
            (pa, ra), (pb, rb) = cache[a], cache[b]
            for m in metrics:
                diff = as_float(pa[m] - pb[m])
                if diff is None:
                    continue
                lo, hi = percentile_interval(ra[m] - rb[m], self.level)
                rows.append({"detector_a": a, "detector_b": b, "metric": m, "diff": diff, "lo": as_float(lo), "hi": as_float(hi)})
        return rows


def unit_weights(clusters: Sequence[str], strata: Sequence[str], rounds: int = ROUNDS, seed: int = SEED) -> np.ndarray:
    """``(rounds × units)`` weights of the same stratified cluster bootstrap for data whose rows
    are *units* (looping paths, clean episodes) rather than episodes: each round resamples the
    clusters (episodes) within their stratum (family), and a unit weighs what its episode drew.
    Sibling paths of one episode therefore move together, as they are not independent evidence.
    Clusters are taken in sorted order, so the draw does not depend on the order of the rows.
    """
    keys = sorted(set(clusters))
    stratum = {}
    for c, s in zip(clusters, strata):
        stratum.setdefault(c, s)
    w = bootstrap_weights([stratum[k] for k in keys], rounds, seed)
    col = {k: i for i, k in enumerate(keys)}
    return w[:, [col[c] for c in clusters]].astype(float)


def weighted_rounds(values: np.ndarray, weights: np.ndarray, median: bool = False) -> np.ndarray:
    """Per round, the weighted mean (or lower weighted median) of ``values``, NaN rows ignored;
    NaN for a round in which no counted unit was drawn."""
    ok = ~np.isnan(values)
    v, w = values[ok], weights[:, ok]
    if v.size == 0:
        return np.full(weights.shape[0], np.nan)
    if not median:
        den = w.sum(axis=1)
        return np.divide(w @ v, den, out=np.full(len(den), np.nan), where=den > 0)
    order = np.argsort(v, kind="stable")
    cum = np.cumsum(w[:, order], axis=1)
    total = cum[:, -1]
    idx = np.argmax(cum >= total[:, None] / 2.0, axis=1)
    return np.where(total > 0, v[order][idx], np.nan)
