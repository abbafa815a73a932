"""bench/bench_coding_runs.py on the OpenHands importer fixture: the table and the alarm context."""
from __future__ import annotations

from pathlib import Path

from tests.benchscripts import load_bench

ROOT = Path(__file__).resolve().parents[1]
FIXTURE = ROOT / "tests" / "fixtures" / "importers" / "openhands_sample.jsonl"


def _bench():
    return load_bench("bench_coding_runs")


def test_table_counts_runs_by_outcome_and_explains_each_alarm(tmp_path, capsys):
    # Lines 1-2 of the fixture: a real run with an identical re-view (a loop), and an
    # edit-then-retest run that resolved (success).
    folder = tmp_path / "runs"
    folder.mkdir()
    (folder / "out.jsonl").write_text("".join(FIXTURE.read_text().splitlines(keepends=True)[:2]))
    assert _bench().main([str(folder), "--detectors", "progress_guard,exact"]) == 0
    out = capsys.readouterr().out
    assert "2 runs read, 0 without a tool call left out; 2 runs, 10 tool calls" in out
    assert "| `progress_guard` | 1 / 0 / 2 | 0 / 0 / 1 | 0 / 0 / 0 | 1 / 0 / 1 |" in out
    assert "| `exact` | 2 / 0 / 2 | 1 / 0 / 1 | 0 / 0 / 0 | 1 / 0 / 1 |" in out  # exact takes the re-test after the edit
    assert "out:ponylang__ponyc-4593 (unknown): call 3 of 5" in out
    assert "identical to call 2; writes between: none; same result: True" in out
    assert "progress_guard allows 1 of 1 re-runs right after a successful editor write" in out


def test_reruns_after_edit_needs_a_successful_editor_write_between():
    bench = _bench()
    from scenarios.importers import import_file

    episodes, _ = import_file("openhands", FIXTURE)
    assert bench.reruns_after_edit(episodes[1].tool_nodes()) == [2]  # pytest after the str_replace
    assert bench.reruns_after_edit(episodes[0].tool_nodes()) == []  # views only, no write
    ctx = bench.alarm_context(episodes[1].tool_nodes(), 2)
    assert ctx == {"prev_same": 0, "writes_between": [1], "same_result": False}


def test_runs_stopped_as_configured_are_counted_apart_from_runs_fired(tmp_path, capsys):
    """The looping run with its last view made twice more: the guard nudges at the first repeat
    and stops at the next finding (stop_after = 1); exact refuses repeats and never ends a run."""
    import copy
    import json

    run = json.loads(FIXTURE.read_text().splitlines()[0])
    action, observation = run["history"][-2:]
    for k in (1, 2):
        a, o = copy.deepcopy(action), copy.deepcopy(observation)
        a["id"], o["id"], o["cause"] = action["id"] + 100 * k, observation["id"] + 100 * k, action["id"] + 100 * k
        for ev in (a, o):
            ev["tool_call_metadata"]["tool_call_id"] = f"again_{k}"
        run["history"] += [a, o]
    folder = tmp_path / "runs"
    folder.mkdir()
    (folder / "out.jsonl").write_text(json.dumps(run) + "\n")
    assert _bench().main([str(folder), "--detectors", "progress_guard,exact", "--explain", ""]) == 0
    out = capsys.readouterr().out
    assert "| `progress_guard` | 1 / 1 / 1 | 0 / 0 / 0 | 0 / 0 / 0 | 1 / 1 / 1 |" in out
    assert "| `exact` | 1 / 0 / 1 | 0 / 0 / 0 | 0 / 0 / 0 | 1 / 0 / 1 |" in out


def test_other_formats_and_swe_bench_reports_grade_the_runs(tmp_path, capsys):
    """SWE-agent trajectories (one per instance) graded by SWE-bench's report.json files: the
    0.x run (an edit refused three times, twice identically) failed, the 1.x run resolved."""
    import json
    import shutil

    runs = tmp_path / "runs" / "model" / "i1"
    runs.mkdir(parents=True)
    fixtures = ROOT / "tests" / "fixtures" / "importers"
    shutil.copy(ROOT / "examples" / "real" / "swe_agent_sample.traj", runs / "pydicom__pydicom-1458.traj")
    shutil.copy(fixtures / "swe_agent_sample.traj", runs.parent / "sweagent__test-1.traj")
    for iid, resolved in (("pydicom__pydicom-1458", False), ("sweagent__test-1", True)):
        (tmp_path / "eval" / iid).mkdir(parents=True)
        (tmp_path / "eval" / iid / "report.json").write_text(json.dumps({iid: {"resolved": resolved}}))
    assert _bench().main([str(tmp_path / "runs"), "--format", "swe-agent", "--reports", str(tmp_path / "eval"),
                          "--detectors", "progress_guard,exact", "--explain", "exact"]) == 0
    out = capsys.readouterr().out
    assert "2 SWE-bench reports read; 2 runs graded by them" in out
    assert "outcomes: failure 1, success 1" in out
    assert "| `exact` | 1 / 0 / 2 | 0 / 0 / 1 | 1 / 0 / 1 | 0 / 0 / 0 |" in out
    assert "pydicom__pydicom-1458 (failure): call 4 of 6" in out
    assert "identical to call 3; writes between: none; same result: True" in out
    # the deployer's table: the guard nudges at the identical refused edit (call 4) and stops at
    # the next (5): halting saves calls 4-5 of the failed run's 6, as configured call 5
    assert "| `progress_guard` | 0 / 1 | 0 / 1 | 33.3 % (2/6) | 16.7 % (1/6) | 0.0 |" in out
    assert "| `exact` | 0 / 1 | 0 / 1 | 33.3 % (2/6) | 0.0 % (0/6) | 0.0 |" in out  # exact refuses, never stops


def test_deploy_figures_count_stops_savings_and_nudges():
    bench = _bench()
    from detectors.protocol import Verdict
    from scenarios.tree import linear_episode

    ok = linear_episode("ok", [("bash", {"command": f"c{i}"}) for i in range(4)])
    ok.meta["outcome"] = "success"
    bad = linear_episode("bad", [("bash", {"command": f"c{i}"}) for i in range(10)])
    bad.meta["outcome"] = "failure"
    A, N, S = Verdict.ALLOW, Verdict.NUDGE, Verdict.STOP
    scored = {"ok": ((2, "x"), {0: A, 1: A, 2: N, 3: A}),
              "bad": ((3, "y"), {**{k: A for k in range(10)}, 3: N, 6: S, 7: S})}
    f = bench.deploy_figures([ok, bad], scored)
    assert f == {"succ": 1, "stopped_halt": 1, "stopped_conf": 0, "fail_calls": 10, "saved_halt": 7,
                 "saved_conf": 4, "alarms_per_100": 25.0}
