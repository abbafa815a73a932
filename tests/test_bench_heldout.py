"""bench/bench_heldout.py: the shipped dev labels and a labels file of our own, scored and printed side by side."""
from __future__ import annotations

import json
from pathlib import Path

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
