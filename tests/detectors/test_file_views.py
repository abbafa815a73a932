"""Which lines of which file a call shows (``detectors.file_views``), and ``progress_guard``'s
``shown_lines`` option that judges a view by the lines already shown."""
from __future__ import annotations

import pytest

from detectors import Verdict
from detectors.effects import Effects
from detectors.file_views import View, file_end, shown_lines, view_of
from detectors.guard import LoopGuard
from detectors.progress_guard import ProgressGuard
from detectors.protocol import Observation, ToolCall

EFFECTS = Effects()


def _view(tool: str, **args) -> View | None:
    return view_of(ToolCall(tool, args), EFFECTS)


@pytest.mark.parametrize("command, expected", [
    ("nl -ba src/a.py | sed -n '120,160p'", View("src/a.py", 120, 160, True)),
    ('cat -n src/a.py | sed -n "5,9p"', View("src/a.py", 5, 9, True)),
    ("nl -ba src/a.py", View("src/a.py", None, None, True)),
    ("sed -n '30,40p' src/a.py", View("src/a.py", 30, 40, False)),
    ("sed -n 30,40p ./src/a.py", View("src/a.py", 30, 40, False)),
    ("head -n 50 src/a.py", View("src/a.py", 1, 50, False)),
    ("nl -ba src/a.py | head -80", View("src/a.py", 1, 80, True)),
    ("cd /testbed && nl -ba src/a.py | sed -n '1,9p'", View("/testbed/src/a.py", 1, 9, True)),
    ("bash -lc nl -ba src/a.py | sed -n '1,9p'", View("src/a.py", 1, 9, True)),  # Codex's argv, joined
    # a slice of a slice: lines 150-190 of the file (an nl between numbers from the slice's start)
    ("sed -n '1,220p' src/a.py | sed -n '150,190p'", View("src/a.py", 150, 190, False, False)),
    ("sed -n '1,220p' src/a.py | nl -ba -v1 | sed -n '140,170p'", View("src/a.py", 140, 170, True, False)),
    ("sed -n '1,100p' src/a.py | sed -n '90,150p'", View("src/a.py", 90, 100, False, False)),
    # not a plain view of a file: run something, chain something, or a bad range
    ("python src/a.py", None),
    ("nl -ba src/a.py | sed -n '1,9p' && python -m pytest -q", None),
    ("grep -n def src/a.py", None),
    ("sed -n '9,1p' src/a.py", None),
    ("sed -i 's/a/b/' src/a.py", None),
])
def test_shell_views(command, expected):
    assert _view("bash", command=command) == expected


def test_editor_and_read_views():
    assert _view("str_replace_editor", command="view", path="/t/a.py", view_range=[5, 9]) == View("/t/a.py", 5, 9, True)
    assert _view("str_replace_editor", command="view", path="/t/a.py") == View("/t/a.py", None, None, True)
    assert _view("str_replace_editor", command="view", path="/t/a.py", view_range=[5, -1]) is None  # to the end
    assert _view("str_replace_editor", command="str_replace", path="/t/a.py", old_str="a", new_str="b") is None
    assert _view("Read", file_path="/t/a.py", offset=10, limit=5) == View("/t/a.py", 10, 14, True)
    assert _view("my_tool", path="/t/a.py") is None  # undeclared


def test_shown_lines_read_the_gutter_or_count_from_the_first_line():
    numbered = View("a.py", None, None, True)
    editor = "Here's the result of running `cat -n` on /t/a.py:\r\n     1\timport os\r\n     2\t\r\n     3\tx = 1\r\n"
    assert shown_lines(numbered, editor) == [1, 2, 3]
    # SWE-agent's abbreviated view of a large file: a space after the number, elided parts
    abbreviated = "<NOTE>This file is too large to display entirely.</NOTE>\n     1 import os\n...\n   220 def f():\n   221     pass\n"
    assert shown_lines(numbered, abbreviated) == [1, 220, 221]
    assert shown_lines(View("a.py", 220, 220, True), abbreviated) == [220]  # only the asked range counts
    assert shown_lines(View("a.py", 10, 12, True), "Read →") == []  # an error text shows nothing of the file
    # mini-swe-agent's wrapper; a plain sed slice counts from its first line
    assert shown_lines(View("a.py", 30, 40, False), "<returncode>0</returncode>\n<output>\nx = 1\ny = 2\n</output>") == [30, 31]
    assert shown_lines(View("a.py", 140, 170, True, False), "     1\tx\n     2\ty\n") == [140, 141]
    # mini-swe-agent's cut of a long output: the head's whole lines count, the tail's place is not told
    cut = ("<returncode>0</returncode>\n<warning>\nThe output of your last command was too long.\n</warning><output_head>\n"
           "import os\nimport sys\nclass A:\n    de</output_head>\n<elided_chars>\n9000 characters elided\n</elided_chars>\n"
           "<output_tail>\n    return x\n</output_tail>")
    assert shown_lines(View("a.py", None, None, False), cut) == [1, 2, 3]
    assert shown_lines(View("a.py", 50, 400, False), cut) == [50, 51, 52]
    # mini-swe-agent's own template ends the head with a line break: its last line is still cut
    assert shown_lines(View("a.py", None, None, False), cut.replace("    de</output_head>", "    de\n</output_head>")) == [1, 2, 3]


def test_file_end_only_from_an_uncut_result_that_stopped_short():
    ranged = View("a.py", 1, 240, True)
    assert file_end(ranged, "    1\tx\n   96\ty", [1, 96]) == 96
    assert file_end(ranged, "...", list(range(1, 241))) is None  # the range was filled: the end is not known
    whole = View("a.py", None, None, True)
    assert file_end(whole, "    1\tx\n    2\ty", [1, 2]) == 2
    assert file_end(whole, "<NOTE>This file is too large to display entirely. Showing abbreviated version.", [1, 2]) is None
    assert file_end(whole, "    1\tx\n<warning>The output of your last command was too long.</warning>", [1]) is None


FILE = "\n".join(f"{n:6}\tline {n} of the module" for n in range(1, 97))  # a 96-line file


def _guard(**params) -> LoopGuard:
    g = LoopGuard(semantic=False, shown_lines=True, **params)
    g.record("str_replace_editor", {"command": "view", "path": "/t/a.py"}, FILE)
    return g


def _slice(g: LoopGuard, lo: int, hi: int) -> Verdict:
    return g.check("str_replace_editor", {"command": "view", "path": "/t/a.py", "view_range": [lo, hi]}).verdict


def test_a_slice_of_lines_already_shown_is_drift():
    g = _guard()
    d = g.check("str_replace_editor", {"command": "view", "path": "/t/a.py", "view_range": [40, 60]})
    assert d.verdict is Verdict.NUDGE and "shows lines 40-60 of /t/a.py, all of them shown already" in d.message
    assert _slice(_guard(), 90, 120) is Verdict.NUDGE  # past the end of a file known to have 96 lines
    assert _slice(LoopGuard(semantic=False), 90, 120) is Verdict.ALLOW  # nothing shown yet
    default = LoopGuard(semantic=False)  # the default: on
    default.record("str_replace_editor", {"command": "view", "path": "/t/a.py"}, FILE)
    assert _slice(default, 40, 60) is Verdict.NUDGE
    off = LoopGuard(semantic=False, shown_lines=False)
    off.record("str_replace_editor", {"command": "view", "path": "/t/a.py"}, FILE)
    assert _slice(off, 40, 60) is Verdict.ALLOW


def test_a_view_of_lines_already_shown_that_ran_is_no_strike():
    """``review_nudges``: re-views that ran (the nudge beside the result) nudge every time and
    add no strike; one the nudge replaced is a strike, so asking for it again stops. Switched
    off, the second re-view stops as any second finding does."""
    det = ProgressGuard(semantic=False)
    state = det.start()
    whole = ToolCall("str_replace_editor", {"command": "view", "path": "/t/a.py"})
    state = det.record(state, whole, det.check(state, whole), Observation(FILE))
    for lo in (10, 20, 30):
        call = ToolCall("str_replace_editor", {"command": "view", "path": "/t/a.py", "view_range": [lo, lo + 5]})
        d = det.check(state, call)
        assert d.verdict is Verdict.NUDGE and d.events[0][1]["nudge_only"] is True
        state = det.record(state, call, d, Observation("x"))
    assert state.strikes == 0
    g = _guard()  # the harness gives the nudge instead of the lines
    view = {"command": "view", "path": "/t/a.py", "view_range": [10, 15]}
    assert g.check("str_replace_editor", view).verdict is Verdict.NUDGE
    g.record("str_replace_editor", view)
    assert g.check("str_replace_editor", view).verdict is Verdict.STOP
    g = _guard(skip_rules=["review_nudges"])
    for lo, verdict in ((10, Verdict.NUDGE), (20, Verdict.STOP)):
        d = g.check("str_replace_editor", {"command": "view", "path": "/t/a.py", "view_range": [lo, lo + 5]})
        assert d.verdict is verdict and "nudge_only" not in d.events[0][1]
        g.record("str_replace_editor", {"command": "view", "path": "/t/a.py", "view_range": [lo, lo + 5]}, "x", decision=d)

def test_a_write_to_the_file_makes_its_lines_news_again_and_a_write_elsewhere_does_not():
    g = _guard()
    g.record("str_replace_editor", {"command": "str_replace", "path": "/t/a.py", "old_str": "a", "new_str": "b"},
             "The file /t/a.py has been edited.")
    assert _slice(g, 40, 60) is Verdict.ALLOW
    g = _guard()
    g.record("str_replace_editor", {"command": "create", "path": "/t/repro.py", "file_text": "print(1)"}, "File created")
    assert _slice(g, 40, 60) is Verdict.NUDGE
    # the identical whole view again after a write to another file: nothing of a.py changed
    assert g.check("str_replace_editor", {"command": "view", "path": "/t/a.py", "view_range": [1, 96]}).verdict \
        is Verdict.NUDGE
    g = _guard()
    g.record("str_replace_editor", {"command": "str_replace", "path": "/t/a.py", "old_str": "zz", "new_str": "b"},
             "No replacement was performed, old_str `zz` did not appear verbatim in /t/a.py.", error=True)
    assert _slice(g, 40, 60) is Verdict.NUDGE  # a refused edit wrote nothing
    g = _guard()
    g.record("bash", {"command": "git apply /t/fix.diff"}, "")  # a shell write whose files are not known
    assert _slice(g, 40, 60) is Verdict.ALLOW
    g = _guard()
    g.record("bash", {"command": "python fix.py > /t/out.txt"}, "")  # one that names its file (``shell_targets``)
    assert _slice(g, 40, 60) is Verdict.NUDGE
    g = _guard(skip_rules=["shell_targets"])
    g.record("bash", {"command": "python fix.py > /t/out.txt"}, "")
    assert _slice(g, 40, 60) is Verdict.ALLOW
    g = _guard()
    g.record("bash", {"command": "sed -i 's/a/b/' a.py"}, "")  # ``a.py`` from another directory may be /t/a.py
    assert _slice(g, 40, 60) is Verdict.ALLOW


def test_lines_never_shown_are_news():
    g = LoopGuard(semantic=False, shown_lines=True)
    g.record("bash", {"command": "nl -ba src/a.py | sed -n '1,40p'"}, "\n".join(f"{n:6}\tx{n} = {n}" for n in range(1, 41)))
    assert g.check("bash", {"command": "nl -ba src/a.py | sed -n '30,60p'"}).verdict is Verdict.ALLOW
    assert g.check("bash", {"command": "sed -n '10,20p' src/a.py"}).verdict is Verdict.NUDGE
    assert g.check("bash", {"command": "sed -n '10,20p' other.py"}).verdict is Verdict.ALLOW


from hypothesis import example, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

_ACTIONS = st.lists(st.one_of(
    st.tuples(st.just("view"), st.integers(1, 60), st.integers(0, 20)),
    st.tuples(st.just("edit"), st.sampled_from(["/t/a.py", "/t/b.py"]), st.booleans()),
), min_size=1, max_size=25)


@settings(max_examples=150, deadline=None)
@given(_ACTIONS)
# found by CI: a view after two refused edits was judged by the edits' failure streak
@example([("view", 40, 20), ("edit", "/t/a.py", False), ("edit", "/t/a.py", False), ("view", 41, 20), ("view", 41, 20)])
def test_a_slice_is_flagged_exactly_when_every_line_of_it_was_shown_since_the_last_write_to_its_file(actions):
    """A 60-line file viewed in slices, with edits (some refused) to it and to another file: the
    ``shown_lines`` finding on each slice agrees with a plain model of what was shown (the
    signature layer, asked first, may name an identical repeat instead; other layers may fire
    on slices the model does not flag)."""
    lines = 60
    shown: set[int] = set()
    end = None  # the file's last line, once a view ran past it (until the file is written)
    g = LoopGuard(semantic=False, shown_lines=True, stop_after=10_000)  # nudges only, never a stop
    for i, action in enumerate(actions):
        if action[0] == "edit":
            _, path, ok = action
            edit = {"command": "str_replace", "path": path, "old_str": f"x{i}", "new_str": "y"}
            ran = g.check("str_replace_editor", edit).verdict is Verdict.ALLOW  # a nudged call does not run
            g.record("str_replace_editor", edit, "edited" if ok else "No replacement was performed.", error=not ok)
            if ran and ok and path == "/t/a.py":
                shown.clear()
                end = None
            continue
        _, lo, width = action
        hi = lo + width
        args = {"command": "view", "path": "/t/a.py", "view_range": [lo, hi]}
        decision = g.check("str_replace_editor", args)
        reason = decision.reason or ""
        mine = "all of them shown already" in reason
        if lo <= lines:
            # a slice that runs past line 60 is known to hold no more only once a view has shown
            # where the file ends: before that, its lines past 60 may exist and are not shown
            if set(range(lo, (hi if end is None else min(hi, end)) + 1)) <= shown:
                assert mine or reason.startswith("loop-guard: signature"), (lo, hi, sorted(shown), reason)
            else:
                assert not mine, (lo, hi, sorted(shown))
        body = "\n".join(f"{n:6}\tline {n}" for n in range(lo, min(hi, lines) + 1))
        g.record("str_replace_editor", args, body)
        if decision.verdict is Verdict.ALLOW:
            shown |= set(range(lo, min(hi, lines) + 1))
        if lo <= lines < hi:
            end = lines
