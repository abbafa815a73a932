"""Importers of real agent-trace formats: fixtures, round trips, pairing, problems, corpora."""
from __future__ import annotations

import json
import shutil
import time
from pathlib import Path

import pytest

from detectors.exact import ExactDetector
from detectors.protocol import ToolCall
from sim.play.openloop import score_episode
from scenarios.trace import TraceError, read_trace, write_trace
from scenarios.tree import Episode, ThinkNode
from scenarios.importers import FORMATS, convert, import_file
from scenarios.importers._common import ImportProblemWarning
from scenarios.importers.magentic_one import parse_browser_action
from scenarios.importers.react_log import parse_action

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "tests" / "fixtures" / "importers"
CORPORA = ROOT / ".." / "shared" / "corpora" / "real"

FIXTURE_FILES = {
    "openai": "openai_chat_sample.jsonl",
    "tau-bench": "tau_bench_airline_sample.json",
    "react-log": "react_hotpotqa_base_sample.txt",
    "magentic-one": "magentic_one_sample.json",
    "captain-agent": "captain_agent_sample.json",
    "openhands": "openhands_sample.jsonl",
    "claude-code": "claude_code_sample.jsonl",
    "swe-agent": "swe_agent_sample.traj",
    "codex": "codex_sample.jsonl",
}


def _import(fmt: str, name: str | None = None) -> tuple[list[Episode], list[str]]:
    return import_file(fmt, FIXTURES / (name or FIXTURE_FILES[fmt]))


def _calls(ep: Episode) -> list[tuple[str, dict]]:
    return [(n.call.tool, dict(n.call.args)) for n in ep.tool_nodes()]


def _results(ep: Episode) -> list[str | None]:
    return [None if n.observation is None else n.observation.content for n in ep.tool_nodes()]


def _roles(ep: Episode) -> list[str]:
    return [n.message.role for n in ep.nodes if isinstance(n, ThinkNode)]


def test_registry_names_every_format():
    # otel's fixtures are written by the OpenTelemetry SDK inside test_otel_import.py.
    assert set(FORMATS) == set(FIXTURE_FILES) | {"otel"}
    with pytest.raises(ValueError, match="unknown trace format 'nope'.*openai"):
        import_file("nope", FIXTURES / FIXTURE_FILES["openai"])
    with pytest.raises(TraceError, match="no such file"):
        import_file("openai", FIXTURES / "missing.jsonl")


@pytest.mark.parametrize("fmt", sorted(FIXTURE_FILES))
def test_episodes_are_linear_unlabelled_replays_naming_their_source(fmt):
    episodes, _ = _import(fmt)
    assert episodes
    for ep in episodes:
        assert ep.family == "replay"
        assert ep.meta["source_format"] == fmt and ep.meta["source_file"] == FIXTURE_FILES[fmt]
        assert ep.is_linear() and not ep.labelled
        assert ep.id.startswith(Path(FIXTURE_FILES[fmt]).stem)
        call_ids = [n.call.call_id for n in ep.tool_nodes()]
        assert len(set(call_ids)) == len(call_ids)
    assert len({ep.id for ep in episodes}) == len(episodes)


@pytest.mark.parametrize("fmt,name", [*FIXTURE_FILES.items(), ("react-log", "react_hotpotqa_reflexion_sample.txt"),
                                      ("openhands", "openhands_sdk_sample.jsonl")])
def test_round_trip_through_the_trace_format(fmt, name, tmp_path):
    episodes, _ = _import(fmt, name)
    out = tmp_path / "trace.jsonl"
    n, _ = convert(fmt, FIXTURES / name, out)
    assert n == len(episodes)
    back = read_trace(out)
    assert back.problems == []
    assert back.episodes == episodes
    write_trace(tmp_path / "again.jsonl", back.episodes)
    assert (tmp_path / "again.jsonl").read_bytes() == out.read_bytes()


# -- openai ----------------------------------------------------------------------------
def test_openai_pairs_results_by_position_when_ids_are_reused():
    episodes, _ = _import("openai")
    ep = episodes[0]
    assert ep.id == "openai_chat_sample:0"
    assert _roles(ep) == ["system", "user", "assistant", "assistant"]  # no empty tool-call-only turns
    assert _calls(ep) == [
        ("search_trains", {"from": "Lyon", "to": "Turin"}),
        ("get_train", {"train": "TGV 9241"}),
        ("get_train", {"train": "TGV 9243"}),
        ("book", {"train": "TGV 9243"}),
    ]
    assert _results(ep) == ['[{"train": "TGV 9241", "seats": 0}]', "TGV 9241: sold out", "TGV 9243: 12 seats", "booked"]
    assert [n.call.call_id for n in ep.tool_nodes()] == ["call_a", "dup", "dup~2", "call_a~2"]
    # Calls proposed in one assistant message share a turn.
    assert [n.call.turn for n in ep.tool_nodes()] == [2, 4, 4, 7]


def test_openai_bare_lists_raw_arguments_and_legacy_function_calls():
    episodes, problems = _import("openai")
    ep = episodes[1]
    assert ep.id == "openai_chat_sample:1"
    assert _calls(ep) == [("calculator", {"_raw": "{expression: 2+2"}), ("calculator", {"expression": "2+2"})]
    assert _results(ep) == ["Error: bad arguments", "4"]
    assert ep.nodes[-1].message.content == "It is 4."  # content parts joined
    assert any(p.endswith(":2: message 1: tool_calls[0] (calculator): arguments are not valid JSON, kept as {'_raw': text}")
               for p in problems)


def test_openai_malformed_lines_are_problems_naming_the_line_and_the_rest_imports():
    episodes, problems = _import("openai")
    path = str(FIXTURES / FIXTURE_FILES["openai"])
    # Line 3 is cut off, line 4 blank, line 5 the wrong shape; line 6 still imports,
    # numbered by its position so ids do not shift when a line breaks.
    assert [ep.id for ep in episodes] == ["openai_chat_sample:0", "openai_chat_sample:1", "openai_chat_sample:4"]
    assert f"{path}:3: not valid JSON (unexpected control character in string), skipped" in problems
    assert f'{path}:5: expected {{"messages": [...]}} or a list of messages, skipped' in problems
    last = episodes[2]
    assert _results(last) == ["-3 C, snow"]
    assert f"{path}:6: message 2: tool_call_id 'w9' matches no open call; paired by position with 'w1'" in problems
    assert f"{path}:6: message 3: tool result 'w2' has no earlier call awaiting a result, skipped" in problems
    assert len(problems) == 5


def test_problems_warn_when_nobody_collects_them():
    with pytest.warns(ImportProblemWarning) as caught:
        episodes = list(FORMATS["openai"](FIXTURES / FIXTURE_FILES["openai"]))
    assert len(episodes) == 3
    texts = [str(w.message) for w in caught]
    assert len(texts) == 5 and any(t.endswith(":3: not valid JSON (unexpected control character in string), skipped")
                                   for t in texts)


# -- tau-bench -------------------------------------------------------------------------
def test_tau_bench_reuses_openai_conversion_and_pairs_reused_ids_by_position():
    episodes, problems = _import("tau-bench")
    assert problems == []
    assert [ep.id for ep in episodes] == [
        "tau_bench_airline_sample:task39_trial1",
        "tau_bench_airline_sample:task12_trial3",
        "tau_bench_airline_sample:task13_trial1",
    ]
    ep = episodes[0]
    assert ep.meta == {"source_format": "tau-bench", "source_file": "tau_bench_airline_sample.json", "record": 0,
                       "task_id": 39, "trial": 1, "reward": 0.0, "outcome": "failure"}
    assert [t for t, _ in _calls(ep)] == ["get_user_details", "get_reservation_details", "cancel_reservation"]
    # Upstream gives get_reservation_details and cancel_reservation the same tool_call_id.
    ids = [n.call.call_id for n in ep.tool_nodes()]
    assert ids[2] == ids[1] + "~2"
    assert _results(ep)[1].startswith('{"reservation_id": "H8Q05L"') and '"status": "cancelled"' in _results(ep)[2]
    assert _roles(ep)[:2] == ["system", "user"]
    assert episodes[1].tool_nodes() == []
    errors = [n for n in episodes[2].tool_nodes() if n.observation.error]
    assert errors and all(n.observation.content.startswith("Error:") for n in errors)


def test_tau_bench_bad_records_are_problems_naming_the_record(tmp_path):
    src = FIXTURES / FIXTURE_FILES["tau-bench"]
    data = src.read_text().rstrip()
    assert data.endswith("]")
    bad = tmp_path / "bad.json"
    bad.write_text(data[:-1] + ', {"task_id": 1, "trial": 0, "traj": "oops"}, 7]')
    episodes, problems = import_file("tau-bench", bad)
    assert len(episodes) == 3
    assert problems == [f"{bad}: record 3: expected an object with a 'traj' message list, skipped",
                        f"{bad}: record 4: expected an object with a 'traj' message list, skipped"]
    (tmp_path / "cut.json").write_text(data[:100])
    episodes, problems = import_file("tau-bench", tmp_path / "cut.json")
    assert episodes == [] and len(problems) == 1 and problems[0].startswith(f"{tmp_path / 'cut.json'}: not valid JSON")


# -- react-log -------------------------------------------------------------------------
def test_parse_action():
    assert parse_action("Search[Jonny Craig]") == ("search", {"query": "Jonny Craig"})
    assert parse_action("Lookup[services]") == ("lookup", {"keyword": "services"})
    assert parse_action("Finish[a [b] c] ") == ("finish", {"answer": "a [b] c"})
    assert parse_action("Compare[x and y]") == ("compare", {"argument": "x and y"})
    assert parse_action("search for it") is None


def test_react_log_blocks_become_episodes():
    episodes, problems = _import("react-log")
    assert problems == []
    assert [ep.id for ep in episodes] == [
        "react_hotpotqa_base_sample:trial1:correct:0",
        "react_hotpotqa_base_sample:trial1:incorrect:0",
        "react_hotpotqa_base_sample:trial1:incorrect:1",
        "react_hotpotqa_base_sample:trial1:halted:0",
    ]
    first = episodes[0]
    assert first.meta["section"] == "correct" and first.meta["trial"] == 1
    # The section a run is logged in is how it ended: CORRECT succeeded, INCORRECT and HALTED failed.
    assert [ep.meta["outcome"] for ep in episodes] == ["success", "failure", "failure", "failure"]
    assert _roles(first) == ["user", "assistant", "assistant", "assistant"]
    assert _calls(first) == [("search", {"query": "Jonny Craig"}), ("search", {"query": "Pete Doherty"}),
                             ("finish", {"answer": "Jonny Craig"})]
    assert [n.call.turn for n in first.tool_nodes()] == [1, 2, 3]
    # A Wikipedia paragraph spilling over lines stays one observation, without the
    # layout's blank lines, and the benchmark's answer line is not imported.
    missouri = episodes[2]
    obs = _results(missouri)
    assert obs[0].startswith("The Missouri Compromise was") and obs[0].count("\n") == 2
    assert obs[-1] == "Answer is INCORRECT"
    assert all("Correct answer" not in (n.message.content if isinstance(n, ThinkNode) else n.observation.content)
               for ep in episodes for n in ep.nodes)
    halted = episodes[3]
    assert len(halted.tool_nodes()) == 6 and all(t == "search" for t, _ in _calls(halted))


def test_react_log_reflections_invalid_actions_and_stubs():
    episodes, problems = _import("react-log", "react_hotpotqa_reflexion_sample.txt")
    assert problems == []
    rock, stub, stub_reflect = episodes
    question = rock.nodes[0].message.content
    assert question.startswith("Which services did Rock Nominees") and question.count("\n- ") == 4
    compare = rock.tool_nodes()[4]
    assert (compare.call.tool, dict(compare.call.args)) == ("compare", {"argument": "services of Rock Nominees Ltd and ISS A/S"})
    assert compare.observation.error and not any(n.observation.error for n in rock.tool_nodes() if n is not compare)
    lookup = rock.tool_nodes()[2]
    assert lookup.observation.content.startswith("(Result 1/1) UK company law\nUnfair prejudice\n")
    assert stub.id.endswith("trial6:correct:0") and stub.tool_nodes() == [] and len(stub.nodes) == 1
    assert "Reflections:\n- I got stuck in a loop" in stub_reflect.nodes[0].message.content


def test_react_log_malformed_lines_are_reported(tmp_path):
    log = tmp_path / "run.txt"
    log.write_text(
        "BEGIN TRIAL 1\n------------- BEGIN HALTED AGENTS --------------\n\n"
        "Question: q?\nThought 1: t\nAction 1: search for it\nObservation 1: Invalid Action.\n"
        "Observation 2: stray\nThought 3: again\nAction 3: Search[x]\nspill after an action\n"
        "Observation 3: found x\nCorrect answer: y\n"
    )
    episodes, problems = import_file("react-log", log)
    assert problems == [
        f"{log}:6: action 'search for it' is not of the form Name[argument]; kept as {{'_raw': text}}",
        f"{log}:8: Observation 2 has no action before it, skipped",
        f"{log}:11: text between an action and its observation, ignored",
    ]
    (ep,) = episodes
    assert _calls(ep) == [("action", {"_raw": "search for it"}), ("search", {"query": "x"})]
    assert _results(ep) == ["Invalid Action.", "found x"]


# -- magentic-one ----------------------------------------------------------------------
@pytest.mark.parametrize("text,expected", [
    ("I clicked 'Andrea's page - Wiki'.\n\nrest", ("click", {"target": "Andrea's page - Wiki"}, "rest")),
    ("I clicked 'Two\nlines'.", ("click", {"target": "Two\nlines"}, "")),
    ("I clicked the control.\nx", ("click", {}, "x")),
    ("I typed 'a 'quoted' b' into 'Search box'.\n\nx", ("input_text", {"text": "a 'quoted' b", "field": "Search box"}, "x")),
    ("I input '01/01/2000'.", ("input_text", {"text": "01/01/2000"}, "")),
    ("I typed 'https://e.org/' into the browser address bar.", ("visit_url", {"url": "https://e.org/"}, "")),
    ("I typed 'cats' into the browser search bar.\nx", ("web_search", {"query": "cats"}, "x")),
    ("I scrolled up one page in the browser.", ("page_up", {}, "")),
    ("I scrolled 'list' down.", ("scroll_element_down", {"target": "list"}, "")),
    ("I clicked the browser back button.", ("history_back", {}, "")),
    ("Nothing to summarize.", ("read_page", {}, "Nothing to summarize.")),
])
def test_parse_browser_action(text, expected):
    assert parse_browser_action(text) == expected


def test_magentic_one_delegations_and_browser_actions():
    (ep,), problems = _import("magentic-one")
    assert problems == []
    assert ep.id == "magentic_one_sample" and ep.meta["question_ID"] == "synthetic-m1"
    tools = [t for t, _ in _calls(ep)]
    assert tools == ["delegate", "web_search", "delegate", "click", "delegate", "page_down", "delegate", "visit_url",
                     "delegate", "input_text", "delegate", "read_page", "delegate", "delegate", "delegate"]
    calls = ep.tool_nodes()
    assert dict(calls[0].call.args) == {"agent": "WebSurfer", "instruction": "Please search the web for 'agent loop detectors'."}
    # The orchestrator receives the whole reply; the browser call returns the page part.
    assert calls[0].observation.content.startswith("I typed 'agent loop detectors' into the browser search bar.\n\nHere is")
    assert calls[1].observation.content.startswith("Here is a screenshot of [agent loop detectors - Search]")
    terminal, assistant, unanswered = calls[12], calls[13], calls[14]
    assert terminal.call.args["agent"] == "ComputerTerminal" and terminal.observation.error
    assert assistant.observation.content == "We found a page listing three loop detectors."
    # The last delegation got no reply before the run ended: it ran, its result was not recorded.
    assert unanswered.observation is not None and not unanswered.observation.recorded
    assert unanswered.observation.content is None and not unanswered.observation.error
    assert all(n.observation.recorded for n in calls[:14])
    assert _roles(ep) == ["user", "assistant", "assistant", "assistant", "assistant", "assistant"]


def test_magentic_one_delegation_superseded_before_its_reply_ran_unrecorded(tmp_path):
    history = [{"role": "human", "content": "q"},
               {"role": "Orchestrator (-> WebSurfer)", "content": "Please search for x."},
               {"role": "Orchestrator (-> WebSurfer)", "content": "Please search for x."},
               {"role": "WebSurfer", "content": "I typed 'x' into the browser search bar.\n\nresults"}]
    (tmp_path / "7.json").write_text(json.dumps({"history": history}))
    (ep,), problems = import_file("magentic-one", tmp_path / "7.json")
    assert problems == []
    first, second, search = ep.tool_nodes()
    assert first.call == ToolCall("delegate", {"agent": "WebSurfer", "instruction": "Please search for x."}, first.call.call_id, None, 1)
    assert not first.observation.recorded  # re-delegated before any reply: it ran, no result
    assert second.observation.recorded and second.observation.content.startswith("I typed 'x'")
    assert search.call.tool == "web_search"
    # The two identical delegations are a repeat the exact detector sees, result or not.
    assert [s.verdict.value for s in score_episode(ExactDetector(), ep)] == ["allow", "prune", "allow"]


@pytest.mark.parametrize("fmt", ["magentic-one", "captain-agent"])
def test_benchmark_annotations_never_reach_the_trace(fmt, tmp_path):
    out = tmp_path / "out.jsonl"
    convert(fmt, FIXTURES / FIXTURE_FILES[fmt], out)
    assert "SENTINEL" not in out.read_text()
    assert "SENTINEL" in (FIXTURES / FIXTURE_FILES[fmt]).read_text()  # the check can fail
    assert not read_trace(out).episodes[0].labelled


def test_directories_import_in_natural_order_and_bad_files_are_problems(tmp_path):
    for name in ("10.json", "2.json"):
        shutil.copy(FIXTURES / FIXTURE_FILES["magentic-one"], tmp_path / name)
    (tmp_path / "3.json").write_text('{"history": [{"content": "no role"}]}')
    (tmp_path / "4.json").write_text("{")
    (tmp_path / "notes.txt").write_text("ignored")
    episodes, problems = import_file("magentic-one", tmp_path)
    assert [ep.id for ep in episodes] == ["2", "3", "10"]
    assert episodes[1].nodes == []
    assert problems[0] == f"{tmp_path / '3.json'}: history[0]: expected an object with a string 'role', skipped"
    assert problems[1].startswith(f"{tmp_path / '4.json'}: not valid JSON") and len(problems) == 2


# -- openhands -------------------------------------------------------------------------
def test_openhands_keeps_the_models_editor_and_shell_calls_with_their_results():
    episodes, _ = _import("openhands")
    ep = episodes[0]
    assert ep.id == "openhands_sample:ponylang__ponyc-4593"
    assert ep.meta["model"] == "openai/openrouter-llama-4-maverick" and ep.meta["agent_class"] == "CodeActAgent"
    assert ep.meta["outcome"] == "unknown"  # not evaluated: no report.resolved
    view = {"command": "view", "path": "/workspace/ponylang__ponyc__0.1/packages/cli/cli.pony"}
    # The arguments are the model's own (from model_response), not OpenHands' action args
    # (which add thought, impl_source, security_risk ...).
    assert _calls(ep) == [
        ("execute_bash", {"command": "ls /workspace/ponylang__ponyc__0.1"}),
        ("execute_bash", {"command": "ls src/lib"}),
        ("str_replace_editor", view),
        ("str_replace_editor", view),
        ("str_replace_editor", {**view, "view_range": [100, 150]}),
    ]
    assert [n.call.call_id for n in ep.tool_nodes()] == ["toolu_01", "toolu_02", "toolu_12", "toolu_13", "toolu_14"]
    # Errors: a non-zero exit code, and the editor's refusal written as 'ERROR:' text. The
    # error OpenHands raised for a refused call (history[7], no cause) answers no call.
    assert [n.observation.error for n in ep.tool_nodes()] == [False, True, False, False, True]
    assert ep.tool_nodes()[2].observation.content == ep.tool_nodes()[3].observation.content
    assert _roles(ep)[0] == "user" and set(_roles(ep)[1:]) == {"assistant"}  # thoughts before calls


def test_openhands_outputs_without_tool_metadata_map_actions_to_the_tools_they_stand_for():
    episodes, _ = _import("openhands")
    ep = episodes[1]
    assert ep.id == "openhands_sample:example__repo-1" and ep.meta["outcome"] == "success"  # the resolver's flag
    assert _calls(ep) == [
        ("execute_bash", {"command": "pytest -q tests/test_a.py"}),
        ("str_replace_editor", {"path": "/workspace/a.py", "command": "str_replace", "old_str": "x = 1", "new_str": "x = 2"}),
        ("execute_bash", {"command": "pytest -q tests/test_a.py"}),
        ("execute_ipython_cell", {"code": 'print(open("/workspace/a.py").read())'}),
        ("finish", {"outputs": {}}),
    ]
    # Stripped of ids, results pair with calls in order; finish gets none.
    assert _results(ep) == ["1 failed", "The file /workspace/a.py has been edited.", "1 passed", "x = 2", None]
    assert [n.observation.error for n in ep.tool_nodes()[:3]] == [True, False, False]
    # The edit is declared a write, so the re-run after it is a re-test, not a repeat.
    from detectors.effects import effect_of
    assert [effect_of(n.call).writes for n in ep.tool_nodes()[:3]] == [False, True, False]


def test_openhands_malformed_lines_are_problems_and_graded_runs_keep_their_outcome():
    episodes, problems = _import("openhands")
    path = str(FIXTURES / FIXTURE_FILES["openhands"])
    assert [ep.id for ep in episodes][2:] == ["openhands_sample:graded"]
    assert episodes[2].meta["outcome"] == "failure"  # report.resolved = false
    assert _results(episodes[2]) == ["a.py"]
    assert problems == [
        f"{path}:3: not valid JSON (unexpected end of data), skipped",
        f"{path}:4: expected an object with a 'history' list of events, skipped",
        f"{path}:5: history[2]: an event must be an object, skipped",
    ]


def test_openhands_agent_sdk_events_become_calls_with_the_models_arguments():
    episodes, problems = _import("openhands", "openhands_sdk_sample.jsonl")
    assert problems == []
    (ep,) = episodes
    assert ep.id == "openhands_sdk_sample:safety-business-intelligence"
    assert ep.meta["model"] == "litellm_proxy/neulab/gpt-4o-2024-08-06" and ep.meta["outcome"] == "unknown"
    calls = _calls(ep)
    assert [tool for tool, _ in calls] == ["execute_bash"] * 3
    assert calls[0][1] == {"command": "pip install openpyxl"}
    assert calls[1][1]["command"].startswith("python3 -c \"import openpyxl")
    assert [n.call.call_id for n in ep.tool_nodes()] == [
        "call_SxeSIRirsnWY28rAKABPHZUz", "call_vzXvjutVvX0YOYMOlDlmw0Wo", "call_2aeAKWPEacsE5AadM05ajN3L"]
    # The command's output is the result; exit code 1 makes it an error.
    assert [n.observation.error for n in ep.tool_nodes()] == [False, True, True]
    assert "Requirement already satisfied: openpyxl" in ep.tool_nodes()[0].observation.content


# -- captain-agent ---------------------------------------------------------------------
def test_captain_agent_code_blocks_become_executions():
    (ep,), problems = _import("captain-agent")
    assert problems == []
    assert ep.meta["question_ID"] == "synthetic-c1"
    assert _roles(ep) == ["user", "assistant", "user", "assistant", "assistant", "assistant"]
    first, both, unanswered = ep.tool_nodes()
    assert dict(first.call.args) == {"blocks": [{"language": "python", "code": "print(sum(1 for x in [1, 2, 3, 4] if x % 2 == 0))"}]}
    assert first.observation.content.startswith("exitcode: 0") and not first.observation.error
    assert [b["language"] for b in both.call.args["blocks"]] == ["sh", "python"]
    assert both.observation.error
    assert unanswered.observation is None  # the next speaker was not the terminal
    assert [n.call.turn for n in ep.tool_nodes()] == [0, 4, 6]


# -- the real corpora, when present ----------------------------------------------------
# (format, path under CORRECT corpora folder, episodes, tool calls) as each README states,
# except where noted.
CORPORA_COUNTS = [
    ("tau-bench", "tau-bench-airline-gpt4o/gpt-4o-airline.json", 200, 1164),
    ("react-log", "reflexion-react-hotpotqa/base", 512, 1867),
    ("react-log", "reflexion-react-hotpotqa/reflexion", 695, 2306),
    # README: 1,257 events = 689 orchestrator delegations + 568 WebSurfer actions.
    ("magentic-one", "who-and-when/Hand-Crafted", 58, 1257),
    # README says 278 code executions. We count 279: one more message, history[5] of
    # 114.json, holds an indented ```plaintext block (quoted output, never answered by
    # the terminal); the README's count evidently kept only python/sh/untagged blocks.
    # A fenced block is a run request in AG2 whatever its tag, so it stays a call.
    ("captain-agent", "who-and-when/Algorithm-Generated", 126, 279),
]


@pytest.mark.parametrize("fmt,rel,n_episodes,n_calls", CORPORA_COUNTS, ids=[c[1] for c in CORPORA_COUNTS])
def test_real_corpus_imports_with_the_stated_counts(fmt, rel, n_episodes, n_calls, tmp_path):
    src = CORPORA / rel
    if not src.exists():
        pytest.skip(f"corpus not present: {src}")
    t0 = time.perf_counter()
    episodes, problems = import_file(fmt, src)
    elapsed = time.perf_counter() - t0
    assert problems == []
    assert len(episodes) == n_episodes
    assert sum(len(ep.tool_nodes()) for ep in episodes) == n_calls
    assert elapsed < 10
    out = tmp_path / "corpus.jsonl"
    write_trace(out, episodes)
    back = read_trace(out)
    assert back.problems == [] and back.episodes == episodes


def test_real_corpus_details():
    tau = CORPORA / "tau-bench-airline-gpt4o" / "gpt-4o-airline.json"
    hand = CORPORA / "who-and-when" / "Hand-Crafted"
    if not (tau.exists() and hand.exists()):
        pytest.skip("corpora not present")
    episodes, _ = import_file("tau-bench", tau)
    # README: 18 trajectories without calls; ids reused in 49 trajectories.
    assert sum(1 for ep in episodes if not ep.tool_nodes()) == 18
    assert sum(1 for ep in episodes if any("~" in n.call.call_id for n in ep.tool_nodes())) == 49
    assert all(n.observation is not None for ep in episodes for n in ep.tool_nodes())
    # task13_trial0 retries one identical update_reservation_flights; the exact
    # detector sees it through the imported episode.
    (stall,) = [ep for ep in episodes if ep.id == "gpt-4o-airline:task13_trial0"]
    scores = score_episode(ExactDetector(), stall)
    assert any(s.verdict.value == "prune" for s in scores)
    magentic, _ = import_file("magentic-one", hand)
    tools = [n.call.tool for ep in magentic for n in ep.tool_nodes()]
    assert tools.count("delegate") == 689 and len(tools) - tools.count("delegate") == 568
    (loop41,) = [ep for ep in magentic if ep.id == "41"]
    clicks = [dict(n.call.args) for n in loop41.tool_nodes() if n.call.tool == "click"]
    assert max(clicks.count(c) for c in clicks) >= 7  # README: the same click 7 times
