"""Leave-one-corpus-out in a deployer's terms (`loopbench report --cv corpus`: cv_deploy.csv,
sim.report.cv_deploy): every deployment figure dev and held out, each held-out corpus checked
against a separate run of that corpus as leave-one-corpus-out configured it."""
import json

import pandas as pd
import pytest
from click.testing import CliRunner

from sim.cli import main
from sim.report.cv_deploy import CV_DEPLOY_COLUMNS, _halts_with_alarms

CORPORA = ("react_hotpotqa", "tau_bench_airline")
#: The deploy.csv figures compared count by count: (action, metric).
COMPARED = (("halt", "successes_stopped"), ("halt", "failed_calls_saved"), ("halt", "loops_caught"),
            ("configured", "successes_stopped"), ("configured", "failed_calls_saved"),
            ("nudge", "nudges_per_100_clean"))


def invoke(*args):
    return CliRunner().invoke(main, list(args), catch_exceptions=False)


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    """The shipped half of real-dev (τ-bench airline and ReAct HotpotQA), reported with --cv corpus."""
    base = tmp_path_factory.mktemp("cvd")
    run = base / "real"
    r = invoke("run", "--suite", "real-dev", "--detectors", "exact,no_progress,progress_guard", "--out", str(run),
               "--no-progress", "--no-report")
    assert r.exit_code == 0, r.output
    r = invoke("report", str(run), "--cv", "corpus", "--rounds", "30", "--out", str(base / "rep"))
    assert r.exit_code == 0, r.output
    return run, base / "rep", r.output


def _counts(rows: pd.DataFrame, det: str, side: str) -> dict:
    got = rows[rows.detector == det]
    return {(a, m): (got[(got.action == a) & (got.metric == m)][f"{side}_count"].iloc[0],
                     got[(got.action == a) & (got.metric == m)][f"{side}_of"].iloc[0]) for a, m in COMPARED}


def _separate_run(tmp_path, corpus: str, det: str, *params: str) -> dict:
    out = tmp_path / f"{det}-{corpus}-{len(params)}"
    args = ["run", "--suite", "real-dev", "--families", corpus, "--detectors", det, "--out", str(out), "--no-progress"]
    for p in params:
        args += ["--param", p]
    r = invoke(*args)
    assert r.exit_code == 0, r.output
    d = pd.read_csv(out / "deploy.csv")
    d = d[d.detector == det]
    return {(a, m): (d[(d.action == a) & (d.metric == m)]["count"].iloc[0], d[(d.action == a) & (d.metric == m)]["of"].iloc[0])
            for a, m in COMPARED}


def test_dev_figures_are_the_deployment_views_own(report):
    _, rep, _ = report
    cvd = pd.read_csv(rep / "cv_deploy.csv")
    assert list(cvd.columns) == CV_DEPLOY_COLUMNS
    pooled = cvd[cvd.corpus == "pooled"].merge(pd.read_csv(rep / "deploy.csv"), on=["detector", "action", "metric"])
    assert len(pooled) == len(cvd[cvd.corpus == "pooled"])
    assert ((pooled["dev"] - pooled["value"]).abs().fillna(0) < 1e-12).all()
    assert (pooled["dev"].isna() == pooled["value"].isna()).all()
    per = cvd[cvd.corpus != "pooled"].merge(pd.read_csv(rep / "deploy_corpora.csv"),
                                             on=["corpus", "detector", "action", "metric"])
    assert len(per) == len(cvd[cvd.corpus != "pooled"]) and ((per["dev"] - per["value"]).abs().fillna(0) < 1e-12).all()


def test_the_guard_held_out_is_a_run_of_each_corpus_without_its_rules(report, tmp_path):
    """progress_guard declares its rules' corpora: each corpus's held-out figures are those of a
    separate run of that corpus with the rules written from it switched off."""
    from detectors.progress_guard import LAYERS_FROM, RULES_FROM

    _, rep, _ = report
    cvd = pd.read_csv(rep / "cv_deploy.csv")
    for corpus in CORPORA:
        rules = json.dumps([n for n, c in RULES_FROM.items() if corpus in c])
        layers = json.dumps([n for n, c in LAYERS_FROM.items() if corpus in c])
        alone = _separate_run(tmp_path, corpus, "progress_guard", f"progress_guard.skip_rules={rules}",
                              f"progress_guard.skip_layers={layers}")
        held = _counts(cvd[cvd.corpus == corpus], "progress_guard", "heldout")
        assert held == alone, corpus
        assert _counts(cvd[cvd.corpus == corpus], "progress_guard", "dev") == _separate_run(tmp_path, corpus, "progress_guard")
    g = cvd[(cvd.detector == "progress_guard") & (cvd.corpus == "tau_bench_airline")]
    assert g["heldout_as"].iloc[0].startswith("react_hotpotqa: without react_hotpotqa's rules")
    # On τ-bench its own rules keep it quiet: held out it nudges on clean calls it let pass as shipped.
    nudges = g[g.metric == "nudges_per_100_clean"].iloc[0]
    assert nudges["heldout_count"] > nudges["dev_count"]


def test_a_threshold_detector_held_out_is_a_run_at_the_threshold_the_other_corpus_chose(report, tmp_path):
    _, rep, _ = report
    cv = pd.read_csv(rep / "cv.csv", keep_default_na=False)
    cvd = pd.read_csv(rep / "cv_deploy.csv")
    for corpus in CORPORA:
        value = cv[(cv.detector == "no_progress") & (cv.corpus == corpus) & (cv.metric == "score_standard")]["value_heldout"].iloc[0]
        alone = _separate_run(tmp_path, corpus, "no_progress", f"no_progress.patience={value}")
        held = _counts(cvd[cvd.corpus == corpus], "no_progress", "heldout")
        # no_progress only nudges: as configured it never halts, held out either
        assert held == alone, (corpus, value)


def test_a_default_chosen_per_fold_is_held_out_in_a_deployers_terms_too(report, tmp_path):
    """--cv-param: each corpus's held-out figures are those of a separate run at the value the
    other corpus chose — for the guard, without this corpus's rules, re-simulated per cell; for
    no_progress, whose patience is its threshold, from one run's scores."""
    from detectors.progress_guard import LAYERS_FROM, RULES_FROM

    run, _, _ = report
    out = tmp_path / "rep"
    r = invoke("report", str(run), "--cv", "corpus", "--rounds", "20", "--out", str(out),
               "--cv-param", "progress_guard.patience=1,3", "--cv-param", "no_progress.patience=1,2,4")
    assert r.exit_code == 0, r.output
    assert "kept no per-call verdicts" not in r.output
    cv = pd.read_csv(out / "cv.csv", keep_default_na=False, dtype={"value_heldout": str})
    cvd = pd.read_csv(out / "cv_deploy.csv")
    chosen = {}
    for det in ("progress_guard", "no_progress"):
        for corpus in CORPORA:
            value = cv[(cv.detector == det) & (cv.corpus == corpus) & (cv.metric == "score_standard")]["value_heldout"].iloc[0]
            chosen[det, corpus] = value
            params = [f"{det}.patience={value}"]
            if det == "progress_guard":
                params += [f"progress_guard.skip_rules={json.dumps([n for n, c in RULES_FROM.items() if corpus in c])}",
                           f"progress_guard.skip_layers={json.dumps([n for n, c in LAYERS_FROM.items() if corpus in c])}"]
            assert _counts(cvd[cvd.corpus == corpus], det, "heldout") == _separate_run(tmp_path, corpus, det, *params), \
                (det, corpus, value)
            said = cvd[(cvd.detector == det) & (cvd.corpus == corpus)]["heldout_as"].iloc[0]
            assert f"{corpus}: patience={value}" in said
    # not every fold kept the default: the held-out figures are not the dev ones relabelled
    assert any(v != "3" for (det, _), v in chosen.items() if det == "no_progress")


def test_held_out_catches_agree_with_the_leave_one_corpus_out_recall(report):
    """Two code paths, one answer: the loops a held-out halt catches within Δ are cv.csv's held-out recall."""
    _, rep, _ = report
    cv = pd.read_csv(rep / "cv.csv", keep_default_na=False)
    cvd = pd.read_csv(rep / "cv_deploy.csv")
    for det in ("exact", "no_progress", "progress_guard"):
        for corpus in CORPORA + ("pooled",):
            recall = cv[(cv.detector == det) & (cv.corpus == corpus) & (cv.metric == "recall")]["heldout"].iloc[0]
            r = cvd[(cvd.detector == det) & (cvd.corpus == corpus) & (cvd.action == "halt")
                    & (cvd.metric == "loops_caught")].iloc[0]
            assert r["heldout"] == pytest.approx(float(recall)), (det, corpus)


def test_the_report_and_the_cli_say_it_dev_beside_held_out(report):
    _, rep, out = report
    assert "in a deployer's terms, pooled, as run -> held out" in out
    table = out[out.index("in a deployer's terms"):]
    line = next(ln for ln in table.splitlines() if ln.startswith("progress_guard "))
    assert " -> " in line and " of " in line
    md = (rep / "report.md").read_text()
    assert "### In a deployer's terms: dev and held out" in md
    assert "Held out, `progress_guard` halting at its first alarm stops" in md
    # the trade, in a deployer's units, computed from the held-out rows
    d = pd.read_csv(rep / "cv_deploy.csv").set_index(["detector", "corpus", "action", "metric"])
    pg = lambda a, m: d.loc[("progress_guard", "pooled", a, m)]  # noqa: E731
    kept = int(pg("halt", "successes_stopped").heldout_count - pg("configured", "successes_stopped").heldout_count)
    given = 100 * (pg("halt", "failed_calls_saved").heldout - pg("configured", "failed_calls_saved").heldout)
    assert f"Nudging first instead of halting at once: {kept} fewer successful run" in md
    assert f"{given:.1f} points fewer of the failed runs' calls saved (held out)" in md


def test_no_cv_rules_leaves_the_guard_as_run(report, tmp_path):
    run, _, _ = report
    r = invoke("report", str(run), "--cv", "corpus", "--rounds", "30", "--out", str(tmp_path / "kept"), "--no-cv-rules")
    assert r.exit_code == 0, r.output
    cvd = pd.read_csv(tmp_path / "kept" / "cv_deploy.csv")
    g = cvd[cvd.detector == "progress_guard"]
    assert (g["heldout_as"] == "as run").all()
    both = g.dropna(subset=["dev"])
    assert len(both) and (both["heldout"] == both["dev"]).all() and (both["change"] == 0).all()


def test_which_alarms_halt_at_another_threshold_is_known_only_when_all_or_none_did():
    frame = lambda *v: pd.DataFrame({"verdict": list(v)})  # noqa: E731
    assert _halts_with_alarms(frame("allow", "stop", "escalate")) is True
    assert _halts_with_alarms(frame("allow", "nudge", "prune")) is False
    assert _halts_with_alarms(frame("allow", "allow")) is False
    assert _halts_with_alarms(frame("allow", "stop", "nudge")) is None
