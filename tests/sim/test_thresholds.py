"""One-pass threshold sweeps: the contract with re-running, calibration, held-out picks."""
import numpy as np
import pytest

from detectors.exact import ExactDetector
from detectors.normalized import NormalizedDetector
from detectors.protocol import Decision, Detector, Verdict
from scenarios.base import registered

registered()
from scenarios.base import make_scenario
from sim.play.harness import generate
from sim.play.openloop import score_episode
from sim.scoring.outcomes import alarms_from, episode_outcomes, load_profiles, summarize
from sim.scoring.thresholds import (CallScores, candidate_values, check_contract, heldout_totals, pick_best, pick_calibrated,
                            sweep, sweep_metrics)
from sim.scoring.uncertainty import episode_totals, metrics_from_totals

_, PROFILES = load_profiles()
FAMS = ("stale", "cosmetic", "paraphrased", "same_tool", "polling", "branch_siblings", "transient_retry")


@pytest.fixture(scope="module")
def episodes():
    return [generate(make_scenario(f, i, 0)) for f in FAMS for i in range(3)]


def call_rows(det, episodes):
    rows = []
    for ep in episodes:
        tools = {n.id: n.call.tool for n in ep.tool_nodes()}
        for s in score_episode(det, ep):
            rows.append({"episode": ep.id, "node": s.node_id, "score": s.score, "tool": tools[s.node_id],
                         "verdict": s.verdict.value})
    return rows


def rerun(det, episodes):
    out = []
    for ep in episodes:
        out += episode_outcomes(ep, alarms_from(score_episode(det, ep)))
    return out


@pytest.mark.parametrize("det,values", [
    (ExactDetector(), [1, 2, 3, 4]),
    (ExactDetector(tool_overrides={"search": {"max_repeats": 2}, "check_status": {"exempt": True}}), [1, 2, 3]),
    (NormalizedDetector(), [1, 2, 3, 4, 5]),
    (NormalizedDetector(threshold=2), [2, 3, 6]),
])
def test_a_sweep_equals_rerunning_the_detector_at_each_value(det, values, episodes):
    """The contract: alarms recomputed from stored scores are the alarms of a detector built with that value."""
    swept = sweep(episodes, call_rows(det, episodes), det, values)
    for v, outs in zip(values, swept):
        assert outs == rerun(det.clone(**{det.threshold_param: v}), episodes), v
    assert len({tuple(o.outcome for o in outs) for outs in swept}) > 1  # the values really differ


def test_the_stored_verdicts_honour_the_contract_and_a_liar_is_caught(episodes):
    det = ExactDetector()
    cs = CallScores.from_rows(call_rows(det, episodes))
    bad, total = check_contract(det, cs, 1)
    assert bad == 0 and total > 0

    class Liar(ExactDetector):
        def threshold_for(self, tool, value):
            return value + 1  # says one thing, does another

    assert check_contract(Liar(), cs, 1)[0] > 0


def test_candidate_values_cover_the_default_and_a_never_firing_value(episodes):
    det = NormalizedDetector()
    cs = CallScores.from_rows(call_rows(det, episodes))
    vals = candidate_values(det, cs, 3)
    assert 3 in vals and vals == sorted(vals) and all(isinstance(v, int) for v in vals)
    assert max(vals) > cs.scores().max()  # the top value never fires


def test_a_failed_episode_scores_the_worst_outcome_at_every_value(episodes):
    det = ExactDetector()
    bad = episodes[0].id
    swept = sweep(episodes, call_rows(det, episodes), det, [1, 2], errors={bad: "boom"})
    for outs in swept:
        assert all(o.error == "boom" and o.outcome in ("miss", "fp") for o in outs if o.episode == bad)


def _sweep_metrics(det, episodes):
    values = candidate_values(det, CallScores.from_rows(call_rows(det, episodes)), det.get_params()[det.threshold_param])
    outs = sweep(episodes, call_rows(det, episodes), det, values)
    return values, outs, sweep_metrics(values, outs, PROFILES)


@pytest.mark.parametrize("target", [0.01, 0.05, 0.3])
def test_calibrated_thresholds_meet_the_far_target_on_the_calibration_data(target, episodes):
    for det in (ExactDetector(), NormalizedDetector()):
        values, outs, rows = _sweep_metrics(det, episodes)
        far = np.array([r["false_alarm_rate"] for r in rows], dtype=float)
        miss = np.array([r["miss_rate"] for r in rows], dtype=float)
        score = np.array([r["score_standard"] for r in rows], dtype=float)
        i = int(pick_calibrated(far, miss, score, target))
        assert far[i] <= target
        # and it is the most sensitive such value: no value meeting the target misses less
        assert all(miss[j] >= miss[i] for j in range(len(values)) if far[j] <= target)


def test_selection_vectorises_over_bootstrap_rounds():
    far = np.array([[0.5, 0.2, 0.0], [0.04, 0.01, 0.0]])
    miss = np.array([[0.1, 0.3, 1.0], [0.1, 0.3, 1.0]])
    score = np.array([[10, 20, 0.0], [30, 20, 0.0]])
    assert pick_calibrated(far, miss, score, 0.05).tolist() == [2, 0]
    assert pick_best(score).tolist() == [1, 0]


def test_heldout_picks_never_look_at_the_family_they_score():
    # totals (F=2 families, V=2 values, k fields): family 0 alone prefers value 0, family 1 prefers value 1.
    def score_fn(t):
        return t[..., 0]
    per_family = np.zeros((2, 2, 1))
    per_family[0, :, 0] = [5.0, 0.0]
    per_family[1, :, 0] = [0.0, 1.0]
    _, pick = heldout_totals(per_family, score_fn)
    assert pick.tolist() == [1, 0]


def test_sweep_totals_feed_the_bootstrap_metrics(episodes):
    det = NormalizedDetector()
    values, outs, rows = _sweep_metrics(det, episodes)
    index = {ep.id: i for i, ep in enumerate(episodes)}
    for outs_v, row in zip(outs, rows):
        m = metrics_from_totals(episode_totals(outs_v, index).sum(0), PROFILES)
        assert float(m["score_standard"]) == pytest.approx(row["score_standard"])
        assert summarize(outs_v)["miss_rate"] == pytest.approx(float(m["miss_rate"]))


def _swept_detectors():
    from detectors.registry import available, make_detector

    out = []
    for name in available():
        if name.startswith("embedding"):  # loads a model; its own tests cover it
            continue
        det = make_detector(name)
        if det.threshold_param is not None:
            out.append(name)
    return out


@pytest.mark.parametrize("name", _swept_detectors())
def test_every_registered_threshold_honours_the_sweep_contract(name, episodes):
    from detectors.registry import make_detector

    det = make_detector(name)
    d = getattr(det, det.threshold_param)
    values = sorted({max(1, d - 1), d + 1, max(1, d // 2)})
    swept = sweep(episodes, call_rows(det, episodes), det, values)
    for v, outs in zip(values, swept):
        assert outs == rerun(det.clone(**{det.threshold_param: v}), episodes), (name, v)


def test_calls_at_another_threshold_alarm_by_the_contract_and_halt_as_the_stored_alarms_did():
    exact = ExactDetector()  # alarms iff score >= max_repeats_per_signature
    rows = lambda *verdicts: [{"episode": "e", "node": f"n{i}", "score": s, "tool": "t", "verdict": v}  # noqa: E731
                              for i, (s, v) in enumerate(zip((0, 1, 2, 3), verdicts))]
    stopping = CallScores.from_rows(rows("allow", "stop", "stop", "stop")).at_threshold(exact, 2)
    assert stopping.verdict_alarm["e"].tolist() == [False, False, True, True]
    assert stopping.halt_known and stopping.verdict_halt["e"].tolist() == [False, False, True, True]
    nudging = CallScores.from_rows(rows("allow", "nudge", "nudge", "nudge")).at_threshold(exact, 3)
    assert nudging.verdict_alarm["e"].tolist() == [False, False, False, True]
    assert nudging.halt_known and not nudging.verdict_halt["e"].any()
    mixed = CallScores.from_rows(rows("allow", "nudge", "stop", "stop")).at_threshold(exact, 1)
    assert mixed.verdict_alarm["e"].tolist() == [False, True, True, True]
    assert not mixed.halt_known and mixed.verdict_halt == {}
