"""bench/bench_loco.py on the shipped half of real-dev (τ-bench airline, ReAct HotpotQA)."""
from __future__ import annotations

import pytest
from click.testing import CliRunner

from sim.cli import main as cli
from tests.benchscripts import load_bench


@pytest.fixture(scope="module")
def real_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("loco") / "real"
    r = CliRunner().invoke(cli, ["run", "--suite", "real-dev", "--detectors", "exact,progress_guard", "--out", str(out),
                                 "--no-progress", "--no-report"], catch_exceptions=False)
    assert r.exit_code == 0, r.output
    return out


def _rows(out: str) -> dict[tuple[str, str], list[str]]:
    cells = [[c.strip() for c in line.strip("|").split("|")] for line in out.splitlines() if line.startswith("| ")]
    return {(r[0], r[1]): r for r in cells if len(r) > 3}


def test_the_guard_is_scored_on_each_corpus_without_the_rules_written_from_it(real_run, capsys):
    bench = load_bench("bench_loco")
    assert bench.main(["--run", str(real_run), "--rounds", "50"]) == 0
    out = capsys.readouterr().out
    assert "rules held out: progress_guard (2 corpora)" in out
    rows = _rows(out)
    tau = rows[("progress_guard", "tau_bench_airline")]
    assert tau[2] == "rules as shipped→as shipped→without tau_bench_airline's rules"
    dev, loco = float(tau[3]), float(tau[9])  # dev score, LOCO score
    assert loco < dev  # its τ-bench rules carry it there
    assert rows[("exact", "tau_bench_airline")][3] == rows[("exact", "tau_bench_airline")][9]
    assert "held-out progress_guard − exact" in out
    # --keep-rules: the guard's LOCO figures are its dev ones
    assert bench.main(["--run", str(real_run), "--rounds", "50", "--keep-rules"]) == 0
    kept = _rows(capsys.readouterr().out)[("progress_guard", "tau_bench_airline")]
    assert kept[3] == kept[9] and "without" not in kept[2]


def test_deploy_gives_what_the_pair_does_to_runs_dev_and_held_out(real_run, capsys, tmp_path):
    """The bench prints the product's figures (sim.report.cv_deploy): the same counts as the
    report's cv_deploy.csv, each corpus and pooled, both detectors dev and held out."""
    import pandas as pd

    bench = load_bench("bench_loco")
    assert bench.main(["--run", str(real_run), "--rounds", "20", "--deploy"]) == 0
    out = capsys.readouterr().out.split("What progress_guard and exact do to runs")[1]
    cells = [[c.strip() for c in line.strip("|").split("|")] for line in out.splitlines() if line.startswith("| ")]
    assert cells[0] == ["corpus", "measure", "progress_guard, dev", "progress_guard, held out", "exact, dev",
                        "exact, held out"]
    rows = {(r[0], r[1]): r[2:] for r in cells[1:]}
    r = CliRunner().invoke(cli, ["report", str(real_run), "--cv", "corpus", "--rounds", "20", "--out", str(tmp_path)],
                           catch_exceptions=False)
    assert r.exit_code == 0, r.output
    d = pd.read_csv(tmp_path / "cv_deploy.csv")
    for action, metric, what, scale in bench.DEPLOY_SHOWN:
        for corpus in ("tau_bench_airline", "pooled"):
            got = d[(d.detector == "progress_guard") & (d.corpus == corpus) & (d.action == action) & (d.metric == metric)].iloc[0]
            cell = rows[(corpus, what)][1]
            if scale == "%":
                assert cell.startswith(f"{int(got.heldout_count)}/{int(got.heldout_of)} "), (corpus, what, cell)
            else:
                assert cell.startswith(f"{got.heldout:.1f} "), (corpus, what, cell)
    saved = rows[("tau_bench_airline", "failed-run calls saved, halting at the first alarm")]
    assert saved[0] != saved[1]  # without τ-bench's rules it fires on other calls
    assert saved[2] == saved[3]  # exact: no threshold moved, no rule to hold out
