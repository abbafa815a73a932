"""Run outcomes and loop severity (SPEC §11): from every importer through the trace format
into a replay's episodes.csv, the real suite's outcomes and proposed severities, and
severity exact on paths with known redundant runs."""
from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scenarios.importers import convert, import_file
from scenarios.labeling import hindsight_severity, label_episodes, propose
from scenarios.outcome import call_at_step, from_reward, history_step, meta_problem, run_outcome
from scenarios.realsuite import label_onset, load_real_suite, load_severities
from scenarios.severity import RUNAWAY_PERSISTENCE, Severity, severity, severity_meta
from scenarios.trace import loads_trace, read_trace, write_trace
from scenarios.tree import Episode, Label, ToolNode, linear_episode
from detectors.protocol import Observation, ToolCall
from sim.config.spec import DetectorSpec
from sim.execute.replay import replay
from sim.scoring.outcomes import Outcome, scoring_units, summarize

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "tests" / "fixtures" / "importers"

#: fixture -> (format, the outcome of each episode in order, mistake_step of each or None)
EXPECTED = {
    "openai_chat_sample.jsonl": ("openai", ["success", "unknown", "unknown"], [None, None, None]),
    "tau_bench_airline_sample.json": ("tau-bench", ["failure", "success", "success"], [None] * 3),
    "react_hotpotqa_base_sample.txt": ("react-log", ["success", "failure", "failure", "failure"], [None] * 4),
    # Who&When annotates history step 9 (magentic) / 3 (captain): the first call made at or after it.
    "magentic_one_sample.json": ("magentic-one", ["failure"], [5]),
    "captain_agent_sample.json": ("captain-agent", ["failure"], [1]),
    # report.resolved / the resolver's success flag; a line before evaluation says nothing.
    "openhands_sample.jsonl": ("openhands", ["unknown", "success", "failure"], [None] * 3),
}


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_outcomes_survive_import_trace_and_replay(name, tmp_path):
    fmt, outcomes, mistakes = EXPECTED[name]
    episodes, _ = import_file(fmt, FIXTURES / name)
    assert [ep.meta["outcome"] for ep in episodes] == outcomes
    assert [ep.meta.get("mistake_step") for ep in episodes] == mistakes
    trace = tmp_path / "trace.jsonl"
    convert(fmt, FIXTURES / name, trace)
    back = read_trace(trace)
    assert back.problems == []
    assert [ep.meta["outcome"] for ep in back.episodes] == outcomes
    assert [ep.meta.get("mistake_step") for ep in back.episodes] == mistakes
    replay(back.episodes, [DetectorSpec("exact", "exact")], tmp_path / "run", [str(trace)], progress=False)
    with open(tmp_path / "run" / "episodes.csv", newline="") as fh:
        rows = list(csv.DictReader(fh))
    assert [r["run_outcome"] for r in rows] == outcomes
    assert all(r["severity"] == "" for r in rows)  # imported traces carry no labels


def test_otel_outcome_from_the_root_status_and_tokens_per_call(tmp_path):
    from .otel_writer import Agent, Chat, Tool, write_otlp

    run = Agent("main", 0, 100, [
        Chat(0, 1, usage=(100, 20)),
        Tool("search", {"q": "x"}, 2, 3, result="hits", call_id="c1"),
        Chat(4, 5, usage=(150, 10)),
        Tool("search", {"q": "x"}, 6, 7, result="hits", call_id="c2"),
        Tool("fetch", {"u": 1}, 8, 9, result="page", call_id="c3"),  # issued by the same turn: no tokens of its own
        Chat(10, 11, usage=(200, 30)),  # the final answer: spent after the last call
    ], status="error")
    ok = Agent("other", 200, 210, [Tool("calc", {"e": "1+1"}, 201, 202, result="2", call_id="d1")], status="ok")
    plain = Agent("plain", 300, 310, [Tool("calc", {"e": "2"}, 301, 302, result="2", call_id="e1")])
    path = write_otlp(tmp_path / "t.jsonl", [run, ok, plain])
    eps, problems = import_file("otel", path)
    assert problems == []
    assert [ep.meta["outcome"] for ep in eps] == ["failure", "success", "unknown"]
    assert [n.tokens for n in eps[0].tool_nodes()] == [120, 160, 230]
    assert sum(n.tokens for n in eps[0].tool_nodes()) == 120 + 160 + 230  # every model token lands on a call
    assert [n.tokens for n in eps[1].tool_nodes()] == [0]  # no usage recorded
    write_trace(tmp_path / "out.jsonl", eps)
    back = read_trace(tmp_path / "out.jsonl").episodes
    assert [ep.meta["outcome"] for ep in back] == ["failure", "success", "unknown"]
    assert [n.tokens for n in back[0].tool_nodes()] == [120, 160, 230]


def test_openai_outcome_must_be_a_known_word(tmp_path):
    f = tmp_path / "c.jsonl"
    f.write_text(json.dumps({"outcome": "won", "messages": [{"role": "user", "content": "hi"}]}) + "\n")
    (ep,), problems = import_file("openai", f)
    assert ep.meta["outcome"] == "unknown"
    assert problems == [f"{f}:1: 'outcome' must be one of success, failure, unknown, got 'won'; read as unknown"]


def test_trace_header_with_a_bad_outcome_is_a_problem_naming_the_line():
    text = "\n".join(json.dumps(r) for r in [
        {"episode": "a", "kind": "episode", "meta": {"outcome": "great"}},
        {"episode": "a", "kind": "tool_call", "tool": "t", "args": {}, "call_id": "1"},
        {"episode": "b", "kind": "episode", "meta": {"outcome": "failure", "mistake_step": -1}},
        {"episode": "b", "kind": "tool_call", "tool": "t", "args": {}, "call_id": "1"},
        {"episode": "c", "kind": "episode", "meta": {"outcome": "failure", "mistake_step": 0}},
        {"episode": "c", "kind": "tool_call", "tool": "t", "args": {}, "call_id": "1"},
    ])
    res = loads_trace(text, name="t.jsonl")
    assert res.problems == [
        "t.jsonl:1: meta field 'outcome' must be one of success, failure, unknown, got 'great'",
        "t.jsonl:3: meta field 'mistake_step' must be a non-negative integer (a tool-call index), got '-1'",
    ]
    assert [run_outcome(ep.meta) for ep in res.episodes] == ["unknown", "unknown", "failure"]


def test_outcome_helpers():
    assert [from_reward(r) for r in (1, 1.0, 0.0, 0.5, None, True, "1")] == \
        ["success", "success", "failure", "failure", "unknown", "unknown", "unknown"]
    assert [history_step(s) for s in ("12", " 3 ", 4, -1, "x", None, True)] == [12, 3, 4, None, None, None, None]
    assert call_at_step([2, 4, None, 9], 3) == 1 and call_at_step([2, 4], 5) is None and call_at_step([2], 2) == 0
    assert meta_problem({}) is None and meta_problem({"outcome": "success", "mistake_step": 2}) is None
    assert run_outcome({"outcome": "nope"}) == "unknown" and run_outcome({}) == "unknown"


# -- severity ------------------------------------------------------------------------------
@st.composite
def known_runs(draw):
    """A path with a known loop: clean calls, then ``run`` redundant ones, then (unless the
    loop lasts to the end) a call that brings something new and any tail."""
    before = draw(st.integers(0, 5))
    run = draw(st.integers(1, 8))
    to_end = draw(st.booleans())
    tail = [] if to_end else [False] + draw(st.lists(st.booleans(), max_size=6))
    return [False] * before + [True] * run + tail, before, run, to_end


@given(known_runs())
@settings(max_examples=200, deadline=None)
def test_severity_is_exact_on_paths_with_known_runs(case):
    flags, onset, run, to_end = case
    sev = severity(flags, onset)
    assert (sev.persistence, sev.to_end) == (run, to_end)
    assert sev.severity == ("runaway" if run >= RUNAWAY_PERSISTENCE or to_end else "blip")
    # The scorer reads the same from a generated episode's per-call labels, into every outcome row.
    ep = linear_episode("e", [("t", {"i": i}, f"r{i}", False, flag) for i, flag in enumerate(flags)])
    ep.meta["outcome"] = "failure"
    units = scoring_units(ep)
    assert units.severities == (sev,) and units.run_outcome == "failure"
    (out,) = units.outcomes({})
    assert (out.persistence, out.to_end, out.severity, out.run_outcome) == (run, to_end, sev.severity, "failure")


@given(st.lists(st.one_of(st.none(), st.booleans()), min_size=1, max_size=12), st.data())
@settings(max_examples=200, deadline=None)
def test_notes_neither_count_nor_end_a_loop(flags, data):
    onset = data.draw(st.integers(0, len(flags) - 1))
    flags[onset] = True
    sev = severity(flags, onset)
    judged = [f for f in flags[onset:] if f is not None]
    expected = next((i for i, f in enumerate(judged) if not f), len(judged))
    assert sev.persistence == expected and sev.to_end == all(judged)



def test_severity_meta_is_the_one_record_of_a_severity():
    # Episode meta, outcome rows and severity files all record a severity this way, keys in this order.
    assert list(severity_meta(Severity(1, False)).items()) == [("persistence", 1), ("to_end", False), ("severity", "blip")]
    assert list(severity_meta(Severity(RUNAWAY_PERSISTENCE, False), "human").items()) == [
        ("persistence", RUNAWAY_PERSISTENCE), ("to_end", False), ("severity", "runaway"), ("source", "human")]
    assert severity_meta(Severity(1, True))["severity"] == "runaway"

def test_each_looping_branch_has_its_own_severity():
    ep = Episode("tree")
    def add(nid, parent, loop):
        ep.add(ToolNode(nid, parent, ToolCall("t", {"n": nid}, nid), Observation("r"), Label(loop, "stale" if loop else None)))
    add("a", None, False)
    add("b1", "a", True)  # branch 1: one redundant call, then news
    add("c1", "b1", False)
    add("b2", "a", True)  # branch 2: redundant to its end
    add("c2", "b2", True)
    units = scoring_units(ep)
    got = {leaf: (s.persistence, s.to_end, s.severity) for (leaf, _, _), s in zip(units.looping, units.severities)}
    assert got == {"c1": (1, False, "blip"), "c2": (2, True, "runaway")}


def test_metrics_split_recall_by_severity():
    def o(kind, sev):
        return Outcome("e", "f", "u", kind, 0, None, 0 if kind == "tp" else None, severity=sev)
    m = summarize([o("tp", "runaway"), o("tp", "runaway"), o("miss", "runaway"), o("tp", "blip"), o("early", "blip"),
                   Outcome("c", "f", "episode", "tn", None, None, None)])
    assert m["recall_runaway"] == pytest.approx(2 / 3) and m["recall_blip"] == pytest.approx(0.5)
    assert summarize([Outcome("c", "f", "episode", "fp", None, None, None)])["recall_runaway"] is None


def test_run_writes_severity_and_split_recall(tmp_path):
    from sim.execute.rows import EPISODE_COLUMNS, METRIC_COLUMNS

    assert {"run_outcome", "persistence", "to_end", "severity"} <= set(EPISODE_COLUMNS)
    assert {"recall_runaway", "recall_blip"} <= set(METRIC_COLUMNS)
    steps = [("s", {"q": 1}, "a", False, False), ("s", {"q": 1}, "a", False, True), ("s", {"q": 2}, "b", False, False)]
    blip = linear_episode("blip", steps)
    runaway = linear_episode("runaway", steps[:2] + [("s", {"q": 1}, "a", False, True)] * 2)
    for ep, outcome in ((blip, "success"), (runaway, "failure")):
        ep.meta["outcome"] = outcome
    replay([blip, runaway], [DetectorSpec("exact", "exact")], tmp_path, ["mem"], progress=False)
    with open(tmp_path / "episodes.csv", newline="") as fh:
        rows = {r["episode"]: r for r in csv.DictReader(fh)}
    assert [rows["blip"][k] for k in ("run_outcome", "persistence", "to_end", "severity")] == ["success", "1", "false", "blip"]
    assert [rows["runaway"][k] for k in ("run_outcome", "persistence", "to_end", "severity")] == ["failure", "3", "true", "runaway"]
    with open(tmp_path / "metrics.csv", newline="") as fh:
        (m,) = [r for r in csv.DictReader(fh) if r["family"] == "all"]
    assert m["recall_runaway"] == "1" and m["recall_blip"] == "1"  # exact fires on the first repeat of both


# -- hindsight severity on real-shaped traces -------------------------------------------------
def test_labeller_proposes_persistence_from_each_calls_result(tmp_path):
    steps = [("search", {"q": "x"}, "page about x"), ("search", {"q": "x"}, "page about x"),
             ("think", {"t": "hmm"}, ""), ("search", {"q": "x"}, "page about x"),
             ("search", {"q": "y"}, "page about y"), ("search", {"q": "y"}, "page about y")]
    ep = linear_episode("r", steps)
    _, prop = propose(ep)
    assert (prop.onset, prop.persistence, prop.to_end, prop.severity) == (1, 2, False, "blip")  # the note is skipped
    assert hindsight_severity(ep, 1).persistence == 2
    (labelled,), _ = label_episodes([ep])
    assert labelled.meta["severity"] == {"persistence": 2, "to_end": False, "severity": "blip", "source": "labeller"}
    write_trace(tmp_path / "t.jsonl", [labelled])
    (back,) = read_trace(tmp_path / "t.jsonl").episodes
    assert scoring_units(back).severities[0].severity == "blip"


def test_every_shipped_real_dev_episode_has_an_outcome_and_every_loop_a_severity():
    problems: list[str] = []
    episodes = load_real_suite(problems=problems)
    assert problems == [] and len(episodes) == 174
    assert {ep.meta["outcome"] for ep in episodes} == {"success", "failure"}
    proposed = load_severities("real-dev")
    loops = [ep for ep in episodes if label_onset(ep) is not None]
    assert loops
    for ep in loops:
        sev = ep.meta["severity"]
        assert sev["source"] == "labeller" and proposed[ep.meta["calls_sha1"]]["onset"] == label_onset(ep)
        (unit,) = scoring_units(ep).severities
        assert (unit.persistence, unit.to_end, unit.severity) == (sev["persistence"], sev["to_end"], sev["severity"])
    # The hand labels mark every call from the onset on; without the proposal every loop would read "to the end".
    assert any(not ep.meta["severity"]["to_end"] for ep in loops)


def test_labeller_thresholds_can_be_set_for_a_block_and_come_back():
    from scenarios import labeling

    ep = linear_episode("p", [("search", {"q": "red big apples"}, "none"), ("search", {"q": "big red apples now"}, "none")])
    assert propose(ep)[1].loops  # a paraphrase at the shipped bar (Jaccard 0.75 >= 0.5)
    with labeling.thresholds(PARAPHRASE_JACCARD=0.9):
        assert labeling.PARAPHRASE_JACCARD == 0.9 and not propose(ep)[1].loops
    assert labeling.PARAPHRASE_JACCARD == 0.5 and propose(ep)[1].loops
    with pytest.raises(ValueError, match="not a labeller threshold: SHINGLE"):
        with labeling.thresholds(SHINGLE=2):
            pass
