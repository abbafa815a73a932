"""The multi-tool coding persona: the editor tool's documented semantics, and its families."""
import pytest

import scenarios.families  # noqa: F401
from detectors.effects import effect_of
from detectors.progress_guard import ProgressGuard
from scenarios.base import FAMILIES, make_scenario
from scenarios.editor import REPO, repo_path
from scenarios.world import World, WorldState
from detectors.protocol import ToolCall, Verdict
from sim.play.harness import generate
from sim.play.validate import scored_looping_paths

HEALTHY = ("editor_edit_test", "editor_edit_view", "editor_reproduce_fix")
LOOPS = ("editor_review", "editor_rerun", "editor_nomatch")
#: Healthy with no identical repeat at all: every read narrows in on text already read.
FOCUS = ("editor_focus",)


def _world():
    w = World.build(5)
    path = sorted(f for f in w.files if f.startswith("src/"))[0]
    return w, path, f"{REPO}/{path}"


def _run(w, state, tool, **args):
    return w.execute(state, ToolCall(tool, args))


def test_the_editor_views_edits_and_undoes_as_documented():
    w, path, raw = _world()
    s = WorldState()
    seen = _run(w, s, "str_replace_editor", command="view", path=raw)
    assert seen.observation.content.startswith(f"Here's the result of running `cat -n` on {raw}:\n     1\t# {path}")
    line = w.files[path].split("\n")[1]
    edited = _run(w, s, "str_replace_editor", command="str_replace", path=raw, old_str=line, new_str=line + " # ok")
    assert edited.observation.content.startswith(f"The file {raw} has been edited. ") and not edited.observation.error
    assert edited.state.file(path) == w.files[path].replace(line, line + " # ok")
    again = _run(w, edited.state, "str_replace_editor", command="view", path=raw)
    assert "# ok" in again.observation.content and again.facts != seen.facts  # the same view, new content
    miss = _run(w, s, "str_replace_editor", command="str_replace", path=raw, old_str="  " + line, new_str="x")
    assert miss.observation.error and "did not appear verbatim in" in miss.observation.content
    assert miss.state.written == ()  # a failed edit changes nothing
    dup = _run(w, s, "str_replace_editor", command="str_replace", path=raw, old_str="line", new_str="row")
    assert dup.observation.error and "Multiple occurrences of old_str `line`" in dup.observation.content
    undone = _run(w, edited.state, "str_replace_editor", command="undo_edit", path=raw)
    assert undone.state.file(path) == w.files[path] and "undone successfully" in undone.observation.content
    assert "No edit history" in _run(w, s, "str_replace_editor", command="undo_edit", path=raw).observation.content
    exists = _run(w, s, "str_replace_editor", command="create", path=raw, file_text="x")
    assert exists.observation.error and "Cannot overwrite files using command `create`" in exists.observation.content
    ins = _run(w, s, "str_replace_editor", command="insert", path=raw, insert_line=1, new_str="import os")
    assert ins.state.file(path).split("\n")[1] == "import os"
    part = _run(w, s, "str_replace_editor", command="view", path=raw, view_range=[2, 3])
    assert part.observation.content.split("\n")[1].startswith("     2\t") and len(part.observation.content.strip().split("\n")) == 3
    assert repo_path(f"{REPO}/src/a.py") == "src/a.py"


def test_the_shell_runs_in_the_repository_and_runs_created_scripts():
    w, path, raw = _world()
    s = WorldState()
    assert "failed" in _run(w, s, "execute_bash", command=f"cd {REPO} && python -m pytest tests -q").observation.content
    assert "No such file" in _run(w, s, "execute_bash", command=f"cd {REPO} && python reproduce.py").observation.content
    made = _run(w, s, "str_replace_editor", command="create", path=f"{REPO}/reproduce.py", file_text="assert f(0) == 0\n")
    ran = _run(w, made.state, "execute_bash", command=f"cd {REPO} && python reproduce.py")
    assert ran.observation.error and "4 of 4 cases still wrong" in ran.observation.content


def test_families_are_registered_in_their_class_and_name_their_source():
    assert all(not FAMILIES[f].looping for f in HEALTHY + FOCUS) and all(FAMILIES[f].looping for f in LOOPS)
    assert all(FAMILIES[f].doc.startswith("Editor + shell") for f in HEALTHY + LOOPS + FOCUS)


@pytest.mark.parametrize("name", HEALTHY + LOOPS + FOCUS)
def test_generation_is_deterministic_on_paths_and_trees(name):
    # (labels and tree support: test_real_families.test_linear_and_tree_episodes_validate)
    for tree_share in (0.0, 1.0):
        runs = [generate(make_scenario(name, 2, suite_seed=11, tree_share=tree_share)) for _ in range(2)]
        a, b = ([(n.call.tool, dict(n.call.args), n.observation, n.label) for n in ep.tool_nodes()] for ep in runs)
        assert a == b and len(a) >= 4


def _same(a: ToolCall, b: ToolCall) -> bool:
    return a.tool == b.tool and dict(a.args) == dict(b.args)


def _writes(node) -> bool:
    e = effect_of(node.call)
    return e is not None and e.writes and not node.observation.error


@pytest.mark.parametrize("name", HEALTHY)
def test_healthy_runs_repeat_a_call_only_after_a_write_and_never_loop(name):
    repeats = 0
    for i in range(10):
        ep = generate(make_scenario(name, i, suite_seed=3, tree_share=0.0))
        calls = ep.tool_nodes()
        assert not any(n.label.loop for n in calls) and not scored_looping_paths(ep)
        for j, n in enumerate(calls):
            earlier = [k for k in range(j) if _same(calls[k].call, n.call)]
            if earlier:
                repeats += 1
                assert any(_writes(calls[k]) for k in range(earlier[-1] + 1, j)), "an identical call again only after an edit"
    assert repeats >= 10


@pytest.mark.parametrize("name", LOOPS)
def test_loops_repeat_with_nothing_written_between(name):
    for i in range(10):
        ep = generate(make_scenario(name, i, suite_seed=3, tree_share=0.0, blip_share=0.0))
        (calls, onset), = scored_looping_paths(ep)
        assert all(n.label.loop and n.label.kind == name for n in calls[onset:])
        assert not any(_writes(n) for n in calls[onset:])
        assert all(any(_same(n.call, m.call) for m in calls[:onset]) for n in calls[onset:]), "stale repeats"


def test_the_guard_lets_the_repair_cycle_through_and_catches_the_loops():
    # ``shown_lines`` off: the rubric's reading of a narrower view (below) is not this family's
    guard = ProgressGuard(semantic=False, shown_lines=False)
    for name in HEALTHY + LOOPS + FOCUS:
        for i in range(8):
            ep = generate(make_scenario(name, i, suite_seed=5, tree_share=0.0))
            state, first = guard.start(), None
            for j, n in enumerate(ep.tool_nodes()):
                d = guard.check(state, n.call)
                if d.alarm and first is None:
                    first = j
                state = guard.record(state, n.call, d, n.observation)
            if FAMILIES[name].looping:
                (_, onset), = scored_looping_paths(ep)
                assert first is not None and onset <= first <= onset + 1, (name, i, first, onset)
            else:
                assert first is None, (name, i, ep.tool_nodes()[first].call)


def _first_alarm(guard, ep):
    state = guard.start()
    for j, n in enumerate(ep.tool_nodes()):
        d = guard.check(state, n.call)
        if d.alarm:
            return j, d.reason
        state = guard.record(state, n.call, d, n.observation)
    return None, ""


def _decisions(guard, ep):
    state, out = guard.start(), []
    for n in ep.tool_nodes():
        d = guard.check(state, n.call)
        out.append(d)
        state = guard.record(state, n.call, d, n.observation)
    return out


def test_narrowing_in_on_what_was_read_is_no_loop_and_the_rules_that_say_so_are_needed():
    """editor_focus: after the whole file, a grep and a slice show only lines already read, and a
    failed edit is followed by a narrower slice. Healthy by the family's reading (each look is
    new), let through by the guard without ``shown_lines``; without write_acts and known_reread
    it calls the edit or the narrower slice a loop. With ``shown_lines`` (the default), which
    reads the slice as the labelling rubric does, it nudges at the slice and never stops."""
    old = ProgressGuard(semantic=False, shown_lines=False, skip_rules=("write_acts", "known_reread"))
    guard = ProgressGuard(semantic=False, shown_lines=False)
    default = ProgressGuard(semantic=False)
    flagged, narrowed = [], 0
    for i in range(20):
        ep = generate(make_scenario("editor_focus", i, suite_seed=7, tree_share=0.0))
        calls = ep.tool_nodes()
        assert not any(n.label.loop for n in calls) and not scored_looping_paths(ep)
        assert not any(_same(calls[k].call, n.call) for j, n in enumerate(calls) for k in range(j))
        path = next(n.call.args["path"] for n in calls if n.call.args.get("command") == "str_replace")
        views = [n for n in calls if n.call.args.get("path") == path and n.call.args.get("view_range")]
        whole = next(n for n in calls if n.call.args.get("command") == "view" and not n.call.args.get("view_range")
                     and n.call.args.get("path") == path)
        body = lambda n: {ln.split("\t", 1)[1] for ln in n.observation.content.split("\n")[1:] if "\t" in ln}  # noqa: E731
        assert all(body(v) <= body(whole) for v in views), "every slice shows lines the whole view showed"
        narrowed += len(views) > 1
        assert _first_alarm(guard, ep)[0] is None, (i, _first_alarm(guard, ep))
        at, why = _first_alarm(default, ep)
        assert at is not None and "drift: shows lines" in why, (i, at, why)
        verdicts = [d.verdict for d in _decisions(default, ep)]
        assert Verdict.STOP not in verdicts and Verdict.NUDGE in verdicts
        at, why = _first_alarm(old, ep)
        if at is not None:
            flagged.append(why.split(":")[1].strip())
    assert narrowed >= 5
    assert len(flagged) >= 8 and set(flagged) <= {"drift", "no_progress"}, flagged
