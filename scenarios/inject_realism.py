"""How far injected loops are from hand-labelled ones: a simple classifier's cross-validated AUC.

Each loop onset — injected (:mod:`scenarios.inject`) or hand-labelled (``real-dev``) — is
described by what a look at the trace shows without reading it: its position (call
index, and its share of the trace), the gap back to the call it re-issues (the nearest
earlier call of the same tool whose arguments :func:`scenarios.labeling.args_match`
reads as a re-issue, else the nearest call of the same tool), its tool, and the sizes
of its arguments and result. A logistic regression (numpy, L2, standardised features)
tries to tell the two apart under stratified k-fold cross-validation, repeated over
shuffles; its AUC is 0.5 when the injected loops look like real ones on these features
and 1.0 when they are told apart every time. Per-feature AUCs say which feature gives
them away.
"""
from __future__ import annotations

import json
import math
from dataclasses import dataclass

import numpy as np

from scenarios.labeling import args_match
from scenarios.tree import Episode

#: The numeric features, in column order (the tool's one-hot columns follow).
NUMERIC = ("position", "relative_position", "gap", "log_arg_chars", "log_result_chars")


@dataclass(frozen=True)
class Onset:
    source: str  # the corpus (family of the source trace)
    tool: str
    position: int
    calls: int
    gap: int
    arg_chars: int
    result_chars: int

    def numeric(self) -> list[float]:
        return [float(self.position), self.position / max(self.calls - 1, 1), float(self.gap),
                math.log1p(self.arg_chars), math.log1p(self.result_chars)]


def onset_of(ep: Episode, onset: int, source: str) -> Onset:
    calls = ep.tool_nodes()
    node = calls[onset]
    same = [i for i in range(onset - 1, -1, -1) if calls[i].call.tool == node.call.tool]
    again = next((i for i in same if args_match(calls[i].call.args, node.call.args) is not None), None)
    back = again if again is not None else (same[0] if same else None)
    obs = node.observation
    return Onset(source, node.call.tool, onset, len(calls), onset - back if back is not None else onset + 1,
                 len(json.dumps(node.call.args, ensure_ascii=False, sort_keys=True)),
                 len(obs.content) if obs is not None and obs.content is not None else 0)


def design(rows: list[Onset], tools: list[str] | None = None) -> tuple[np.ndarray, list[str]]:
    """The feature matrix: numeric columns, then one column per tool."""
    tools = tools if tools is not None else sorted({r.tool for r in rows})
    col = {t: i for i, t in enumerate(tools)}
    x = np.zeros((len(rows), len(NUMERIC) + len(tools)))
    for i, r in enumerate(rows):
        x[i, :len(NUMERIC)] = r.numeric()
        if r.tool in col:
            x[i, len(NUMERIC) + col[r.tool]] = 1.0
    return x, list(NUMERIC) + [f"tool={t}" for t in tools]


def auc(scores: np.ndarray, y: np.ndarray) -> float:
    """Area under the ROC curve (Mann-Whitney, ties counted half)."""
    pos, neg = scores[y == 1], scores[y == 0]
    if not len(pos) or not len(neg):
        return float("nan")
    order = np.argsort(np.concatenate([pos, neg]), kind="mergesort")
    ranks = np.empty(len(order))
    allv = np.concatenate([pos, neg])[order]
    # average ranks over ties
    i = 0
    while i < len(allv):
        j = i
        while j + 1 < len(allv) and allv[j + 1] == allv[i]:
            j += 1
        ranks[order[i:j + 1]] = (i + j) / 2 + 1
        i = j + 1
    r_pos = ranks[:len(pos)].sum()
    return float((r_pos - len(pos) * (len(pos) + 1) / 2) / (len(pos) * len(neg)))


def fit_logistic(x: np.ndarray, y: np.ndarray, l2: float = 1.0, steps: int = 500) -> tuple[np.ndarray, float]:
    """Weights and bias of an L2-penalised logistic regression, classes weighted to balance,
    by Newton's method (a few hundred features at most)."""
    n, d = x.shape
    w_cls = np.where(y == 1, 0.5 / max(y.sum(), 1), 0.5 / max((1 - y).sum(), 1)) * n
    xb = np.hstack([x, np.ones((n, 1))])
    beta = np.zeros(d + 1)
    reg = np.full(d + 1, l2)
    reg[-1] = 0.0
    for _ in range(steps):
        p = 1 / (1 + np.exp(-np.clip(xb @ beta, -30, 30)))
        grad = xb.T @ (w_cls * (p - y)) + reg * beta
        hess = (xb * (w_cls * p * (1 - p))[:, None]).T @ xb + np.diag(reg + 1e-9)
        step = np.linalg.solve(hess, grad)
        beta -= step
        if np.abs(step).max() < 1e-8:
            break
    return beta[:-1], float(beta[-1])


def cross_validated_auc(x: np.ndarray, y: np.ndarray, folds: int = 5, repeats: int = 10, seed: int = 0
                        ) -> tuple[float, float]:
    """Mean and standard deviation over ``repeats`` shuffles of the pooled out-of-fold AUC of
    stratified ``folds``-fold cross-validation; features are standardised on each training fold."""
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(repeats):
        fold = np.empty(len(y), dtype=int)
        for cls in (0, 1):
            idx = np.flatnonzero(y == cls)
            rng.shuffle(idx)
            fold[idx] = np.arange(len(idx)) % folds
        scores = np.empty(len(y))
        for f in range(folds):
            tr, te = fold != f, fold == f
            mu, sd = x[tr].mean(0), x[tr].std(0)
            sd[sd == 0] = 1.0
            w, b = fit_logistic((x[tr] - mu) / sd, y[tr])
            scores[te] = ((x[te] - mu) / sd) @ w + b
        out.append(auc(scores, y))
    return float(np.mean(out)), float(np.std(out))


def feature_aucs(x: np.ndarray, y: np.ndarray, names: list[str]) -> dict[str, float]:
    """Each feature alone as a score: its AUC folded to >= 0.5 (either direction separates)."""
    return {n: max(a, 1 - a) for n, a in ((n, auc(x[:, i], y)) for i, n in enumerate(names)) if not math.isnan(a)}
