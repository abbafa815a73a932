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


def test_deploy_gives_what_the_guard_does_to_runs_dev_and_held_out(real_run, capsys):
    """Each corpus run alone, as shipped and without its rules: the held-out column is the run
    with those rules off (checked against its own deploy.csv), exact's beside it."""
    bench = load_bench("bench_loco")
    assert bench.main(["--run", str(real_run), "--rounds", "20", "--deploy"]) == 0
    out = capsys.readouterr().out.split("What progress_guard does to runs")[1]
    cells = [[c.strip() for c in line.strip("|").split("|")] for line in out.splitlines() if line.startswith("| ")]
    assert cells[0] == ["corpus", "measure", "progress_guard, dev", "progress_guard, held out", "exact"]
    rows = {(r[0], r[1]): r[2:] for r in cells[1:]}
    held = bench._deploy_counts(real_run.parent / f"{real_run.name}-deploy" / "tau_bench_airline-held-out", "progress_guard")
    for key, (what, scale) in bench.DEPLOY.items():
        c, of = held[key]
        assert rows[("tau_bench_airline", what)][1] == f"{c}/{of} ({100 * c / of:.1f} {scale})"
    saved = rows[("tau_bench_airline", "failed-run calls saved, halting at the first alarm")]
    assert saved[0] != saved[1]  # without τ-bench's rules it fires on other calls
    assert {k[1] for k in rows if k[0] == "pooled"} == {what for what, _ in bench.DEPLOY.values()}
