"""``loopbench adopt``: a guard change judged on the corpora it was not derived from.

The runs are real (``loopbench run`` over the shipped real-dev traces, τ-bench and ReAct);
the semantic layer is off in both detectors so no test needs the embedding model.
"""
from __future__ import annotations

import json

import pandas as pd
import pytest
from click.testing import CliRunner

from sim.cli import main
from sim.report.adoption import (BASE, CANDIDATE, ELSEWHERE, POOLED, AdoptionError, SuiteComparison, check_derived,
                                 compare_run, decide)

NO_MODEL = ("--param", "base.semantic=false", "--param", "candidate.semantic=false")


def adopt(tmp_path, *args, name="out"):
    out = tmp_path / name
    res = CliRunner().invoke(main, ["adopt", *args, "--out", str(out), "--rounds", "200", "--suites", "real-dev"],
                             catch_exceptions=False)
    return res, out


def test_a_rule_taken_out_is_worse_on_the_corpus_it_came_from_and_not_adopted(tmp_path) -> None:
    # short_answer was written from τ-bench: without it τ-bench loses, ReAct does not move
    res, out = adopt(tmp_path, "--candidate", "progress_guard", *NO_MODEL,
                     "--param", 'candidate.skip_rules=["short_answer"]', "--derived-from", "tau_bench_airline")
    assert res.exit_code == 1, res.output
    rows = pd.read_csv(out / "adoption.csv").set_index("group")
    assert rows.loc["tau_bench_airline", "derived"] == "derived" and rows.loc["tau_bench_airline", "diff"] < 0
    assert rows.loc["react_hotpotqa", "derived"] == "not derived" and rows.loc["react_hotpotqa", "diff"] == 0
    # one corpus left: the pooled row over it is that corpus's own figure
    assert rows.loc[ELSEWHERE, "diff"] == rows.loc["react_hotpotqa", "diff"]
    assert rows.loc[ELSEWHERE, "episodes"] == rows.loc["react_hotpotqa", "episodes"]
    # held out, τ-bench is scored without the rules written from it, short_answer among them:
    # taking the rule out changes nothing there
    assert rows.loc["tau_bench_airline", "loco_diff"] == 0
    assert rows.loc["tau_bench_airline", "loco_base"] < rows.loc["tau_bench_airline", "base"]
    assert rows.loc[POOLED, "loco_base"] == rows.loc[POOLED, "loco_candidate"]
    assert pd.isna(rows.loc[ELSEWHERE, "loco_diff"])
    verdict = json.loads((out / "adoption.json").read_text())
    assert verdict["verdict"] == "worse" and not verdict["adopted"]
    assert any(w.startswith("real-dev tau_bench_airline -") for w in verdict["worse"])
    assert "**Not adopted: worse on** real-dev tau_bench_airline" in res.output
    assert (out / "real-dev" / "episodes.csv").is_file()  # the run it came from stays


def test_the_same_detector_twice_is_no_gain(tmp_path) -> None:
    res, out = adopt(tmp_path, "--candidate", "progress_guard", *NO_MODEL, "--derived-from", "none")
    assert res.exit_code == 1
    rows = pd.read_csv(out / "adoption.csv")
    assert (rows["diff"] == 0).all() and (rows["lo"] == 0).all() and (rows["hi"] == 0).all()
    assert json.loads((out / "adoption.json").read_text())["verdict"] == "no gain"
    assert "no gain where it was not derived from" in res.output


def test_a_gain_elsewhere_with_nothing_worse_is_adopted(tmp_path) -> None:
    # not_found_items put back (the mechanics only: the rule came from ReAct, declared here as
    # from none): ReAct gains, τ-bench is level, held out nothing moves, no run stopped
    res, out = adopt(tmp_path, "--candidate", "progress_guard", *NO_MODEL, "--param", 'base.skip_rules=["not_found_items"]',
                     "--derived-from", "none", "--json")
    assert res.exit_code == 0, res.output
    verdict = json.loads(res.output)
    assert verdict["verdict"] == "adopt" and verdict["adopted"] and verdict["worse"] == []
    (gain,) = verdict["gains"]
    assert gain["suite"] == "real-dev" and gain["group"] == POOLED and gain["diff"] > 0
    deploy = pd.read_csv(out / "adoption_deploy.csv").set_index(["action", "metric"])
    assert deploy.loc[("configured", "successes_stopped"), "candidate_count"] == 0


def test_ahead_as_run_but_behind_held_out_is_worse(tmp_path) -> None:
    # the guard over the seed's hash: ahead on ReAct as run, but τ-bench without the rules written
    # from it scores below exact (the leave-one-corpus-out gap of docs/detectors.md)
    res, out = adopt(tmp_path, "--base", "exact", "--candidate", "progress_guard", "--param", "candidate.semantic=false",
                     "--derived-from", "none")
    assert res.exit_code == 1
    rows = pd.read_csv(out / "adoption.csv").set_index("group")
    assert rows.loc["react_hotpotqa", "diff"] > 0 and rows.loc["tau_bench_airline", "diff"] == 0
    assert rows.loc["tau_bench_airline", "loco_diff"] < 0
    verdict = json.loads((out / "adoption.json").read_text())
    assert verdict["verdict"] == "worse"
    assert verdict["worse"] == [f"real-dev tau_bench_airline held out (leave-one-corpus-out) "
                                f"{rows.loc['tau_bench_airline', 'loco_diff']:+.1f}"]


def test_a_gain_only_on_the_corpus_it_came_from_is_no_gain(tmp_path) -> None:
    # the same rule declared as written from ReAct, the one corpus it gains on
    res, out = adopt(tmp_path, "--candidate", "progress_guard", *NO_MODEL, "--param", 'base.skip_rules=["not_found_items"]',
                     "--derived-from", "react_hotpotqa")
    assert res.exit_code == 1
    rows = pd.read_csv(out / "adoption.csv").set_index("group")
    assert rows.loc["react_hotpotqa", "diff"] > 0 and rows.loc[ELSEWHERE, "diff"] == 0
    assert json.loads((out / "adoption.json").read_text())["verdict"] == "no gain"


def test_the_pooled_row_is_the_runs_own_score(tmp_path) -> None:
    """The comparison's pooled figure for each detector is the run's ``all`` row in metrics.csv
    (a synthetic suite: families, no derived marks)."""
    out = tmp_path / "quick"
    res = CliRunner().invoke(main, ["run", "--suite", "quick", "--families", "stale,polling,healthy", "--mode", "open",
                                    "--detectors", "base=exact,candidate=progress_guard", "--param",
                                    "candidate.semantic=false", "--out", str(out), "--no-report", "--no-progress"],
                             catch_exceptions=False)
    assert res.exit_code == 0, res.output
    comp = compare_run(out, ("tau_bench_airline",), rounds=50)
    assert not comp.real and {r["derived"] for r in comp.rows} == {""}
    assert all(r["loco_diff"] is None for r in comp.rows)  # families are no corpora
    metrics = pd.read_csv(out / "metrics.csv")
    pooled = next(r for r in comp.rows if r["group"] == POOLED)
    for det in (BASE, CANDIDATE):
        want = metrics[(metrics.detector == det) & (metrics.family == "all")]["score_standard"].item()
        assert pooled[det] == pytest.approx(want, abs=1e-9)
    assert [r["group"] for r in comp.rows] == ["healthy", "polling", "stale", POOLED]


def test_tolerance_and_stops_decide_worse() -> None:
    def suite(diff, stopped=(0, 0)):
        s = SuiteComparison("real-dev", real=True, held_out=False)
        s.rows = [{"suite": "real-dev", "group": POOLED, "derived": "", "diff": diff, "lo": diff, "hi": diff}]
        s.deploy = [{"suite": "real-dev", "action": "configured", "metric": "successes_stopped", BASE: stopped[0] / 50,
                     "base_count": stopped[0], "candidate_count": stopped[1], "candidate_of": 50,
                     CANDIDATE: stopped[1] / 50}]
        return s

    assert decide([suite(-0.5)]).verdict == "worse"
    assert decide([suite(-0.5)], tolerance=1.0).verdict == "no gain"
    assert decide([suite(2.0)]).verdict == "adopt"
    v = decide([suite(2.0, stopped=(0, 1))])
    assert v.verdict == "worse" and v.worse == ["real-dev: successful runs stopped as configured 0 -> 1 of 50"]


def test_derived_from_names_real_corpora() -> None:
    assert check_derived(["none"]) == ()
    assert check_derived(["magentic_one", "tau_bench_airline", "magentic_one"]) == ("magentic_one", "tau_bench_airline")
    with pytest.raises(AdoptionError, match="unknown corpus tau_bench"):
        check_derived(["tau_bench"])


@pytest.mark.parametrize("args, message", [
    (["--candidate", "progress_guard", "--derived-from", "webarena"], "--derived-from: unknown corpus webarena"),
    (["--candidate", "progress_guard", "--derived-from", "none", "--param", "guard.patience=2"],
     "--param guard.patience=2: name base or candidate"),
    (["--candidate", "no_such_detector", "--derived-from", "none"], "no_such_detector"),
    (["--candidate", "progress_guard", "--derived-from", "none", "--param", "candidate.patience=-1"], "patience"),
    (["--candidate", "progress_guard", "--derived-from", "none", "--suites", "nightly"], "nightly"),
])
def test_bad_input_is_one_line_and_exit_2(tmp_path, args, message) -> None:
    res = CliRunner().invoke(main, ["adopt", *args, "--out", str(tmp_path / "o")])
    assert res.exit_code == 2, res.output
    lines = [ln for ln in res.output.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("loopbench: error:") and message in lines[0], res.output
    assert "Traceback" not in res.output


def test_an_earlier_comparison_is_not_overwritten_without_force(tmp_path) -> None:
    res, out = adopt(tmp_path, "--candidate", "progress_guard", *NO_MODEL, "--derived-from", "none")
    assert res.exit_code == 1
    again = CliRunner().invoke(main, ["adopt", "--candidate", "progress_guard", *NO_MODEL, "--derived-from", "none",
                                      "--suites", "real-dev", "--out", str(out)])
    assert again.exit_code == 2 and "holds an earlier comparison" in again.output and "--force" in again.output
    assert (out / "real-dev" / "episodes.csv").is_file()


def test_a_suite_for_measuring_only_decides_nothing() -> None:
    dev = SuiteComparison("real-dev", real=True, held_out=False)
    dev.rows = [{"suite": "real-dev", "group": POOLED, "derived": "", "diff": 1.0, "lo": 0.2, "hi": 2.0}]
    held = SuiteComparison("real-heldout-self", real=True, held_out=True)
    held.rows = [{"suite": "real-heldout-self", "group": "tau_bench_airline", "derived": "held out", "diff": -9.0,
                  "lo": -20.0, "hi": -1.0},
                 {"suite": "real-heldout-self", "group": POOLED, "derived": "", "diff": -3.0, "lo": -8.0, "hi": -0.5}]
    v = decide([dev, held])
    assert v.verdict == "adopt" and v.worse == [] and [g["suite"] for g in v.gains] == ["real-dev"]
    assert [r["diff"] for r in v.held_out] == [-3.0]
    # and a gain there is no gain
    held.rows[1]["diff"] = 5.0
    dev.rows[0]["diff"] = 0.0
    assert decide([dev, held]).verdict == "no gain"


def test_resume_keeps_the_suites_already_run(tmp_path) -> None:
    out = tmp_path / "o"
    common = ["adopt", "--candidate", "progress_guard", *NO_MODEL, "--derived-from", "none", "--out", str(out),
              "--rounds", "50"]
    first = CliRunner().invoke(main, [*common, "--suites", "real-dev"], catch_exceptions=False)
    assert first.exit_code == 1
    kept = (out / "real-dev" / "manifest.json").read_bytes()
    both = CliRunner().invoke(main, [*common, "--suites", "real-dev,quick", "--resume"], catch_exceptions=False)
    assert both.exit_code == 1, both.output
    assert "finishing suite real-dev" in both.output and "running suite quick" in both.output
    assert (out / "quick" / "episodes.csv").is_file()
    run_id = json.loads(kept)["run_id"]
    assert json.loads((out / "real-dev" / "manifest.json").read_text())["run_id"] == run_id
    assert set(pd.read_csv(out / "adoption.csv")["suite"]) == {"real-dev", "quick"}
    # a different candidate in the same folder is refused, naming the suite
    other = CliRunner().invoke(main, [*common, "--suites", "real-dev", "--resume", "--param", "candidate.patience=4"])
    assert other.exit_code == 2 and "suite real-dev" in other.output and "another configuration" in other.output


def test_a_guard_of_your_own_from_the_working_folder(tmp_path, monkeypatch) -> None:
    # two versions of a guard's code: the base a module beside the candidate, both imported by the runs
    (tmp_path / "guard_main.py").write_text("from detectors.exact import ExactDetector\n\n\n"
                                            "class Guard(ExactDetector):\n    pass\n")
    monkeypatch.chdir(tmp_path)
    res = CliRunner().invoke(main, ["adopt", "--base", "guard_main:Guard", "--candidate", "exact", "--derived-from", "none",
                                    "--suites", "real-dev", "--out", "o", "--rounds", "50"], catch_exceptions=False)
    assert res.exit_code == 1, res.output
    rows = pd.read_csv(tmp_path / "o" / "adoption.csv")
    assert (rows["diff"] == 0).all() and rows["base"].notna().all()
    manifest = json.loads((tmp_path / "o" / "real-dev" / "manifest.json").read_text())
    assert "guard_main" in json.dumps(manifest)


def test_a_change_to_when_the_guard_stops_is_named_a_trade(tmp_path) -> None:
    # stop_after=2: the first alarm never moves (no score does), the stops after it do
    res, out = adopt(tmp_path, "--candidate", "progress_guard", *NO_MODEL, "--param", "candidate.stop_after=2",
                     "--derived-from", "none")
    assert res.exit_code == 1
    rows = pd.read_csv(out / "adoption.csv")
    assert (rows["diff"] == 0).all()
    verdict = json.loads((out / "adoption.json").read_text())
    assert verdict["verdict"] == "no gain"
    assert any("failed-run calls saved, as configured" in m for m in verdict["halting_moved"]), verdict
    assert "what moves is when the guard stops" in res.output and "tune --objective deploy" in res.output


def test_the_same_detector_twice_moves_nothing_when_it_stops(tmp_path) -> None:
    res, out = adopt(tmp_path, "--candidate", "progress_guard", *NO_MODEL, "--derived-from", "none")
    assert json.loads((out / "adoption.json").read_text())["halting_moved"] == []


def test_every_suite_is_checked_before_the_first_runs(tmp_path) -> None:
    out = tmp_path / "o"
    res = CliRunner().invoke(main, ["adopt", "--candidate", "progress_guard", "--derived-from", "none",
                                    "--suites", "real-dev,nightly", "--out", str(out)])
    assert res.exit_code == 2 and "--suites: unknown suite 'nightly'" in res.output
    assert not (out / "real-dev").exists()


def test_an_earlier_comparison_is_refused_even_for_other_suites(tmp_path) -> None:
    res, out = adopt(tmp_path, "--candidate", "progress_guard", *NO_MODEL, "--derived-from", "none")
    again = CliRunner().invoke(main, ["adopt", "--candidate", "progress_guard", *NO_MODEL, "--derived-from", "none",
                                      "--suites", "quick", "--out", str(out)])
    assert again.exit_code == 2 and "holds an earlier comparison" in again.output
    assert set(pd.read_csv(out / "adoption.csv")["suite"]) == {"real-dev"}


def test_what_was_compared_is_recorded(tmp_path) -> None:
    res, out = adopt(tmp_path, "--candidate", "progress_guard", *NO_MODEL, "--derived-from", "none",
                     "--tolerance", "0.5")
    compared = json.loads((out / "adoption.json").read_text())["compared"]
    assert compared["base"] == "progress_guard" and compared["suites"] == ["real-dev"]
    assert compared["parameters"] == list(NO_MODEL[1::2]) and compared["tolerance"] == 0.5
    assert "- candidate: `progress_guard`" in (out / "adoption.md").read_text()


def test_held_out_alone_decides_nothing(tmp_path) -> None:
    out = tmp_path / "o"
    res = CliRunner().invoke(main, ["adopt", "--candidate", "progress_guard", *NO_MODEL,
                                    "--param", 'candidate.skip_rules=["short_answer"]', "--derived-from", "none",
                                    "--suites", "real-heldout-self", "--out", str(out), "--rounds", "50"],
                             catch_exceptions=False)
    assert res.exit_code == 1
    assert json.loads((out / "adoption.json").read_text())["verdict"] == "undecided"
    assert "nothing decides" in res.output


def test_a_candidate_that_raises_is_worse_and_says_so(tmp_path, monkeypatch) -> None:
    (tmp_path / "broken_guard.py").write_text(
        "from detectors.exact import ExactDetector\n\n\n"
        "class Broken(ExactDetector):\n"
        "    def check(self, state, call):\n"
        "        raise RuntimeError('boom')\n")
    monkeypatch.chdir(tmp_path)
    res = CliRunner().invoke(main, ["adopt", "--base", "exact", "--candidate", "broken_guard:Broken", "--derived-from",
                                    "none", "--suites", "real-dev", "--out", "o", "--rounds", "50"], catch_exceptions=False)
    assert res.exit_code == 1
    worse = json.loads((tmp_path / "o" / "adoption.json").read_text())["worse"]
    assert any(w.startswith("real-dev: the candidate raised in ") for w in worse), worse
    assert "Raised in episodes" in res.output


def test_the_runs_warnings_are_passed_on(tmp_path) -> None:
    empty = tmp_path / "corpus"
    empty.mkdir()
    res = CliRunner().invoke(main, ["adopt", "--candidate", "progress_guard", *NO_MODEL, "--derived-from", "none",
                                    "--suites", "real-dev", "--corpus", str(empty), "--out", str(tmp_path / "o"),
                                    "--rounds", "50"], catch_exceptions=False)
    assert res.exit_code == 1
    assert "suite real-dev: loopbench run said:" in res.output and "label not used" in res.output


def test_the_deployers_figures_held_out_are_the_reports(tmp_path) -> None:
    """The held-out deployment cells equal ``loopbench report --cv corpus``'s cv_deploy.csv."""
    res, out = adopt(tmp_path, "--base", "exact", "--candidate", "progress_guard", "--param", "candidate.semantic=false",
                     "--derived-from", "none")
    assert res.exit_code == 1
    mine = pd.read_csv(out / "adoption_deploy.csv").set_index(["action", "metric"])
    rep = CliRunner().invoke(main, ["report", str(out / "real-dev"), "--cv", "corpus", "--rounds", "50",
                                    "--out", str(tmp_path / "rep")], catch_exceptions=False)
    assert rep.exit_code == 0, rep.output
    cv = pd.read_csv(tmp_path / "rep" / "cv_deploy.csv")
    cv = cv[cv.corpus == "pooled"].set_index(["detector", "action", "metric"])
    for action, metric in [("halt", "successes_stopped"), ("configured", "successes_stopped"),
                           ("halt", "failed_calls_saved"), ("configured", "failed_calls_saved")]:
        for det in ("base", "candidate"):
            want = cv.loc[(det, action, metric), "heldout"]
            assert mine.loc[(action, metric), f"loco_{det}"] == pytest.approx(want, abs=1e-6), (det, action, metric)
    assert "| in a deployer's terms | base | candidate | base, leave-one-corpus-out | candidate, leave-one-corpus-out |" \
        in res.output
