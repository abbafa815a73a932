"""bench/bench_ablation.py on the shipped τ-bench traces: one layer off, its change against the full guard."""
from __future__ import annotations

import pytest

from tests.benchscripts import load_bench


def _bench():
    return load_bench("bench_ablation")


def test_fan_out_off_brings_back_the_one_tau_false_alarm(tmp_path, capsys):
    # τ-bench's task3_trial0 tries the profile's gift cards one after another, refused alike.
    # With fan_out the same-error layer lets that through (the guard's τ dev score is exact's);
    # without the rule the streak stops it, the guard's one false alarm there; the same_error
    # layer off then moves nothing, and the signature layer off loses loops. The shipped traces
    # alone (τ-bench, ReAct), whether or not the corpora are beside the checkout.
    bench = _bench()
    assert bench.main(["--suites", "real-dev", "--layers", "same_error,signature", "--rules", "fan_out",
                       "--shipped-only", "--out", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    cells = [[c.strip() for c in line.strip("|").split("|")]
             for line in out.split("### real-dev")[1].split("in a deployer's terms")[0].splitlines() if line.startswith("| ")]
    tau = cells[0].index("tau_bench_airline")
    rows = {row[0]: row for row in cells}
    assert rows["the guard"][tau] == "99.0" == rows["`exact`"][tau]
    assert rows["− fan_out"][tau] == "98.4 (-0.6, false +1)"
    assert rows["− same_error"][tau] == "99.0"
    assert "tp -" in rows["− signature"][tau]
    # Held out: each corpus scored without the rules written from it (RULES_FROM, LAYERS_FROM),
    # the pooled column over every episode each way — bench_loco's leave-one-corpus-out figure.
    held = rows["held out: each corpus without its own rules"]
    assert held[tau].startswith("70.9 (-28.1")
    assert float(held[cells[0].index("all")].split()[0]) < float(rows["the guard"][cells[0].index("all")])
    assert cells[0][1:] == ["all", "react_hotpotqa", "tau_bench_airline"]


def test_a_rule_switched_off_is_a_variant_beside_the_layers(tmp_path, capsys):
    # --rules gives one row per rule, named as the rule, from the same run as the layers'.
    bench = _bench()
    assert bench.main(["--suites", "real-dev", "--layers", "", "--rules", "error_news,echo_mask,write_acts",
                       "--shipped-only", "--out", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    scores, deploy = out.split("in a deployer's terms")
    labels = [line.strip("|").split("|")[0].strip() for line in scores.splitlines() if line.startswith("| ")]
    assert labels == ["variant", "the guard", "− error_news", "− echo_mask", "− write_acts", "`exact`",
                      "held out: each corpus without its own rules"]
    assert "without_echo_mask" in (tmp_path / "real-dev" / "metrics.csv").read_text()
    # write_acts moves no first alarm (its score row says nothing moved) but one stop as configured:
    # τ-bench task13_trial2, a successful run whose agent handed over to a human after three refused changes
    score = {ln.strip("|").split("|")[0].strip(): ln.split("|")[2].strip() for ln in scores.splitlines() if ln.startswith("| ")}
    assert score["− write_acts"] == score["the guard"]
    rows = {ln.strip("|").split("|")[0].strip(): [c.strip() for c in ln.strip("|").split("|")[1:]]
            for ln in deploy.splitlines() if ln.startswith("| ")}
    assert rows["the guard"][0] == "0/53" and rows["− write_acts"][0] == "1/53 (+1)"
    assert rows["− error_news"] == ["–", "–", "–", "–"]


@pytest.mark.parametrize("argv, message", [
    (["--layers", "nope"], "'nope' is no layer"),
    (["--rules", "nope"], "'nope' is no rule"),
    (["--layers", "", "--rules", ""], "nothing to switch off"),
])
def test_unknown_names_are_refused_in_one_line(argv, message, capsys):
    with pytest.raises(SystemExit) as exc:
        _bench().main(argv)
    assert exc.value.code == 2
    assert message in capsys.readouterr().err


def test_source_table_counts_alarm_changes_by_the_corpus_an_episode_was_built_from(tmp_path):
    rows = ["detector,episode,family,unit,outcome",
            "progress_guard,tau:t1~stale,inj_stale,n1,tp", "progress_guard,tau:t2~retry,inj_retry,episode,fp",
            "progress_guard,react:L1~stale,inj_stale,n1,tp",
            "without_same_error,tau:t1~stale,inj_stale,n1,tp", "without_same_error,tau:t2~retry,inj_retry,episode,tn",
            "without_same_error,react:L1~stale,inj_stale,n1,miss",
            "exact,tau:t1~stale,inj_stale,n1,early", "exact,tau:t2~retry,inj_retry,episode,fp",
            "exact,react:L1~stale,inj_stale,n1,tp"]
    (tmp_path / "episodes.csv").write_text("\n".join(rows) + "\n")
    lines = _bench().source_table(tmp_path, "real-injected", [("skip_layers", "same_error")])
    table = [ln for ln in lines if ln.startswith("| ")]
    assert table[0] == "| variant | react | tau |"
    assert table[1] == "| − same_error | tp -1 | false -1 |"
    assert table[2] == "| `exact` | – | tp -1, false +1 |"
