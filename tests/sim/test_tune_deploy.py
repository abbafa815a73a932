"""``loopbench tune --objective deploy``: the halt setting under a cap on successful runs stopped."""
from __future__ import annotations

import json
import tomllib

import numpy as np
import pytest
from click.testing import CliRunner

from detectors.progress_guard import ProgressGuard
from detectors.registry import make_detector
from scenarios.injected_suite import load_real_episodes
from sim.cli import main
from sim.config.spec import DetectorSpec
from sim.execute.rows import CALL_COLUMNS, open_rows
from sim.scoring.deploy import episode_totals, metrics_from_totals, run_outcomes
from sim.scoring.outcomes import load_profiles
from sim.tuning.deploy_tune import CONFIGURED_POOLED, HaltEvaluator, frames, held_out_verdict, loco, pick
from sim.tuning.evaluate import run_specs
from sim.tuning.params import TuningError

# No embedding model: the semantic layer only adds alarms, and these tests are about the halt.
PARAMS = {"semantic": False}


@pytest.fixture(scope="module")
def real_rows():
    """progress_guard's episodes.csv / calls.csv rows on real-dev, and the run outcomes."""
    eps = load_real_episodes("real-dev")
    return _rows(eps, PARAMS)


def _rows(eps, params):
    spec = DetectorSpec("progress_guard", "progress_guard", params)
    res = run_specs([spec], eps)["progress_guard"]
    _, outcome_rows, lines = open_rows("progress_guard", res, eps, 5, load_profiles()[1])
    units, calls = frames(lines, outcome_rows, CALL_COLUMNS)
    return units, calls, run_outcomes(units).by_episode


def invoke(*args):
    return CliRunner().invoke(main, list(args), catch_exceptions=False)


@pytest.mark.parametrize("cap", [0.0, 0.02, 0.05, 0.5])
def test_the_pick_respects_the_cap(real_rows, cap) -> None:
    units, calls, outcomes = real_rows
    p = pick(ProgressGuard(**PARAMS), units, calls, outcomes, cap, delta=5)
    stopped, succ = p.picked.counts("succ_stopped", "succ")
    assert succ > 0 and p.met and stopped <= cap * succ
    # no setting within the cap saves more failed-run calls (the global values, every one tried)
    ev = HaltEvaluator(ProgressGuard(**PARAMS), units, calls, outcomes, 5)
    best = max((s.figures["failed_calls_saved"] for s in (ev.evaluate(v, {}) for v in ev.candidates) if s.met(cap)))
    assert p.picked.figures["failed_calls_saved"] >= best


def test_the_pick_changes_with_the_cap(real_rows) -> None:
    units, calls, outcomes = real_rows
    tight = pick(ProgressGuard(**PARAMS), units, calls, outcomes, 0.0, delta=5)
    loose = pick(ProgressGuard(**PARAMS), units, calls, outcomes, 1.0, delta=5)
    assert (tight.picked.value, tight.picked.tools) != (loose.picked.value, loose.picked.tools)
    assert loose.picked.figures["failed_calls_saved"] > tight.picked.figures["failed_calls_saved"]
    assert loose.picked.value == 0  # no cap: halt at the first alarm saves the most


def test_the_latest_halt_tried_halts_nothing_so_a_cap_of_zero_is_reachable(real_rows) -> None:
    units, calls, outcomes = real_rows
    ev = HaltEvaluator(ProgressGuard(**PARAMS), units, calls, outcomes, 5)
    last = ev.evaluate(ev.candidates[-1], {})
    assert last.counts("succ_stopped", "succ")[0] == 0 and last.counts("fail_stopped", "fail")[0] == 0
    assert ev.evaluate(0, {}).counts("fail_stopped", "fail")[0] > 0


def test_the_evaluation_is_the_guard_it_writes(real_rows) -> None:
    """The figures of a picked setting are what the guard built from it does: its own STOP verdicts,
    replayed, halt the same runs at the same calls."""
    units, calls, outcomes = real_rows
    p = pick(ProgressGuard(**PARAMS), units, calls, outcomes, 0.02, delta=5)
    params = {**PARAMS, "stop_after": p.picked.value, "tool_overrides": p.overrides(None) or None}
    u2, c2, _ = _rows(load_real_episodes("real-dev"), params)
    halts = c2["verdict"].isin(["stop", "escalate"]).to_numpy()
    keys = {e: i for i, e in enumerate(dict.fromkeys(u2["episode"].astype(str)))}
    t = episode_totals(u2, c2, outcomes, keys, alarm=halts).sum(axis=0)
    m = metrics_from_totals(t)
    for k in ("successes_stopped", "failures_stopped", "failed_calls_saved"):
        assert np.isclose(m[k], p.picked.figures[k]), k


def test_leave_one_corpus_out_scores_each_corpus_on_a_pick_it_never_saw(real_rows) -> None:
    units, calls, outcomes = real_rows
    rows = loco(ProgressGuard(**PARAMS), units, calls, outcomes, 0.01, delta=5)
    corpora = sorted(set(units["family"]))
    assert [r["corpus"] for r in rows] == corpora + ["pooled", CONFIGURED_POOLED]
    held = [r for r in rows if r["corpus"] in corpora]
    # the pooled row adds up the held-out folds
    total = sum(int(r["successes"].split("/")[1]) for r in held)
    assert rows[-2]["successes"].endswith(f"/{total}")
    # and the last one the setting as configured, scored on the same held-out rows
    guard = ProgressGuard(**PARAMS)
    ev = [HaltEvaluator(guard, units[units.family == c], calls[calls.family == c], outcomes, 5) for c in corpora]
    conf = pick(guard, units, calls, outcomes, 0.01, delta=5).configured
    stopped = sum(e.evaluate(conf.value, conf.tools, conf.nudge_value, conf.nudge_tools).counts("succ_stopped", "succ")[0]
                  for e in ev)
    assert rows[-1]["successes"] == f"{stopped}/{total}"


def test_the_held_out_verdict_says_adopt_only_what_holds_on_corpora_it_was_not_picked_on() -> None:
    row = lambda corpus, stopped, saved, caught: {  # noqa: E731
        "corpus": corpus, "successes_stopped": stopped, "successes": "x/53", "failed_calls_saved": saved,
        "failed_calls": "y", "runaway_caught": caught, "runaway": "z", "note": ""}
    conf = row(CONFIGURED_POOLED, 0.0, 0.137, 0.581)
    assert held_out_verdict([row("pooled", 0.0, 0.137, 0.581), conf], 0.01).endswith("keep the configured setting.")
    assert held_out_verdict([row("pooled", 0.0, 0.20, 0.60), conf], 0.01).endswith("adopt it.")
    said = held_out_verdict([row("pooled", 0.03, 0.30, 0.70), conf], 0.01)
    assert "the cap is not met held out" in said and "13.7%" in said and "30.0%" in said
    assert held_out_verdict([conf], 0.01) == ""


def test_cli_writes_a_toml_the_run_and_the_adapters_read(tmp_path) -> None:
    out = tmp_path / "deploy.toml"
    r = invoke("tune", "--objective", "deploy", "--detector", "progress_guard", "--max-stopped", "0.01",
               "--suite", "real-dev", "--out", str(out), "--no-progress", "--json", "--delta", "5")
    assert r.exit_code == 0, r.output
    summary = json.loads(r.stdout[r.stdout.index("{"):])
    assert summary["met"] and summary["recommended"]["successes_stopped"] <= 0.01
    table = tomllib.loads(out.read_text())["detectors"]["progress_guard"]
    assert table["stop_after"] == summary["value"]
    for tool, v in summary["tools"].items():
        assert table["tool_overrides"][tool]["stop_after"] == v
    from adapters.core import guard_factory

    guard = guard_factory("progress_guard", config=out)()
    assert guard.detector.stop_after == summary["value"]
    loose = invoke("tune", "--objective", "deploy", "--detector", "progress_guard", "--max-stopped", "0.5",
                   "--suite", "real-dev", "--out", str(tmp_path / "loose.toml"), "--no-progress", "--json")
    assert json.loads(loose.stdout[loose.stdout.index("{"):])["value"] != summary["value"]


def test_global_only_writes_no_per_tool_halt_and_the_oracle_bounds_the_cap(real_rows, tmp_path) -> None:
    out = tmp_path / "global.toml"
    r = invoke("tune", "--objective", "deploy", "--detector", "progress_guard", "--max-stopped", "0.01",
               "--suite", "real-dev", "--out", str(out), "--no-progress", "--json", "--global-only",
               "--max-nudges", "0.05")  # every finding voiced is 0.12 per 100 clean calls here: the budget binds
    assert r.exit_code == 0, r.output
    summary = json.loads(r.stdout[r.stdout.index("{"):])
    table = tomllib.loads(out.read_text())["detectors"]["progress_guard"]
    assert summary["tools"] == {} and summary["nudge_tools"] == {} and "tool_overrides" not in table
    assert table["nudge_after"] == summary["nudge_value"] >= 1 and summary["nudges_met"]
    assert summary["recommended"]["nudges_per_100_clean"] <= 0.05
    from adapters.core import guard_factory

    assert guard_factory("progress_guard", config=out)().detector.nudge_after == summary["nudge_value"]
    assert all(row["overrides_applied"] in ("0/0", "") for row in summary["loco"])
    # the oracle's point within the cap stops no more than the cap allows; at the onset it
    # catches every loop, and halting later never saves more
    oracle = summary["label_oracle"]
    assert oracle["within_cap"]["successes_stopped"] <= 0.01 and oracle["at_onset"]["loops_caught"] == 1.0
    assert oracle["within_cap"]["failed_calls_saved"] <= oracle["at_onset"]["failed_calls_saved"]
    # and it is the labels' own figure: the successful runs with a labelled loop are what it stops
    units, calls, outcomes = real_rows
    looping_successes = {e for e, o in zip(units["episode"], units["outcome"])
                         if outcomes.get(e) == "success" and o in ("tp", "miss", "early")}
    succ = sum(1 for o in outcomes.values() if o == "success")
    assert oracle["at_onset"]["successes_stopped"] == pytest.approx(len(looping_successes) / succ)


def test_a_fold_says_which_per_tool_halts_reach_the_held_out_corpus(real_rows) -> None:
    units, calls, outcomes = real_rows
    rows = loco(ProgressGuard(**PARAMS), units, calls, outcomes, 0.01, delta=5)
    for r in rows[:-2]:  # the folds, not the two pooled rows
        applied, picked = (int(x) for x in r["overrides_applied"].split("/"))
        held_tools = set(calls.loc[calls["family"] == r["corpus"], "tool"].astype(str))
        assert picked == r["setting"].count(";") and applied <= picked
        assert applied == sum(f"; {t}:" in r["setting"] for t in held_tools)


@pytest.mark.parametrize("args, says", [
    (["--max-stopped", "0.01", "--suite", "quick", "--corpus", "."], "--corpus is for real suites"),
    (["--max-stopped", "0.01", "--corpus", "/no/such/dir"], "/no/such/dir: no such corpus directory"),
    (["--max-stopped", "1.5"], "'--max-stopped': 1.5 is not in the range"),
    (["--max-stopped", "x"], "'--max-stopped': 'x' is not a valid float"),
    ([], "--objective deploy needs --max-stopped"),
    (["--max-stopped", "0.01", "--max-false-alarm-rate", "0.05"], "--objective deploy takes --max-stopped"),
    (["--max-stopped", "0.01", "--detector", "exact"], "ExactDetector has no graduated response"),
    (["--max-stopped", "0.01", "--suite", "quick", "--families", "parallel_burst", "--episodes", "2"],
     "no episode with a successful run outcome"),
])
def test_bad_values_are_one_line(args, says, tmp_path) -> None:
    base = ["tune", "--objective", "deploy", "--suite", "real-dev", "--out", str(tmp_path / "t.toml"), "--no-progress"]
    if "--detector" not in args:
        base += ["--detector", "progress_guard"]
    r = CliRunner().invoke(main, base + args)
    assert r.exit_code == 2
    err = r.stderr.strip().splitlines()
    assert err[-1].startswith("loopbench: error:") and says in err[-1], r.stderr
    assert "Traceback" not in r.output
    assert not (tmp_path / "t.toml").exists()


def test_max_stopped_needs_the_deploy_objective(tmp_path) -> None:
    r = CliRunner().invoke(main, ["tune", "--detector", "exact", "--max-false-alarm-rate", "0.05", "--max-stopped", "0.01",
                                  "--suite", "quick", "--out", str(tmp_path / "t.toml")])
    assert r.exit_code == 2 and "--max-stopped is for --objective deploy" in r.stderr
    r = CliRunner().invoke(main, ["tune", "--detector", "exact", "--max-false-alarm-rate", "0.05", "--global-only",
                                  "--suite", "quick", "--out", str(tmp_path / "t.toml")])
    assert r.exit_code == 2 and "--corpus, --global-only and --max-nudges are for --objective deploy" in r.stderr


def test_a_detector_without_a_graduated_response_cannot_be_picked(real_rows) -> None:
    units, calls, outcomes = real_rows
    with pytest.raises(TuningError, match="no graduated response"):
        pick(make_detector("exact"), units, calls, outcomes, 0.01, delta=5)


def test_progress_guard_takes_stop_after_per_tool() -> None:
    """The per-tool halt the deploy objective writes is one the guard honours: an alarm on a tool
    with ``stop_after = 0`` stops at once; on another tool the first alarm still nudges."""
    from detectors.protocol import Observation, ToolCall, Verdict

    g = ProgressGuard(semantic=False, tool_overrides={"search": {"stop_after": 0}})
    assert g.halt_threshold("search", 1) == 1.0 and g.halt_threshold("fetch_page", 1) == 2.0

    def second(tool: str) -> Verdict:
        s = g.start()
        c = ToolCall(tool, {"q": "same"})
        s = g.record(s, c, g.check(s, c), Observation("a result"))
        return g.check(s, ToolCall(tool, {"q": "same"})).verdict

    assert second("search") is Verdict.STOP
    assert second("find_flights") is Verdict.NUDGE


#: The semantic layer on static vectors (no model, no torch): without it no finding on the shipped
#: traces' clean runs is left for a nudge budget to silence.
STATIC = {"semantic_vectors": "static"}


@pytest.fixture(scope="module")
def real_rows_static():
    return _rows(load_real_episodes("real-dev"), STATIC)


def test_the_nudge_pick_is_what_the_guard_it_writes_voices(real_rows_static) -> None:
    """Under a nudge budget the pick keeps the first findings silent; the guard built from the
    pick, replayed, voices exactly the nudges and halts the evaluation counted — and stays
    within the budget."""
    units, calls, outcomes = real_rows_static
    loose = pick(ProgressGuard(**STATIC), units, calls, outcomes, 0.0, delta=5)
    p = pick(ProgressGuard(**STATIC), units, calls, outcomes, 0.0, delta=5, max_nudges=0.05)
    assert p.nudges_met and p.picked.figures["nudges_per_100_clean"] <= 0.05
    assert loose.picked.figures["nudges_per_100_clean"] > 0.05  # the budget binds: it is a real choice
    assert p.picked.nudge_value > 0 or p.picked.nudge_tools
    params = {**STATIC, "stop_after": p.picked.value, "nudge_after": p.picked.nudge_value,
              "tool_overrides": p.overrides(None) or None}
    u2, c2, _ = _rows(load_real_episodes("real-dev"), params)
    keys = {e: i for i, e in enumerate(dict.fromkeys(u2["episode"].astype(str)))}
    voiced = (c2["verdict"] != "allow").to_numpy()
    from sim.scoring.deploy import caught_from_calls

    t = episode_totals(u2, c2, outcomes, keys, alarm=voiced, caught=caught_from_calls(u2, c2, voiced, 5)).sum(axis=0)
    m = metrics_from_totals(t)
    for k in ("nudges_per_100_clean", "blips_nudged", "runaway_nudged"):
        assert np.isclose(m[k], p.picked.figures[k]), k
    # silent findings are stored with their score: re-evaluating the replayed rows finds the same setting's figures
    again = HaltEvaluator(ProgressGuard(**STATIC), u2, c2, outcomes, 5).evaluate(
        p.picked.value, p.picked.tools, p.picked.nudge_value, p.picked.nudge_tools)
    assert again.figures == p.picked.figures


def test_a_nudge_budget_needs_a_guard_that_can_stay_silent(real_rows) -> None:
    units, calls, outcomes = real_rows

    class Loud(ProgressGuard):
        nudge_param = None

    with pytest.raises(TuningError, match="voices every finding"):
        pick(Loud(**PARAMS), units, calls, outcomes, 0.01, delta=5, max_nudges=1.0)
    with pytest.raises(TuningError, match="--max-nudges -1"):
        pick(ProgressGuard(**PARAMS), units, calls, outcomes, 0.01, delta=5, max_nudges=-1)


def test_real_injected_is_left_out_by_corpus_not_by_injection_kind(tmp_path) -> None:
    """Its families are injection kinds; each fold leaves out the episodes built from one corpus."""
    r = invoke("tune", "--objective", "deploy", "--detector", "progress_guard", "--max-stopped", "0.05",
               "--suite", "real-injected", "--out", str(tmp_path / "inj.toml"), "--no-progress", "--json")
    assert r.exit_code == 0, r.output
    rows = json.loads(r.stdout[r.stdout.index("{"):])["loco"]
    assert [row["corpus"] for row in rows] == ["react_hotpotqa", "tau_bench_airline", "pooled", CONFIGURED_POOLED]


def test_a_held_out_corpus_is_scored_on_the_rows_of_the_guard_without_its_rules(real_rows) -> None:
    """loco's ``unseen``: a fold is picked on the other corpora's shipped rows and scored on the
    held-out corpus's rows from the guard without the rules written from it."""
    from detectors.progress_guard import RULES_FROM

    units, calls, outcomes = real_rows
    tau = "tau_bench_airline"
    without = {**PARAMS, "skip_rules": [n for n, c in RULES_FROM.items() if tau in c]}
    eps = [ep for ep in load_real_episodes("real-dev") if ep.family == tau]
    vu, vc, _ = _rows(eps, without)
    guard = ProgressGuard(**PARAMS)
    shipped = loco(guard, units, calls, outcomes, 0.05, delta=5)
    held = loco(guard, units, calls, outcomes, 0.05, delta=5, unseen={tau: (vu, vc)})
    row = {r["corpus"]: r for r in held}
    assert row[tau]["held_out_as"] == f"without {tau}'s rules" and row["react_hotpotqa"]["held_out_as"] == "as shipped"
    assert row["react_hotpotqa"] == {r["corpus"]: r for r in shipped}["react_hotpotqa"]  # its fold: unchanged
    # τ's fold: the same pick (made on ReAct), scored on the variant's τ-bench rows
    picked = pick(guard, units[units.family != tau], calls[calls.family != tau], outcomes, 0.05, delta=5).picked
    expect = HaltEvaluator(guard, vu, vc, outcomes, 5).evaluate(picked.value, picked.tools, picked.nudge_value,
                                                                picked.nudge_tools)
    assert row[tau]["nudges_per_100_clean"] == pytest.approx(expect.figures["nudges_per_100_clean"])
    assert row[tau]["failed_calls_saved"] == pytest.approx(expect.figures["failed_calls_saved"])
    assert row[tau]["nudges_per_100_clean"] > {r["corpus"]: r for r in shipped}[tau]["nudges_per_100_clean"]


def test_cli_holds_the_rules_out_unless_told_not_to(tmp_path) -> None:
    args = ["tune", "--objective", "deploy", "--detector", "progress_guard", "--max-stopped", "0.05", "--suite", "real-dev",
            "--no-progress", "--json"]
    r = invoke(*args, "--out", str(tmp_path / "a.toml"))
    assert r.exit_code == 0, r.output
    got = json.loads(r.stdout[r.stdout.index("{"):])
    rows = got["loco"]
    assert [x["held_out_as"] for x in rows] == ["without react_hotpotqa's rules", "without tau_bench_airline's rules", "", ""]
    assert got["held_out_verdict"] == held_out_verdict(rows, 0.05) and got["held_out_verdict"].startswith("Held out, pooled")
    r = invoke(*args, "--out", str(tmp_path / "b.toml"), "--no-cv-rules")
    assert r.exit_code == 0, r.output
    assert {x["held_out_as"] for x in json.loads(r.stdout[r.stdout.index("{"):])["loco"]} == {"as shipped", ""}


def test_tuning_on_the_held_out_half_says_it_is_for_measuring(tmp_path):
    r = CliRunner().invoke(main, ["tune", "--detector", "progress_guard", "--objective", "deploy", "--max-stopped",
                                  "0.02", "--suite", "real-heldout-self", "--global-only", "--out",
                                  str(tmp_path / "t.toml"), "--no-progress"])
    assert r.exit_code == 0, r.output
    assert "note: suite real-heldout-self is for measuring" in r.stderr
    quiet = CliRunner().invoke(main, ["tune", "--detector", "progress_guard", "--objective", "deploy", "--max-stopped",
                                      "0.02", "--suite", "real-dev", "--global-only", "--out", str(tmp_path / "d.toml"),
                                      "--no-progress"])
    assert quiet.exit_code == 0 and "is for measuring" not in quiet.stderr
