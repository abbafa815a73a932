"""`loopbench report` and the report written at the end of `loopbench run`."""
import re

import pandas as pd
import pytest
from click.testing import CliRunner

from sim.cli import main
from sim.report.plots import PLOTS, palette

DETS = "exact,normalized,no_progress,layered"


def invoke(*args):
    return CliRunner().invoke(main, list(args), catch_exceptions=False)


@pytest.fixture(scope="module")
def quick(tmp_path_factory):
    out = tmp_path_factory.mktemp("rep") / "q"
    r = invoke("run", "--suite", "quick", "--detectors", DETS, "--out", str(out), "--no-progress")
    assert r.exit_code == 0, r.output
    return out


def _check_report(folder, n_plots=len(PLOTS) + 1):  # + the deployment view's operating curve
    for name in ("report.md", "report.html", "intervals.csv", "paired.csv", "thresholds.csv", "delta_sensitivity.csv"):
        assert (folder / name).stat().st_size > 0, name
    pngs = sorted((folder / "plots").glob("*.png"))
    assert len(pngs) == n_plots
    for p in pngs:
        assert p.stat().st_size > 1000 and p.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n", p
    page = (folder / "report.html").read_text()
    assert len(re.findall(r'<img src="data:image/png;base64,[A-Za-z0-9+/=]{1000,}"', page)) == n_plots
    assert "http://" not in page and "https://" not in page  # self-contained
    md = (folder / "report.md").read_text()
    assert all(f"plots/{p.name}" in md for p in pngs)
    assert (folder / "plots" / "operating_curve.png").exists()


def test_run_ends_with_a_full_report(quick):
    _check_report(quick)
    md = (quick / "report.md").read_text()
    manifest = (quick / "manifest.json").read_text()
    assert re.search(r'"config_hash": "([0-9a-f]+)"', manifest).group(1) in md


def test_report_tables_have_the_documented_columns(quick):
    iv = pd.read_csv(quick / "intervals.csv")
    assert list(iv.columns) == ["detector", "family", "metric", "value", "lo", "hi"]
    assert set(iv.detector) == set(DETS.split(",")) | {"no_guard"}  # the closed loop's unguarded reference row
    assert "success_rate" in set(iv[iv.detector == "no_guard"].metric)
    assert {"score_standard", "miss_rate", "false_alarm_rate", "success_rate"} <= set(iv.metric)
    pr = pd.read_csv(quick / "paired.csv")
    assert list(pr.columns) == ["detector_a", "detector_b", "metric", "diff", "lo", "hi"]
    th = pd.read_csv(quick / "thresholds.csv")
    assert {"detector", "kind", "value", "far", "miss_rate", "median_delay", "score_standard"} <= set(th.columns)
    exact = th[th.detector == "exact"].set_index("kind")
    assert {"default", "calibrated@1%", "calibrated@5%", "calibrated_heldout", "oracle"} == set(exact.index)
    assert exact.loc["oracle", "score_standard"] >= exact.loc["default", "score_standard"] - 1e-9
    for kind in ("calibrated@1%", "calibrated@5%"):
        if "met" in exact.loc[kind, "note"] and "no value" not in exact.loc[kind, "note"]:
            assert exact.loc[kind, "far"] <= float(kind.split("@")[1].rstrip("%")) / 100
    assert set(th[th.detector == "layered"].kind) == {"default"}  # no threshold parameter
    # the default point of the sweep is the run's own metrics
    m = pd.read_csv(quick / "metrics.csv").set_index(["detector", "family"])
    assert exact.loc["default", "score_standard"] == pytest.approx(m.loc[("exact", "all"), "score_standard"], abs=1e-6)
    d = pd.read_csv(quick / "delta_sensitivity.csv")
    at5 = d[(d.detector == "normalized") & (d.delta == 5)].iloc[0]
    assert at5["miss_rate"] == pytest.approx(m.loc[("normalized", "all"), "miss_rate"], abs=1e-6)
    assert sorted(d.delta.unique()) == [0, 1, 2, 3, 5, 8, 10]


def test_report_command_regenerates_and_pools_runs(quick, tmp_path):
    again = tmp_path / "again"
    r = invoke("report", str(quick), "--out", str(again), "--rounds", "200")
    assert r.exit_code == 0, r.output
    _check_report(again)
    seed1 = tmp_path / "s1"
    assert invoke("run", "--suite", "quick", "--detectors", "exact,normalized", "--seed", "1", "--mode", "open",
                  "--out", str(seed1), "--no-progress").exit_code == 0
    pooled = tmp_path / "pooled"
    r = invoke("report", str(quick), str(seed1), "--out", str(pooled), "--rounds", "200")
    assert r.exit_code == 0, r.output
    iv = pd.read_csv(pooled / "intervals.csv")
    assert set(iv[iv.metric == "score_standard"].detector) == {"exact", "normalized"}  # the detectors both runs have
    assert "2 run folders are pooled" in (pooled / "report.md").read_text()


def test_report_refuses_what_it_cannot_read(tmp_path):
    r = CliRunner().invoke(main, ["report", str(tmp_path)])
    assert r.exit_code == 2 and "not a run folder" in r.output
    r = CliRunner().invoke(main, ["report", str(tmp_path), str(tmp_path)])
    assert r.exit_code == 2 and "--out" in r.output


def test_the_palette_is_stable_and_distinct():
    a = palette(["exact", "normalized", "layered"])
    b = palette(["layered", "exact"])
    assert a["exact"] == b["exact"] and a["layered"] == b["layered"]
    assert len({a[n] for n in a}) == 3


def test_the_analysis_jobs_in_forked_workers_equal_one_process(quick):
    """Every part of the analysis (intervals, each detector's sweep and Δ view, the closed
    loop) runs as a job on forked processes; the tables come back in detector order, exactly
    as a one-core machine computes them in-process."""
    from sim.report.analysis import DELTAS, analyse, load_runs

    data = load_runs([quick])
    forked = analyse(data, rounds=50, workers=2)
    alone = analyse(data, rounds=50, workers=1)
    assert forked.thresholds and forked.curves and forked.delta_rows and forked.closed_intervals
    for table in ("intervals", "paired", "thresholds", "curves", "delta_rows", "closed_intervals", "closed_paired"):
        assert pd.DataFrame(getattr(forked, table)).equals(pd.DataFrame(getattr(alone, table))), table
    assert forked.notes == alone.notes and forked.delays == alone.delays
    assert [r["detector"] for r in forked.thresholds] == sorted(
        (r["detector"] for r in forked.thresholds), key=list(data.detectors).index)
    assert [r["detector"] for r in forked.delta_rows] == [d for d in data.detectors for _ in DELTAS]
    assert set(forked.seconds) == {"bootstrap", "thresholds", "delta", "closed", "total"}
