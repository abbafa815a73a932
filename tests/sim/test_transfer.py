"""Transfer between a synthetic and a real run: Kendall τ-b, ranks, top picks, the report section."""
import csv
import itertools

import pytest
from click.testing import CliRunner
from hypothesis import given
from hypothesis import strategies as st

from sim.cli import main
import numpy as np

from sim.report.transfer import kendall_tau_b, kendall_tau_b_rounds, ranks, transfer


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


@given(st.lists(st.integers(0, 4), min_size=2, max_size=8), st.data())
def test_tau_b_over_rounds_is_tau_b_of_each_round(x, data):
    rows = data.draw(st.lists(st.lists(st.integers(0, 4), min_size=len(x), max_size=len(x)), min_size=1, max_size=5))
    got = kendall_tau_b_rounds(x, np.asarray(rows, dtype=float))
    for row, tau in zip(rows, got):
        want = kendall_tau_b(x, row)
        assert (np.isnan(tau) and want is None) or tau == pytest.approx(want)


def test_held_out_tau_gets_a_basic_bootstrap_interval():
    from sim.report.transfer import heldout_transfer

    synthetic = {"a": 90.0, "b": 50.0, "c": 10.0}
    cv = _cv_rows({"tau": {"a": (80, 80), "b": (60, 60), "c": (5, 5)}, "web": {"a": (70, 70), "b": (50, 50), "c": (10, 10)},
                   "pooled": {"a": (75, 75), "b": (55, 55), "c": (8, 8)}})
    steady = {d: np.tile(np.array([[80.0, 70.0, 75.0]]) - 25 * i, (50, 1)) for i, d in enumerate("abc")}
    rows = heldout_transfer(synthetic, cv, ["tau", "web"], heldout_rounds=steady)
    assert all(r["tau_heldout"] == r["tau_heldout_lo"] == r["tau_heldout_hi"] == 1.0 for r in rows)  # no noise, no width
    # Pooled held out the real order is a, c, b (τ-b 1/3 against a, b, c); in half the rounds c
    # also passes a (τ-b -1/3). The rounds sit below the point, so the basic interval,
    # 2 × point − the rounds' percentiles, lies above it: [1/3, 1].
    moved = {"a": np.tile([[80.0, 70.0, 75.0]], (50, 1)), "b": np.tile([[55.0, 45.0, 50.0]], (50, 1)),
             "c": np.tile([[30.0, 20.0, 60.0]], (50, 1))}
    moved["c"][::2, 2] = 90.0
    cv_moved = _cv_rows({"tau": {"a": (80, 80), "b": (55, 55), "c": (30, 30)}, "web": {"a": (70, 70), "b": (45, 45), "c": (20, 20)},
                         "pooled": {"a": (75, 75), "b": (50, 50), "c": (60, 60)}})
    pooled = heldout_transfer(synthetic, cv_moved, ["tau", "web"], heldout_rounds=moved)[-1]
    assert pooled["tau_heldout"] == pytest.approx(1 / 3)
    assert (pooled["tau_heldout_lo"], pooled["tau_heldout_hi"]) == (pytest.approx(1 / 3), 1.0)
    assert pooled["tau_both_heldout_lo"] is None  # no synthetic held-out scores given


def test_ranks_share_ties_and_transfer_summarises():
    assert ranks({"a": 2.0, "b": 2.0, "c": 5.0}) == {"c": 1, "a": 2, "b": 2}
    rows, summary = transfer({"a": 90, "b": 50, "c": 10, "x": 1}, {"a": 40, "b": 60, "c": 5, "y": 2})
    assert [r["detector"] for r in rows] == ["a", "b", "c"]
    assert summary["top_synthetic"] == "a" and summary["top_synthetic_real_rank"] == 2
    assert summary["top_real"] == "b" and not summary["same_top"]
    assert summary["kendall_tau"] == pytest.approx(1 / 3)
    assert summary["only_synthetic"] == ["x"] and summary["only_real"] == ["y"]
    assert next(r for r in rows if r["detector"] == "a")["rank_change"] == 1


DETS = "exact,normalized,no_progress,cline"


def _report_with_transfer(tmp_path, synth: list[str], real: list[str]):
    """Run the two suites (open loop, the four detectors), then report the first with --transfer the second."""
    runner = CliRunner()
    for name, args in (("synth", synth), ("real", real)):
        r = runner.invoke(main, ["run", *args, "--mode", "open", "--detectors", DETS, "--out", str(tmp_path / name),
                                 "--no-progress"], catch_exceptions=False)
        assert r.exit_code == 0, r.output
    r = runner.invoke(main, ["report", str(tmp_path / "synth"), "--transfer", str(tmp_path / "real"), "--rounds", "20"],
                      catch_exceptions=False)
    assert r.exit_code == 0, r.output
    return r


def test_report_with_transfer_writes_table_section_and_plot(tmp_path):
    dets = DETS
    r = _report_with_transfer(tmp_path, ["--suite", "quick", "--episodes", "3", "--seed", "1"],
                              ["--suite", "quick", "--episodes", "3", "--seed", "2"])
    assert "Kendall τ-b" in r.output
    rows = list(csv.DictReader(open(tmp_path / "synth" / "transfer.csv", encoding="utf-8")))
    assert sorted(r["detector"] for r in rows) == sorted(dets.split(","))
    assert sorted(int(r["synthetic_rank"]) for r in rows)[0] == 1
    report = (tmp_path / "synth" / "report.md").read_text(encoding="utf-8")
    assert "## Transfer: synthetic `quick` against real `quick`" in report
    assert (tmp_path / "synth" / "plots" / "transfer.png").stat().st_size > 1000
    assert set(itertools.chain.from_iterable(r.keys() for r in rows)) >= {"rank_change", "score_change"}
    # a synthetic "real" run has no corpora to hold out: no held-out transfer, no error
    assert not (tmp_path / "synth" / "transfer_cv.csv").exists() and "Held out" not in report


def _cv_rows(scores: dict) -> list[dict]:
    """CrossVal rows (score_standard only) from {corpus: {detector: (in_sample, heldout)}}; as run =
    in-sample, except where a detector's threshold as run is worse (``"c"`` on ``tau``)."""
    return [{"detector": d, "corpus": c, "metric": "score_standard", "in_sample": ins, "heldout": ho,
             "as_run": 99 if (c, d) == ("tau", "c") else ins}
            for c, by_det in scores.items() for d, (ins, ho) in by_det.items()]


def test_heldout_transfer_ranks_the_real_side_in_sample_and_held_out_per_corpus():
    from sim.report.transfer import heldout_text, heldout_transfer

    synthetic = {"a": 90.0, "b": 50.0, "c": 10.0}
    rows = heldout_transfer(synthetic, _cv_rows({
        "tau": {"a": (80, 80), "b": (60, 60), "c": (5, 5)},      # the same order both ways
        "web": {"a": (70, 20), "b": (50, 50), "c": (10, 10)},    # a's threshold chosen elsewhere fails here
        "pooled": {"a": (75, 40), "b": (55, 55), "c": (8, 8)},
    }), ["tau", "web"], synthetic_heldout={"a": 30.0, "b": 50.0, "c": 10.0})
    assert [r["corpus"] for r in rows] == ["tau", "web", "pooled"]
    by = {r["corpus"]: r for r in rows}
    assert by["tau"]["tau_in_sample"] == by["tau"]["tau_heldout"] == 1.0
    assert by["tau"]["tau_as_run"] == pytest.approx(-1 / 3) and by["tau"]["top_as_run"] == "c"
    assert by["web"]["tau_in_sample"] == 1.0 and by["web"]["tau_heldout"] == pytest.approx(1 / 3)
    assert by["pooled"]["top_in_sample"] == "a" and by["pooled"]["top_heldout"] == "b"
    assert by["pooled"]["synthetic_top"] == "a" and by["pooled"]["synthetic_top_rank_heldout"] == 2
    # a's threshold chosen without the family scored fails on the synthetic side too: both held out agree
    assert by["pooled"]["tau_both_heldout"] == 1.0 and by["tau"]["tau_both_heldout"] == pytest.approx(1 / 3)
    text = heldout_text(rows)
    assert "pooled 0.33 (as run 1.00, thresholds chosen on all corpora 1.00; both sides held out, " \
           "the synthetic one leave-one-family-out, 1.00)" in text
    assert "`a` is #2 held out" in text and "web 0.33 (1.00, 1.00)" in text and "tau 1.00 (-0.33, 1.00)" in text


def test_report_transfer_against_a_real_run_adds_the_held_out_ranking(tmp_path):
    # real-dev's shipped traces (τ-bench, ReAct): two corpora to hold out one at a time
    r = _report_with_transfer(tmp_path, ["--suite", "quick", "--episodes", "3", "--no-report"],
                              ["--suite", "real-dev", "--no-report"])
    assert "Held out (leave-one-corpus-out" in r.output
    rows = list(csv.DictReader(open(tmp_path / "synth" / "transfer_cv.csv", encoding="utf-8")))
    assert [r["corpus"] for r in rows] == ["react_hotpotqa", "tau_bench_airline", "pooled"]
    assert all(int(r["detectors"]) == 4 for r in rows)
    assert all(-1 <= float(r["tau_heldout"]) <= 1 for r in rows if r["tau_heldout"])
    assert all(-1 <= float(r["tau_heldout_lo"]) <= float(r["tau_heldout_hi"]) <= 1 for r in rows if r["tau_heldout_lo"])
    assert rows[-1]["tau_heldout_lo"] and f"pooled {float(rows[-1]['tau_heldout']):.2f} [" in r.output
    report = (tmp_path / "synth" / "report.md").read_text(encoding="utf-8")
    assert "| real corpus | detectors | τ-b as run | τ-b in-sample | τ-b held out | τ-b both held out |" in report
    assert all(r["tau_both_heldout"] for r in rows)
    # as run, pooled, is the transfer line's τ-b over the same detectors
    pooled = rows[-1]
    assert f"over 4 detectors: {float(pooled['tau_as_run']):.2f}" in r.output
