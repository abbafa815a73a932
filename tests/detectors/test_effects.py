"""Declared tool effects (detectors.effects) and progress_guard's use of them."""
import tomllib

import pytest

from detectors.effects import BUILTIN, DeclarationError, Effect, Effects, declaration_from, effect_of
from detectors.guard import LoopGuard
from detectors.progress_guard import ProgressGuard
from detectors.protocol import ToolCall, Verdict


def _effect(tool: str, **args) -> Effect | None:
    return effect_of(ToolCall(tool, args))


@pytest.mark.parametrize("command, writes", [("view", False), ("create", True), ("str_replace", True),
                                             ("insert", True), ("undo_edit", True)])
@pytest.mark.parametrize("tool", ["str_replace_editor", "str_replace_based_edit_tool", "file_editor"])
def test_the_editor_tool_writes_by_its_command(tool, command, writes):
    e = _effect(tool, command=command, path="/workspace/repo/src/mod.py", old_str="a", new_str="b")
    assert e == Effect(writes, "/workspace/repo/src/mod.py", "file")


@pytest.mark.parametrize("tool, args, writes, target", [
    # Claude Code
    ("Edit", {"file_path": "/r/a.py", "old_string": "x", "new_string": "y"}, True, "/r/a.py"),
    ("MultiEdit", {"file_path": "/r/a.py", "edits": [{"old_string": "x", "new_string": "y"}]}, True, "/r/a.py"),
    ("Write", {"file_path": "/r/b.py", "content": "print(1)"}, True, "/r/b.py"),
    ("NotebookEdit", {"notebook_path": "/r/n.ipynb", "new_source": "1"}, True, "/r/n.ipynb"),
    ("Read", {"file_path": "/r/a.py"}, False, "/r/a.py"),
    ("Grep", {"pattern": "def main"}, False, None),
    # Cline
    ("write_to_file", {"path": "src/a.ts", "content": "x"}, True, "src/a.ts"),
    ("replace_in_file", {"path": "src/a.ts", "diff": "<<<<<<< SEARCH\nx\n=======\ny\n>>>>>>> REPLACE"}, True, "src/a.ts"),
    ("list_files", {"path": "src"}, False, "src"),
    # Codex: the patch envelope names the files
    ("apply_patch", {"input": "*** Begin Patch\n*** Update File: src/a.py\n@@\n-x\n+y\n*** Add File: b.py\n+z\n*** End Patch"},
     True, "b.py,src/a.py"),
    # Gemini CLI
    ("replace", {"file_path": "/r/a.py", "old_string": "x", "new_string": "y"}, True, "/r/a.py"),
    ("write_file", {"file_path": "/r/c.py", "content": "x"}, True, "/r/c.py"),
    ("read_file", {"absolute_path": "/r/a.py"}, False, "/r/a.py"),
    ("read_file", {"path": "notes.md"}, False, "notes.md"),
])
def test_harness_tools_are_declared(tool, args, writes, target):
    e = effect_of(ToolCall(tool, args))
    assert e is not None and e.writes is writes and e.target == target


@pytest.mark.parametrize("command, writes", [
    ("cd /workspace/repo && python reproduce.py", False),
    ("python -m pytest tests/test_mod.py -x -q", False),
    ("grep -rn 'def parse' src/ | head -20", False),
    ("cat src/mod.py", False),
    ("git diff", False),
    ("git status && git log --oneline -3", False),
    ("echo 'print(1)' > reproduce.py", True),
    ("cat >> notes.txt <<'EOF'\nmore\nEOF", True),
    ("sed -i 's/a/b/' setup.cfg", True),
    ("perl -pi -e 's/a/b/' setup.cfg", True),
    ("perl -0777 -pe \"s/a/b/s; s/c/d/\" -i src/mod.py && python -m pytest -q", True),  # -i after the script
    ("perl -ne 'print if /x/' src/mod.py | grep -i x", False),
    ("perl -Mlib=lib -e 'print 1'", False),
    ("perl -i.bak -pe 's/a/b/' setup.cfg", True),
    ("python reproduce.py | tee out.log", True),
    ("mv a.py b.py", True),
    ("cp a.py /tmp/a.py", True),
    ("rm -rf build", True),
    ("git commit -am fix", True),
    ("git apply fix.patch", True),
    ("git checkout -- src/mod.py", True),
    ("pip install -e .", True),
    ("python -m pytest -q 2>&1 > /dev/null", False),
])
@pytest.mark.parametrize("tool", ["execute_bash", "Bash", "execute_command", "run_shell_command", "bash", "terminal"])
def test_shell_commands_write_by_their_text(tool, command, writes):
    assert _effect(tool, command=command).writes is writes


def test_codex_shells_take_argv_or_a_command_line():
    assert effect_of(ToolCall("shell", {"command": ["bash", "-lc", "sed -i 's/a/b/' x.py"]})).writes is True
    assert effect_of(ToolCall("shell", {"command": ["bash", "-lc", "rg parse src"]})).writes is False
    assert effect_of(ToolCall("exec_command", {"cmd": "echo x > notes.txt"})).writes is True
    assert effect_of(ToolCall("exec_command", {"cmd": "pytest -q"})).writes is False
    assert effect_of(ToolCall("shell_command", {"command": "git commit -am fix"})).writes is True


def test_an_undeclared_tool_has_no_effect_and_an_unknown_subcommand_counts_as_a_write():
    assert _effect("lookup_weather", city="Oslo") is None
    assert _effect("str_replace_editor", command="rename", path="a.py").writes is True


def test_effects_are_declared_in_toml():
    config = tomllib.loads("""
[tools.notes]                 # a tool with sub-commands
command_arg = "action"
read_commands = ["list", "show"]
write_commands = ["add", "delete"]
target_args = ["note_id"]
what = "record"

[tools.save_settings]         # every call writes
writes = true

[tools.fetch_page]            # name says nothing: only reads
writes = false

[tools.sandbox]               # a shell under another argument name
shell_args = ["cmd"]

[tools.edit]                  # a renamed str_replace_editor
effects = "str_replace_editor"
""")
    fx = Effects(config["tools"])
    assert fx.of(ToolCall("notes", {"action": "show", "note_id": "n1"})) == Effect(False, "n1", "record")
    assert fx.of(ToolCall("notes", {"action": "Add", "note_id": "n2"})) == Effect(True, "n2", "record")
    assert fx.of(ToolCall("save_settings", {"theme": "dark"})).writes is True
    assert fx.of(ToolCall("fetch_page", {"url": "https://x"})).writes is False
    assert fx.of(ToolCall("sandbox", {"cmd": "touch x"})).writes is True and fx.is_shell("sandbox")
    assert fx.of(ToolCall("edit", {"command": "view", "path": "a"})) == Effect(False, "a", "file")
    assert fx.of(ToolCall("edit", {"command": "insert", "path": "a"})).writes is True
    # a table about something else declares nothing, and the built-ins stay
    assert declaration_from("http_get", {"max_retries": 5}) is None
    assert Effects({"http_get": {"max_retries": 5}}).declared("http_get") is False
    assert Effects({}).declared("str_replace_editor") and len(BUILTIN) >= 25


@pytest.mark.parametrize("table, message", [
    ({"writes": "yes"}, "writes must be true or false"),
    ({"effects": "vim"}, "effects must name a built-in declaration"),
    ({"what": "disk"}, "what must be one of file, record, remote, environment"),
    ({"write_commands": ["add"]}, "need command_arg"),
    ({"target_args": ["path"]}, "declare writes"),
    ({"command_arg": "op", "read_commands": [1]}, "read_commands must be a string or a list of strings"),
])
def test_a_bad_declaration_names_the_tool_and_key(table, message):
    with pytest.raises(DeclarationError, match=message) as info:
        declaration_from("my_tool", table)
    assert "'my_tool'" in str(info.value)
    with pytest.raises(ValueError, match=message):  # the guard reads them when it is built
        ProgressGuard(semantic=False, tool_overrides={"my_tool": table})


# -- progress_guard on declared effects -------------------------------------------------------------

REPRO = {"command": "cd /workspace/repo && python reproduce.py"}
TRACEBACK = "Traceback (most recent call last):\n  File \"reproduce.py\", line 3\nValueError: bad width 0"
MOD = "/workspace/repo/src/mod.py"


def _view_edit_rerun(g: LoopGuard) -> list[Verdict]:
    """An OpenHands-style repair: reproduce, view, edit through the editor, re-run, view the edit, re-run."""
    verdicts = []

    def step(tool, args, result, error=False):
        verdicts.append(g.check(tool, args).verdict)
        g.record(tool, args, result, error=error)

    step("execute_bash", REPRO, TRACEBACK, error=True)
    view = {"command": "view", "path": MOD}
    step("str_replace_editor", view, "     1\tdef width(x):\n     2\t    return 10 // x\n")
    step("str_replace_editor", {"command": "str_replace", "path": MOD, "old_str": "    return 10 // x",
                                "new_str": "    return 10 // x if x else 0"},
         f"The file {MOD} has been edited. Here's the result of running `cat -n` on a snippet of {MOD}:\n"
         "     2\t    return 10 // x if x else 0\nReview the changes and make sure they are as expected.")
    step("execute_bash", REPRO, TRACEBACK, error=True)  # still failing: the same output
    step("str_replace_editor", view, "     1\tdef width(x):\n     2\t    return 10 // x if x else 0\n")
    step("str_replace_editor", {"command": "insert", "path": MOD, "insert_line": 1, "new_str": "    x = int(x)"},
         f"The file {MOD} has been edited. Here's the result of running `cat -n` on a snippet of the edited file:\n"
         "     2\t    x = int(x)\nReview the changes and make sure they are as expected (correct indentation, no duplicate lines, etc). Edit the file again if necessary.")
    step("execute_bash", REPRO, "width ok: 0")
    return verdicts


def test_an_edit_through_the_editor_tool_makes_the_rerun_progress():
    assert _view_edit_rerun(LoopGuard(semantic=False)) == [Verdict.ALLOW] * 7


def test_re_viewing_or_re_running_with_no_edit_between_is_still_a_loop():
    g = LoopGuard(semantic=False)
    view = {"command": "view", "path": MOD}
    g.record("str_replace_editor", view, "     1\tdef width(x):\n     2\t    return 10 // x\n")
    g.record("execute_bash", REPRO, TRACEBACK, error=True)
    assert g.check("str_replace_editor", view).verdict is Verdict.NUDGE  # view is a read, not a write
    g2 = LoopGuard(semantic=False)
    g2.record("execute_bash", REPRO, TRACEBACK, error=True)
    g2.record("str_replace_editor", view, "     1\tdef width(x):\n")
    assert g2.check("execute_bash", REPRO).verdict is Verdict.NUDGE


def test_a_failed_write_changes_nothing_so_the_same_read_after_it_is_a_repeat():
    # tau-bench airline: a refused update, then the identical read with the identical record
    g = LoopGuard(semantic=False)
    read = {"reservation_id": "ZFA04Y"}
    record = '{"reservation_id": "ZFA04Y", "cabin": "economy", "status": "confirmed"}'
    g.record("get_reservation_details", read, record)
    g.record("update_reservation_flights", {"reservation_id": "ZFA04Y", "cabin": "business"},
             "Error: payment method not found", error=True)
    assert g.check("get_reservation_details", read).verdict is Verdict.NUDGE
    # ... while after a write that went through, the same read is how the agent checks it
    g2 = LoopGuard(semantic=False)
    g2.record("get_reservation_details", read, record)
    g2.record("update_reservation_flights", {"reservation_id": "ZFA04Y", "cabin": "business"}, record.replace("economy", "business"))
    assert g2.check("get_reservation_details", read).verdict is Verdict.ALLOW


def test_a_str_replace_that_fails_again_and_again_is_a_loop():
    g = LoopGuard(semantic=False)
    edit = {"command": "str_replace", "path": MOD, "old_str": "return 10/x", "new_str": "return 0"}
    miss = f"ERROR:\nNo replacement was performed, old_str `return 10/x` did not appear verbatim in {MOD}."
    g.record("str_replace_editor", edit, miss, error=True)
    assert g.check("str_replace_editor", edit).verdict is Verdict.NUDGE
    # the failed edit changed nothing: the same view around it is a repeat
    view = {"command": "view", "path": MOD}
    g2 = LoopGuard(semantic=False)
    g2.record("str_replace_editor", view, "     1\tdef width(x):\n     2\t    return 10 // x\n")
    g2.record("str_replace_editor", edit, miss, error=True)
    assert g2.check("str_replace_editor", view).verdict is Verdict.NUDGE


def test_an_old_str_resent_with_its_indentation_fixed_is_a_new_call():
    g = LoopGuard(semantic=True, semantic_vectors="static")
    wrong = {"command": "str_replace", "path": MOD, "old_str": "return 10 // x  # divide the width", "new_str": "return 0"}
    g.record("str_replace_editor", wrong, f"ERROR:\nNo replacement was performed, old_str `{wrong['old_str']}` did "
                                          f"not appear verbatim in {MOD}.", error=True)
    fixed = dict(wrong, old_str="    return 10 // x  # divide the width", new_str="    return 0")
    assert g.check("str_replace_editor", fixed).verdict is Verdict.ALLOW  # not cosmetic, not a rewording
    assert g.check("Edit", {"file_path": MOD, "old_string": "a\n    b", "new_string": "c"}).verdict is Verdict.ALLOW


def test_a_failed_shell_line_that_writes_still_counts_as_a_write():
    # ``cat > f <<EOF ... EOF && python f`` reports the run's failure; the file was written
    g = LoopGuard(semantic=False)
    g.record("execute_bash", REPRO, TRACEBACK, error=True)
    g.record("execute_bash", {"command": "cat > reproduce.py <<'EOF'\nprint(width(0))\nEOF\npython reproduce.py"},
             "Traceback (most recent call last):\nNameError: name 'width' is not defined", error=True)
    assert g.check("execute_bash", REPRO).verdict is Verdict.ALLOW


def test_a_declared_mode_still_wins_and_toml_declarations_reach_the_guard():
    g = LoopGuard(semantic=False, tool_overrides={"str_replace_editor": {"mode": "mutating"}})
    view = {"command": "view", "path": MOD}
    g.record("str_replace_editor", view, "x")
    assert g.check("str_replace_editor", view).verdict is Verdict.NUDGE  # a mutating tool repeated
    g2 = LoopGuard(semantic=False, tool_overrides={"notes": {"command_arg": "action", "read_commands": ["show"]}})
    g2.record("notes", {"action": "show", "id": 1}, "note 1: buy milk")
    g2.record("notes", {"action": "append", "id": 1, "text": "and eggs"}, "ok")
    assert g2.check("notes", {"action": "show", "id": 1}).verdict is Verdict.ALLOW
