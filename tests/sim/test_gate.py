"""The regression gate end to end: the committed baseline passes, a worse detector fails with exit 1."""
import json
import shutil
import subprocess
import sys
from pathlib import Path
from xml.etree import ElementTree as ET

import numpy as np
import pytest
from click.testing import CliRunner

from sim.cli import main
from sim.gate.regression import compare, paired_interval, read_baseline
from sim.scoring.uncertainty import unit_weights

ROOT = Path(__file__).resolve().parents[2]
SMALL_SUITE = """
name = "gate-test"
seed = 3
episodes = 12
mode = "open"
families = ["stale", "cycle", "parallel_burst", "healthy", "polling", "same_tool"]
"""
WORSE = "exact=tests.sim.gate_helpers:LateExact"


def invoke(*args):
    return CliRunner().invoke(main, list(args), catch_exceptions=False)


def test_committed_real_baseline_passes_on_the_committed_code():
    """results/baseline-real-dev: every built-in detector on real-dev's shipped traces, and the
    guard held out (each corpus without the rules written from it)."""
    r = invoke("check", "--baseline", str(ROOT / "results" / "baseline-real-dev"), "--no-progress", "--no-timing")
    assert r.exit_code == 0, r.output
    assert "no regression" in r.output and "progress_guard (held out)  all" in r.output


def test_committed_heldout_baseline_passes_on_the_committed_code():
    """results/baseline-real-heldout-self: the same on the shipped traces of the held-out half
    labelled here, a gate against getting worse on traces no rule was written from."""
    r = invoke("check", "--baseline", str(ROOT / "results" / "baseline-real-heldout-self"), "--no-progress",
               "--no-timing")
    assert r.exit_code == 0, r.output
    assert "no regression" in r.output and "progress_guard (held out)  all" in r.output
    manifest = json.loads((ROOT / "results" / "baseline-real-heldout-self" / "manifest.json").read_text())
    assert manifest["suite"]["name"] == "real-heldout-self"


def test_committed_baseline_passes_on_the_committed_code(tmp_path):
    junit = tmp_path / "gate.xml"
    r = invoke("check", "--baseline", str(ROOT / "results" / "baseline"), "--no-progress", "--junit", str(junit))
    assert r.exit_code == 0, r.output
    assert "no regression" in r.output
    suite = ET.parse(junit).getroot().find("testsuite")
    detectors = json.loads((ROOT / "results" / "baseline" / "manifest.json").read_text())["detectors"]
    assert int(suite.get("tests")) == len(detectors) * 5 and suite.get("failures") == "0"


@pytest.fixture(scope="module")
def small_baseline(tmp_path_factory):
    d = tmp_path_factory.mktemp("gate")
    (d / "suite.toml").write_text(SMALL_SUITE)
    r = invoke("baseline", "update", "--suite", str(d / "suite.toml"), "--detectors", "exact,normalized",
               "--out", str(d / "baseline"), "--no-progress")
    assert r.exit_code == 0, r.output
    return d


def test_baseline_folder_is_plain_files(small_baseline):
    b = small_baseline / "baseline"
    assert sorted(p.name for p in b.iterdir()) == [".gitignore", "episodes.csv", "machine", "manifest.json", "metrics.csv"]
    assert sorted(p.name for p in (b / "machine").iterdir()) == ["timings.csv", "versions.json"]
    assert (b / ".gitignore").read_text().splitlines()[-1] == "machine/"
    manifest = json.loads((b / "manifest.json").read_text())
    assert manifest["suite"]["seed"] == 3 and [d["label"] for d in manifest["detectors"]] == ["exact", "normalized"]
    assert "versions" not in manifest


def test_baseline_update_writes_the_same_committed_bytes_twice(small_baseline, tmp_path):
    again = tmp_path / "again"
    r = invoke("baseline", "update", "--suite", str(small_baseline / "suite.toml"), "--detectors", "exact,normalized",
               "--out", str(again), "--no-progress")
    assert r.exit_code == 0, r.output
    for name in ("manifest.json", "metrics.csv", "episodes.csv", ".gitignore"):
        assert (again / name).read_bytes() == (small_baseline / "baseline" / name).read_bytes(), name


def test_the_committed_baseline_holds_every_builtin_but_the_embedding_ones():
    from detectors.registry import available, detector_class

    builtins = {n for n in available() if detector_class(n).__module__.startswith("detectors.")}
    manifest = json.loads((Path(__file__).resolve().parents[2] / "results" / "baseline" / "manifest.json").read_text())
    assert {d["label"] for d in manifest["detectors"]} == builtins - {"embedding", "embedding_call"}
    assert "versions" not in manifest


def test_a_worse_detector_fails_the_gate_and_the_same_one_passes(small_baseline, tmp_path):
    base = str(small_baseline / "baseline")
    same = invoke("check", "--baseline", base, "--suite", str(small_baseline / "suite.toml"), "--no-progress")
    assert same.exit_code == 0, same.output

    junit = tmp_path / "worse.xml"
    r = invoke("check", "--baseline", base + "/manifest.json", "--suite", str(small_baseline / "suite.toml"),
               "--detectors", WORSE, "--junit", str(junit), "--no-progress")
    assert r.exit_code == 1, r.output
    lines = [line for line in r.output.splitlines() if "REGRESSION" in line and line.startswith("exact")]
    # LateExact fires one repeat later: its delay (and, past the window, its misses) regress,
    # and the diff names the metric and the family that shows it.
    assert lines and all(line.split()[2] in ("median_delay", "miss_rate") for line in lines), r.output
    assert any(line.split()[1] == "cycle" for line in lines), r.output
    assert "got worse beyond tolerance" in r.output
    root = ET.parse(junit).getroot()  # valid XML, one testcase per detector and metric
    cases = root.findall("./testsuite/testcase")
    assert {c.get("name") for c in cases} == {"false_alarm_rate", "early_rate", "miss_rate", "median_delay", "p50_us"}
    failed = {c.get("name") for c in cases if c.find("failure") is not None}
    assert failed and failed <= {"median_delay", "miss_rate"}
    assert any("cycle:" in c.find("failure").text for c in cases if c.get("name") in failed)
    assert root.find("testsuite").get("failures") == str(len(failed))


def test_parameters_reach_a_dotted_module_class(small_baseline):
    # With max_repeats 1 the helper is exact again: the gate passes.
    r = invoke("check", "--baseline", str(small_baseline / "baseline"), "--suite", str(small_baseline / "suite.toml"),
               "--detectors", WORSE, "--param", "exact.max_repeats_per_signature=1", "--no-timing", "--no-progress")
    assert r.exit_code == 0, r.output
    assert "p50_us" not in r.output


@pytest.mark.parametrize("mutate, message", [
    (lambda b: (b / "episodes.csv").unlink(), "episodes.csv: missing"),
    (lambda b: (b / "manifest.json").write_text("{not json"), "not valid JSON"),
    (lambda b: (b / "manifest.json").write_text(
        (b / "manifest.json").read_text().replace('"episodes_fingerprint": "', '"episodes_fingerprint": "x')),
     "other episodes than when the baseline was made"),
    (lambda b: (b / "manifest.json").write_text((b / "manifest.json").read_text().replace('"seed": 3', '"seed": 4')),
     "with another seed"),
])
def test_a_broken_or_stale_baseline_is_a_usage_error(small_baseline, tmp_path, mutate, message):
    b = tmp_path / "b"
    shutil.copytree(small_baseline / "baseline", b)
    mutate(b)
    r = invoke("check", "--baseline", str(b), "--suite", str(small_baseline / "suite.toml"), "--no-progress")
    assert r.exit_code == 2 and message in r.output, r.output


def test_unknown_label_and_missing_baseline_exit_2(small_baseline, tmp_path):
    r = invoke("check", "--baseline", str(small_baseline / "baseline"), "--suite", str(small_baseline / "suite.toml"),
               "--detectors", "roo_code", "--no-progress")
    assert r.exit_code == 2 and "no baseline for detector(s) roo_code" in r.output
    assert invoke("check", "--baseline", str(tmp_path / "nope"), "--no-progress").exit_code == 2


def test_regression_needs_both_the_tolerance_and_the_interval(small_baseline):
    base = read_baseline(small_baseline / "baseline")
    # One extra miss among 40 looping paths: 2.5 points > 2 tolerance, but the interval includes 0.
    b = np.zeros(40)
    c = b.copy()
    c[0] = 1
    w = unit_weights([f"ep{i}" for i in range(40)], ["stale"] * 40, rounds=2000)
    low, high = paired_interval("miss_rate", b, c, w)
    assert low <= 0 < high
    # Everything misses now: far beyond tolerance, and certain.
    low, _ = paired_interval("miss_rate", b, np.ones(40), w)
    assert low > 0
    same = compare(base, base, ["exact"])
    assert not same.regressions and all(r.verdict in ("ok", "n/a") for r in same.rows)


def test_episode_generation_does_not_depend_on_the_hash_seed():
    """The gate pairs episodes across processes, so generation must not follow set order."""
    code = ("from scenarios.suites import load_suite; from sim.execute.runner import build_scenarios, generate_episodes; "
            "from scenarios.trace import dumps_events, episode_events; import hashlib; s = load_suite('ci'); "
            "eps = generate_episodes(build_scenarios(s.families, 2, s.seed, s.family_params)); "
            "print(hashlib.sha256(b''.join(dumps_events(episode_events(e)) for e in eps)).hexdigest())")
    outs = {subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT,
                           env={"PYTHONHASHSEED": seed, "PATH": ""}).stdout for seed in ("1", "2")}
    assert len(outs) == 1


def test_sibling_paths_of_one_episode_are_not_independent_evidence():
    """Four sibling looping paths per episode that always share their outcome carry the
    evidence of one path each: resampled by episode (the cluster), the gate's interval is
    about twice as wide as if every path were an independent unit."""
    episodes, siblings = 30, 4
    ids = [f"ep{e}" for e in range(episodes) for _ in range(siblings)]
    base = np.zeros(len(ids))
    cur = np.array([float(e % 3 == 0) for e in range(episodes) for _ in range(siblings)])  # whole episodes miss
    fams = ["stale"] * len(ids)
    clustered = paired_interval("miss_rate", base, cur, unit_weights(ids, fams, rounds=2000))
    independent = paired_interval("miss_rate", base, cur, unit_weights([f"u{i}" for i in range(len(ids))], fams,
                                                                       rounds=2000))
    width = lambda iv: iv[1] - iv[0]  # noqa: E731
    assert width(clustered) > 1.6 * width(independent)
    assert clustered[0] < independent[0] and clustered[1] > independent[1]


@pytest.fixture(scope="module")
def real_baseline(tmp_path_factory):
    """A baseline on real-dev's shipped traces (τ-bench airline, ReAct HotpotQA)."""
    out = tmp_path_factory.mktemp("gate-real") / "baseline"
    r = invoke("baseline", "update", "--suite", "real-dev", "--detectors", "exact,progress_guard", "--out", str(out),
               "--no-progress")
    assert r.exit_code == 0, r.output
    return out


def test_on_real_traces_the_guard_is_gated_held_out_too(real_baseline):
    """Each corpus scored without the rules written from it, as one more gated detector: its
    rows are those of separate runs of each corpus with those rules off."""
    import pandas as pd

    from detectors.progress_guard import LAYERS_FROM, RULES_FROM

    manifest = json.loads((real_baseline / "manifest.json").read_text())
    assert manifest["held_out"] == {"progress_guard (held out)": {c: f"without {c}'s rules"
                                                                  for c in ("react_hotpotqa", "tau_bench_airline")}}
    base = pd.read_csv(real_baseline / "episodes.csv")
    held = base[base.detector == "progress_guard (held out)"].set_index(["episode", "unit"])["outcome"]
    assert "exact (held out)" not in set(base.detector)  # exact declares no rules
    for corpus in ("react_hotpotqa", "tau_bench_airline"):
        run = real_baseline.parent / corpus
        r = invoke("run", "--suite", "real-dev", "--families", corpus, "--detectors", "progress_guard", "--out",
                   str(run), "--no-progress", "--no-report",
                   "--param", f"progress_guard.skip_rules={json.dumps([n for n, c in RULES_FROM.items() if corpus in c])}",
                   "--param", f"progress_guard.skip_layers={json.dumps([n for n, c in LAYERS_FROM.items() if corpus in c])}")
        assert r.exit_code == 0, r.output
        alone = pd.read_csv(run / "episodes.csv").set_index(["episode", "unit"])["outcome"]
        assert held.loc[alone.index].tolist() == alone.tolist()
    r = invoke("check", "--baseline", str(real_baseline), "--no-progress", "--no-timing")
    assert r.exit_code == 0, r.output
    assert "progress_guard (held out)  all" in r.output
    # a change that raises the guard's false alarms fails it dev and held out
    r = invoke("check", "--baseline", str(real_baseline), "--no-progress", "--no-timing",
               "--param", "progress_guard.same_error_limit=1")
    assert r.exit_code == 1, r.output
    assert any(ln.startswith("progress_guard (held out)") and "false_alarm_rate" in ln and "REGRESSION" in ln
               for ln in r.output.splitlines())
    # a replacement that declares no rules' corpora cannot be held out: one line, exit 2
    r = CliRunner().invoke(main, ["check", "--baseline", str(real_baseline), "--no-progress", "--no-timing",
                                  "--detectors", "progress_guard=exact"])
    assert r.exit_code == 2 and "progress_guard (held out)" in r.output and "derived_from" in r.output
    assert len(r.output.strip().splitlines()) == 1 and "Traceback" not in r.output


def test_real_injected_is_gated_held_out_by_the_corpus_each_episode_was_built_from(tmp_path):
    out = tmp_path / "inj"
    r = invoke("baseline", "update", "--suite", "real-injected", "--detectors", "progress_guard", "--out", str(out),
               "--no-progress")
    assert r.exit_code == 0, r.output
    held = json.loads((out / "manifest.json").read_text())["held_out"]["progress_guard (held out)"]
    assert sorted(held) == ["react_hotpotqa", "tau_bench_airline"]  # not the injection kinds it reports under
