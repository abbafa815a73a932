"""The deployment view from hand-made episodes.csv / calls.csv with known answers."""
from __future__ import annotations

import csv
from pathlib import Path

import pytest

from sim.scoring.deploy import DEPLOY_COLUMNS, read_table, write_deploy

CALLS = ["detector", "episode", "family", "call_id", "node", "call_index", "depth", "tool", "score", "verdict",
         "label_loop", "label_kind"]
EPISODES = ["detector", "episode", "family", "unit", "outcome", "onset", "first_alarm", "delay", "late", "error",
            "run_outcome"]


def _write(path: Path, columns, rows) -> None:
    with path.open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow(columns)
        w.writerows(rows)


def _calls(ep: str, labels: list[bool], alarm_at: int | None, det: str = "g") -> list[list]:
    return [[det, ep, "fam", f"c{i}", f"n{i}", i, i, "search", 1.0 if i == alarm_at else 0.0,
             "stop" if i == alarm_at else "allow", str(lab).lower(), "repeat" if lab else ""]
            for i, lab in enumerate(labels)]


@pytest.fixture
def run(tmp_path: Path) -> Path:
    # s1: success, clean, alarm at call 2 (stopped);  s2: success, clean, no alarm.
    # f1: failure, loop from call 1 to the end (runaway), alarm at 1 -> 3 of 4 calls saved.
    # f2: failure, one redundant call at 2 (blip), no alarm -> 0 of 6 saved.
    calls = (_calls("s1", [False] * 4, 2) + _calls("s2", [False] * 4, None)
             + _calls("f1", [False, True, True, True], 1) + _calls("f2", [False, False, True, False, False, False], None))
    _write(tmp_path / "calls.csv", CALLS, calls)
    eps = [["g", "s1", "fam", "episode", "fp", "", 2, "", "false", "", "success"],
           ["g", "s2", "fam", "episode", "tn", "", "", "", "false", "", "success"],
           ["g", "f1", "fam", "n3", "tp", 1, 1, 0, "false", "", "failure"],
           ["g", "f2", "fam", "n5", "miss", 2, "", "", "false", "", "failure"]]
    _write(tmp_path / "episodes.csv", EPISODES, eps)
    return tmp_path


def _metrics(rows, action: str = "halt", detector: str = "g") -> dict[str, dict]:
    """One detector's rows of one action (halt rows also carry the nudge metrics' action rows)."""
    return {r["metric"]: r for r in rows if r["detector"] == detector and r["action"] in (action, "nudge")}


def test_deploy_figures_from_the_files_alone(run: Path) -> None:
    m = _metrics(write_deploy(run, rounds=200))
    assert m["successes_stopped"]["value"] == 0.5 and (m["successes_stopped"]["count"], m["successes_stopped"]["of"]) == (1, 2)
    assert m["failures_stopped"]["value"] == 0.5
    assert (m["failed_calls_saved"]["count"], m["failed_calls_saved"]["of"]) == (3, 10)
    assert m["runaway_caught"]["value"] == 1.0 and m["runaway_caught"]["of"] == 1
    assert m["blips_nudged"]["value"] == 0.0 and m["blips_nudged"]["of"] == 1
    # clean calls: 8 on s1/s2, 1 on f1, 5 on f2; one alarm among them (s1's call 2)
    assert m["nudges_per_100_clean"]["value"] == pytest.approx(100 / 14)
    assert m["failed_tokens_saved"]["value"] is None and "tokens" in m["failed_tokens_saved"]["note"]
    lo, hi = m["successes_stopped"]["lo"], m["successes_stopped"]["hi"]
    assert 0.0 <= lo <= 0.5 <= hi <= 1.0 and lo < hi
    written = read_table(run / "deploy.csv")
    assert list(written.columns) == DEPLOY_COLUMNS
    assert len(written[(written.detector == "g") & (written.action != "configured")]) == len(m)


def test_as_configured_only_the_guards_own_stops_halt(run: Path) -> None:
    """A guard that nudges on s1 and stops on f1: halting at its first alarm stops s1, run as
    configured it does not; f1's stop still saves its calls and catches its runaway loop."""
    calls = read_table(run / "calls.csv")
    calls.loc[(calls.episode == "s1") & (calls.call_index == 2), "verdict"] = "nudge"
    calls.to_csv(run / "calls.csv", index=False)
    rows = write_deploy(run, rounds=50)
    first, conf = _metrics(rows, "halt"), _metrics(rows, "configured")
    assert first["successes_stopped"]["count"] == 1 and conf["successes_stopped"]["count"] == 0
    assert (conf["failed_calls_saved"]["count"], conf["failed_calls_saved"]["of"]) == (3, 10)
    assert conf["runaway_caught"]["value"] == 1.0 and conf["loops_caught"]["count"] == 1


def test_the_label_oracle_halts_at_each_labelled_onset(run: Path) -> None:
    """Halting at the onset: no clean run stopped, f1 from call 1 (3 of 4) and f2 from call 2
    (4 of 6) saved, both loops caught; at the k-th labelled call only f1 has
    one for k > 1 (its calls from k on saved)."""
    from sim.scoring.deploy import LABEL_ORACLE, oracle_curve, run_outcomes

    o = _metrics(write_deploy(run, rounds=50), "halt", LABEL_ORACLE)
    assert o["successes_stopped"]["count"] == 0 and o["failures_stopped"]["count"] == 2
    assert (o["failed_calls_saved"]["count"], o["failed_calls_saved"]["of"]) == (7, 10)
    assert o["loops_caught"]["value"] == 1.0 and o["runaway_caught"]["value"] == 1.0
    eps, calls = read_table(run / "episodes.csv"), read_table(run / "calls.csv")
    curve = {p["value"]: p for p in oracle_curve(eps, calls, run_outcomes(eps).by_episode, 5, ks=(1, 2, 3, 4))}
    assert curve[1]["failed_calls_saved"] == 0.7 and curve[2]["failed_calls_saved"] == 0.2
    assert curve[3]["failed_calls_saved"] == 0.1 and curve[4]["failed_calls_saved"] == 0.0
    assert curve[2]["loops_caught"] == 0.5  # f1's second labelled call is within Δ of its onset


def test_unknown_outcomes_are_said_not_zeroed(run: Path) -> None:
    eps = read_table(run / "episodes.csv").drop(columns=["run_outcome"])
    eps.to_csv(run / "episodes.csv", index=False)
    m = _metrics(write_deploy(run, rounds=50))
    for name in ("successes_stopped", "failures_stopped", "failed_calls_saved"):
        assert m[name]["value"] is None and m[name]["note"] == "run outcome unknown for every episode"
    assert m["loops_caught"]["value"] == 0.5  # needs no outcome


def test_outcome_from_an_uninterrupted_closed_loop_play(run: Path) -> None:
    eps = read_table(run / "episodes.csv").drop(columns=["run_outcome"])
    eps.to_csv(run / "episodes.csv", index=False)
    closed = ["detector", "episode", "family", "ended", "success", "executed", "wasted_calls", "wasted_spend", "spend",
              "nudge", "prune", "escalate", "stop", "false_interventions", "error"]
    _write(run / "closed.csv", closed, [
        ["g", "s1", "fam", "completed", "True", 4, 0, 0, 1, 0, 0, 0, 0, 0, ""],
        ["g", "s2", "fam", "completed", "True", 4, 0, 0, 1, 0, 0, 0, 0, 0, ""],
        ["g", "f1", "fam", "stopped", "False", 1, 0, 0, 1, 0, 0, 0, 1, 0, ""],  # interrupted: says nothing
        ["h", "f1", "fam", "budget", "False", 4, 3, 0, 1, 0, 0, 0, 0, 0, ""],
        ["g", "f2", "fam", "gave_up", "False", 6, 1, 0, 1, 0, 0, 0, 0, 0, ""]])
    m = _metrics(write_deploy(run, rounds=50))
    assert m["successes_stopped"]["value"] == 0.5 and m["failures_stopped"]["of"] == 2


def test_a_closed_loop_run_has_the_no_guard_row_and_a_deploy_csv(tmp_path: Path) -> None:
    from scenarios.suites import load_suite
    from sim.config.spec import DetectorSpec, RunConfig
    from sim.execute.runner import run as run_suite
    from sim.report.deploy_view import closed_view

    out = tmp_path / "run"
    cfg = RunConfig(suite=load_suite("quick"), detectors=[DetectorSpec("exact", "exact")], families=["stale", "cycle"],
                    episodes=2, seed=0, mode="both", out=str(out), progress=False)
    run_suite(cfg)
    closed = read_table(out / "closed.csv")
    assert sorted(set(closed["detector"])) == ["exact", "no_guard"]
    assert (closed[closed.detector == "no_guard"][["nudge", "prune", "escalate", "stop"]].to_numpy() == 0).all()
    view = {r["detector"]: r for r in closed_view(closed)}
    assert view["no_guard"]["success_change"] == 0.0 and view["no_guard"]["spend_saved"] == 0.0
    deploy = read_table(out / "deploy.csv")
    assert set(deploy["detector"]) == {"exact", "label_oracle"}
    # synthetic episodes: the outcome comes from the unguarded closed-loop play, so halts are measured
    runs = deploy[deploy.metric.isin(["successes_stopped", "failures_stopped"]) & (deploy.detector == "exact")
                  & (deploy.action == "halt")]
    assert "run outcome unknown for every episode" not in set(runs["note"])
    assert runs["of"].fillna(0).sum() == 4  # every episode's outcome is known (success or failure)


def test_the_deploy_section_escapes_what_a_run_folder_names() -> None:
    from sim.report.deploy_view import DeployView, deploy_section
    from sim.report.full import Doc

    evil = "<img src=x onerror=alert(1)>"
    rows = [{"detector": evil, "action": "halt", "metric": m, "value": 0.5, "lo": 0.25, "hi": 0.75, "count": 1, "of": 2,
             "note": ""} for m in ("successes_stopped", "failed_calls_saved")]
    closed = [{"detector": evil, "episodes": 2, "success_rate": 0.5, "success_change": -0.5, "spend": 1.0,
               "spend_saved": 0.5, "stops": 1}]
    doc = Doc()
    deploy_section(doc, DeployView(rows=rows, closed=closed, outcome_source="episodes.csv"), [evil], lambda name: None)
    page = doc.html("t")
    assert evil not in page and "&lt;img src=x onerror=alert(1)&gt;" in page
    assert "successes stopped" in page and "50.0% [25.0%, 75.0%] (1/2)" in page


def test_a_report_of_a_real_and_a_synthetic_run_keeps_them_apart(tmp_path: Path) -> None:
    """Item 5 of SPEC §11: the open-loop view on real traces beside the closed loop on synthetic
    episodes, each run's open-loop rows on their own; a guard that nudges first gets its halt levels
    as an operating curve."""
    from scenarios.suites import load_suite
    from sim.config.spec import DetectorSpec, RunConfig
    from sim.execute.runner import run as run_suite
    from sim.report.full import write_report

    dets = [DetectorSpec("progress_guard", "progress_guard", {"semantic": False}), DetectorSpec("exact", "exact")]
    real, synth = tmp_path / "real", tmp_path / "synth"
    s = load_suite("real-dev")
    run_suite(RunConfig(suite=s, detectors=dets, families=list(s.families), episodes=1, seed=0, mode="open",
                        out=str(real), progress=False))
    run_suite(RunConfig(suite=load_suite("quick"), detectors=dets, families=["stale", "cycle", "paraphrased"],
                        episodes=2, seed=0, mode="both", out=str(synth), progress=False))
    write_report([real, synth], tmp_path / "both", rounds=20)
    deploy = read_table(tmp_path / "both" / "deploy.csv")
    runs = sorted(set(deploy["run"]))
    assert len(runs) == 2 and any("real traces" in r for r in runs) and any("synthetic" in r for r in runs)
    # each run's successful runs counted on its own (the real run's are the real-dev successes)
    succ = deploy[(deploy.metric == "successes_stopped") & (deploy.detector == "exact")
                  & (deploy.action == "halt")].set_index("run")["of"]
    real_succ = sum(1 for r in read_table(real / "episodes.csv").drop_duplicates("episode")["run_outcome"] if r == "success")
    assert succ[next(r for r in runs if "real traces" in r)] == real_succ
    # per corpus, real traces only: each corpus on its own, adding up to the pooled counts
    per = read_table(tmp_path / "both" / "deploy_corpora.csv")
    assert set(per["run"]) == {next(r for r in runs if "real traces" in r)}
    assert set(per["corpus"]) == set(read_table(real / "episodes.csv")["family"])
    pooled = deploy[(deploy.detector == "exact") & (deploy.action == "halt") & deploy["run"].str.contains("real traces")]
    sub = per[(per.detector == "exact") & (per.action == "halt")]
    for metric in ("successes_stopped", "failed_calls_saved"):
        p = pooled[pooled.metric == metric].iloc[0]
        parts = sub[sub.metric == metric]
        assert parts["count"].fillna(0).sum() == p["count"] and parts["of"].fillna(0).sum() == p["of"], metric
    curves = read_table(tmp_path / "both" / "deploy_curves.csv")
    pg = curves[(curves.detector == "progress_guard") & curves["run"].str.contains("real traces")]
    assert set(pg["param"]) == {"stop_after"} and pg["value"].min() == 0 and len(pg) >= 3
    assert pg.sort_values("value")["successes_stopped"].is_monotonic_decreasing  # a later halt stops fewer
    oracle = curves[(curves.detector == "label_oracle") & curves["run"].str.contains("real traces")]
    assert list(oracle.sort_values("value")["value"]) == list(range(1, 9)) and oracle["param"].eq("k").all()
    assert oracle.sort_values("value")["failed_calls_saved"].is_monotonic_decreasing  # a later halt saves less
    from sim.report.scoreboard import scoreboard_text

    board = scoreboard_text(real)  # deployer terms on the first page, as deploy.csv has them
    part = board[board.index("## What a guard does to runs"):]
    rows = {line.split(" | ")[0]: line for line in part.splitlines() if line.startswith("| `")}
    halt = deploy[(deploy.detector == "progress_guard") & (deploy.action == "configured")
                  & (deploy.metric == "successes_stopped") & deploy["run"].str.contains("real traces")].iloc[0]
    assert f"({int(halt['count'])}/{int(halt['of'])})" in rows["| `progress_guard`"]
    assert "label oracle" in part and "`exact`" in rows["| `exact`"]
    assert "## What a guard does to runs" in scoreboard_text(synth)  # outcomes from the unguarded closed-loop play
    md = (tmp_path / "both" / "report.md").read_text()
    assert md.count("### Open loop on ") == 2 and "no_guard" in md
    assert (tmp_path / "both" / "plots" / "operating_curve.png").stat().st_size > 10_000
