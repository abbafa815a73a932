"""The realism check's classifier: its AUC is right, chance on noise, 1 on separable data."""
from __future__ import annotations

import itertools

import numpy as np

from scenarios.inject_realism import auc, cross_validated_auc, design, feature_aucs, onset_of
from scenarios.tree import linear_episode


def test_auc_matches_the_pairwise_count():
    rng = np.random.default_rng(1)
    scores = rng.integers(0, 5, 40).astype(float)  # ties on purpose
    y = rng.integers(0, 2, 40)
    pairs = [(p, n) for p, n in itertools.product(scores[y == 1], scores[y == 0])]
    expect = sum(1.0 if p > n else 0.5 if p == n else 0.0 for p, n in pairs) / len(pairs)
    assert abs(auc(scores, y) - expect) < 1e-12


def test_cross_validated_auc_is_chance_on_noise_and_one_when_separable():
    rng = np.random.default_rng(2)
    x = rng.normal(size=(300, 4))
    y = (rng.random(300) < 0.2).astype(int)
    noise, _ = cross_validated_auc(x, y, repeats=3)
    assert 0.35 < noise < 0.65
    x_sep = x.copy()
    x_sep[:, 0] += 6 * y
    sep, _ = cross_validated_auc(x_sep, y, repeats=3)
    assert sep > 0.99
    assert feature_aucs(x_sep, y, ["a", "b", "c", "d"])["a"] > 0.99


def test_onset_features_read_gap_tool_and_sizes():
    ep = linear_episode("e", [("search", {"q": "a b"}, "r1"), ("open", {"id": 1}, "x"), ("search", {"q": "A  b"}, "r1")])
    row = onset_of(ep, 2, "c")
    assert (row.tool, row.position, row.calls, row.gap, row.result_chars) == ("search", 2, 3, 2, 2)
    x, names = design([row])
    assert names[-1] == "tool=search" and x[0, -1] == 1.0
