"""A shell line's commands (``detectors.commands.command_parts``), and ``progress_guard``'s
``shell_parts`` option that judges a line made only of commands already run as a repeat."""
from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from detectors import Verdict
from detectors.commands import command_parts, inert, moves
from detectors.progress_guard import ProgressGuard
from detectors.protocol import Observation, ToolCall


@pytest.mark.parametrize("line, parts", [
    ("cd /r && nl -ba a.py | sed -n '1,5p'; echo 'x && y'", ("cd /r", "nl -ba a.py | sed -n '1,5p'", "echo 'x && y'")),
    # a here-document stays with its command, whatever its script holds
    ("python - <<'PY'\nimport a; b = 1\nprint(b) && 2\nPY\nnl -ba f.py", ("python - <<'PY'\nimport a; b = 1\nprint(b) && 2\nPY", "nl -ba f.py")),
    ("cat > /tmp/t.py <<-EOF\n\tprint(1)\n\tEOF\npython /tmp/t.py 2>&1 | tail -5",
     ("cat > /tmp/t.py <<-EOF\n\tprint(1)\n\tEOF", "python /tmp/t.py 2>&1 | tail -5")),
    ("ls > out.txt 2>&1 && echo ok", ("ls > out.txt 2>&1", "echo ok")),
    ("sleep 2 & echo done", ("sleep 2", "echo done")),
    ('echo "a;b" ; x=$(ls; pwd) || y', ('echo "a;b"', "x=$(ls; pwd)", "y")),
    ("grep -rn foo . # && a comment\nls", ("grep -rn foo .", "ls")),
    ("python -c 'print(1 ; 2)'", ("python -c 'print(1 ; 2)'",)),
    # not split: unclosed quote or here-document, a compound command
    ("python -c 'unterminated", None),
    ("python - <<'PY'\nprint(1)\n", None),
    ("for f in *.py; do echo $f; done", None),
    ("ls && if [ -f a ]; then cat a; fi", None),
    ("f() { ls; }; f", None),
])
def test_command_parts(line, parts):
    assert command_parts(line) == parts


def test_inert_and_moving_commands():
    assert inert("echo '--- run ---'") and inert("set -e") and not inert("python t.py")
    assert not inert("echo x > out.txt")  # a redirection into a file writes
    assert moves("cd /testbed") and moves("pushd src") and not moves("cdk deploy") and not inert("cd /testbed")


@settings(max_examples=200, deadline=None)
@given(st.lists(st.sampled_from(["ls -l", "python t.py", "git diff", "grep -n x a.py", "echo 'a && b'",
                                 "python -c 'print(1; 2)'", "nl -ba a.py | sed -n '1,9p'"]), min_size=1, max_size=5),
       st.lists(st.sampled_from([" && ", "; ", "\n", " || "]), min_size=4, max_size=4))
def test_joined_commands_split_back_into_themselves(commands, seps):
    line = commands[0] + "".join(sep + c for sep, c in zip(seps, commands[1:]))
    assert command_parts(line) == tuple(commands)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(list("ab ;&|()\n\\'\"#<>-{}$") + ["<<EOF", "EOF", "<<-'X'", "\tX", "cd ", "for ", "&&"]),
                max_size=30).map("".join))
def test_any_text_splits_into_nonempty_parts_or_none(line):
    """Trace text is untrusted: whatever a line holds, splitting it returns parts or None, never raises."""
    parts = command_parts(line)
    assert parts is None or all(isinstance(p, str) and p == p.strip() and p for p in parts)


def _run(guard: ProgressGuard, steps):
    """Feed ``(command, output, error)`` steps; the verdict of each."""
    s = guard.start()
    out = []
    for command, output, error in steps:
        call = ToolCall("bash", {"command": command})
        d = guard.check(s, call)
        out.append(d.verdict)
        s = guard.record(s, call, d, Observation(output, error=error))
    return out


PATCH_THEN_CHECK = "cat > t.py <<'EOF'\nprint(fix())\nEOF\npython t.py"


def test_a_check_run_alone_after_the_line_that_patched_and_ran_it_is_a_repeat():
    steps = [(PATCH_THEN_CHECK, "ok", False), ("ls", "t.py", False), ("python t.py", "ok", False),
             ("echo '== again' && ls && python t.py", "== again\nt.py\nok", False)]
    assert _run(ProgressGuard(semantic=False, shell_parts=True), steps) == [
        Verdict.ALLOW, Verdict.ALLOW, Verdict.NUDGE, Verdict.STOP]
    # off by default: the signature layer compares whole lines
    assert _run(ProgressGuard(semantic=False), steps)[2] is Verdict.ALLOW


@pytest.mark.parametrize("steps", [
    # a write between: the check is a re-test
    [(PATCH_THEN_CHECK, "ok", False), ("sed -i 's/a/b/' t.py", "", False), ("python t.py", "ok", False)],
    # the check ran before the write on its line: it saw the old file
    [("python t.py && sed -i 's/a/b/' t.py", "fail", False), ("python t.py", "ok", False)],
    # the line failed: it may have stopped before its check ran
    [(PATCH_THEN_CHECK, "SyntaxError", True), ("python t.py", "ok", False)],
    # the same command in another directory reads other files
    [("cd /r/a && ls -l", "x", False), ("cd /r/b && ls -l", "y", False)],
    # after a line that moved a lasting shell, a bare command may run elsewhere
    [("git diff && ls -l", "x", False), ("cd src", "", False), ("ls -l", "y", False)],
    # a new command among old ones
    [("ls && git diff", "x", False), ("ls && git status", "y", False)],
])
def test_what_is_no_repeat_of_earlier_commands(steps):
    assert set(_run(ProgressGuard(semantic=False, shell_parts=True), steps)) == {Verdict.ALLOW}
