"""`loopbench run --suite real-dev`: labelled real traces scored exactly like a synthetic suite."""
import csv
import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from sim.cli import main

CORPUS = Path(__file__).resolve().parents[3] / "shared" / "corpora" / "real"


def invoke(*args):
    return CliRunner().invoke(main, list(args), catch_exceptions=False)


def test_real_dev_runs_from_the_package_data(tmp_path):
    out = tmp_path / "real"
    r = invoke("run", "--suite", "real-dev", "--detectors", "exact,normalized", "--out", str(out), "--no-progress")
    assert r.exit_code == 0, r.output
    rows = list(csv.DictReader(open(out / "metrics.csv", encoding="utf-8")))
    fams = {row["family"] for row in rows}
    assert fams == {"tau_bench_airline", "react_hotpotqa", "all"}  # Who&When needs --corpus
    allrow = next(row for row in rows if row["detector"] == "exact" and row["family"] == "all")
    assert int(allrow["tp"]) + int(allrow["miss"]) + int(allrow["early"]) > 30  # the labelled loops are scored
    assert int(allrow["tn"]) + int(allrow["fp"]) > 100
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["config"]["real"] is True and manifest["label_problems"] == []
    board = (out / "scoreboard.md").read_text(encoding="utf-8")
    assert "react_hotpotqa" in board.split("## Loop families")[1] and "react_hotpotqa" in board.split("## Healthy")[1]


def test_real_dev_is_open_loop_only_and_knows_its_families(tmp_path):
    r = invoke("run", "--suite", "real-dev", "--mode", "closed", "--detectors", "exact", "--no-progress")
    assert r.exit_code == 2 and "open loop only" in r.output
    r = invoke("run", "--suite", "real-dev", "--families", "stale", "--detectors", "exact", "--no-progress")
    assert r.exit_code == 2 and "its corpora" in r.output
    r = invoke("run", "--suite", "quick", "--corpus", str(tmp_path), "--detectors", "exact", "--no-progress")
    assert r.exit_code == 2 and "--corpus is for real suites" in r.output


@pytest.mark.skipif(not CORPUS.is_dir(), reason="the corpora are not beside this checkout (../shared/corpora/real)")
def test_real_dev_with_the_local_corpus_adds_who_and_when(tmp_path):
    out = tmp_path / "real"
    r = invoke("run", "--suite", "real-dev", "--corpus", str(CORPUS), "--families", "magentic_one,captain_agent",
               "--detectors", "exact", "--out", str(out), "--no-progress")
    assert r.exit_code == 0, r.output
    fams = {row["family"] for row in csv.DictReader(open(out / "metrics.csv", encoding="utf-8"))}
    assert fams == {"magentic_one", "captain_agent", "all"}
