"""The shipped real suite: conversion rules, label matching by hash, package data, corpora."""
from __future__ import annotations

import json
import os
from collections import Counter
from pathlib import Path

import pytest

from scenarios import realsuite
from scenarios.realsuite import (
    Call, calls_sha1, episode_calls, labelled_episode, load_labels, load_real_suite, load_suite, react_call,
)
from scenarios.trace import episode_events

ROOT = Path(__file__).resolve().parents[2]
# ``LOOPBENCH_CORPORA`` lets a checkout that is not next to ``shared`` (a worktree) find them.
CORPORA = Path(os.environ.get("LOOPBENCH_CORPORA", ROOT / ".." / "shared" / "corpora" / "real"))
needs_corpora = pytest.mark.skipif(not CORPORA.is_dir(), reason="the real corpora are not next to the repository")


def _family_counts(episodes):
    return Counter((e.family, any(n.label.loop for n in e.tool_nodes())) for e in episodes)


def test_package_data_loads_with_the_expected_counts_and_no_problems():
    load = load_suite("real-dev")
    assert load.problems == []
    assert load.matched == 174 and load.ambiguous == 4
    assert load.skipped_sources == {"who-and-when/Hand-Crafted": 30, "who-and-when/Algorithm-Generated": 64}
    assert _family_counts(load.episodes) == {
        ("tau_bench_airline", False): 92, ("tau_bench_airline", True): 8,
        ("react_hotpotqa", False): 38, ("react_hotpotqa", True): 36,
    }


def test_labels_become_call_labels_from_the_onset_on():
    labels = {realsuite.episode_id(t): t for t in load_labels()["traces"]}
    for ep in load_real_suite():
        t = labels[ep.id]
        assert calls_sha1(episode_calls(ep)) == t["calls_sha1"]
        flags = [n.label.loop for n in ep.tool_nodes()]
        if t["loops"]:
            assert flags == [i >= t["onset"] for i in range(len(flags))]
            assert {n.label.kind for n in ep.tool_nodes() if n.label.loop} == {t["kind"]}
        else:
            assert not any(flags)


def test_a_label_whose_trace_converts_differently_is_reported_not_used(tmp_path):
    labels = load_labels()
    victim = next(t for t in labels["traces"] if t["source"] == "reflexion-react-hotpotqa" and t["loops"])
    victim["calls_sha1"] = "0" * 40
    path = tmp_path / "labels.json"
    path.write_text(json.dumps(labels))
    load = load_suite(labels_path=path)
    assert load.matched == 173
    assert len(load.problems) == 1 and "calls_sha1" in load.problems[0] and str(victim["trace_key"]) in load.problems[0]
    assert realsuite.episode_id(victim) not in {e.id for e in load.episodes}


def test_load_real_suite_warns_about_unmatched_labels_unless_collecting(monkeypatch):
    labels = load_labels()
    next(t for t in labels["traces"] if t["source"] == "tau-bench-airline-gpt4o" and t["n_calls"])["calls_sha1"] = "0" * 40
    monkeypatch.setattr(realsuite, "load_labels", lambda name, path=None: labels)
    with pytest.warns(realsuite.RealSuiteWarning, match="calls_sha1"):
        assert len(load_real_suite()) == 173
    problems: list[str] = []
    assert len(load_real_suite(problems=problems)) == 173 and len(problems) == 1


def test_unknown_suite_and_missing_corpus_are_one_line_errors(tmp_path):
    with pytest.raises(realsuite.RealSuiteError, match="unknown real suite"):
        load_suite("real-nope")
    with pytest.raises(realsuite.RealSuiteError, match="does not exist"):
        load_suite(corpus_dir=tmp_path / "absent")


def test_a_missing_source_file_is_reported_per_label(tmp_path):
    load = load_suite(corpus_dir=tmp_path)
    assert load.matched == 174  # the shipped part still loads
    assert len(load.problems) == 93  # 94 Who&When labels, 1 ambiguous
    assert all("cannot read" in p for p in load.problems)


# -- the conversion rules on small inputs ---------------------------------------------------
def test_react_actions_parse_greedily_and_unknown_actions_are_invalid():
    assert react_call("Search[A] and Search[B]") == ("search", {"query": "A] and Search[B"})
    assert react_call("lookup[year]") == ("lookup", {"keyword": "year"})
    assert react_call("Compare[a, b]") == ("_invalid", {"raw": "Compare[a, b]"})


def test_react_trace_extent_and_multiline_observations(tmp_path):
    log = tmp_path / "log.txt"
    log.write_text("BEGIN TRIAL 1\n------------- BEGIN HALTED AGENTS -------------\n\n"
                   "Question: Q one\nThought 1: t\nAction 1: Search[X]\nObservation 1: line a\nline b\n\n"
                   "Thought 2: u\nAction 2: Search[X]\nObservation 2: line a\nline b\nCorrect answer: z\n\n"
                   "Question: Q two\nAction 1: Finish[y]\n#####\n")
    traces = realsuite._react(log)  # the converter of one file, keyed by question ordinal
    calls0 = [s for s in traces[0] if isinstance(s, Call)]
    assert [(c.tool, c.args, c.result) for c in calls0] == [("search", {"query": "X"}, "line a\nline b")] * 2
    calls1 = [s for s in traces[1] if isinstance(s, Call)]
    assert calls1 == [Call("finish", {"answer": "y"}, None)]


def test_magentic_one_delegation_without_reply_has_no_result(tmp_path):
    f = tmp_path / "1.json"
    f.write_text(json.dumps({"history": [
        {"role": "human", "content": "task"},
        {"role": "Orchestrator (-> WebSurfer)", "content": "Open the page"},
        {"role": "Orchestrator (-> WebSurfer)", "content": "Please open the page"},
        {"role": "WebSurfer", "content": "I clicked 'Next'.\n\nThe page shows Next."},
        {"role": "WebSurfer", "content": "I clicked the control.\nrest"},
        {"role": "WebSurfer", "content": "The answer is 4."},
    ]}))
    calls = [s for s in realsuite._magentic_one(f)[None] if isinstance(s, Call)]
    assert [(c.tool, c.args, c.result) for c in calls] == [
        ("WebSurfer", {"instruction": "Open the page"}, None),
        ("WebSurfer", {"instruction": "Please open the page"}, "I clicked 'Next'.\n\nThe page shows Next."),
        ("click", {"target": "Next"}, "The page shows Next."),
        ("click", {"target": ""}, "rest"),
    ]
    ep = labelled_episode({"source": "who-and-when/Hand-Crafted", "file": "who-and-when/Hand-Crafted/1.json",
                           "trace_key": None, "locator": {}, "calls_sha1": calls_sha1(calls), "loops": True,
                           "onset": 1, "kind": "paraphrased"}, realsuite._magentic_one(f)[None])
    assert ep.tool_nodes()[0].observation is realsuite.NO_RESULT
    assert [n.label.loop for n in ep.tool_nodes()] == [False, True, True, True]


def test_captain_agent_calls_need_a_terminal_reply(tmp_path):
    f = tmp_path / "2.json"
    f.write_text(json.dumps({"history": [
        {"name": "Expert", "content": "```Python\nprint(1)\n```\ntext\n```sh\nls\n```"},
        {"name": "Computer_terminal", "content": "exitcode: 0\nCode output: 1"},
        {"name": "Expert", "content": "```\nprint(2)\n```"},
        {"name": "Other", "content": "never ran"},
    ]}))
    calls = [s for s in realsuite._captain_agent(f)[None] if isinstance(s, Call)]
    assert calls == [Call("exec.python", {"code": "print(1)\n\nls"}, "exitcode: 0\nCode output: 1")]


# -- against the corpora ------------------------------------------------------------------
@needs_corpora
def test_every_dev_label_matches_its_trace_in_the_corpora():
    load = load_suite(corpus_dir=CORPORA, from_corpus_only=True)
    assert load.problems == []
    assert load.matched == 267 and load.ambiguous == 5
    fams = _family_counts(load.episodes)
    assert fams[("magentic_one", True)] == 17 and fams[("magentic_one", False)] == 12
    assert fams[("captain_agent", True)] == 3 and fams[("captain_agent", False)] == 61


@needs_corpora
def test_shipped_episodes_equal_a_fresh_conversion():
    fresh = {e.id: e for e in load_suite(corpus_dir=CORPORA, from_corpus_only=True).episodes}
    shipped = load_real_suite()
    assert shipped
    for ep in shipped:
        assert list(episode_events(ep)) == list(episode_events(fresh[ep.id]))


@needs_corpora
def test_corpus_dir_adds_who_and_when_to_the_shipped_part():
    problems: list[str] = []
    episodes = load_real_suite(corpus_dir=CORPORA, problems=problems)
    assert problems == [] and len(episodes) == 267
    assert {e.family for e in episodes} == {"tau_bench_airline", "react_hotpotqa", "magentic_one", "captain_agent"}
