"""Runs graded by SWE-bench's evaluation reports: `import --outcomes`, `replay --outcomes`."""
from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest
from click.testing import CliRunner

from scenarios.importers import import_file
from scenarios.importers.graded import ReportError, grade, instance_of, read_reports
from scenarios.trace import TraceError, read_trace
from sim.cli import main

ROOT = Path(__file__).resolve().parents[2]
SWE_0X = ROOT / "examples" / "real" / "swe_agent_sample.traj"  # pydicom: an edit refused twice alike
SWE_1X = ROOT / "tests" / "fixtures" / "importers" / "swe_agent_sample.traj"


def _runs(tmp_path: Path) -> Path:
    runs = tmp_path / "runs" / "a"
    runs.mkdir(parents=True)
    (runs / "pydicom__pydicom-1458.traj").write_bytes(SWE_0X.read_bytes())
    (runs / "sweagent__test-1.traj").write_bytes(SWE_1X.read_bytes())
    return tmp_path / "runs"


def _reports(tmp_path: Path, **resolved: bool) -> Path:
    for iid, ok in resolved.items():
        (tmp_path / "eval" / iid).mkdir(parents=True)
        (tmp_path / "eval" / iid / "report.json").write_text(json.dumps({iid: {"resolved": ok, "tests_status": {}}}))
    return tmp_path / "eval"


def test_reports_grade_the_runs_of_their_instances(tmp_path):
    resolved = read_reports(_reports(tmp_path, **{"pydicom__pydicom-1458": False, "sweagent__test-1": True}))
    assert resolved == {"pydicom__pydicom-1458": False, "sweagent__test-1": True}
    episodes, _ = import_file("swe-agent", _runs(tmp_path))
    assert [instance_of(ep) for ep in episodes] == ["pydicom__pydicom-1458", "sweagent__test-1"]
    assert grade(episodes, resolved) == 2
    assert [ep.meta["outcome"] for ep in episodes] == ["failure", "success"]
    assert grade(episodes, {"pydicom__pydicom-1458": True}) == 0  # a recorded outcome is kept
    # ids of the other formats: <stem>:<instance> (openhands), <instance>.traj (mini-swe-agent), #k duplicates
    from scenarios.tree import Episode
    assert [instance_of(Episode(i)) for i in ("out:django__django-1", "django__django-1.traj", "x__y-2#2")] == [
        "django__django-1", "django__django-1", "x__y-2"]


def test_a_runs_summary_grades_its_instances(tmp_path):
    """The harness's summary of a run (``<model>.<run_id>.json``) and sb-cli's report: an empty
    patch or a failed evaluation is unresolved, as SWE-bench counts it; an id it lists nowhere
    is not graded."""
    summary = tmp_path / "gemini.run1.json"
    summary.write_text(json.dumps({"total_instances": 5, "resolved_ids": ["a__a-1"], "unresolved_ids": ["b__b-2"],
                                   "error_ids": ["c__c-3"], "empty_patch_ids": ["d__d-4"], "incomplete_ids": ["e__e-5"]}))
    assert read_reports(summary) == {"a__a-1": True, "b__b-2": False, "c__c-3": False, "d__d-4": False}
    summary.write_text(json.dumps({"resolved_ids": ["a__a-1"], "unresolved_ids": "b__b-2"}))
    with pytest.raises(ReportError, match=r"gemini.run1.json: 'unresolved_ids' must be a list"):
        read_reports(summary)


def test_bad_reports_are_one_line_naming_the_file(tmp_path):
    with pytest.raises(TraceError, match="no such file"):
        read_reports(tmp_path / "missing")
    (tmp_path / "report.json").write_text("{")
    with pytest.raises(ReportError, match=r"report.json: not valid JSON"):
        read_reports(tmp_path)
    (tmp_path / "report.json").write_text("[1, 2]")
    with pytest.raises(ReportError, match=r"report.json: expected an object"):
        read_reports(tmp_path / "report.json")


def test_import_and_replay_take_the_outcomes_and_the_report_reads_them(tmp_path):
    runs = _runs(tmp_path)
    evals = _reports(tmp_path, **{"pydicom__pydicom-1458": False, "sweagent__test-1": True})
    out = tmp_path / "graded.jsonl"
    r = CliRunner().invoke(main, ["import", "--format", "swe-agent", str(runs), "-o", str(out), "--outcomes", str(evals)])
    assert r.exit_code == 0, r.output
    assert "2 of 2 runs graded by 2 evaluation reports" in r.output
    assert [ep.meta["outcome"] for ep in read_trace(out).episodes] == ["failure", "success"]

    folder = tmp_path / "replay"
    r = CliRunner().invoke(main, ["replay", "--format", "swe-agent", str(runs), "--outcomes", str(evals),
                                  "--detectors", "exact,progress_guard", "--out", str(folder), "--no-progress"])
    assert r.exit_code == 0, r.output
    assert "2 of 2 runs graded by 2 reports" in r.output
    r = CliRunner().invoke(main, ["report", str(folder), "--out", str(tmp_path / "rep"), "--rounds", "20"])
    assert r.exit_code == 0, r.output
    deploy = pd.read_csv(tmp_path / "rep" / "deploy.csv")
    row = deploy[(deploy.detector == "progress_guard") & (deploy.action == "halt") & (deploy.metric == "failed_calls_saved")]
    # the guard's first alarm is the failed run's identical refused edit, call 4 of 6: calls 4-5 saved
    assert (int(row["count"].iloc[0]), int(row["of"].iloc[0])) == (2, 6)
    row = deploy[(deploy.detector == "progress_guard") & (deploy.action == "halt") & (deploy.metric == "successes_stopped")]
    assert (int(row["count"].iloc[0]), int(row["of"].iloc[0])) == (0, 1)
    # the runs as replayed, graded, are the folder's trace: the report re-scores from them
    assert [ep.meta["outcome"] for ep in read_trace(folder / "trace.jsonl").episodes] == ["failure", "success"]
    assert "no trace to re-score from" not in r.output
    assert len(pd.read_csv(tmp_path / "rep" / "threshold_curves.csv"))


def test_two_runs_with_the_same_calls_each_take_their_own_label(tmp_path):
    """One trajectory committed to two collections: two episodes, one call list, an entry each."""
    runs = tmp_path / "runs"
    for name in ("a", "b"):
        (runs / name).mkdir(parents=True)
        (runs / name / "sweagent__test-1.traj").write_bytes(SWE_1X.read_bytes())
    episodes, _ = import_file("swe-agent", runs)
    from scenarios.labeling import calls_sha1
    sha = calls_sha1(episodes[0])
    ids = [ep.id for ep in episodes]
    labels = tmp_path / "labels.json"
    labels.write_text(json.dumps({"format": "loopbench-labels", "rubric_version": 1, "traces": [
        {"episode": ids[1], "calls_sha1": sha, "loops": True, "onset": 1, "kind": "stale", "source": "human",
         "decision": "corrected"},
        {"episode": ids[0], "calls_sha1": sha, "loops": False, "source": "human", "decision": "clean"}]}))
    r = CliRunner().invoke(main, ["replay", "--format", "swe-agent", str(runs), "--labels", str(labels),
                                  "--detectors", "exact", "--out", str(tmp_path / "out"), "--no-progress"])
    assert r.exit_code == 0, r.output
    assert "applied 2 of 2 labels" in r.output
    got = {ep.id: ep.meta.get("label_decision") for ep in read_trace(tmp_path / "out" / "trace.jsonl").episodes}
    assert got == {ids[0]: "clean", ids[1]: "corrected"}


def test_a_replay_of_trace_files_keeps_no_copy_of_them(tmp_path):
    """Trace files the report can read again are the run's sources; an importer's format, labels
    or graded outcomes make the replayed episodes a trace of their own (``trace.jsonl``)."""
    trace = tmp_path / "runs.jsonl"
    r = CliRunner().invoke(main, ["import", "--format", "swe-agent", str(SWE_1X), "-o", str(trace)])
    assert r.exit_code == 0, r.output
    r = CliRunner().invoke(main, ["replay", str(trace), "--detectors", "exact", "--out", str(tmp_path / "a"),
                                  "--no-progress"])
    assert r.exit_code == 0, r.output
    assert not (tmp_path / "a" / "trace.jsonl").exists()
    r = CliRunner().invoke(main, ["report", str(tmp_path / "a"), "--rounds", "20"])
    assert r.exit_code == 0 and "no trace to re-score from" not in r.output, r.output


@pytest.mark.parametrize("command", ["import", "replay"])
def test_a_bad_outcomes_file_is_a_one_line_error_and_nothing_is_written(command, tmp_path):
    bad = tmp_path / "report.json"
    bad.write_text("{not json")
    out = tmp_path / "out.jsonl" if command == "import" else tmp_path / "folder"
    args = ["import", "--format", "swe-agent", str(SWE_1X), "-o", str(out)] if command == "import" else \
        ["replay", "--format", "swe-agent", str(SWE_1X), "--out", str(out), "--no-progress", "--detectors", "exact"]
    r = CliRunner().invoke(main, [*args, "--outcomes", str(bad)])
    assert r.exit_code == 2
    assert r.output.strip().splitlines()[-1].startswith(f"loopbench: error: {bad}: not valid JSON")
    assert "Traceback" not in r.output
    assert not out.exists()
