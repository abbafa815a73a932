"""The stratified cluster bootstrap: intervals, paired differences, determinism, speed."""
import time

import numpy as np
import pytest

from sim.scoring.outcomes import Outcome, composite, load_profiles, summarize
from sim.scoring.uncertainty import Bootstrap, bootstrap_weights, episode_totals, metrics_from_totals

_, PROFILES = load_profiles()


def synthetic(n_per_family=30, seed=1, families=("a", "b", "c"), p_fp=0.2, p_miss=0.3):
    """Outcomes of a fake detector: half the episodes clean, half with one or two looping paths."""
    rng = np.random.default_rng(seed)
    outs = []
    for f in families:
        for i in range(n_per_family):
            eid = f"{f}-{i}"
            if i % 2 == 0:
                outs.append(Outcome(eid, f, "episode", "fp" if rng.random() < p_fp else "tn", None, None, None))
            else:
                for leaf in range(1 + (i % 3 == 0)):
                    r = rng.random()
                    if r < p_miss:
                        outs.append(Outcome(eid, f, f"l{leaf}", "miss", 2, None, None))
                    elif r < p_miss + 0.1:
                        outs.append(Outcome(eid, f, f"l{leaf}", "early", 2, 1, None))
                    else:
                        d = int(rng.integers(0, 6))
                        outs.append(Outcome(eid, f, f"l{leaf}", "tp", 2, 2 + d, d))
    return outs


def setup(outs_by_det, rounds=500, seed=0):
    fam = {o.episode: o.family for outs in outs_by_det.values() for o in outs}
    keys = sorted(fam)
    index = {k: i for i, k in enumerate(keys)}
    boot = Bootstrap(keys, [fam[k] for k in keys], rounds=rounds, seed=seed)
    return boot, {d: episode_totals(o, index) for d, o in outs_by_det.items()}


def test_point_estimates_are_the_official_scorers():
    outs = synthetic()
    boot, data = setup({"d": outs})
    rows = {(r["family"], r["metric"]): r["value"] for r in boot.intervals(data, PROFILES)}
    s = summarize(outs)
    assert rows[("all", "false_alarm_rate")] == pytest.approx(s["false_alarm_rate"])
    assert rows[("all", "miss_rate")] == pytest.approx(s["miss_rate"])
    assert rows[("all", "mean_delay")] == pytest.approx(s["mean_delay"])
    for name, w in PROFILES.items():
        assert rows[("all", f"score_{name}")] == pytest.approx(composite(outs, w))
    fam_b = [o for o in outs if o.family == "b"]
    assert rows[("b", "score_standard")] == pytest.approx(composite(fam_b, PROFILES["standard"]))


def test_intervals_contain_the_point_estimate():
    boot, data = setup({"d": synthetic(), "e": synthetic(seed=7, p_fp=0.05, p_miss=0.6)})
    rows = boot.intervals(data, PROFILES)
    assert rows
    for r in rows:
        if r["lo"] is not None:
            assert r["lo"] - 1e-9 <= r["value"] <= r["hi"] + 1e-9, r


def test_the_bootstrap_is_deterministic_given_its_seed():
    outs = {"d": synthetic()}
    a = setup(outs, seed=3)
    b = setup(outs, seed=3)
    c = setup(outs, seed=4)
    ra, rb, rc = (x[0].intervals(x[1], PROFILES) for x in (a, b, c))
    assert ra == rb
    assert ra != rc


def test_a_detector_paired_with_itself_differs_by_exactly_zero():
    outs = synthetic()
    boot, data = setup({"d": outs, "twin": list(outs), "other": synthetic(seed=9)})
    rows = boot.paired(data, PROFILES, ["score_standard", "miss_rate", "false_alarm_rate"])
    same = [r for r in rows if {r["detector_a"], r["detector_b"]} == {"d", "twin"}]
    assert len(same) == 3
    assert all(r["diff"] == 0.0 and r["lo"] == 0.0 and r["hi"] == 0.0 for r in same)
    other = [r for r in rows if r["detector_b"] == "other" and r["metric"] == "score_standard"]
    assert other and all(r["lo"] < r["hi"] for r in other)


def test_the_interval_narrows_with_more_episodes():
    def width(n):
        boot, data = setup({"d": synthetic(n_per_family=n)}, rounds=400)
        r = next(r for r in boot.intervals(data, PROFILES) if r["family"] == "all" and r["metric"] == "score_standard")
        return r["hi"] - r["lo"]

    assert width(200) < width(20)


def test_resampling_is_stratified_by_family():
    strata = ["a"] * 5 + ["b"] * 20 + ["c"] * 1
    w = bootstrap_weights(strata, rounds=50, seed=0)
    assert w.shape == (50, 26)
    assert (w[:, :5].sum(1) == 5).all() and (w[:, 5:25].sum(1) == 20).all() and (w[:, 25] == 1).all()


def test_undefined_metrics_are_nan_not_zero():
    m = metrics_from_totals(np.zeros((2, 10)), PROFILES)
    assert np.isnan(m["false_alarm_rate"]).all() and np.isnan(m["score_standard"]).all()


def test_a_thousand_rounds_over_700_episodes_and_20_detectors_take_seconds():
    outs = synthetic(n_per_family=37, families=tuple("abcdefghijklmnopqrs"))  # 19 families, 703 episodes
    dets = {f"d{i}": outs for i in range(20)}
    t0 = time.perf_counter()
    boot, data = setup(dets, rounds=1000)
    rows = boot.intervals(data, PROFILES)
    boot.paired(data, PROFILES, ["score_standard", "miss_rate", "false_alarm_rate"])
    assert rows and time.perf_counter() - t0 < 30
