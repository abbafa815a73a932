"""Importers of coding-agent transcripts: Claude Code sessions, SWE-agent trajectories,
mini-swe-agent trajectories (read by the ``openai`` importer)."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from detectors import Verdict, make_detector
from detectors.effects import effect_of
from scenarios.importers import convert, import_file
from scenarios.importers.swe_agent import parse_action
from scenarios.trace import TraceError, read_trace
from scenarios.tree import ThinkNode
from sim.play.openloop import score_episode

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "tests" / "fixtures" / "importers"
CLAUDE = FIXTURES / "claude_code_sample.jsonl"
SWE = FIXTURES / "swe_agent_sample.traj"
SWE_LEGACY = ROOT / "examples" / "real" / "swe_agent_sample.traj"  # the docs' example: SWE-agent 0.x commands


def _lines(*records: dict) -> str:
    return "".join(json.dumps(r) + "\n" for r in records)


def _turn(kind: str, uuid: str, parent: str | None, content, **extra) -> dict:
    msg = {"role": kind, "content": content}
    return {"type": kind, "uuid": uuid, "parentUuid": parent, "message": msg, **extra}


def _use(cid: str, name: str, **args) -> dict:
    return {"type": "tool_use", "id": cid, "name": name, "input": args}


def _result(cid: str, text, error: bool = False) -> dict:
    return {"type": "tool_result", "tool_use_id": cid, "content": text, "is_error": error}


# -- claude-code -----------------------------------------------------------------------
def test_claude_code_session_becomes_the_agents_calls_and_a_sub_agents_episode():
    episodes, problems = import_file("claude-code", CLAUDE)
    assert problems == []
    main, side = episodes
    assert main.id == "claude_code_sample" and side.id == "claude_code_sample:sidechain-1"
    assert [(n.call.tool, n.call.call_id) for n in main.tool_nodes()] == [
        ("Bash", "toolu_01"), ("Read", "toolu_02"), ("Edit", "toolu_03"), ("Task", "toolu_04"), ("Bash", "toolu_05")]
    first, read, edit, task, again = main.tool_nodes()
    assert first.observation.error and first.observation.content.startswith("F.\n1 failed")  # is_error
    assert not again.observation.error and again.observation.content == "..\n2 passed"
    assert task.observation.content == "Only the test calls parse_date."  # text blocks joined
    assert edit.call.args["file_path"] == "/home/dev/app/dates.py" and effect_of(edit.call).writes
    assert main.meta == {"source_format": "claude-code", "source_file": CLAUDE.name, "outcome": "unknown",
                         "version": "2.0.14", "model": "claude-sonnet-4-5-20250929"}
    assert side.meta["model"] == "claude-haiku-4-5"  # the sub-agent's own model
    # the sub-agent's calls are its own episode, not repeats inside the main one
    assert [n.call.tool for n in side.tool_nodes()] == ["Grep"]
    # thinking blocks stay out; the prompt and the agent's text are ThinkNodes
    roles = [n.message.role for n in main.nodes if isinstance(n, ThinkNode)]
    assert roles == ["user", "assistant", "assistant"]
    assert "Run the test first." not in json.dumps([n.message.content for n in main.nodes if isinstance(n, ThinkNode)])


def test_claude_code_usage_is_counted_once_per_message_and_goes_to_the_next_call():
    main, _ = import_file("claude-code", CLAUDE)[0]
    tokens = [n.tokens for n in main.tool_nodes()]
    # msg_01 spans two lines with the same usage (20 + 1200 cached + 8): counted once.
    assert tokens[0] == 1228
    # msg_05 (150 + 1200 + 20) and the final answer msg_06 (170 + 1200 + 25) both go to the last call.
    assert tokens[-1] == 1370 + 1395
    assert sum(tokens) == sum(i + 1200 + o for i, o in ((20, 8), (60, 30), (90, 60), (120, 40), (150, 20), (170, 25)))


def test_claude_code_round_trips_through_the_trace_format(tmp_path):
    out = tmp_path / "trace.jsonl"
    n, problems = convert("claude-code", CLAUDE, out)
    assert (n, problems) == (2, [])
    assert read_trace(out).episodes == import_file("claude-code", CLAUDE)[0]


def test_claude_code_a_rewound_turn_is_a_branch_not_a_repeat(tmp_path):
    """The user went back to u2 and asked again: the second identical Read starts a new path
    from the turn before the first, so no path holds the same call twice."""
    def session(rewound_to: str):
        return _lines(
            _turn("user", "u1", None, "read config"),
            _turn("assistant", "u2", "u1", [_use("t1", "Read", file_path="/a/config.toml")]),
            _turn("user", "u3", "u2", [_result("t1", "key = 1")]),
            _turn("assistant", "u4", "u3", [{"type": "text", "text": "key is 1"}]),
            _turn("assistant", "u5", rewound_to, [_use("t2", "Read", file_path="/a/config.toml")]),
            _turn("user", "u6", "u5", [_result("t2", "key = 1")]),
        )

    (tmp_path / "s.jsonl").write_text(session("u1"))  # rewound to the prompt
    (ep,) = import_file("claude-code", tmp_path / "s.jsonl")[0]
    assert not ep.is_linear() and len(list(ep.paths())) == 2
    verdicts = [s.verdict for s in score_episode(make_detector("exact"), ep)]
    assert verdicts == [Verdict.ALLOW, Verdict.ALLOW]
    # The same lines continuing the chain are a repeat: the check can fail.
    (tmp_path / "flat.jsonl").write_text(session("u4"))
    (linear,) = import_file("claude-code", tmp_path / "flat.jsonl")[0]
    assert linear.is_linear()
    assert [s.verdict for s in score_episode(make_detector("exact"), linear)][-1] is not Verdict.ALLOW


def test_claude_code_stream_json_keys_sub_agents_by_their_task_call(tmp_path):
    stream = tmp_path / "run.txt"  # `claude -p --output-format stream-json > run.txt`
    stream.write_text(_lines(
        {"type": "system", "subtype": "init", "uuid": "i", "claude_code_version": "2.1.19", "session_id": "x"},
        {"type": "assistant", "uuid": "a", "parent_tool_use_id": None,
         "message": {"id": "m1", "role": "assistant", "model": "claude-opus-4-5", "content": [_use("T", "Task", prompt="look")]}},
        {"type": "assistant", "uuid": "b", "parent_tool_use_id": "T",
         "message": {"id": "m2", "role": "assistant", "content": [_use("g", "Grep", pattern="x")]}},
        {"type": "user", "uuid": "c", "parent_tool_use_id": "T", "message": {"role": "user", "content": [_result("g", "hit")]}},
        {"type": "user", "uuid": "d", "parent_tool_use_id": None, "message": {"role": "user", "content": [_result("T", "done")]}},
        {"type": "result", "subtype": "success", "is_error": False, "uuid": "e"},
    ))
    episodes, problems = import_file("claude-code", stream)
    assert problems == []
    assert [(ep.id, [(n.call.tool, n.observation.content) for n in ep.tool_nodes()]) for ep in episodes] == [
        ("run", [("Task", "done")]), ("run:sidechain-1", [("Grep", "hit")])]
    assert episodes[0].meta["version"] == "2.1.19"


def test_claude_code_bad_lines_are_problems_naming_the_line_and_the_rest_imports(tmp_path):
    session = tmp_path / "s.jsonl"
    session.write_text(_lines(
        _turn("user", "u1", None, "go"),
        _turn("assistant", "u2", "u1", [_use("t1", "Bash", command="ls")]),
        _turn("user", "u3", "u2", [_result("nope", "?")]),
        {"type": "assistant", "uuid": "u4", "parentUuid": "u3"},
        _turn("assistant", "u5", "u2", [{"type": "tool_use", "id": "t2"}]),
        _turn("user", "u6", "u2", [_result("t1", "a.txt")]),
    ) + "{not json\n")
    (ep,), problems = import_file("claude-code", session)
    assert [n.observation.content for n in ep.tool_nodes()] == ["a.txt"]
    assert problems[:3] == [
        f"{session}:3: content[0]: a tool_result for no call of this file ('nope'), skipped",
        f"{session}:4: a assistant line without a 'message' object, skipped",
        f"{session}:5: content[0]: a tool_use without a name, skipped",
    ]
    assert problems[3].startswith(f"{session}:7: not valid JSON") and len(problems) == 4


def test_claude_code_folders_are_searched_recursively_but_not_side_files(tmp_path):
    project = tmp_path / "projects" / "-home-dev-app"
    (project / "s1" / "subagents").mkdir(parents=True)
    (project / "s1" / "tool-results").mkdir()
    (project / "s1.jsonl").write_text(CLAUDE.read_text())
    (project / "s1" / "subagents" / "agent-7.jsonl").write_text(_lines(
        _turn("user", "x1", None, "sub"), _turn("assistant", "x2", "x1", [_use("q", "Glob", pattern="*.py")]),
        _turn("user", "x3", "x2", [_result("q", "a.py")])))
    (project / "s1" / "tool-results" / "big.jsonl").write_text(_lines(_turn("user", "y", None, "not a session")))
    episodes, problems = import_file("claude-code", tmp_path / "projects")
    assert problems == []
    assert [ep.id for ep in episodes] == ["s1", "s1:sidechain-1", "agent-7"]
    with pytest.raises(TraceError, match="no such file"):
        import_file("claude-code", tmp_path / "missing")


# -- swe-agent -------------------------------------------------------------------------
@pytest.mark.parametrize("action,expected", [
    ("str_replace_editor view /testbed/a.py --view_range 1 50",
     ("str_replace_editor", {"command": "view", "path": "/testbed/a.py", "view_range": [1, 50]})),
    ("str_replace_editor str_replace /t/a.py --old_str 'x = 1' --new_str 'x = 2\n'",
     ("str_replace_editor", {"command": "str_replace", "path": "/t/a.py", "old_str": "x = 1", "new_str": "x = 2\n"})),
    ("str_replace_editor insert /t/a.py --insert_line 3 --new_str y",
     ("str_replace_editor", {"command": "insert", "path": "/t/a.py", "insert_line": 3, "new_str": "y"})),
    ("str_replace_editor view /t/a.py --bogus 1", ("str_replace_editor", {"command": "view /t/a.py --bogus 1"})),
    ("str_replace_editor create /t/a.py --file_text 'unbalanced",
     ("str_replace_editor", {"command": "create /t/a.py --file_text 'unbalanced"})),
    ("edit 4:4\ndef f(a):\nend_of_edit\n", ("edit", {"command": "4:4\ndef f(a):\nend_of_edit"})),
    ("submit\n", ("submit", {})),
    ("cd /testbed && python reproduce.py", ("bash", {"command": "cd /testbed && python reproduce.py"})),
    ("python3 -m pytest -q", ("bash", {"command": "python3 -m pytest -q"})),
])
def test_swe_agent_action_lines_read_back_as_calls(action, expected):
    assert parse_action(action) == expected


def test_swe_agent_function_calling_keeps_the_models_own_calls():
    (ep,), problems = import_file("swe-agent", SWE)
    assert problems == []
    assert ep.id == "swe_agent_sample"
    assert ep.meta == {"source_format": "swe-agent", "source_file": SWE.name, "outcome": "unknown",
                       "exit_status": "submitted", "model": "gpt-4o"}
    calls = [(n.call.tool, n.call.args) for n in ep.tool_nodes()]
    assert calls[0] == ("find_file", {"file_name": "missing_colon.py"})  # tool_calls, not the action line
    assert calls[3] == ("bash", {"command": "python3 /SWE-agent__test-repo/tests/missing_colon.py"})
    assert calls[-1][0] == "submit"
    assert ep.tool_nodes()[0].call.call_id == "call_fJuazlMUN5fQDQ73G6XSpYpx"
    assert ep.tool_nodes()[3].observation.content == "8.2"
    roles = [n.message.role for n in ep.nodes if isinstance(n, ThinkNode)]
    assert roles[0] == "user" and set(roles[1:]) == {"assistant"}  # the task, then each step's thought


def test_swe_agent_legacy_commands_and_refused_edits():
    (ep,), problems = import_file("swe-agent", SWE_LEGACY)
    assert problems == []
    tools = [n.call.tool for n in ep.tool_nodes()]
    assert tools == ["find_file", "open", "edit", "edit", "edit", "edit"]
    # "Your proposed edit has introduced new syntax error(s)": not applied, an error
    assert [n.observation.error for n in ep.tool_nodes()] == [False, False, True, True, True, False]
    # the identical refused edit (call 4 repeats call 3) is a repeat the seed's hash refuses
    scores = score_episode(make_detector("exact"), ep)
    assert [s.verdict.value for s in scores] == ["allow", "allow", "allow", "allow", "prune", "allow"]


def test_swe_agent_xml_calls_blank_actions_and_bad_files(tmp_path):
    run = {"trajectory": [
        {"action": "str_replace_editor view /t/a.py  --view_range 5 9", "observation": "5\tx = 1",
         "response": "Look.\n<function=str_replace_editor>\n<parameter=command>view</parameter>\n"
                     "<parameter=path>/t/a.py</parameter>\n<parameter=view_range>[5, 9]</parameter>\n</function>"},
        {"action": "str_replace_editor str_replace /t/a.py --old_str nope --new_str y",
         "observation": "No replacement was performed, old_str `nope` did not appear verbatim in /t/a.py.",
         "response": "<function=str_replace_editor>\n<parameter=command>str_replace</parameter>\n<parameter=path>/t/a.py"
                     "</parameter>\n<parameter=old_str>nope</parameter>\n<parameter=new_str>y</parameter>\n</function>"},
        {"action": "", "observation": "Exited (autosubmitted)", "response": ""},
        "not a step",
    ], "history": [], "info": {"exit_status": "submitted (exit_cost)"}}
    (tmp_path / "nested" / "run1").mkdir(parents=True)
    (tmp_path / "nested" / "run1" / "i-1.traj").write_text(json.dumps(run))
    (tmp_path / "nested" / "broken.traj").write_text("{")
    (tmp_path / "nested" / "other.traj").write_text(json.dumps({"history": []}))
    episodes, problems = import_file("swe-agent", tmp_path)
    (ep,) = episodes
    assert [(n.call.tool, n.call.args, n.observation.error) for n in ep.tool_nodes()] == [
        ("str_replace_editor", {"command": "view", "path": "/t/a.py", "view_range": [5, 9]}, False),
        ("str_replace_editor", {"command": "str_replace", "path": "/t/a.py", "old_str": "nope", "new_str": "y"}, True),
    ]
    assert ep.meta["exit_status"] == "submitted (exit_cost)"
    assert problems == [
        f"{tmp_path / 'nested' / 'broken.traj'}: not valid JSON (unexpected end of data), skipped",
        f"{tmp_path / 'nested' / 'other.traj'}: expected an object with a 'trajectory' list, skipped",
        f"{tmp_path / 'nested' / 'run1' / 'i-1.traj'}: trajectory[3]: a step must be an object, skipped",
    ]


def test_swe_agent_round_trips_through_the_trace_format(tmp_path):
    for src in (SWE, SWE_LEGACY):
        out = tmp_path / f"{src.stem}.jsonl"
        assert convert("swe-agent", src, out) == (1, [])
        assert read_trace(out).episodes == import_file("swe-agent", src)[0]


# -- mini-swe-agent, through the openai importer ---------------------------------------
def test_a_pretty_printed_conversation_is_one_episode_and_returncodes_say_errors(tmp_path):
    traj = {"info": {"exit_status": "Submitted"}, "trajectory_format": "mini-swe-agent-1.1", "messages": [
        {"role": "system", "content": "You are a helpful assistant."},
        {"role": "user", "content": "Fix the bug."},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "bash", "arguments": "{\"command\": \"pytest -q\"}"}}]},
        {"role": "tool", "tool_call_id": "c1", "content": "<returncode>1</returncode>\n<output>\n1 failed\n</output>"},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "c2", "type": "function", "function": {"name": "bash", "arguments": "{\"command\": \"ls\"}"}}]},
        {"role": "tool", "tool_call_id": "c2", "content": "<returncode>0</returncode>\n<output>\na.py\n</output>"},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "c3", "type": "function", "function": {"name": "bash", "arguments": "{\"command\": \"pytest\"}"}}]},
        {"role": "tool", "tool_call_id": "c3", "content": "<exception>Command 'pytest' timed out after 60 seconds</exception>"
                                                          "\n<returncode>-1</returncode>\n<output>\n....\n</output>"},
    ]}
    path = tmp_path / "django__django-1.traj.json"
    path.write_text(json.dumps(traj, indent=2))
    (ep,), problems = import_file("openai", path)
    assert problems == [] and ep.id == "django__django-1.traj"
    assert [(n.call.tool, n.call.args, n.observation.error) for n in ep.tool_nodes()] == [
        ("bash", {"command": "pytest -q"}, True), ("bash", {"command": "ls"}, False), ("bash", {"command": "pytest"}, True)]
    # one conversation per line stays what it was
    lines = tmp_path / "chats.json"
    lines.write_text(json.dumps(traj) + "\n" + json.dumps(traj) + "\n")
    assert [ep.id for ep in import_file("openai", lines)[0]] == ["chats:0", "chats:1"]


def test_mini_swe_agent_1x_actions_are_the_bash_blocks_of_its_replies():
    """Before 2.0 mini-swe-agent called no tools: the one bash block of a reply ran, and the next
    user message is its output; a reply with two blocks ran nothing. A run folder is searched
    recursively, and the patches beside the runs (``preds.json``) are passed over."""
    (ep,), problems = import_file("openai", FIXTURES / "mini_swe_agent_v1")
    assert ep.id == "demo__demo-1.traj" and problems == []
    assert [(n.call.tool, n.call.args["command"], n.observation.error) for n in ep.tool_nodes()] == [
        ("bash", "nl -ba src/calc.py | sed -n '1,5p'", False),
        ("bash", "sed -i 's/ + 1//' src/calc.py && python -c 'from src.calc import total; print(total([1, 2]))'", False),
        ("bash", "pytest -q tests", True),
        ("bash", "pytest -q", True),  # "The last command ... timed out"
        ("bash", "echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT && git add -A && git diff --cached", False)]
    assert ep.tool_nodes()[0].observation.content.startswith("<returncode>0</returncode>")
    # the replies stay the agent's text, the format error the harness's message to it
    texts = [n.message.content for n in ep.nodes if isinstance(n, ThinkNode)]
    assert any("found 2 actions" in t for t in texts) and any(t.startswith("THOUGHT: Two ideas") for t in texts)
    # the same messages under mini-swe-agent 1.1's format are read by their tool calls only
    doc = json.loads((FIXTURES / "mini_swe_agent_v1" / "demo__demo-1" / "demo__demo-1.traj.json").read_text())
    doc["trajectory_format"] = "mini-swe-agent-1.1"
    (ep,), _ = import_file("openai", _write(doc))
    assert ep.tool_nodes() == []


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(["```bash", "```", "\n", " ", "ls", "\t", "```bash\n", "x\n```"]), max_size=16).map("".join))
def test_bash_blocks_are_the_blocks_mini_swe_agents_own_pattern_finds(reply):
    """Searched only up to the last closing fence (many unclosed openings, a hostile trace's way
    to make a lazy pattern quadratic), yet the same blocks as mini-swe-agent 1.x's pattern finds."""
    import re

    from scenarios.importers.openai_chat import bash_blocks

    expected = re.findall(r"```bash\s*\n(.*?)\n```", reply, re.DOTALL)
    assert [b.strip() for b in bash_blocks(reply)] == [b.strip() for b in expected]


def test_swe_agent_xml_parameters_are_read_up_to_the_last_closing_tag():
    """Many unclosed ``<parameter=`` tags (a hostile trace) are searched no further than the last
    ``</parameter>``: what closes is read as before, what never closes is no parameter."""
    from scenarios.importers.swe_agent import _xml_call

    call = "<function=str_replace_editor><parameter=command>view</parameter><parameter=path>/a.py</parameter>"
    assert _xml_call(call + "<parameter=view_range>[1, 5]</parameter></function>") == (
        "str_replace_editor", {"command": "view", "path": "/a.py", "view_range": [1, 5]})
    assert _xml_call(call + "<parameter=view_range>[1, 5]" * 2000) == (
        "str_replace_editor", {"command": "view", "path": "/a.py"})


def _write(doc: dict) -> Path:
    import tempfile
    path = Path(tempfile.mkdtemp()) / "x__y-1.traj.json"
    path.write_text(json.dumps(doc, indent=2))
    return path


# -- codex -----------------------------------------------------------------------------
CODEX = FIXTURES / "codex_sample.jsonl"


def _item(payload: dict, kind: str = "response_item") -> dict:
    return {"timestamp": "2026-11-22T08:00:00.000Z", "type": kind, "payload": payload}


def _shell(cid: str, script: str) -> dict:
    return _item({"type": "function_call", "name": "shell", "call_id": cid,
                  "arguments": json.dumps({"command": ["bash", "-lc", script]})})


def test_codex_rollout_becomes_the_agents_calls_with_their_results_and_effects():
    (ep,), problems = import_file("codex", CODEX)
    assert problems == []
    assert ep.id == "codex_sample"
    assert ep.meta == {"source_format": "codex", "source_file": CODEX.name, "outcome": "unknown",
                       "cli_version": "0.58.0", "model": "gpt-5-codex"}
    assert [(n.call.tool, n.call.call_id) for n in ep.tool_nodes()] == [
        ("shell", "call_t1"), ("shell", "call_r1"), ("apply_patch", "call_p1"), ("shell", "call_t2")]
    test, read, patch, again = ep.tool_nodes()
    assert test.call.args["command"] == ["bash", "-lc", "pytest -q tests/test_calc.py"]
    # exec_command_end and the JSON output tell the same result: read once, exit code 1 = error
    assert test.observation.error and test.observation.content.startswith("F.\nFAILED")
    assert read.observation.content == "def divide(a, b):\n    return a / b\n" and not read.observation.error
    assert patch.call.args["input"].startswith("*** Begin Patch") and effect_of(patch.call).writes
    assert effect_of(patch.call).target == "calc.py"
    assert not again.observation.error and again.observation.content.endswith("2 passed")  # "Exit code: 0"
    # the scaffold's context block and the reasoning item stay out
    assert [(n.message.role, n.message.content) for n in ep.nodes if isinstance(n, ThinkNode)] == [
        ("user", "test_divide fails; fix it."), ("assistant", "divide now raises ValueError on zero; both tests pass.")]


def test_codex_token_counts_go_to_the_next_call_and_the_last_to_the_last_call():
    (ep,), _ = import_file("codex", CODEX)
    # input (cached included) + output of each token_count; the final answer's goes to the last call
    assert [n.tokens for n in ep.tool_nodes()] == [3040, 3260, 3520, 3630 + 3750]


def test_codex_round_trips_through_the_trace_format(tmp_path):
    out = tmp_path / "trace.jsonl"
    assert convert("codex", CODEX, out) == (1, [])
    assert read_trace(out).episodes == import_file("codex", CODEX)[0]


@pytest.mark.parametrize("end_first", [True, False])
def test_codex_a_result_told_twice_is_read_once_whichever_comes_first(tmp_path, end_first):
    end = _item({"type": "exec_command_end", "call_id": "c1", "aggregated_output": "boom", "exit_code": 2}, "event_msg")
    out = _item({"type": "function_call_output", "call_id": "c1",
                 "output": json.dumps({"output": "boom", "metadata": {"exit_code": 2}})})
    rollout = tmp_path / "rollout-1.jsonl"
    rollout.write_text(_lines(_shell("c1", "make"), *((end, out) if end_first else (out, end))))
    (ep,), problems = import_file("codex", rollout)
    assert problems == []
    (node,) = ep.tool_nodes()
    assert (node.observation.content, node.observation.error) == ("boom", True)


def test_codex_text_outputs_local_shell_calls_and_failed_exit_lines(tmp_path):
    rollout = tmp_path / "rollout-2.jsonl"
    rollout.write_text(_lines(
        _shell("a", "cat missing.txt"),
        _item({"type": "function_call_output", "call_id": "a", "output": "Exit code: 1\nOutput:\ncat: missing.txt: No such file"}),
        _item({"type": "local_shell_call", "call_id": "b", "status": "completed",
               "action": {"type": "exec", "command": ["ls", "-a"]}}),
        _item({"type": "local_shell_call_output", "call_id": "b", "output": "plain text, no exit line"}),
        _item({"type": "function_call", "name": "update_plan", "call_id": "c", "arguments": "{\"plan\": []}"}),
        _item({"type": "function_call_output", "call_id": "c", "output": "Plan updated"}),
        _item({"type": "function_call", "name": "exec_command", "call_id": "d", "arguments": "{\"cmd\": \"make\"}"}),
        _item({"type": "function_call_output", "call_id": "d", "output":
               "Chunk ID: 4f2a\nWall time: 1.2 seconds\nProcess exited with code 2\nOutput:\nmake: *** [all] Error 2"}),
        _item({"type": "function_call", "name": "exec_command", "call_id": "e", "arguments": "{\"cmd\": \"cat log\"}"}),
        _item({"type": "function_call_output", "call_id": "e", "output":
               "Wall time: 0.1 seconds\nProcess exited with code 0\nOutput:\nExit code: 1 was logged"}),
    ))
    (ep,), problems = import_file("codex", rollout)
    assert problems == []
    assert [(n.call.tool, n.call.args, n.observation.error) for n in ep.tool_nodes()] == [
        ("shell", {"command": ["bash", "-lc", "cat missing.txt"]}, True),
        ("shell", {"command": ["ls", "-a"]}, False),
        ("update_plan", {"plan": []}, False),
        ("exec_command", {"cmd": "make"}, True),
        ("exec_command", {"cmd": "cat log"}, False)]


def test_codex_bad_lines_are_problems_naming_the_line_and_folders_are_searched(tmp_path):
    day = tmp_path / "sessions" / "2026" / "11" / "22"
    day.mkdir(parents=True)
    rollout = day / "rollout-3.jsonl"
    rollout.write_text(_lines(
        _shell("a", "ls"),
        {"type": "response_item", "payload": "not an object"},
        _item({"type": "function_call", "call_id": "x", "arguments": "{}"}),
        _item({"type": "function_call_output", "call_id": "nope", "output": "?"}),
        _item({"type": "function_call_output", "call_id": "a", "output": "a.txt"}),
    ) + "{not json\n")
    (ep,), problems = import_file("codex", tmp_path / "sessions")
    assert ep.id == "rollout-3" and [n.observation.content for n in ep.tool_nodes()] == ["a.txt"]
    assert problems[:3] == [
        f"{rollout}:2: expected {{\"type\": ..., \"payload\": {{...}}}}, skipped",
        f"{rollout}:3: a function_call without a name, skipped",
        f"{rollout}:4: an output for no call of this file ('nope'), skipped",
    ]
    assert problems[3].startswith(f"{rollout}:6: not valid JSON") and len(problems) == 4
