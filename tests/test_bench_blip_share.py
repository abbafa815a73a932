"""bench/bench_blip_share.py: the blip share judged leave-one-corpus-out, on the shipped real traces."""
from __future__ import annotations

from scenarios.suites import load_suite
from tests.benchscripts import load_bench


def test_suite_file_sets_the_share_in_every_family_with_blips_and_keeps_the_rest(tmp_path):
    bench = load_bench("bench_blip_share")
    suite = load_suite("default")
    path = tmp_path / "s.toml"
    path.write_text(bench.suite_toml(suite, 0.25), encoding="utf-8")
    back = load_suite(str(path))
    assert back.families == suite.families and back.family_weights == suite.family_weights and back.mode == "open"
    assert back.family_params["stale"]["blip_share"] == 0.25 and back.family_params["redelegate"]["blip_share"] == 0.25
    assert "parallel_burst" not in back.family_params and "healthy" not in back.family_params  # no blips there


def test_shares_leave_each_corpus_out():
    bench = load_bench("bench_blip_share")
    pooled, loo = bench.shares({"a": (3, 2), "b": (17, 10), "c": (36, 15), "d": (8, 6)})
    assert pooled == 0.52 and loo == {"a": 0.51, "b": 0.49, "c": 0.64, "d": 0.48}


def test_the_share_without_each_corpus_is_judged_on_it(tmp_path, capsys):
    corpus = tmp_path / "corpus"  # no Who&When here: the shipped τ-bench and ReAct traces only
    corpus.mkdir()
    bench = load_bench("bench_blip_share")
    assert bench.main(["--corpus", str(corpus), "--suite", "quick", "--episodes", "2", "--detectors",
                       "exact,no_progress,crewai", "--rounds", "20", "--out", str(tmp_path / "runs")]) == 0
    out = capsys.readouterr().out
    # the dev labels: τ-bench 6 blips of 8 loops, ReAct 15 of 36; each corpus gets the other's share
    assert "| tau_bench_airline | 8 | 6 | 0.75 | 0.42 |" in out and "| react_hotpotqa | 36 | 15 | 0.42 | 0.75 |" in out
    per_corpus = [line for line in out.split("with the share derived without that corpus")[1].splitlines()
                  if line.startswith("| tau_bench") or line.startswith("| react")]
    assert len(per_corpus) == 2 and all(line.count("|") == 6 for line in per_corpus)
    pooled = out.split("Pooled, every share run")[1]
    assert all(f"| {s} |" in pooled for s in ("0", "0.42", "0.48", "0.75"))
    assert 'blip_share = 0.75' in (tmp_path / "runs" / "suite-0.75.toml").read_text()
