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


EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "real"


@pytest.fixture
def sample_corpus(tmp_path):
    """A corpora folder holding only the three shortened τ-bench records of examples/real."""
    corpus = tmp_path / "corpus"
    (corpus / "tau-bench-airline-gpt4o").mkdir(parents=True)
    (corpus / "tau-bench-airline-gpt4o" / "gpt-4o-airline.json").write_bytes((EXAMPLES / "tau_bench_sample.json").read_bytes())
    return corpus


def _labels(tmp_path, edit=None) -> Path:
    doc = json.loads((EXAMPLES / "tau_bench_sample_labels.json").read_text(encoding="utf-8"))
    if edit:
        edit(doc)
    path = tmp_path / "labels.json"
    path.write_text(json.dumps(doc), encoding="utf-8")
    return path


def _outcomes(out: Path, detector: str) -> dict[str, str]:
    return {r["episode"]: r["outcome"] for r in csv.DictReader(open(out / "episodes.csv", encoding="utf-8"))
            if r["detector"] == detector}


def test_labels_file_is_scored_instead_of_the_dev_labels(tmp_path, sample_corpus):
    out = tmp_path / "mine"
    r = invoke("run", "--suite", "real-dev", "--corpus", str(sample_corpus), "--labels", str(_labels(tmp_path)),
               "--detectors", "exact", "--out", str(out), "--no-progress", "--no-report")
    assert r.exit_code == 0, r.output
    got = _outcomes(out, "exact")
    # record 2 repeats a search with the same empty result (our label: stale at call 3); record 0 is
    # clean; record 1 has no tool call to judge
    assert got == {"tau_bench_airline:task13_trial1": "tp", "tau_bench_airline:task39_trial1": "tn",
                   "tau_bench_airline:task12_trial3": "unlabelled"}
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["config"]["labels"]["path"] == str(tmp_path / "labels.json")
    assert len(manifest["config"]["labels"]["sha256"]) == 64 and manifest["label_problems"] == []

    # The labels, not the traces, decide: the same trace labelled clean is now a false alarm,
    # and a label whose trace converts to other calls is reported and left out.
    def edit(doc):
        doc["traces"][2].update(loops=False, onset=None, kind=None)
        doc["traces"][0]["calls_sha1"] = "0" * 40
        doc["traces"].append({**doc["traces"][1], "source": "openhands-swe-bench", "file": "runs/output.jsonl"})
    out2 = tmp_path / "edited"
    r = invoke("run", "--suite", "real-dev", "--corpus", str(sample_corpus), "--labels", str(_labels(tmp_path, edit)),
               "--detectors", "exact", "--out", str(out2), "--no-progress", "--no-report")
    assert r.exit_code == 0, r.output
    assert _outcomes(out2, "exact") == {"tau_bench_airline:task13_trial1": "fp",
                                        "tau_bench_airline:task12_trial3": "unlabelled"}
    problems = json.loads((out2 / "manifest.json").read_text())["label_problems"]
    assert any("calls_sha1 " in p and "label not used" in p for p in problems)
    assert any("source 'openhands-swe-bench' is not a corpus of this suite" in p for p in problems)
    assert json.loads((out2 / "manifest.json").read_text())["config_hash"] != json.loads(
        (out / "manifest.json").read_text())["config_hash"]


@pytest.mark.parametrize("edit,args,needle", [
    (lambda d: d["traces"][1].pop("calls_sha1"), (), "traces[1]: missing field 'calls_sha1'"),
    (lambda d: d["traces"][0].update(loops="yes"), (), "traces[0].loops must be bool, not 'yes'"),
    (lambda d: d["traces"][2].update(onset=9), (), "traces[2].onset 9 is outside its 5 calls"),
    (lambda d: d.pop("traces"), (), "not a labels file"),
    (None, ("--no-corpus",), "--labels needs --corpus DIR"),
    (None, ("--suite", "real-injected"), "--labels is for --suite real-dev"),
])
def test_unusable_labels_are_one_line_and_exit_2(tmp_path, sample_corpus, edit, args, needle):
    cmd = ["run", "--suite", "real-dev", "--labels", str(_labels(tmp_path, edit)), "--detectors", "exact",
           "--out", str(tmp_path / "run"), "--no-progress"]
    if "--no-corpus" not in args:
        cmd += ["--corpus", str(sample_corpus)]
    cmd += [a for a in args if a != "--no-corpus"]
    r = CliRunner().invoke(main, cmd)
    assert r.exit_code == 2, r.output
    assert needle in r.stderr and "Traceback" not in r.output
    assert not (tmp_path / "run").exists()  # refused before any work
