"""The shipped self-labelled held-out half: the traces the dev labels leave out, labelled blind.

Its figures are only worth something while it stays apart from what was tuned: these tests
pin that it shares no trace with the dev half, that it is a valid labels file, and (with the
corpora beside the repository) that every label still matches its trace.
"""
from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from scenarios.label_agreement import compare, read_side
from scenarios.realsuite import check_labels, load_labels, load_real_suite, load_suite
from scenarios.trace import episode_events

from .test_realsuite import CORPORA, needs_corpora

ROOT = Path(__file__).resolve().parents[2]
SUITE = "real-heldout-self"
HELDOUT = ROOT / "scenarios" / "data" / "real" / "real-heldout-self-labels.json"
KINDS = {"stale", "cosmetic", "paraphrased", "drift", "cycle", "no_progress"}


@pytest.fixture(scope="module")
def doc() -> dict:
    return json.loads(HELDOUT.read_text(encoding="utf-8"))


def test_the_suite_reads_its_shipped_labels(doc):
    assert load_labels(SUITE) == doc


def test_it_is_a_labels_file_with_a_kind_and_onset_for_every_loop(doc):
    check_labels(doc, HELDOUT)
    assert doc["split"] == "heldout-self"
    for t in doc["traces"]:
        if t["loops"]:
            assert t["kind"] in KINDS and 0 <= t["onset"] < t["n_calls"] and t["onset_call_sha1"]
        else:
            assert t["onset"] is None and t["kind"] is None and t["onset_call_sha1"] is None
        assert len(t["result_sha1"]) == t["n_calls"]


def test_it_shares_no_trace_with_the_dev_half(doc):
    dev = load_labels()["traces"]
    where = {(t["source"], t["file"], t["trace_key"]) for t in dev}
    called = {t["calls_sha1"] for t in dev if t["n_calls"]}
    for t in doc["traces"]:
        assert (t["source"], t["file"], t["trace_key"]) not in where
        assert not t["n_calls"] or t["calls_sha1"] not in called
    # and no trace twice
    assert len({(t["source"], t["file"], t["trace_key"]) for t in doc["traces"]}) == len(doc["traces"])


def test_a_trace_of_one_call_or_none_is_clean(doc):
    assert all(not t["loops"] for t in doc["traces"] if t["n_calls"] < 2)


def test_the_counts_the_docs_give(doc):
    counts = Counter((t["source"], "ambiguous" if t["ambiguous"] else "loop" if t["loops"] else "clean")
                     for t in doc["traces"])
    assert counts == {
        ("tau-bench-airline-gpt4o", "loop"): 8, ("tau-bench-airline-gpt4o", "clean"): 83,
        ("reflexion-react-hotpotqa", "loop"): 15, ("reflexion-react-hotpotqa", "clean"): 57,
        ("reflexion-react-hotpotqa", "ambiguous"): 1,
        ("who-and-when/Hand-Crafted", "loop"): 16, ("who-and-when/Hand-Crafted", "clean"): 12,
        ("who-and-when/Algorithm-Generated", "loop"): 1, ("who-and-when/Algorithm-Generated", "clean"): 60,
    }


@needs_corpora
def test_every_label_matches_its_trace_in_the_corpora():
    load = load_suite(SUITE, corpus_dir=CORPORA, from_corpus_only=True)
    assert load.problems == []
    assert load.matched == 252 and load.ambiguous == 1


def test_the_shipped_traces_load_without_the_corpora():
    load = load_suite(SUITE)
    assert load.problems == [] and load.matched == 163 and load.ambiguous == 1
    assert load.skipped_sources == {"who-and-when/Hand-Crafted": 28, "who-and-when/Algorithm-Generated": 61}
    loops = Counter((e.family, any(n.label.loop for n in e.tool_nodes())) for e in load.episodes)
    assert loops == {("tau_bench_airline", True): 8, ("tau_bench_airline", False): 83,
                     ("react_hotpotqa", True): 15, ("react_hotpotqa", False): 57}


@needs_corpora
def test_shipped_episodes_equal_a_fresh_conversion():
    fresh = {e.id: e for e in load_suite(SUITE, corpus_dir=CORPORA, from_corpus_only=True).episodes}
    shipped = load_real_suite(SUITE)
    assert len(shipped) == 163
    for ep in shipped:
        assert list(episode_events(ep)) == list(episode_events(fresh[ep.id]))


@pytest.mark.parametrize("a, b, agree, of, kappa, onsets", [
    ("real-dev-labels.json", "real-heldout-self-calibration.json", 23, 24, 0.92, 10),
    ("real-heldout-self-labels.json", "real-heldout-self-second-reading.json", 32, 32, 1.00, 14),
])
def test_the_shipped_readings_give_the_documented_agreement(a, b, agree, of, kappa, onsets):
    data = HELDOUT.parent
    ag = compare(read_side(data / a)[0], read_side(data / b)[0])
    assert ag.compared == of and round(ag.percent_agree * of) == agree
    assert round(ag.kappa, 2) == kappa and ag.same_onset == ag.both_loop == onsets
