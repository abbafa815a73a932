"""Loops injected into clean real traces: labels exact by construction, the clean prefix
kept byte for byte, hard negatives never labelled a loop, one output per seed."""
from __future__ import annotations

import orjson
import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from detectors.protocol import Observation
from scenarios.inject import (KINDS, LOOP_KINDS, META_KEY, NEGATIVE_KINDS, PARAPHRASE_FLOOR, InjectError, check_kinds,
                              clean_reason, failed, inject_episodes, inject_trace, model_similarity, onset_of)
from scenarios.injected_suite import INJECTED_FAMILIES, load_real_episodes
from scenarios.labeling import propose
from scenarios import realsuite
from scenarios.realsuite import load_real_suite
from scenarios.suites import load_suite
from scenarios.trace import dumps_events, episode_events, loads_trace, write_trace
from sim.cli import main
from tests.strategies import episodes as random_episodes

pytestmark = pytest.mark.model  # paraphrases are checked with the bundled model


@pytest.fixture(scope="module")
def clean_real():
    return [ep for ep in load_real_suite("real-dev") if clean_reason(ep) is None]


@pytest.fixture(scope="module")
def sim():
    return model_similarity()


def _node_events(ep, upto_calls: int) -> list[bytes]:
    """The events of ``ep``'s nodes up to its ``upto_calls``-th tool call and that call's
    result, without the episode id and the label: what must stay byte-identical."""
    out, calls = [], 0
    for ev in list(episode_events(ep))[1:]:
        if calls == upto_calls and ev["kind"] != "tool_result":
            break
        calls += ev["kind"] == "tool_call"
        out.append(orjson.dumps({k: v for k, v in ev.items() if k not in ("episode", "label")}))
    return out


def check_injected(src, out) -> None:
    """The invariants every injected episode keeps."""
    meta = out.meta[META_KEY]
    at, kind = meta["at"], meta["kind"]
    assert meta["source"] == src.id
    assert 1 <= at <= len(src.tool_nodes())
    # The prefix: the source's nodes, calls, arguments and results, byte for byte.
    assert _node_events(out, at) == _node_events(src, at)
    calls = out.tool_nodes()
    assert all(n.label is not None for n in calls)
    if kind in LOOP_KINDS:
        onset = meta["onset"]
        assert onset is not None and onset >= at
        assert onset_of(out) == onset
        assert calls[onset].label.loop and calls[onset].label.kind == meta["label_kind"]
        assert not any(n.label.loop for n in calls[:onset])
    else:
        assert meta["onset"] is None
        assert not any(n.label.loop for n in calls), "a hard negative is never labelled a loop"
    # Continuation calls are the source's own, labelled clean.
    n_inj = meta["injected_calls"]
    assert len(calls) == at + n_inj + meta["continued_calls"]
    for n in calls[at + n_inj:]:
        assert not n.label.loop


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data(), kind=st.sampled_from(KINDS), seed=st.integers(0, 2**31))
def test_real_traces_injected_keep_labels_prefix_and_determinism(clean_real, sim, data, kind, seed):
    src = data.draw(st.sampled_from(clean_real))
    out = inject_trace(src, kind, seed, sim)
    if out is None:
        return
    check_injected(src, out)
    again = inject_trace(src, kind, seed, sim)
    assert dumps_events(episode_events(again)) == dumps_events(episode_events(out))
    # the file round trip keeps every label
    back = loads_trace(dumps_events(episode_events(out))).episodes[0]
    assert [n.label for n in back.tool_nodes()] == [n.label for n in out.tool_nodes()]


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ep=random_episodes(max_calls=12, branching=False), kinds=st.lists(st.sampled_from(KINDS), min_size=1, max_size=4),
       seed=st.integers(0, 1000))
def test_any_clean_linear_trace_injected_keeps_the_invariants(sim, ep, kinds, seed):
    run = inject_episodes([ep], kinds, seed, similarity=sim)
    assert run.sources + sum(run.skipped_traces.values()) == 1
    for out in run.episodes:
        check_injected(ep, out)


def test_every_kind_is_built_from_the_shipped_traces(clean_real, sim):
    run = inject_episodes(clean_real, KINDS, 0, similarity=sim)
    counts = run.per_kind()
    assert all(counts[k] >= 10 for k in KINDS), counts
    for ep in run.episodes:
        src = next(s for s in clean_real if s.id == ep.meta[META_KEY]["source"])
        check_injected(src, ep)


def test_the_labeller_reads_injected_loops_as_labelled(clean_real, sim):
    """The rubric's own implementation (scenarios.labeling) finds the injected onset, and
    no loop in a hard negative. no_progress is left out: the labeller counts only results
    flagged as errors, and ReAct's "Could not find" is not flagged."""
    run = inject_episodes(clean_real, KINDS, 1, similarity=sim)
    agree: dict[str, list[int]] = {}
    for ep in run.episodes:
        meta = ep.meta[META_KEY]
        _, proposal = propose(ep)
        ok = proposal.onset == meta["onset"] if meta["loop"] else not proposal.loops
        agree.setdefault(meta["kind"], []).append(ok)
    for kind, oks in agree.items():
        if kind != "no_progress":
            assert sum(oks) / len(oks) >= 0.95, (kind, sum(oks), len(oks))


def test_paraphrases_stay_above_the_model_floor(clean_real, sim):
    run = inject_episodes(clean_real, ["paraphrased", "silent_redelegation"], 2, similarity=sim)
    checked = 0
    for ep in run.episodes:
        meta = ep.meta[META_KEY]
        if meta["label_kind"] != "paraphrased":
            continue
        calls = ep.tool_nodes()
        new, old = calls[meta["onset"]].call.args, calls[meta["repeats"]].call.args
        (key,) = [k for k in old if old[k] != new[k]]
        assert sim(old[key], [new[key]])[0] >= PARAPHRASE_FLOOR
        checked += 1
    assert checked >= 10


def test_hard_negatives_and_loops_reuse_the_trace_s_own_results(clean_real, sim):
    run = inject_episodes(clean_real, ["stale", "reread_after_failed_write", "silent_redelegation"], 3, similarity=sim)
    for ep in run.episodes:
        meta = ep.meta[META_KEY]
        calls = ep.tool_nodes()
        onset, j = calls[meta["onset"]], calls[meta["repeats"]]
        if meta["kind"] == "silent_redelegation":
            assert not onset.observation.recorded and j.observation.recorded
        else:
            assert (onset.call.tool, onset.call.args, onset.observation) == (j.call.tool, j.call.args, j.observation)
        if meta["kind"] == "reread_after_failed_write":
            write = calls[meta["onset"] - 1]
            src = next(s for s in clean_real if s.id == meta["source"])
            assert write.observation.error and write.observation.content in {
                n.observation.content for n in src.tool_nodes() if n.observation is not None and n.observation.error}


def test_repeats_are_drawn_where_real_loops_fall(clean_real, sim):
    """Most injected repeats re-issue a failed call (as about three in four hand-labelled
    onsets do, FAILED_SHARE) although few calls of the clean traces failed, and a loop that
    ends its trace runs as long as its source, its extra calls stale copies of the last."""
    run = inject_episodes(clean_real, ["stale", "cosmetic", "cycle"], 4, similarity=sim)
    repeated_failed, ended = [], 0
    for ep in run.episodes:
        meta = ep.meta[META_KEY]
        calls = ep.tool_nodes()
        if meta["kind"] != "cycle":
            repeated_failed.append(failed(calls[meta["repeats"]].observation))
        if meta["runs_to_end"]:
            assert meta["continued_calls"] == 0
            src = next(s for s in clean_real if s.id == meta["source"])
            assert len(src.tool_nodes()) - 1 <= len(calls) <= max(len(src.tool_nodes()), meta["onset"] + 6)
            if meta["kind"] == "cosmetic" and meta["injected_calls"] > 3:  # longer than any drawn run
                assert calls[-1].label.kind == "stale" and calls[-1].call.args == calls[-2].call.args
                ended += 1
    share = sum(repeated_failed) / len(repeated_failed)
    all_calls = [failed(n.observation) for s in clean_real for n in s.tool_nodes()]
    assert share >= 0.5 > 3 * sum(all_calls) / len(all_calls), share
    assert ended >= 5


def test_seed_changes_the_draw_and_repeats_it(clean_real, sim):
    def draw(seed):
        run = inject_episodes(clean_real[:40], KINDS, seed, similarity=sim)
        return b"".join(dumps_events(episode_events(e)) for e in run.episodes)

    assert draw(5) == draw(5)
    assert draw(5) != draw(6)


def test_looping_and_branching_traces_are_not_sources():
    looping = [ep for ep in load_real_suite("real-dev") if ep.looping]
    assert looping and all(clean_reason(ep) == "labelled looping" for ep in looping)
    run = inject_episodes(looping, KINDS, 0, similarity=lambda t, c: [1.0] * len(c))
    assert run.sources == 0 and not run.episodes


def test_unknown_kinds_are_refused():
    with pytest.raises(InjectError, match="unknown injection kind"):
        check_kinds(["stale", "loopy"])



@pytest.mark.parametrize("text, got_nothing", [
    ("[]", True), ("{}", True), (" {} ", True), ("null", True), ("None", True), ("NO RESULTS.", True), ("0 results", True),
    ("No results for 'x'", True), ("Error: not found", False), ("{\"id\": 1}", False), ("[1]", False), ("", False),
])
def test_a_failed_call_is_an_error_an_empty_record_or_what_the_detectors_read_as_not_found(text, got_nothing):
    assert failed(Observation(text)) is got_nothing
    assert failed(Observation(text, error=True)) is True

def test_the_real_injected_suite_loads_every_family():
    suite = load_suite("real-injected")
    assert suite.real and suite.mode == "open" and suite.families == INJECTED_FAMILIES
    eps = load_real_episodes("real-injected")
    assert {ep.family for ep in eps} == set(INJECTED_FAMILIES)
    assert all(ep.looping == (ep.meta[META_KEY]["kind"] in LOOP_KINDS) for ep in eps)
    assert [e.id for e in eps] == [e.id for e in load_real_episodes("real-injected")]
    assert sum(1 for e in eps if e.meta[META_KEY]["kind"] in NEGATIVE_KINDS) >= 100



def test_the_real_injected_suite_reports_its_base_suites_unmatched_labels(monkeypatch):
    labels = realsuite.load_labels("real-dev")
    next(t for t in labels["traces"] if t["source"] == "tau-bench-airline-gpt4o" and t["n_calls"])["calls_sha1"] = "0" * 40
    monkeypatch.setattr(realsuite, "load_labels", lambda name, path=None: labels)
    with pytest.warns(realsuite.RealSuiteWarning, match="calls_sha1"):
        warned = load_real_episodes("real-injected")
    problems: list[str] = []
    collected = load_real_episodes("real-injected", problems=problems)
    assert len(problems) == 1 and "calls_sha1" in problems[0]
    assert [e.id for e in warned] == [e.id for e in collected]

# -- the command -------------------------------------------------------------------------------
def _cli(*args):
    return CliRunner().invoke(main, list(args))


@pytest.fixture(scope="module")
def source_file(tmp_path_factory, clean_real):
    path = tmp_path_factory.mktemp("inject") / "clean.jsonl"
    write_trace(path, clean_real[:30])
    return path


def test_cli_writes_the_same_file_for_the_same_seed(source_file, tmp_path):
    a, b = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    r1 = _cli("inject", str(source_file), "-o", str(a), "--seed", "7", "--kinds", "stale,paging")
    r2 = _cli("inject", str(source_file), "-o", str(b), "--seed", "7", "--kinds", "stale,paging")
    assert r1.exit_code == 0 and r2.exit_code == 0, r1.output
    assert a.read_bytes() == b.read_bytes()
    eps = loads_trace(a.read_bytes()).episodes
    assert {ep.meta[META_KEY]["kind"] for ep in eps} == {"stale", "paging"}
    assert "injected into 30 clean traces" in r1.output


def test_cli_anywhere_repeats_successful_calls_too(source_file, tmp_path):
    """By default a trace without the failed call drawn gets no repeat; --anywhere takes any call."""
    out = {}
    for flag in ([], ["--anywhere"]):
        path = tmp_path / f"o{len(flag)}.jsonl"
        r = _cli("inject", str(source_file), "-o", str(path), "--seed", "3", "--kinds", "stale", *flag)
        assert r.exit_code == 0, r.output
        eps = loads_trace(path.read_bytes()).episodes
        out[bool(flag)] = [failed(e.tool_nodes()[e.meta[META_KEY]["repeats"]].observation) for e in eps]
    assert len(out[True]) > len(out[False]) and sum(out[False]) / len(out[False]) > sum(out[True]) / len(out[True])


def test_cli_missing_file_is_one_line_error(tmp_path):
    r = _cli("inject", str(tmp_path / "nope.jsonl"), "-o", str(tmp_path / "o.jsonl"))
    assert r.exit_code == 2
    assert r.output.strip().splitlines() == [f"loopbench: error: {tmp_path / 'nope.jsonl'}: no such file"]
    assert "Traceback" not in r.output


def test_cli_bad_line_is_named_and_skipped(source_file, tmp_path):
    bad = tmp_path / "bad.jsonl"
    bad.write_bytes(source_file.read_bytes() + b"{not json\n")
    r = _cli("inject", str(bad), "-o", str(tmp_path / "o.jsonl"))
    n_lines = len(bad.read_bytes().splitlines())
    assert r.exit_code == 3
    assert f"loopbench: skipped: {bad}:{n_lines}: not valid JSON" in r.output
    assert "Traceback" not in r.output and (tmp_path / "o.jsonl").exists()


def test_cli_unknown_kind_and_no_clean_trace_are_errors(source_file, tmp_path):
    r = _cli("inject", str(source_file), "-o", str(tmp_path / "o.jsonl"), "--kinds", "stale,nope")
    assert r.exit_code == 2 and "unknown injection kind(s) nope" in r.output
    looping = tmp_path / "looping.jsonl"
    write_trace(looping, [ep for ep in load_real_suite("real-dev") if ep.looping][:3])
    r = _cli("inject", str(looping), "-o", str(tmp_path / "o.jsonl"))
    assert r.exit_code == 2 and "no clean traces to inject into (3 labelled looping)" in r.output
