"""Transfer between a synthetic and a real run: Kendall τ-b, ranks, top picks, the report section."""
import csv
import itertools

import pytest
from click.testing import CliRunner
from hypothesis import given
from hypothesis import strategies as st

from sim.cli import main
from sim.report.transfer import kendall_tau_b, ranks, transfer


def test_tau_extremes_and_a_known_value():
    assert kendall_tau_b([1, 2, 3, 4], [10, 20, 30, 40]) == 1.0
    assert kendall_tau_b([1, 2, 3, 4], [4, 3, 2, 1]) == -1.0
    assert kendall_tau_b([1, 2, 3], [1, 3, 2]) == pytest.approx(1 / 3)
    assert kendall_tau_b([1, 1, 1], [1, 2, 3]) is None
    assert kendall_tau_b([1], [1]) is None


@given(st.lists(st.tuples(st.integers(0, 5), st.integers(0, 5)), min_size=2, max_size=12))
def test_tau_b_matches_scipy(pairs):
    stats = pytest.importorskip("scipy.stats")
    x, y = [p[0] for p in pairs], [p[1] for p in pairs]
    ours = kendall_tau_b(x, y)
    theirs = stats.kendalltau(x, y).statistic
    if ours is None:
        assert theirs != theirs  # NaN
    else:
        assert ours == pytest.approx(theirs)


def test_ranks_share_ties_and_transfer_summarises():
    assert ranks({"a": 2.0, "b": 2.0, "c": 5.0}) == {"c": 1, "a": 2, "b": 2}
    rows, summary = transfer({"a": 90, "b": 50, "c": 10, "x": 1}, {"a": 40, "b": 60, "c": 5, "y": 2})
    assert [r["detector"] for r in rows] == ["a", "b", "c"]
    assert summary["top_synthetic"] == "a" and summary["top_synthetic_real_rank"] == 2
    assert summary["top_real"] == "b" and not summary["same_top"]
    assert summary["kendall_tau"] == pytest.approx(1 / 3)
    assert summary["only_synthetic"] == ["x"] and summary["only_real"] == ["y"]
    assert next(r for r in rows if r["detector"] == "a")["rank_change"] == 1


def test_report_with_transfer_writes_table_section_and_plot(tmp_path):
    runner = CliRunner()
    dets = "exact,normalized,no_progress,cline"
    for name, seed in (("synth", "1"), ("real", "2")):
        r = runner.invoke(main, ["run", "--suite", "quick", "--episodes", "3", "--mode", "open", "--seed", seed,
                                 "--detectors", dets, "--out", str(tmp_path / name), "--no-progress"],
                          catch_exceptions=False)
        assert r.exit_code == 0, r.output
    r = runner.invoke(main, ["report", str(tmp_path / "synth"), "--transfer", str(tmp_path / "real"), "--rounds", "20"],
                      catch_exceptions=False)
    assert r.exit_code == 0, r.output
    assert "Kendall τ-b" in r.output
    rows = list(csv.DictReader(open(tmp_path / "synth" / "transfer.csv", encoding="utf-8")))
    assert sorted(r["detector"] for r in rows) == sorted(dets.split(","))
    assert sorted(int(r["synthetic_rank"]) for r in rows)[0] == 1
    report = (tmp_path / "synth" / "report.md").read_text(encoding="utf-8")
    assert "## Transfer: synthetic `quick` against real `quick`" in report
    assert (tmp_path / "synth" / "plots" / "transfer.png").stat().st_size > 1000
    assert set(itertools.chain.from_iterable(r.keys() for r in rows)) >= {"rank_change", "score_change"}
