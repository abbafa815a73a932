"""Leave-one-corpus-out (`loopbench report --cv corpus`, sim.report.crossval)."""
import json

import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner

from sim.cli import main
from sim.report.analysis import load_runs
from sim.report.crossval import CV_COLUMNS, METRICS, POOLED, corpus_cv, fold_totals
from sim.scoring.outcomes import composite, load_profiles
from sim.scoring.thresholds import CallScores, sweep
from sim.scoring.uncertainty import FIELDS

_, PROFILES = load_profiles()
STD = PROFILES["standard"]
K = len(FIELDS)


def invoke(*args):
    return CliRunner().invoke(main, list(args), catch_exceptions=False)


def totals(**counts) -> np.ndarray:
    t = np.zeros(K)
    for name, v in counts.items():
        t[FIELDS.index(name)] = v
    return t


# Two thresholds: value 0 fires on everything (catches each loop at its onset, alarms on every
# clean episode), value 1 never fires. Corpus "loops" has only loops: value 0 is best there;
# the other two have only clean episodes: value 1 is best there.
SENSITIVE_LOOPS = totals(looping=100, tp=100, credit=100)
STRICT_LOOPS = totals(looping=100, miss=100)
SENSITIVE_CLEAN = totals(clean=10, fp=10)
STRICT_CLEAN = totals(clean=10)


def per_corpus() -> np.ndarray:
    """(C=3, V=2, k): corpora "clean_a", "clean_b", "loops"."""
    return np.stack([np.stack([SENSITIVE_CLEAN, STRICT_CLEAN]), np.stack([SENSITIVE_CLEAN, STRICT_CLEAN]),
                     np.stack([SENSITIVE_LOOPS, STRICT_LOOPS])])


def test_the_held_out_corpus_gets_the_threshold_the_others_chose():
    pf = per_corpus()
    as_run, in_sample, heldout, pick_out, pick_in = fold_totals(pf, 1, STD)
    # On all corpora the hundred loops outweigh twenty false alarms: value 0 in-sample ...
    assert int(pick_in) == 0
    # ... but held out, "loops" gets what the clean corpora chose (value 1: it never fires) ...
    assert pick_out.tolist() == [0, 0, 1]
    np.testing.assert_array_equal(heldout[2], STRICT_LOOPS)
    np.testing.assert_array_equal(in_sample[2], SENSITIVE_LOOPS)
    # ... and each clean corpus gets value 0, chosen on the other clean corpus plus the loops.
    np.testing.assert_array_equal(heldout[0], SENSITIVE_CLEAN)
    # The pooled row is the sum of the held-out corpora; as run is the default (value 1).
    np.testing.assert_array_equal(heldout[3], heldout[:3].sum(0))
    np.testing.assert_array_equal(as_run[:3], pf[:, 1])


def test_a_held_out_pick_never_depends_on_the_held_out_corpus():
    rng = np.random.default_rng(3)
    pf = rng.integers(0, 20, size=(4, 5, K)).astype(float)
    _, _, _, pick, _ = fold_totals(pf, 2, STD)
    for c in range(4):
        changed = pf.copy()
        changed[c] = rng.integers(0, 200, size=(5, K))  # anything at all on the held-out corpus
        _, _, held, pick2, _ = fold_totals(changed, 2, STD)
        assert pick2[c] == pick[c]
        np.testing.assert_array_equal(held[c], changed[c, pick[c]])


def test_fold_totals_work_per_bootstrap_round():
    pf = per_corpus()
    rounds = np.stack([pf, pf * 2])  # (R=2, C, V, k)
    _, _, held, pick, pick_in = fold_totals(rounds, 1, STD)
    assert pick.tolist() == [[0, 0, 1], [0, 0, 1]] and pick_in.tolist() == [0, 0]
    np.testing.assert_array_equal(held[1], 2 * held[0])


@pytest.fixture(scope="module")
def real_run(tmp_path_factory):
    """The shipped half of real-dev: τ-bench airline and ReAct HotpotQA, two corpora."""
    out = tmp_path_factory.mktemp("cv") / "real"
    r = invoke("run", "--suite", "real-dev", "--detectors", "exact,no_progress,progress_guard", "--out", str(out),
               "--no-progress", "--no-report")
    assert r.exit_code == 0, r.output
    return out


def test_on_a_real_run_the_held_out_threshold_is_the_best_on_the_other_corpus(real_run):
    data = load_runs([real_run])
    cv = corpus_cv(data, rounds=50)
    assert cv.corpora == ["react_hotpotqa", "tau_bench_airline"]
    # Independently of the fold code: sweep no_progress's stored scores on each corpus alone.
    from sim.config.spec import DetectorSpec

    spec, params = data.specs["no_progress"]
    det = DetectorSpec("no_progress", spec, params).build()
    calls = CallScores.from_rows(data.calls[data.calls["detector"] == "no_progress"])
    values = sorted({1, 2, 3, 4, 5, 6, getattr(det, det.threshold_param)})
    best = {}
    for corpus in cv.corpora:
        units = {e: u for e, u in data.units.items() if u.family == corpus}
        scores = [composite(o, STD) for o in sweep(units, calls, det, values)]
        best[corpus] = (values[int(np.argmax(scores))], max(scores), scores)
    for held, other in (("react_hotpotqa", "tau_bench_airline"), ("tau_bench_airline", "react_hotpotqa")):
        row = cv.get("no_progress", held)
        chosen, _, _ = best[other]
        if best[other][2].count(best[other][1]) == 1:  # a unique optimum: the pick is determined
            assert row["value_heldout"] == str(chosen)
        assert row["heldout"] == pytest.approx(best[held][2][values.index(int(row["value_heldout"]))])
    # A detector without a threshold parameter is scored as run, both ways.
    for corpus in cv.corpora + [POOLED]:
        r = cv.get("progress_guard", corpus)
        assert r["in_sample"] == r["heldout"] == r["as_run"] and r["gap"] == 0 and r["value_heldout"] == ""
    # Deterministic.
    assert corpus_cv(load_runs([real_run]), rounds=50).rows == cv.rows



def test_cv_takes_the_reports_sweeps_and_gets_the_same_table(real_run, monkeypatch):
    import sim.report.crossval as crossval
    from sim.report.analysis import analyse

    data = load_runs([real_run])
    alone = corpus_cv(data, rounds=50)
    an = analyse(data, rounds=50, workers=2, keep_sweeps=True)  # the sweeps come back from forked workers
    assert set(an.swept) == set(data.detectors) and all(not st.outs for st in an.swept.values())
    plain = analyse(data, rounds=10, workers=1)  # a report without --cv keeps neither
    assert plain.swept == {} and plain.open_loop is None
    monkeypatch.setattr(crossval, "swept_totals", lambda *a, **k: pytest.fail("cv swept again"))
    assert corpus_cv(data, rounds=50, analysis=an).rows == alone.rows
    # Another bootstrap (other rounds or seed) is not the report's: cv makes its own.
    monkeypatch.undo()
    assert corpus_cv(data, rounds=50, seed=1, analysis=an).rows == corpus_cv(data, rounds=50, seed=1).rows

def test_report_cv_writes_the_table_and_the_section(real_run, tmp_path):
    r = invoke("report", str(real_run), "--cv", "corpus", "--rounds", "30", "--out", str(tmp_path / "rep"))
    assert r.exit_code == 0, r.output
    assert "Leave-one-corpus-out" in r.output and "progress_guard" in r.output
    df = pd.read_csv(tmp_path / "rep" / "cv.csv", keep_default_na=False)
    assert list(df.columns) == CV_COLUMNS
    assert len(df) == 3 * 3 * len(METRICS)  # detectors x (2 corpora + pooled) x metrics
    guard = df[(df.detector == "progress_guard") & (df.corpus == POOLED) & (df.metric == "score_standard")].iloc[0]
    assert guard["reference"] == "exact" and float(guard["vs_reference_lo"]) <= float(guard["vs_reference"])
    page = (tmp_path / "rep" / "report.html").read_text()
    assert "<h2>Leave-one-corpus-out</h2>" in page and "<code>tau_bench_airline</code>" in page


def test_cv_refuses_runs_it_cannot_split(real_run, tmp_path):
    one = tmp_path / "one"
    r = invoke("run", "--suite", "real-dev", "--families", "react_hotpotqa", "--detectors", "exact", "--out", str(one),
               "--no-progress", "--no-report")
    assert r.exit_code == 0, r.output
    r = CliRunner().invoke(main, ["report", str(one), "--cv", "corpus"])
    assert r.exit_code != 0 and "needs at least 2 corpora" in r.output and "react_hotpotqa" in r.output
    assert len(r.output.strip().splitlines()) == 1 and "Traceback" not in r.output
    assert not (one / "report.html").exists()
    syn = tmp_path / "syn"
    r = invoke("run", "--suite", "quick", "--families", "stale,cosmetic", "--episodes", "2", "--mode", "open",
               "--detectors", "exact", "--out", str(syn), "--no-progress", "--no-report")
    assert r.exit_code == 0, r.output
    r = CliRunner().invoke(main, ["report", str(syn), "--cv", "corpus"])
    assert r.exit_code != 0 and "synthetic run" in r.output and "'quick'" in r.output
    r = CliRunner().invoke(main, ["report", str(real_run), "--cv", "family"])
    assert r.exit_code != 0 and "'family'" in r.output


def test_family_names_from_traces_are_escaped_in_the_report(tmp_path):
    """Trace files are untrusted: a corpus named with markup reaches the page as text."""
    evil = '<script>alert("x")</script>'
    lines = []
    with open("examples/agent_trace.jsonl", encoding="utf-8") as fh:
        for line in fh:
            rec = json.loads(line)
            if rec.get("kind") == "episode":
                rec["family"] = evil if rec["episode"] == "e1" else "b&b"
            lines.append(json.dumps(rec))
    trace = tmp_path / "t.jsonl"
    trace.write_text("\n".join(lines) + "\n", encoding="utf-8")
    run = tmp_path / "run"
    r = invoke("replay", str(trace), "--detectors", "exact,no_progress", "--out", str(run), "--no-progress")
    assert r.exit_code == 0, r.output
    r = invoke("report", str(run), "--cv", "corpus", "--rounds", "20")
    assert r.exit_code == 0, r.output
    page = (run / "report.html").read_text()
    assert "<script>" not in page
    assert "&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;" in page and "b&amp;b" in page
    assert set(pd.read_csv(run / "cv.csv", keep_default_na=False)["corpus"]) == {evil, "b&b", POOLED}
    # the deployer's held-out figures name the corpora too (the trace records no run outcome:
    # what needs one is left empty, with the reason)
    assert "In a deployer" in page and "dev and held out" in page
    assert page.count("&lt;script&gt;") >= 2
    d = pd.read_csv(run / "cv_deploy.csv", keep_default_na=False)
    assert set(d["corpus"]) == {evil, "b&b", POOLED}
    stopped = d[(d.metric == "successes_stopped")]
    assert (stopped["dev"] == "").all() and (stopped["note"] == "run outcome unknown for every episode").all()
    assert (d[d.metric == "nudges_per_100_clean"]["dev"] != "").all()
    # the same corpora in a synthetic run's transfer section, ranked held out
    synth = tmp_path / "synth"
    r = invoke("run", "--suite", "quick", "--episodes", "2", "--mode", "open", "--detectors", "exact,no_progress",
               "--out", str(synth), "--no-progress", "--no-report")
    assert r.exit_code == 0, r.output
    r = invoke("report", str(synth), "--transfer", str(run), "--rounds", "20")
    assert r.exit_code == 0, r.output
    page = (synth / "report.html").read_text()
    assert "<script>" not in page and "τ-b held out" in page
    assert "<code>&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;</code>" in page and "b&amp;b" in page
    assert set(pd.read_csv(synth / "transfer_cv.csv", keep_default_na=False)["corpus"]) == {evil, "b&b", POOLED}


def test_cv_param_chooses_a_re_simulated_default_per_fold(real_run, tmp_path):
    """A non-threshold default (progress_guard.same_error_limit) chosen on the other corpus,
    checked against separate `loopbench run`s of that corpus alone at each value."""
    out = tmp_path / "rep"
    r = invoke("report", str(real_run), "--cv", "corpus", "--rounds", "20", "--out", str(out),
               "--cv-param", "progress_guard.same_error_limit=1,2")
    assert r.exit_code == 0, r.output
    df = pd.read_csv(out / "cv.csv", keep_default_na=False, dtype={c: str for c in ("value_as_run", "value_in_sample", "value_heldout")})
    score = df[(df.detector == "progress_guard") & (df.metric == "score_standard")].set_index("corpus")
    assert set(score["param"]) == {"same_error_limit"}
    tau = {}
    for v in (1, 2):  # (3 and 4 tie with 2 on τ-bench: no same-error streak there goes past 2)
        run = tmp_path / f"tau{v}"
        r = invoke("run", "--suite", "real-dev", "--families", "tau_bench_airline", "--detectors", "progress_guard",
                   "--param", f"progress_guard.same_error_limit={v}", "--out", str(run), "--no-progress", "--no-report")
        assert r.exit_code == 0, r.output
        m = pd.read_csv(run / "metrics.csv")
        tau[v] = float(m[m.family == "tau_bench_airline"]["score_standard"].iloc[0])
    best = max(tau, key=tau.get)
    assert list(tau.values()).count(tau[best]) == 1, tau  # a unique optimum on τ-bench
    # ReAct held out gets the value τ-bench chose; τ-bench as run is its default (2).
    assert score.loc["react_hotpotqa", "value_heldout"] == str(best)
    assert score.loc["tau_bench_airline", "value_as_run"] == "2"
    assert float(score.loc["tau_bench_airline", "as_run"]) == pytest.approx(tau[2], abs=1e-4)
    assert float(score.loc["tau_bench_airline", "in_sample"]) == pytest.approx(tau[int(score.loc["tau_bench_airline", "value_in_sample"])], abs=1e-4)


def test_held_out_is_beside_dev_by_default_wherever_there_are_corpora(real_run, tmp_path):
    """`loopbench report` adds leave-one-corpus-out unasked to a run over two or more corpora
    (--cv auto), not to a synthetic run or a run of one corpus, and never with --cv none;
    `loopbench run` on real traces prints it under its scoreboard."""
    r = invoke("report", str(real_run), "--rounds", "20", "--out", str(tmp_path / "auto"))
    assert r.exit_code == 0, r.output
    assert (tmp_path / "auto" / "cv.csv").is_file() and (tmp_path / "auto" / "cv_deploy.csv").is_file()
    assert "Leave-one-corpus-out, standard score" in r.output and "in a deployer's terms" in r.output
    r = invoke("report", str(real_run), "--rounds", "20", "--out", str(tmp_path / "none"), "--cv", "none")
    assert r.exit_code == 0, r.output
    assert not (tmp_path / "none" / "cv.csv").exists() and "Leave-one-corpus-out" not in r.output
    syn = tmp_path / "syn"
    r = invoke("run", "--suite", "quick", "--episodes", "2", "--mode", "open", "--detectors", "exact", "--out", str(syn),
               "--no-progress")
    assert r.exit_code == 0, r.output
    assert not (syn / "cv.csv").exists() and "Leave-one-corpus-out" not in r.output
    run = tmp_path / "real"
    r = invoke("run", "--suite", "real-dev", "--detectors", "exact,progress_guard", "--out", str(run), "--no-progress")
    assert r.exit_code == 0, r.output
    assert r.output.index("Leave-one-corpus-out, standard score") > r.output.index("| detector")  # after the scoreboard
    assert "progress_guard without the rules written from the held-out corpus" in r.output
    assert (run / "cv.csv").is_file() and "Leave-one-corpus-out" in (run / "report.md").read_text()


def test_cv_param_errors_are_one_line(real_run):
    for args, words in ((["--cv", "none", "--cv-param", "progress_guard.patience=2,3"], "needs leave-one-corpus-out"),
                        (["--cv", "corpus", "--cv-param", "nobody.patience=2"], "did not score a detector 'nobody'"),
                        (["--cv", "corpus", "--cv-param", "no_progress.threshold=2"], "has no parameter 'threshold'"),
                        (["--cv", "corpus", "--cv-param", "exact"], "expected DETECTOR.PARAM=V1,V2")):
        r = CliRunner().invoke(main, ["report", str(real_run), *args])
        assert r.exit_code == 2 and words in r.output and len(r.output.strip().splitlines()) == 1, (args, r.output)


def test_fixed_folds_score_each_corpus_with_its_given_cell_and_in_sample_as_run():
    from sim.report.crossval import fixed_folds

    pf = per_corpus()
    as_run, in_sample, heldout, pick_out, pick_in = fixed_folds(pf, 1, [1, 0, 0])
    assert pick_out.tolist() == [1, 0, 0] and int(pick_in) == 1
    np.testing.assert_array_equal(in_sample, as_run)
    np.testing.assert_array_equal(heldout[:3], np.stack([pf[0, 1], pf[1, 0], pf[2, 0]]))
    np.testing.assert_array_equal(heldout[3], heldout[:3].sum(0))
    rounds = np.stack([pf, 3 * pf])  # per bootstrap round, the same cells
    _, _, held_r, pick_r, _ = fixed_folds(rounds, 1, [1, 0, 0])
    assert pick_r.tolist() == [[1, 0, 0], [1, 0, 0]]
    np.testing.assert_array_equal(held_r[1], 3 * held_r[0])


def test_unseen_params_switch_off_what_was_written_from_the_corpus():
    from detectors.progress_guard import LAYERS_FROM, RULES_FROM
    from sim.config.spec import DetectorSpec
    from sim.config.provenance import unseen_params

    guard = DetectorSpec("progress_guard", "progress_guard", {"skip_rules": ["echo_mask"]})
    p = unseen_params(guard.build(), "react_hotpotqa", guard.params)
    assert p["skip_rules"] == ["echo_mask"] + [r for r, c in RULES_FROM.items() if "react_hotpotqa" in c]
    assert p["skip_layers"] == [name for name, c in LAYERS_FROM.items() if "react_hotpotqa" in c] == ["not_there"]
    assert "not_found_items" in p["skip_rules"] and "short_answer" not in p["skip_rules"]
    assert unseen_params(guard.build(), "my_own_agent", guard.params) is None  # a corpus nothing was written from
    assert unseen_params(DetectorSpec("exact", "exact", {}).build(), "react_hotpotqa") is None  # declares nothing


def _corpus_score(tmp_path, corpus: str, *params: str) -> float:
    run = tmp_path / f"{corpus}-{len(params)}"
    args = ["run", "--suite", "real-dev", "--families", corpus, "--detectors", "progress_guard", "--out", str(run),
            "--no-progress", "--no-report"]
    for p in params:
        args += ["--param", p]
    r = invoke(*args)
    assert r.exit_code == 0, r.output
    m = pd.read_csv(run / "metrics.csv")
    return float(m[m.family == corpus]["score_standard"].iloc[0])


def test_cv_rules_score_each_held_out_corpus_without_the_rules_written_from_it(real_run, tmp_path):
    """Checked against separate `loopbench run`s of each corpus with those rules switched off."""
    from detectors.progress_guard import LAYERS_FROM, RULES_FROM

    out = tmp_path / "rep"
    r = invoke("report", str(real_run), "--cv", "corpus", "--rounds", "20", "--out", str(out))
    assert r.exit_code == 0, r.output
    df = pd.read_csv(out / "cv.csv", keep_default_na=False)
    score = df[(df.detector == "progress_guard") & (df.metric == "score_standard")].set_index("corpus")
    for corpus in ("react_hotpotqa", "tau_bench_airline"):
        rules = json.dumps([n for n, c in RULES_FROM.items() if corpus in c])
        layers = json.dumps([n for n, c in LAYERS_FROM.items() if corpus in c])
        without = _corpus_score(tmp_path, corpus, f"progress_guard.skip_rules={rules}",
                                f"progress_guard.skip_layers={layers}")
        row = score.loc[corpus]
        assert float(row["heldout"]) == pytest.approx(without, abs=1e-4)
        assert float(row["in_sample"]) == pytest.approx(float(row["as_run"]))  # as shipped
        assert float(row["as_run"]) == pytest.approx(_corpus_score(tmp_path, corpus), abs=1e-4)
        assert row["value_heldout"] == f"without {corpus}'s rules" and row["value_in_sample"] == "as shipped"
    # On τ-bench its own rules carry the guard: held out it scores lower than as shipped.
    assert float(score.loc["tau_bench_airline", "heldout"]) < float(score.loc["tau_bench_airline", "as_run"])
    # --no-cv-rules: the guard's rules stay in, its held-out figures are as run.
    r = invoke("report", str(real_run), "--cv", "corpus", "--rounds", "20", "--out", str(tmp_path / "kept"),
               "--no-cv-rules")
    assert r.exit_code == 0, r.output
    kept = pd.read_csv(tmp_path / "kept" / "cv.csv", keep_default_na=False)
    g = kept[(kept.detector == "progress_guard") & (kept.metric == "score_standard")]
    assert (g["heldout"] == g["as_run"]).all() and (g["value_heldout"] == "").all()
    # exact and no_progress declare no rules: the same rows either way.
    same = df[df.detector != "progress_guard"].reset_index(drop=True)
    pd.testing.assert_frame_equal(same, kept[kept.detector != "progress_guard"].reset_index(drop=True))


def test_cv_param_with_the_rules_held_out_chooses_and_scores_on_the_variant(real_run, tmp_path):
    """--cv-param on the guard with its rules held out: each corpus's value is chosen on the
    other corpus scored by the guard without this corpus's rules, and scored on this corpus
    by that guard at that value (checked against a separate run)."""
    from detectors.progress_guard import LAYERS_FROM, RULES_FROM

    out = tmp_path / "rep"
    r = invoke("report", str(real_run), "--cv", "corpus", "--rounds", "20", "--out", str(out),
               "--cv-param", "progress_guard.patience=1,3")
    assert r.exit_code == 0, r.output
    assert "kept progress_guard's rules in" not in r.output
    df = pd.read_csv(out / "cv.csv", keep_default_na=False, dtype={c: str for c in ("value_as_run", "value_in_sample", "value_heldout")})
    row = df[(df.detector == "progress_guard") & (df.metric == "score_standard") & (df.corpus == "tau_bench_airline")].iloc[0]
    assert row["param"] == "patience" and row["value_as_run"] == "3"
    corpus = "tau_bench_airline"
    rules = json.dumps([n for n, c in RULES_FROM.items() if corpus in c])
    layers = json.dumps([n for n, c in LAYERS_FROM.items() if corpus in c])
    without = _corpus_score(tmp_path, corpus, f"progress_guard.skip_rules={rules}", f"progress_guard.skip_layers={layers}",
                            f"progress_guard.patience={row['value_heldout']}")
    assert float(row["heldout"]) == pytest.approx(without, abs=1e-4)
    assert float(row["as_run"]) == pytest.approx(_corpus_score(tmp_path, corpus), abs=1e-4)


def test_transfer_ranks_the_real_side_with_the_rules_held_out(real_run, tmp_path):
    synth = tmp_path / "synth"
    r = invoke("run", "--suite", "quick", "--episodes", "2", "--mode", "open", "--detectors", "exact,progress_guard",
               "--out", str(synth), "--no-progress", "--no-report")
    assert r.exit_code == 0, r.output
    for flag, rules in (([], "progress_guard"), (["--no-cv-rules"], "")):
        r = invoke("report", str(synth), "--transfer", str(real_run), "--rounds", "20", "--out", str(tmp_path / f"r{len(flag)}"),
                   *flag)
        assert r.exit_code == 0, r.output
        df = pd.read_csv(tmp_path / f"r{len(flag)}" / "transfer_cv.csv", keep_default_na=False)
        assert set(df["rules_held_out"]) == {rules}
        said = "`progress_guard` without the rules written from the held-out corpus" in r.output
        assert said is bool(rules)
        # the held-out ranking drawn beside the as-run one
        assert (tmp_path / f"r{len(flag)}" / "plots" / "transfer_heldout.png").stat().st_size > 0
        assert "Transfer of the ranking, held out" in (tmp_path / f"r{len(flag)}" / "report.html").read_text()


def test_variant_folds_choose_on_each_corpus_own_variant():
    from sim.report.crossval import variant_folds

    pf = per_corpus()
    # With every variant the detector as shipped, the folds are leave-one-corpus-out's own.
    same = variant_folds(pf, [pf, pf, pf], 1, STD)
    for a, b in zip(same, fold_totals(pf, 1, STD)):
        np.testing.assert_array_equal(a, b)
    # Held out, "loops" is chosen and scored on its variant: there the other corpora have loops
    # that value 0 catches without a false alarm, so they choose value 0, which catches its loops.
    variant = pf.copy()
    variant[:2, 0] = totals(clean=10, looping=10, tp=10, credit=10)
    variant[:2, 1] = totals(clean=10, looping=10, miss=10)
    as_run, in_sample, held, pick_out, pick_in = variant_folds(pf, [pf, pf, variant], 1, STD)
    assert pick_out.tolist() == [0, 0, 0]
    np.testing.assert_array_equal(held[2], SENSITIVE_LOOPS)
    np.testing.assert_array_equal(as_run[:3], pf[:, 1])  # as run and in-sample: as shipped
    np.testing.assert_array_equal(in_sample, fold_totals(pf, 1, STD)[1])


def test_pooled_run_folders_keep_the_rules_in_and_the_report_says_so(real_run, tmp_path):
    again = tmp_path / "again"
    r = invoke("run", "--suite", "real-dev", "--detectors", "exact,progress_guard", "--out", str(again),
               "--no-progress", "--no-report")
    assert r.exit_code == 0, r.output
    r = invoke("report", str(real_run), str(again), "--cv", "corpus", "--rounds", "20", "--out", str(tmp_path / "rep"))
    assert r.exit_code == 0, r.output
    assert "kept every detector's rules in" in r.output and "pools several" in r.output
    df = pd.read_csv(tmp_path / "rep" / "cv.csv", keep_default_na=False)
    g = df[(df.detector == "progress_guard") & (df.metric == "score_standard")]
    assert (g["heldout"] == g["as_run"]).all()


def test_the_verdict_names_the_held_out_leader_and_whether_its_lead_is_real(real_run):
    from sim.report.crossval import verdict
    from sim.scoring.uncertainty import percentile_interval

    from sim.tuning.loco import rule_grids

    data = load_runs([real_run])
    cv = corpus_cv(data, rounds=200, grids=rule_grids(data, set(), []))
    first, second = cv.detectors()[:2]
    lo, hi = percentile_interval(cv.heldout_rounds[first][:, -1] - cv.heldout_rounds[second][:, -1])
    said = verdict(cv)
    assert said.startswith(f"Verdict held out: `{first}` leads") and f"over `{second}`" in said
    assert f"[{lo:.1f}, {hi:.1f}]" in said
    assert ("excludes 0" in said) == (lo > 0)
    # exact leads held out here; as run it is progress_guard, whose place held out is named
    assert first == "exact" and "The leader as run, `progress_guard`" in said and "#2 held out" in said


def test_real_injected_is_left_out_by_the_corpus_each_episode_was_built_from(tmp_path):
    """real-injected reports under injection kinds; leave-one-corpus-out groups its episodes by
    the corpus each was built from (the id's prefix), and holds the guard's rules out with it:
    τ-bench's held-out score is a separate run with τ-bench's rules off, on the episodes built
    from τ-bench."""
    from detectors.progress_guard import LAYERS_FROM, RULES_FROM
    from sim.report.analysis import outcome_objects

    inj = tmp_path / "inj"
    r = invoke("run", "--suite", "real-injected", "--detectors", "exact,progress_guard", "--out", str(inj),
               "--no-progress", "--no-report")
    assert r.exit_code == 0, r.output
    r = invoke("report", str(inj), "--rounds", "20")
    assert r.exit_code == 0, r.output
    assert "Leave-one-corpus-out, standard score (pooled; then each corpus held out): react_hotpotqa, tau_bench_airline" in r.output
    cv = pd.read_csv(inj / "cv.csv", keep_default_na=False)
    assert set(cv["corpus"]) == {"react_hotpotqa", "tau_bench_airline", POOLED}
    assert (inj / "cv_deploy.csv").is_file()
    corpus = "tau_bench_airline"
    alone = tmp_path / "alone"
    r = invoke("run", "--suite", "real-injected", "--detectors", "progress_guard", "--out", str(alone), "--no-progress",
               "--no-report", "--param", f"progress_guard.skip_rules={json.dumps([n for n, c in RULES_FROM.items() if corpus in c])}",
               "--param", f"progress_guard.skip_layers={json.dumps([n for n, c in LAYERS_FROM.items() if corpus in c])}")
    assert r.exit_code == 0, r.output
    eps = pd.read_csv(alone / "episodes.csv")
    built = eps[eps["episode"].str.startswith(corpus + ":")]
    expected = composite(outcome_objects(built), STD)
    row = cv[(cv.detector == "progress_guard") & (cv.corpus == corpus) & (cv.metric == "score_standard")].iloc[0]
    assert float(row["heldout"]) == pytest.approx(expected, abs=1e-6)
    assert row["value_heldout"] == f"without {corpus}'s rules"


def test_a_run_is_re_analysed_with_the_parameters_it_ran_with(real_run, monkeypatch):
    """A default changed after a run (here `no_progress`'s patience) does not change what the
    run's report re-derives: the detector is rebuilt from the values it resolved then, so its
    threshold sweep and leave-one-corpus-out pick from the verdicts it actually gave."""
    from sim.config.spec import DetectorSpec
    from detectors.layers import NoProgressDetector

    before = corpus_cv(load_runs([real_run]), rounds=20).get("no_progress", POOLED)
    monkeypatch.setitem(NoProgressDetector.__init__.__kwdefaults__, "patience", 7)
    data = load_runs([real_run])
    assert data.specs["no_progress"][1]["patience"] == 3
    assert DetectorSpec("no_progress", *data.specs["no_progress"]).build().patience == 3
    after = corpus_cv(data, rounds=20).get("no_progress", POOLED)
    assert after["heldout"] == before["heldout"] and after["value_as_run"] == "3"
