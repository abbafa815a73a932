"""The command line, end to end: run, replay, list, and honest errors."""
import json
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from sim.cli import main

FAST = ["exact", "normalized", "planner", "step_budget", "no_progress", "layered"]


def invoke(*args):
    return CliRunner().invoke(main, list(args), catch_exceptions=False)


@pytest.fixture(scope="module")
def quick_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("run") / "q"
    r = invoke("run", "--suite", "quick", "--detectors", ",".join(FAST), "--out", str(out), "--no-progress", "--workers", "1")
    assert r.exit_code == 0, r.output
    return out


def test_run_writes_every_file_of_spec_section_7(quick_run):
    for name in ("manifest.json", "calls.csv", "episodes.csv", "metrics.csv", "timings.csv", "scoreboard.md",
                 "closed.csv", "closed_metrics.csv", "trace.jsonl"):
        assert (quick_run / name).stat().st_size > 0, name
    header = (quick_run / "metrics.csv").read_text().splitlines()[0].split(",")
    for col in ("detector", "family", "episodes", "tn", "fp", "early", "tp", "miss", "false_alarm_rate", "miss_rate", "median_delay"):
        assert col in header
    calls_header = (quick_run / "calls.csv").read_text().splitlines()[0].split(",")
    for col in ("detector", "episode", "call_id", "call_index", "score", "verdict", "label_loop"):
        assert col in calls_header
    manifest = json.loads((quick_run / "manifest.json").read_text())
    assert manifest["config_hash"] and manifest["profiles_version"] == "1"
    assert {d["label"] for d in manifest["detectors"]} == set(FAST)
    assert manifest["detectors"][0]["params"] == {"max_repeats_per_signature": 1, "tool_overrides": None}


def test_same_seed_gives_byte_identical_metrics(quick_run, tmp_path):
    out = tmp_path / "again"
    r = invoke("run", "--suite", "quick", "--detectors", ",".join(FAST), "--out", str(out), "--no-progress")
    assert r.exit_code == 0
    assert (out / "metrics.csv").read_bytes() == (quick_run / "metrics.csv").read_bytes()
    assert (out / "closed_metrics.csv").read_bytes() == (quick_run / "closed_metrics.csv").read_bytes()


def test_another_seed_gives_other_episodes(quick_run, tmp_path):
    out = tmp_path / "s1"
    assert invoke("run", "--suite", "quick", "--detectors", "exact", "--seed", "1", "--out", str(out), "--no-progress").exit_code == 0
    assert (out / "trace.jsonl").read_bytes() != (quick_run / "trace.jsonl").read_bytes()


def test_replay_of_a_run_trace_reproduces_its_open_loop_metrics(quick_run, tmp_path):
    out = tmp_path / "replay"
    r = invoke("replay", str(quick_run / "trace.jsonl"), "--detectors", ",".join(FAST), "--out", str(out), "--no-progress")
    assert r.exit_code == 0, r.output
    a = (quick_run / "metrics.csv").read_text().splitlines()
    b = (out / "metrics.csv").read_text().splitlines()
    assert a == b


def test_replay_skips_bad_records_and_says_so(tmp_path):
    f = tmp_path / "t.jsonl"
    f.write_text("\n".join([
        json.dumps({"episode": "e", "kind": "tool_call", "tool": "a", "args": {"q": 1}, "call_id": "1"}),
        json.dumps({"episode": "e", "kind": "tool_result", "call_id": "1", "content": "x"}),
        "{broken",
        json.dumps({"episode": "e", "kind": "tool_call", "tool": "a", "args": "oops", "call_id": "2"}),
        json.dumps({"episode": "e", "kind": "tool_call", "tool": "a", "args": {"q": 1}, "call_id": "3"}),
        json.dumps({"episode": "e", "kind": "tool_result", "call_id": "3", "content": "x"}),
    ]) + "\n")
    out = tmp_path / "r"
    r = CliRunner().invoke(main, ["replay", str(f), "--detectors", "exact", "--out", str(out), "--json"])
    assert r.exit_code == 3
    assert f"{f}:3: not valid JSON" in r.stderr
    assert f"{f}:4: tool_call field 'args' must be an object, got a string" in r.stderr
    summary = json.loads(r.stdout)
    assert summary["skipped_records"] == 2
    fires = {x["detector"]: x for x in summary["fires"] if x["family"] == "all"}
    assert fires["exact"]["fired"] == 1  # the valid records were still scored
    assert (out / "calls.csv").exists()


@pytest.mark.parametrize("args,needle", [
    (["run", "--suite", "nope"], "unknown suite 'nope'"),
    (["run", "--detectors", "nope"], "unknown detector 'nope'"),
    (["run", "--families", "nope"], "unknown scenario families: nope"),
    (["run", "--param", "exact.bogus=1", "--detectors", "exact"], "has no parameter(s) bogus"),
    (["run", "--param", "garbage"], "expected DETECTOR.PARAM=VALUE"),
    (["run", "--config", "/nonexistent.toml"], "no such configuration file"),
    (["replay", "/nonexistent.jsonl"], "no such file"),
    (["run", "--detectors", "no.such.module:Thing"], "cannot import detector module"),
    (["list", "nope"], "unknown detector 'nope'"),
    (["list", "no.such.module:Thing"], "cannot import detector module"),
])
def test_bad_input_is_one_line_and_exit_2(args, needle):
    r = CliRunner().invoke(main, args)
    assert r.exit_code == 2, r.output
    assert needle in r.stderr
    assert "Traceback" not in r.output
    assert len([l for l in r.stderr.splitlines() if l.startswith("loopbench: error")]) <= 1


def test_replay_of_a_directory_is_an_error(tmp_path):
    r = CliRunner().invoke(main, ["replay", str(tmp_path)])
    assert r.exit_code == 2 and "is a directory" in r.stderr


def test_list_names_detectors_and_families():
    r = invoke("list")
    for name in ("exact", "normalized", "planner", "layered", "step_budget", "no_progress",
                 "stale", "cosmetic", "paraphrased", "no_progress", "healthy", "same_tool", "transient_retry", "branch_siblings"):
        assert name in r.output


def test_list_detector_gives_every_parameter_with_its_default_and_allowed_values():
    out = invoke("list", "progress_guard").output
    assert out.startswith("progress_guard: detectors.progress_guard:ProgressGuard")
    params = {ln.split()[0]: ln for ln in out.rsplit("\nParameters (", 1)[1].splitlines()[1:] if ln.startswith("  ")}
    assert "default 2; an integer >= 1" in params["same_error_limit"]
    assert "default []; a list of one of 'signature', 'drift'" in params["skip_layers"]
    assert "default \"model\"; one of 'model', 'static'" in params["semantic_vectors"]
    # a parameter whose values are names gets what each name means, under its row
    from detectors.progress_guard import RULES

    rows = out.rsplit("\nParameters (", 1)[1].splitlines()
    at = next(i for i, ln in enumerate(rows) if ln.split()[:1] == ["skip_rules"])
    assert [ln.split(":")[0].strip() for ln in rows[at + 1:at + 1 + len(RULES)]] == list(RULES)
    assert f"short_answer: {RULES['short_answer']}" in rows[at + 1 + list(RULES).index("short_answer")]
    # a detector named by module:Class
    assert "max_repeats_per_signature  default 1" in invoke("list", "detectors.exact:ExactDetector").output


def test_console_script_is_installed():
    out = subprocess.run([sys.executable, "-m", "sim.cli", "--help"], capture_output=True, text=True)
    assert out.returncode == 0 and "loopbench" in out.stdout.lower() or "Usage" in out.stdout


def test_process_pool_gives_the_same_results_as_one_process(quick_run, tmp_path):
    out = tmp_path / "pool"
    r = invoke("run", "--suite", "quick", "--detectors", ",".join(FAST), "--out", str(out), "--no-progress", "--workers", "2")
    assert r.exit_code == 0
    for name in ("metrics.csv", "calls.csv", "episodes.csv", "closed_metrics.csv"):
        assert (out / name).read_bytes() == (quick_run / name).read_bytes(), name
