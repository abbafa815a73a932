"""bench/bench_heldout.py: the shipped dev labels and a labels file of our own, scored and printed side by side."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.benchscripts import load_bench

EXAMPLES = Path(__file__).resolve().parents[1] / "examples" / "real"


def test_dev_and_heldout_side_by_side_with_the_targets(tmp_path, capsys):
    corpus = tmp_path / "corpus" / "tau-bench-airline-gpt4o"
    corpus.mkdir(parents=True)
    (corpus / "gpt-4o-airline.json").write_bytes((EXAMPLES / "tau_bench_sample.json").read_bytes())
    bench = load_bench("bench_heldout")
    assert bench.main(["--labels", str(EXAMPLES / "tau_bench_sample_labels.json"), "--corpus", str(tmp_path / "corpus"),
                       "--detectors", "exact,progress_guard", "--rounds", "20", "--out", str(tmp_path / "runs"),
                       "--targets", "--param", "progress_guard.stop_after=2"]) == 0
    out = capsys.readouterr().out
    rows = {tuple(c.strip() for c in line.strip("|").split("|")[:2]): [c.strip() for c in line.strip("|").split("|")]
            for line in out.splitlines() if line.startswith("| exact") or line.startswith("| progress_guard")}
    # τ-bench: 8 loops and 83 clean runs in the shipped dev half; 1 and 1 in our labels of the sample
    guard_tau = rows[("progress_guard", "tau_bench_airline")]
    assert guard_tau[2:4] == ["8/83", "1/1"]
    assert guard_tau[4].startswith("99.0 [") and guard_tau[5].startswith("100.0")
    assert rows[("exact", "tau_bench_airline")][10:12] == ["0.000", "0.000"]  # FAR dev, held-out
    assert "paired bootstrap progress_guard − exact, standard score, pooled" in out
    assert "- recall 1.000 >= 0.85: met" in out and "- false_alarm_rate 0.000 <= 0.01: met" in out
    assert "ahead of exact by a paired-bootstrap margin" in out and ": NOT met" in out  # a tie on one loop
    assert (tmp_path / "runs" / "heldout" / "paired.csv").is_file()
    for run in ("dev", "heldout"):  # --param reaches both runs
        manifest = json.loads((tmp_path / "runs" / run / "manifest.json").read_text())
        guard = next(d for d in manifest["config"]["detectors"] if d["label"] == "progress_guard")
        assert guard["params"]["stop_after"] == 2
    # the dev labels of Who&When have no traces in this corpus folder: said, not hidden
    assert "dev: 93 labels not used" in out
    assert not any(line.startswith("held-out:") for line in out.splitlines())
    assert "Leave-one-corpus-out on each label set" not in out  # one corpus: nothing to hold out


def test_transfer_of_a_synthetic_ranking_dev_beside_held_out(tmp_path, capsys):
    from click.testing import CliRunner

    from sim.cli import main

    dets = "exact,progress_guard,no_progress"
    r = CliRunner().invoke(main, ["run", "--suite", "quick", "--episodes", "3", "--mode", "open", "--detectors", dets,
                                  "--out", str(tmp_path / "synthetic"), "--no-progress", "--no-report"],
                           catch_exceptions=False)
    assert r.exit_code == 0, r.output
    corpus = tmp_path / "corpus" / "tau-bench-airline-gpt4o"
    corpus.mkdir(parents=True)
    (corpus / "gpt-4o-airline.json").write_bytes((EXAMPLES / "tau_bench_sample.json").read_bytes())
    assert load_bench("bench_heldout").main([
        "--labels", str(EXAMPLES / "tau_bench_sample_labels.json"), "--corpus", str(tmp_path / "corpus"),
        "--detectors", dets, "--rounds", "20", "--out", str(tmp_path / "runs"), "--targets",
        "--transfer", str(tmp_path / "synthetic")]) == 0
    out = capsys.readouterr().out
    table = {line.strip("|").split("|")[0].strip(): [c.strip() for c in line.strip("|").split("|")]
             for line in out.split("Transfer: Kendall τ-b")[1].splitlines() if line.startswith("| ")}
    # dev: τ-bench and ReAct (two corpora: leave-one-corpus-out too); held-out: τ-bench's sample only
    assert list(table)[1:] == ["react_hotpotqa", "tau_bench_airline", "pooled"]
    pooled = table["pooled"]
    point = lambda c: float(c.split(" [")[0])  # noqa: E731 — "0.33 [0.33, 1.00]": the point, then its interval
    assert all(c == "–" or -1 <= point(c) <= 1 for c in pooled[1:7])
    assert pooled[3] != "–" and pooled[4] == "–"  # LOCO on dev; none on one held-out corpus
    assert pooled[3].count("[") == 1  # LOCO τ-b with its bootstrap interval
    assert table["react_hotpotqa"][2] == "–"  # no ReAct traces in the held-out labels
    assert "- Kendall τ-b " in out and ">= 0.8 with the same top pick (synthetic `" in out


def test_transfer_needs_a_run_folder(tmp_path, capsys):
    import pytest

    with pytest.raises(SystemExit) as exc:
        load_bench("bench_heldout").main(["--labels", str(EXAMPLES / "tau_bench_sample_labels.json"),
                                          "--transfer", str(tmp_path)])
    assert exc.value.code == 2 and "--transfer" in capsys.readouterr().err


def _cv(rows):
    keys = ("as_run", "heldout", "heldout_lo", "heldout_hi", "vs_reference", "vs_reference_lo", "vs_reference_hi")
    return {"cv": {(d, c, "score_standard"): {"reference": "exact", **dict(zip(keys, map(str, v)))}
                   for (d, c), v in rows.items()}}


def test_leave_one_corpus_out_on_both_label_sets_side_by_side():
    bench = load_bench("bench_heldout")
    dev = _cv({("progress_guard", "pooled"): (86.3, 72.0, 62.0, 80.9, 0.4, -8.1, 9.4),
               ("progress_guard", "tau"): (99.0, 70.9, 34.3, 97.0, -28.1, -64.1, -2.5),
               ("exact", "pooled"): (71.7, 71.7, 61.1, 81.8, 0, 0, 0)})
    held = _cv({("progress_guard", "pooled"): (72.7, 58.2, 41.8, 71.9, -2.7, -17.0, 10.4),
                ("exact", "pooled"): (60.8, 60.8, 45.4, 74.6, 0, 0, 0)})
    lines = bench.loco_lines(dev, held, ("progress_guard", "exact"))
    assert "| detector | corpus | as run dev | held-out | LOCO dev | held-out | LOCO − exact dev | held-out |" in lines
    rows = {tuple(c.strip() for c in ln.strip("|").split("|")[:2]): [c.strip() for c in ln.strip("|").split("|")]
            for ln in lines if ln.startswith("| progress_guard") or ln.startswith("| exact")}
    assert rows[("progress_guard", "pooled")][2:] == ["86.3", "72.7", "72.0 [62.0, 80.9]", "58.2 [41.8, 71.9]",
                                                      "+0.4 [-8.1, 9.4]", "-2.7 [-17.0, 10.4]"]
    # an interval that excludes 0 is marked; a corpus only one label set has shows – on the other side
    assert rows[("progress_guard", "tau")][2:] == ["99.0", "–", "70.9 [34.3, 97.0]", "–", "-28.1 [-64.1, -2.5] ≠0", "–"]
    assert rows[("exact", "pooled")][6:] == ["–", "–"]  # the reference is not compared with itself
    # pooled after the corpora
    assert [k[1] for k in rows if k[0] == "progress_guard"] == ["tau", "pooled"]
    assert bench.loco_lines({"cv": {}}, held, ("progress_guard", "exact")) == []  # one corpus: no cv.csv


def test_labels_default_to_the_held_out_half_labelled_here(tmp_path, monkeypatch):
    bench = load_bench("bench_heldout")
    assert bench.SELF_HELDOUT.is_file() and bench.SELF_HELDOUT.name == "real-heldout-self-labels.json"
    seen = []

    class Stop(Exception):
        pass

    def fake_run_and_report(out, corpus, detectors, rounds, labels, extra=()):
        seen.append(labels)
        if labels is not None:
            raise Stop
        return out

    monkeypatch.setattr(bench, "run_and_report", fake_run_and_report)
    monkeypatch.setattr(bench, "figures", lambda run: {})
    with pytest.raises(Stop):
        bench.main(["--corpus", str(tmp_path)])
    assert seen == [None, bench.SELF_HELDOUT.resolve()]


def test_the_shipped_half_runs_as_its_own_suite(tmp_path, monkeypatch):
    """So its loops carry their severities; another labels file replaces real-dev's."""
    bench = load_bench("bench_heldout")
    calls = []
    monkeypatch.setattr(bench, "run_loopbench", lambda args, who="bench_heldout": calls.append(args))
    bench.run_and_report(tmp_path / "a", tmp_path, "exact", 10, bench.SELF_HELDOUT)
    bench.run_and_report(tmp_path / "b", tmp_path, "exact", 10, EXAMPLES / "tau_bench_sample_labels.json")
    runs = [c for c in calls if c[0] == "run"]
    assert runs[0][runs[0].index("--suite") + 1] == "real-heldout-self" and "--labels" not in runs[0]
    assert runs[1][runs[1].index("--suite") + 1] == "real-dev" and "--labels" in runs[1]
