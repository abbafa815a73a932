"""``progress_guard``'s ``skip_rules``: each rule, switched off, gives up exactly its own verdict.

One small trace per rule (``RULES``): the verdict at its last check with every rule on,
and the other verdict with that rule off. ``bench/bench_ablation.py --rules`` measures the
same switches on the suites.
"""
import pytest

from detectors.guard import LoopGuard
from detectors.params import ParamError, check_params
from detectors.progress_guard import RULES, ProgressGuard
from detectors.protocol import Observation, ToolCall, Verdict, allow

ALLOW, NUDGE = Verdict.ALLOW, Verdict.NUDGE


def transient_retry(g: LoopGuard) -> Verdict:
    g.record("http_get", {"url": "https://api/x"}, "Error: 503 Service Unavailable", error=True)
    return g.check("http_get", {"url": "https://api/x"}).verdict


def unanswered_retry(g: LoopGuard) -> Verdict:
    g.record("WebSurfer", {"instruction": "open the museum page"}, None)  # ran, no reply
    return g.check("WebSurfer", {"instruction": "open the museum page"}).verdict


def failed_write(g: LoopGuard) -> Verdict:
    g.record("get_order", {"order_id": "O1"}, '{"order_id": "O1", "status": "pending"}')
    g.record("update_order", {"order_id": "O1", "status": "shipped"}, "Error: not allowed", error=True)
    return g.check("get_order", {"order_id": "O1"}).verdict  # the refused write changed nothing


def undo_once(g: LoopGuard) -> Verdict:
    rec = '{"id": "R1", "seats": %d, "status": "active"}'
    g.record("update_record", {"record_id": "R1", "value": 1}, rec % 1)
    g.record("update_record", {"record_id": "R1", "value": 2}, rec % 2)
    return g.check("update_record", {"record_id": "R1", "value": 1}).verdict  # back to 1, once


def blind_trial(g: LoopGuard) -> Verdict:
    test = {"command": "pytest -q tests"}
    fail = "FAILED tests::test_0\n1 failed, 3 passed"
    g.record("bash", test, fail, error=True)
    g.record("bash", {"command": "sed -i 's/value=52624x/value=6/' src/a.py"}, "")
    g.record("bash", test, fail, error=True)
    g.record("bash", {"command": "sed -i 's/value=40335x/value=9/' src/a.py"}, "")
    return g.check("bash", test).verdict


def write_progress(g: LoopGuard) -> Verdict:
    rec = '{"id": "R1", "bags": %d, "cabin": "basic"}'
    g.record("get_record", {"record_id": "R1"}, rec % 2)
    g.record("update_record", {"record_id": "R1", "field": "bags", "value": 0}, rec % 0)
    g.record("get_record", {"record_id": "R1"}, rec % 0)
    return g.check("update_record", {"record_id": "R1", "field": "bags", "value": 2}).verdict


def code_cosmetic(g: LoopGuard) -> Verdict:
    g.record("exec.python", {"code": "import math\nprint(round(math.pi * 2))"}, "exitcode: 0\nCode output: 6")
    return g.check("exec.python", {"code": "# again\nimport math\n\nprint(round(math.pi * 2))"}).verdict


def error_news(g: LoopGuard) -> Verdict:
    # two tracebacks through the same calls (the first 200 characters, the streak's key, agree)
    # that end in different exceptions: two errors, not one repeated
    head = ('Traceback (most recent call last):\n  File "/app/run.py", line 41, in <module>\n    main()\n'
            '  File "/app/run.py", line 37, in main\n    load(cfg)\n  File "/app/loader.py", line 12, in load\n'
            '    return parse(open(path).read())\n')
    for i, tail in enumerate(("KeyError: 'user_name'", "ValueError: bad port number")):
        g.record("run_script", {"config": f"cfg{i}.toml"}, head + tail, error=True)
    return g.check("run_script", {"config": "cfg9.toml"}).verdict


def not_found_items(g: LoopGuard) -> Verdict:
    for kw in ("alpha", "beta", "gamma", "zeta"):
        g.record("search", {"query": f"{kw} star"}, f"Could not find [{kw} star]. Similar: ['Sirius', 'Vega']")
    return g.check("search", {"query": "delta star"}).verdict  # three answers in a row listing nothing new


def short_answer(g: LoopGuard) -> Verdict:
    g.record("calculate", {"expression": "12 * 7"}, "84.0")
    for expr, answer in (("84 + 16", "100.0"), ("100 / 4", "25.0"), ("25 * 3", "75.0")):
        g.record("calculate", {"expression": expr}, answer)
    return g.check("calculate", {"expression": "75 - 5"}).verdict


def report_once(g: LoopGuard) -> Verdict:
    page = "Here is a screenshot of [Museum](https://museum.org/). The viewport shows opening hours 9 to 5."
    g.record("open_result", {"n": 0}, "Here is a screenshot of [Gallery](https://gallery.org/): closed on Mondays.")
    g.record("WebSurfer", {"instruction": "open the first result"}, f"I clicked 'result 1'.\n\n{page}")
    g.record("open_result", {"n": 1}, page)  # what the reply already reported
    # another number after a call that told nothing new would be drift
    return g.check("open_result", {"n": 2}).verdict


def cross_check(g: LoopGuard) -> Verdict:
    out = "exitcode: 0 (execution succeeded)\nCode output: 1209"
    for code in ("print(39 * 31)", "print(31 * 39)", "x = 31\nprint(x * 39)", "print(2418 / 2)"):
        g.record("run_code", {"code": code}, out)
    return g.check("run_code", {"code": "print(1209 * 1)"}).verdict


def echo_mask(g: LoopGuard) -> Verdict:
    g.record("get_index", {"id": "start"}, "records: alpha, beta")
    for n in (101, 102, 103):
        g.record("get_record", {"record_id": n}, f"no record {n}")
    return g.check("get_record", {"record_id": 104}).verdict


def paging_poll(g: LoopGuard) -> Verdict:
    for part in ("intro text about alpha", "second part on beta"):
        g.record("scroll_down", {}, f"viewport: {part}")
    return g.check("scroll_down", {}).verdict


def fan_out(g: LoopGuard) -> Verdict:
    g.record("get_user_details", {"user_id": "u1"}, '{"payment_methods": ["gift_card_11", "gift_card_12", "gift_card_13"]}')
    for card in ("gift_card_11", "gift_card_12"):
        g.record("pay", {"order_id": "O7", "payment_id": card}, "Error: gift card balance is not enough", error=True)
    return g.check("pay", {"order_id": "O7", "payment_id": "gift_card_13"}).verdict  # the third listed card


def write_resets(g: LoopGuard) -> Verdict:
    source = ["def width(text, tab_size):  # cells drawn", "    cells = len(text.expandtabs(tab_size))",
              "    return cells  # the drawn width in cells"]
    g.record("execute_bash", {"command": "cat src/core.py"}, "\n".join(source))
    g.record("execute_bash", {"command": "ls tests"}, "test_core.py  test_layout.py  conftest.py")
    for line in source[:2]:  # lines found again: nothing new
        g.record("execute_bash", {"command": f"grep -F '{line.split()[1]}' src/core.py"}, line)
    g.record("str_replace_editor", {"command": "str_replace", "path": "/repo/src/core.py", "old_str": source[1],
                                    "new_str": "    cells = len(text.expandtabs(tab_size or 8))"},
             "The file /repo/src/core.py has been edited.")
    g.record("execute_bash", {"command": "grep -F 'return' src/core.py"}, source[2])  # a line the edit left
    # the tests after the edit: were the write not counted, a fourth result in a row that added nothing
    return g.check("execute_bash", {"command": "python -m pytest -q tests"}).verdict

MATCH_C = ["static ast_t* make_pattern_type(pass_opt_t* opt, ast_t* pattern)", "    case TK_MATCH_CAPTURE: /* bind it */",
           "    case TK_MATCH_DONTCARE: /* ignore it */", "      return pattern_type; /* as aliased */"]


def write_acts(g: LoopGuard) -> Verdict:
    source = MATCH_C
    g.record("str_replace_editor", {"command": "view", "path": "/repo/src/match.c"}, "\n".join(source))
    for word in ("DONTCARE", "pattern_type"):  # greps that show lines the view showed: nothing new
        g.record("execute_bash", {"command": f"grep -n {word} /repo/src/match.c"},
                 next(line for line in source if word in line))
    g.record("str_replace_editor", {"command": "view", "path": "/repo/src/match.c", "view_range": [2, 3]},
             "\n".join(source[1:3]))
    # three results in a row that added nothing, then the agent edits: acting, not asking again
    return g.check("str_replace_editor", {"command": "str_replace", "path": "/repo/src/match.c",
                                          "old_str": source[3], "new_str": "      return alias(pattern_type);"}).verdict


def known_reread(g: LoopGuard) -> Verdict:
    source = MATCH_C
    g.record("str_replace_editor", {"command": "view", "path": "/repo/src/match.c"}, "\n".join(source))
    g.record("str_replace_editor", {"command": "view", "path": "/repo/src/match.c", "view_range": [1, 4]},
             "\n".join(source))  # a slice of what was read: nothing new, and no change of numbers
    g.record("str_replace_editor", {"command": "str_replace", "path": "/repo/src/match.c",
                                    "old_str": "case TK_MATCH_CAPTURE:\n   3\tcase", "new_str": "x"},
             "ERROR: No replacement was performed, old_str did not appear verbatim", error=True)
    return g.check("str_replace_editor", {"command": "view", "path": "/repo/src/match.c", "view_range": [2, 3]}).verdict


def line_news(g: LoopGuard) -> Verdict:
    """Views after a patch that failed half-way (the shell line wrote, then its check failed):
    the second view shows the patched line, every word of which was seen before."""
    source = ["def prepare_body(self, data):", "    if data:", "        body = encode(data)",
              "    self.body = body"]
    g.record("bash", {"command": "nl -ba models.py | sed -n '1,4p'"},
             "\n".join(f"{k:6d}\t{line}" for k, line in enumerate(source, 1)))
    g.record("bash", {"command": "grep -n body models.py"}, "3:        body = encode(data)")  # seen
    # the narrower views ran (``shown_lines`` nudges them; the harness here only watches)
    g.record("bash", {"command": "nl -ba models.py | sed -n '2,3p'"},
             "\n".join(f"{k:6d}\t{line}" for k, line in enumerate(source[1:3], 2)), decision=allow(0))  # seen
    patched = "    if data: body = encode(self.body)"  # known words, a new line
    g.record("bash", {"command": "nl -ba models.py | sed -n '2,2p'"}, f"     2\t{patched}", decision=allow(0))
    # the test after reading the patched code: without the line, a fourth result that added nothing
    return g.check("bash", {"command": "python -m pytest -q tests/test_models.py"}).verdict


def redo_write(g: LoopGuard) -> Verdict:
    """A fix reverted to watch the test fail, then applied again."""
    fix = {"command": "sed -i 's/PERMS = None/PERMS = 0o644/' conf/settings.py"}
    g.record("bash", fix, "<returncode>0</returncode>\n<output>\n</output>")
    g.record("bash", {"command": "sed -i 's/PERMS = 0o644/PERMS = None/' conf/settings.py"},
             "<returncode>0</returncode>\n<output>\n</output>")
    g.record("bash", {"command": "python -m pytest -q tests/test_perms.py"},
             "<returncode>1</returncode>\n<output>\n1 failed\n</output>", error=True)
    return g.check("bash", fix).verdict


def program_streak(g: LoopGuard) -> Verdict:
    """Two greps that found nothing, then a look at a file: no continuation of the greps."""
    for pattern in ("parse_option", "parse_command_option"):
        g.record("bash", {"command": f"grep -rn {pattern} src"}, "<returncode>1</returncode>\n<output>\n</output>", error=True)
    return g.check("bash", {"command": "cat src/cli.py"}).verdict


def shell_targets(g: LoopGuard) -> Verdict:
    """The same file read again after writing and running a reproduction script: a repeat."""
    read = {"command": "cat django/db/models/base.py"}
    g.record("bash", read, "<returncode>0</returncode>\n<output>\nclass Model:\n    pass\n</output>")
    g.record("bash", {"command": "cat <<'EOF' > reproduce_issue.py\nimport django\nprint(django.VERSION)\nEOF"},
             "<returncode>0</returncode>\n<output>\n</output>")
    g.record("bash", {"command": "python reproduce_issue.py"}, "<returncode>0</returncode>\n<output>\n(4, 2)\n</output>")
    return g.check("bash", read).verdict


def review_nudges(g: LoopGuard) -> Verdict:
    """A narrower view of lines already shown, run with the nudge beside its result (as an open-loop
    replay runs it), then the identical failing test again: is the agent stopped? (NUDGE: it is;
    ALLOW: it is only nudged.) A re-view that ran is no strike toward a stop."""
    det = g.detector

    def run(command: str, out: str, error: bool = False) -> Verdict:
        call = ToolCall("bash", {"command": command})
        d = det.check(g.state, call)
        g.state = det.record(g.state, call, d, Observation(out, error))
        return d.verdict

    run("nl -ba src/app.py | sed -n '1,40p'",
        "<returncode>0</returncode>\n<output>\n" + "".join(f"{n:6}\tline {n}\n" for n in range(1, 41)) + "</output>")
    run("python -m pytest -q", "<returncode>1</returncode>\n<output>\n1 failed\n</output>", error=True)
    assert run("sed -n '10,20p' src/app.py",
               "<returncode>0</returncode>\n<output>\n" + "".join(f"line {n}\n" for n in range(10, 21)) + "</output>") is NUDGE
    return NUDGE if det.check(g.state, ToolCall("bash", {"command": "python -m pytest -q"})).verdict is Verdict.STOP else ALLOW


def test_a_read_of_named_files_is_changed_only_by_a_write_to_them():
    """``shell_targets``'s reach: a write that names other files leaves the read a repeat; a
    write to the file, a write whose files are not known (``git checkout``, a script that opens
    files for writing), or a listing of a directory after a program ran, is no repeat. An
    editor's declared view counts the same, and ``x.py`` names ``/testbed/x.py``."""
    ok = "<returncode>0</returncode>\n<output>\n</output>"
    view = {"command": "nl -ba src/app/models.py | sed -n '10,20p'"}
    shown = "<returncode>0</returncode>\n<output>\n    10\tclass A:\n    11\t    x = 1\n</output>"
    cases = [
        ([("bash", {"command": "echo 'print(1)' > check.py && python check.py"}, ok)], ("bash", view), NUDGE),
        ([("bash", {"command": "sed -i 's/x = 1/x = 2/' src/app/models.py"}, ok)], ("bash", view), ALLOW),
        ([("bash", {"command": "cd /testbed && sed -i 's/x = 1/x = 2/' /testbed/src/app/models.py"}, ok)], ("bash", view), ALLOW),
        ([("bash", {"command": "git checkout src/app/other.py"}, ok)], ("bash", view), ALLOW),
        ([("bash", {"command": "cat > fix.py <<'EOF'\nopen('src/app/models.py', 'w').write('')\nEOF"}, ok)],
         ("bash", view), ALLOW),
        ([("bash", {"command": "rm -rf src/app"}, ok)], ("bash", view), ALLOW),  # a directory holding it
    ]
    for before, (tool, args), expected in cases:
        g = LoopGuard(semantic=False)
        g.record(tool, args, shown)
        for t, a, out in before:
            g.record(t, a, out)
        assert g.check(tool, args).verdict is expected, (before, expected)
    # past MAX_NAMED_FILES files tracked, a write to one more counts as one whose files are not known
    from detectors.progress_guard import MAX_NAMED_FILES
    g = LoopGuard(semantic=False, max_steps=10_000)
    g.record("bash", view, shown)
    for i in range(MAX_NAMED_FILES - 1):
        g.record("bash", {"command": f"touch out/f{i}.txt"}, ok)
    g.record("bash", {"command": "touch out/last.txt"}, ok)  # the last one tracked
    assert g.check("bash", view).verdict is NUDGE
    g.record("bash", {"command": "touch out/one_more.txt"}, ok)
    assert g.check("bash", view).verdict is ALLOW
    # a listing: a program run may have written into the directory (``__pycache__``)
    g = LoopGuard(semantic=False)
    g.record("bash", {"command": "ls -la src/app"}, "<returncode>0</returncode>\n<output>\nmodels.py\n</output>")
    g.record("bash", {"command": "echo 'import app' > t.py && python t.py"}, ok)
    assert g.check("bash", {"command": "ls -la src/app"}).verdict is ALLOW
    # an editor's view, after a shell write to another file and after one to its own
    ev = {"command": "view", "path": "/testbed/src/app/models.py"}
    for write, expected in (("echo x > notes.txt", NUDGE), ("sed -i 's/a/b/' src/app/models.py", ALLOW)):
        g = LoopGuard(semantic=False)
        g.record("str_replace_editor", ev, "     1\tclass A:\n     2\t    x = 1\n")
        g.record("bash", {"command": write}, ok)
        assert g.check("str_replace_editor", ev).verdict is expected, write
    # Claude Code on Windows: a Read of a backslashed path after a write to that file spelled otherwise
    read = {"file_path": "C:\\repo\\src\\app.py"}
    for tool, args in (("Edit", {"file_path": "C:/repo/src/app.py", "old_string": "x = 1", "new_string": "x = 2"}),
                       ("Bash", {"command": "sed -i 's/x = 1/x = 2/' src/app.py"})):
        g = LoopGuard(semantic=False)
        g.record("Read", read, "     1\tclass A:\n     2\t    x = 1\n")
        g.record(tool, args, "ok")
        assert g.check("Read", read).verdict is ALLOW, tool


def test_a_repeat_the_check_calls_stale_is_recorded_as_no_news():
    """The check and the record agree on whether a read may have changed: a read of named files
    that ran again after a write to another file (as an open-loop replay runs it, the nudge beside
    its result) brought nothing new, and a third identical read says so. With ``shell_targets``
    off, any write makes it a new look at the world."""
    out = "<returncode>0</returncode>\n<output>\nclass Model:\n    pass\n</output>"
    ok = "<returncode>0</returncode>\n<output>\n</output>"
    read = "cat src/models.py"
    for rules, said in (([], "returned nothing new"), (["shell_targets"], None)):
        det = LoopGuard(semantic=False, skip_rules=rules).detector
        state = det.start()
        last = None
        for command, result in ((read, out), ("echo 'print(1)' > check.py", ok), (read, out),
                                ("echo 'print(2)' > check2.py", ok), (read, None)):
            call = ToolCall("bash", {"command": command})
            last = det.check(state, call)
            if result is not None:
                state = det.record(state, call, last, Observation(result))
        if said is None:
            assert last.verdict is Verdict.ALLOW
        else:
            assert last.verdict is not Verdict.ALLOW and said in last.reason, last.reason
    # A read that shows other text than it did last time is news, whatever the writes between
    # name: here a script run behind a redirect to a log reverted the file.
    v1, v2 = out, out.replace("pass", "x = 1")
    det = LoopGuard(semantic=False).detector
    state = det.start()
    for command, result in ((read, v1), ("git apply fix.diff", ok), (read, v2),
                            ("python revert_fix.py > /tmp/revert.log 2>&1", ok), (read, v1), ("touch notes.txt", ok)):
        call = ToolCall("bash", {"command": command})
        state = det.record(state, call, det.check(state, call), Observation(result))
    last = det.check(state, ToolCall("bash", {"command": read}))
    assert "its result is already known" in last.reason, last.reason


def test_a_shell_failure_streak_judges_the_next_command_of_its_program_only():
    """``program_streak``'s reach: the program of a line's last command (after ``cd``, past
    environment assignments) keys the streak; an API tool's streak stays the tool's."""
    fail = "<returncode>1</returncode>\n<output>\n</output>"
    g = LoopGuard(semantic=False)
    for pattern in ("parse_option", "parse_command_option"):
        g.record("bash", {"command": f"cd /r && grep -rn {pattern} src"}, fail, error=True)
    assert g.check("bash", {"command": "grep -rn 'option(' src | head"}).verdict is NUDGE  # grep again
    assert g.check("bash", {"command": "PYTHONPATH=. python -m pytest -q"}).verdict is ALLOW
    assert g.check("bash", {"command": "pwd"}).verdict is ALLOW  # continues no program's failures
    # two programs failing alike make no streak
    g = LoopGuard(semantic=False)
    g.record("bash", {"command": "grep -rn x src"}, fail, error=True)
    g.record("bash", {"command": "ls missing_dir"}, fail, error=True)
    assert g.check("bash", {"command": "ls other_dir"}).verdict is ALLOW
    # an API tool's streak is the tool's, whatever its arguments
    g = LoopGuard(semantic=False)
    for n in (1, 2):
        g.record("book", {"flight": f"HAT0{n}"}, "Error: payment declined", error=True)
    assert g.check("book", {"flight": "HAT09"}).verdict is NUDGE



def test_an_editor_view_is_not_judged_by_a_streak_of_refused_edits():
    """A declared read of a tool that also writes is another operation than its writes: two
    refused ``str_replace`` edits say nothing of the ``view`` that looks for the right text (a
    hypothesis example of test_file_views found the nudge), while a third edit is still judged
    by them, and two failed views by each other."""
    refused = "No replacement was performed. Multiple occurrences of old_str"
    g = LoopGuard(semantic=False)
    for n in (1, 2):
        g.record("str_replace_editor", {"command": "str_replace", "path": "/r/a.py", "old_str": f"x{n}",
                                        "new_str": "y"}, refused, error=True)
    assert g.check("str_replace_editor", {"command": "view", "path": "/r/a.py", "view_range": [1, 20]}).verdict is ALLOW
    assert g.check("str_replace_editor", {"command": "str_replace", "path": "/r/a.py", "old_str": "z",
                                          "new_str": "y"}).verdict is NUDGE
    assert g.check("str_replace_editor", {"command": "view", "path": "/r/a.py"},).verdict is ALLOW
    off = LoopGuard(semantic=False, skip_rules=["program_streak"])
    for n in (1, 2):
        off.record("str_replace_editor", {"command": "str_replace", "path": "/r/a.py", "old_str": f"x{n}",
                                          "new_str": "y"}, refused, error=True)
    assert off.check("str_replace_editor", {"command": "view", "path": "/r/a.py"}).verdict is NUDGE
    g = LoopGuard(semantic=False)
    for path in ("/r/missing.py", "/r/gone.py"):
        g.record("str_replace_editor", {"command": "view", "path": path}, "The path does not exist.", error=True)
    assert g.check("str_replace_editor", {"command": "view", "path": "/r/other.py"}).verdict is NUDGE


def test_a_write_made_again_is_a_repeat_unless_a_later_write_may_have_undone_it():
    """``redo_write``'s reach: a shell write or a declared file write that ran again after a
    write that may have undone it is no repeat; the same write with nothing written since, or
    with only a write to another declared file, or an API record write after another write, is."""
    edit = {"command": "str_replace", "path": "/r/a.py", "old_str": "x = 1", "new_str": "x = 2"}
    ok = "The file /r/a.py has been edited."
    cases = [
        ([("str_replace_editor", edit, ok)], ("str_replace_editor", edit), NUDGE),  # nothing since
        ([("str_replace_editor", edit, ok), ("str_replace_editor", {**edit, "old_str": "x = 2", "new_str": "x = 1"}, ok)],
         ("str_replace_editor", edit), ALLOW),  # undone by a write to its file
        ([("str_replace_editor", edit, ok), ("str_replace_editor", {**edit, "path": "/r/b.py"}, "The file /r/b.py has been edited.")],
         ("str_replace_editor", edit), NUDGE),  # another file's write cannot undo it
        ([("str_replace_editor", edit, ok), ("bash", {"command": "git checkout a.py"}, "")],
         ("str_replace_editor", edit), ALLOW),  # a shell line: its files are not known
        ([("update_order", {"order_id": "O1", "status": "shipped"}, '{"status": "shipped"}'),
          ("update_order", {"order_id": "O2", "status": "shipped"}, '{"status": "shipped"}')],
         ("update_order", {"order_id": "O1", "status": "shipped"}), NUDGE),  # a record write: no undo
    ]
    for before, (tool, args), expected in cases:
        g = LoopGuard(semantic=False)
        for t, a, out in before:
            g.record(t, a, out)
        assert g.check(tool, args).verdict is expected, (before, expected)


def test_without_code_cosmetic_code_is_compared_as_written():
    """Switched off, the rule forgives nothing: code that differs in indentation (a snippet
    indented as a whole fails in Python) or case is another call, not a repeat."""
    ran = ("exec.python", {"code": "  import math\n  print(math.pi)"}, "exitcode: 1\nIndentationError: unexpected indent")
    for code in ("import math\nprint(math.pi)", "  import math\n  print(math.PI)"):
        for skip in ([], ["code_cosmetic"]):
            g = LoopGuard(semantic=False, skip_rules=skip)
            g.record(*ran, error=True)
            assert g.check("exec.python", {"code": code}).verdict is ALLOW, (code, skip)
    g = LoopGuard(semantic=False, skip_rules=["code_cosmetic"])
    g.record(*ran, error=True)
    assert g.check("exec.python", {"code": ran[1]["code"]}).verdict is not ALLOW  # the same text is a repeat


#: rule -> (its case, the verdict with every rule on)
CASES = {
    "transient_retry": (transient_retry, ALLOW), "unanswered_retry": (unanswered_retry, ALLOW),
    "failed_write": (failed_write, NUDGE), "undo_once": (undo_once, ALLOW), "blind_trial": (blind_trial, NUDGE),
    "write_progress": (write_progress, ALLOW), "code_cosmetic": (code_cosmetic, NUDGE),
    "error_news": (error_news, ALLOW), "not_found_items": (not_found_items, NUDGE),
    "short_answer": (short_answer, ALLOW), "report_once": (report_once, ALLOW), "cross_check": (cross_check, ALLOW),
    "echo_mask": (echo_mask, NUDGE), "paging_poll": (paging_poll, ALLOW), "fan_out": (fan_out, ALLOW),
    "write_resets": (write_resets, ALLOW), "write_acts": (write_acts, ALLOW), "known_reread": (known_reread, ALLOW),
    "line_news": (line_news, ALLOW), "redo_write": (redo_write, ALLOW),
    "program_streak": (program_streak, ALLOW), "shell_targets": (shell_targets, NUDGE),
    "review_nudges": (review_nudges, ALLOW),
}


def alarm(verdict: Verdict) -> bool:
    return verdict is not ALLOW  # a nudge, or a stop where the case's earlier calls drew a strike


def test_every_rule_has_a_case():
    assert sorted(CASES) == sorted(RULES)


@pytest.mark.parametrize("rule", list(RULES))
def test_a_rule_switched_off_gives_up_its_verdict_and_no_other_rules(rule):
    case, on = CASES[rule]
    assert alarm(case(LoopGuard(semantic=False))) is alarm(on)
    assert alarm(case(LoopGuard(semantic=False, skip_rules=[rule]))) is not alarm(on)
    for other, (other_case, other_on) in CASES.items():
        if other != rule:
            assert alarm(other_case(LoopGuard(semantic=False, skip_rules=[rule]))) is alarm(other_on), other


def test_a_rule_can_be_switched_off_for_one_tool():
    overrides = {"http_get": {"skip_rules": ["transient_retry"]}}
    assert transient_retry(LoopGuard(semantic=False, tool_overrides=overrides)) is NUDGE
    assert unanswered_retry(LoopGuard(semantic=False, tool_overrides={"http_get": {"skip_rules": ["unanswered_retry"]}})) is ALLOW
    # an override's empty list switches the rule back on for that tool
    back = {"http_get": {"skip_rules": []}}
    assert transient_retry(LoopGuard(semantic=False, skip_rules=["transient_retry"], tool_overrides=back)) is ALLOW


def test_an_unknown_rule_is_refused_globally_and_per_tool():
    with pytest.raises(ParamError, match="skip_rules"):
        check_params(ProgressGuard, {"skip_rules": ["short_answers"]})
    check_params(ProgressGuard, {"skip_rules": list(RULES)})
    with pytest.raises(ValueError, match=r"tool 'search': skip_rules must name rules among .*'typo'"):
        LoopGuard(semantic=False, tool_overrides={"search": {"skip_rules": ["typo"]}})


def test_where_each_rule_came_from_is_the_rule_ablations_built_from_column():
    """``RULES_FROM`` (what leave-one-corpus-out holds out with a corpus) says what the
    docs' rule table says each rule was built from: one record, two places, kept equal."""
    from pathlib import Path

    from detectors.progress_guard import RULES_FROM

    names = {"CaptainAgent": "captain_agent", "Magentic-One": "magentic_one", "ReAct": "react_hotpotqa",
             "τ-bench": "tau_bench_airline"}
    doc = (Path(__file__).resolve().parents[2] / "docs" / "detectors.md").read_text(encoding="utf-8")
    table = doc.split("| rule off | built from |")[1].split("\n\n")[0]
    seen = set()
    for line in table.splitlines()[2:]:
        cells = [c.strip() for c in line.strip("|").split("|")]
        rule, built_from = cells[0].strip("`"), cells[1]
        seen.add(rule)
        assert tuple(sorted(c for name, c in names.items() if name in built_from)) == tuple(sorted(RULES_FROM.get(rule, ()))), rule
    assert seen == set(RULES)
