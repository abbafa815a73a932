"""Families modelled on real traces: what each one guarantees, beyond valid labels.

(Every family's labels, determinism and tree support are also checked generically in
test_families.py.) Healthy families must really show something new where a guard might
think they repeat; loop families must really repeat what the path already has.
"""
import re

import pytest

import scenarios.families  # noqa: F401
from scenarios.base import FAMILIES, healthy_families, loop_families, make_scenario
from scenarios.suites import SuiteError, episode_count, load_suite
from scenarios.worldtools import canonical_code
from sim.play.harness import generate
from sim.play.validate import scored_looping_paths, validate_episode

NEW_HEALTHY = ("write_echo", "fresh_suggestions", "same_output", "scroll_paging", "corrected_id", "shell_edit_test",
               "editor_edit_test", "editor_edit_view", "editor_reproduce_fix")
NEW_LOOPS = ("search_dead_end", "rerun_code", "scroll_stall", "redelegate", "shell_rerun",
             "editor_review", "editor_rerun", "editor_nomatch")
EDIT = re.compile(r"^(sed -i|cat > |python - <<|git checkout)")
NOISE = re.compile(r"\(took \d+ ms, request [0-9a-f]+\)")


def episodes(name, n=12, **params):
    """Runaway loops unless asked (their shape is what these tests check; blips: test_families)."""
    if FAMILIES[name].looping:
        params.setdefault("blip_share", 0.0)
    return [generate(make_scenario(name, i, suite_seed=7, **params)) for i in range(n)]


def text(node):
    return node.observation.content


def test_new_families_are_registered_in_their_class():
    assert set(NEW_HEALTHY) <= set(healthy_families()) and set(NEW_LOOPS) <= set(loop_families())
    assert all(not FAMILIES[f].looping for f in NEW_HEALTHY) and all(FAMILIES[f].looping for f in NEW_LOOPS)


@pytest.mark.parametrize("name", NEW_HEALTHY + NEW_LOOPS)
def test_linear_and_tree_episodes_validate(name):
    kinds = set()
    for tree_share in (0.0, 1.0):
        for i in range(4):
            sc = make_scenario(name, i, suite_seed=11, tree_share=tree_share)
            ep = generate(sc)
            validate_episode(sc, ep)
            kinds.add(ep.is_linear())
            if name.startswith("shell_"):
                assert {n.call.tool for n in ep.tool_nodes()} == {"bash"}, "the shell persona has one tool"
            if name.startswith("editor_"):  # the coding persona (test_coding_agent.py): an editor and a shell
                assert {n.call.tool for n in ep.tool_nodes()} <= {"str_replace_editor", "execute_bash"}
    assert kinds == {True, False}


def test_write_echo_writes_answer_with_a_record_read_before():
    echoes = 0
    for ep in episodes("write_echo"):
        seen = set()
        for n in ep.tool_nodes():
            if n.call.tool in ("update_record", "cancel_record") and text(n) in seen:
                assert not n.label.loop
                echoes += 1
            if n.call.tool in ("get_record", "update_record"):
                seen.add(text(n))
        assert not scored_looping_paths(ep)
    assert echoes >= 12


def test_fresh_suggestions_each_failure_suggests_a_new_title_then_a_hit():
    for ep in episodes("fresh_suggestions"):
        looks = [n for n in ep.tool_nodes() if n.call.tool == "wiki_search"]
        failed = [n for n in looks if text(n).startswith("Could not find")]
        assert len(failed) >= 2 and not text(looks[-1]).startswith("Could not find")
        seen: set[str] = set()
        for n in failed:
            titles = set(re.findall(r"'([^']+)'", text(n).split("Similar:", 1)[1]))
            assert titles - seen, "every failure suggests something not seen before"
            seen |= titles
        assert len({n.call.args["entity"] for n in failed}) == len(failed)


def test_same_output_is_new_code_every_time():
    for ep in episodes("same_output"):
        runs = [n for n in ep.tool_nodes() if n.call.tool == "run_code"]
        assert len(runs) >= 3
        assert len({text(n) for n in runs}) == 1, "the same output"
        assert len({canonical_code(n.call.args["code"]) for n in runs}) == len(runs), "different code"
        assert not any(n.label.loop for n in runs)


def test_scroll_paging_shows_new_text_for_the_identical_call():
    for ep in episodes("scroll_paging"):
        scrolls = [n for n in ep.tool_nodes() if n.call.tool == "scroll"]
        assert len(scrolls) >= 2 and len({repr(n.call.args) for n in scrolls}) == 1
        shown = [text(n) for n in ep.tool_nodes() if n.call.tool in ("open_url", "scroll")]
        assert len(set(shown)) == len(shown)


def test_corrected_id_retries_a_mistyped_id_once():
    retried = 0
    for ep in episodes("corrected_id"):
        calls = [n for n in ep.tool_nodes() if n.call.tool == "get_record"]
        for bad, good in zip(calls, calls[1:]):
            if bad.observation.error:
                a, b = bad.call.args["record_id"], good.call.args["record_id"]
                assert a != b and len(a) == len(b) and not good.observation.error
                assert sum(x != y for x, y in zip(a, b)) <= 2
                retried += 1
        assert not scored_looping_paths(ep)
    assert retried >= 12


def test_shell_edit_test_re_runs_the_same_test_only_after_an_edit():
    for ep in episodes("shell_edit_test", tree_share=0.0):
        calls = ep.tool_nodes()
        test = ep.meta["test"]
        runs = [i for i, n in enumerate(calls) if n.call.args["command"] == test]
        assert len(runs) >= 3
        for a, b in zip(runs, runs[1:]):
            between = [calls[k].call.args["command"] for k in range(a + 1, b)]
            assert any(EDIT.match(c) for c in between), "an edit, visible only in the command text"
            assert NOISE.sub("", text(calls[a])) != NOISE.sub("", text(calls[b]))
        assert not any(n.label.loop for n in calls)


def looping(name, **params):
    out = []
    for ep in episodes(name, **params):
        (calls, onset), = scored_looping_paths(ep)
        out.append((ep, calls, onset))
    return out


def test_search_dead_end_rewords_and_gets_only_suggestions_already_seen():
    for ep, calls, onset in looping("search_dead_end", tree_share=0.0):
        first = calls[onset - 1]
        assert first.call.tool == "wiki_search" and text(first).startswith("Could not find")
        seen = set(re.findall(r"'([^']+)'", text(first)))
        for n in calls[onset:]:
            assert n.call.tool == "wiki_search" and text(n).startswith("Could not find")
            assert n.label.kind == "search_dead_end"
            assert set(re.findall(r"'([^']+)'", text(n))) <= seen
        assert len({n.call.args["entity"] for n in calls[onset - 1:]}) > 2, "reworded, not repeated"


def test_rerun_code_is_the_same_computation_for_the_same_output():
    variants = set()
    for ep, calls, onset in looping("rerun_code"):
        first = calls[onset - 1]
        variants.add(ep.meta["variant"])
        for n in calls[onset:]:
            assert canonical_code(n.call.args["code"]) == canonical_code(first.call.args["code"])
            assert text(n) == text(first)
    assert variants == {"exact", "cosmetic"}


def test_scroll_stall_shows_the_last_screen_again():
    for ep, calls, onset in looping("scroll_stall"):
        last = text(calls[onset - 1])
        assert "100% of the page" in last
        assert all(n.call.tool == "scroll" and text(n) == last for n in calls[onset:])


def test_redelegate_rewords_a_fulfilled_request_and_gets_no_reply():
    from scenarios.worldtools import no_reply, request_key

    for ep, calls, onset in looping("redelegate"):
        first = calls[onset - 1]
        assert first.call.tool == "delegate" and text(first)
        stuck = calls[onset:]
        assert all(n.observation == no_reply() for n in stuck)
        assert all(request_key(n.call.args["instruction"]) == request_key(first.call.args["instruction"]) for n in stuck)
        assert len({n.call.args["instruction"] for n in stuck}) > 1, "new words"


def test_shell_rerun_changes_nothing_between_the_repeats():
    variants = set()
    for ep, calls, onset in looping("shell_rerun", n=16, tree_share=0.0):
        variants.add(ep.meta["variant"])
        cmds = [n.call.args["command"] for n in calls]
        out = {}
        for i, n in enumerate(calls):
            key = NOISE.sub("", text(n))
            if i >= onset:
                if cmds[i].startswith("sed -i"):
                    assert key == "", "an edit whose pattern is not in the file prints nothing and changes nothing"
                else:
                    assert out[cmds[i]] == key, "the same command, the same output"
            out[cmds[i]] = key
    assert variants == {"rerun", "reread", "noop_edit"}


def test_default_suite_mix_follows_real_prevalence():
    s = load_suite("default")
    assert set(NEW_HEALTHY + NEW_LOOPS) <= set(s.families)
    n = {f: episode_count(s.episodes, s.family_weights.get(f, 1.0)) for f in s.families}
    loops = {f: k for f, k in n.items() if FAMILIES[f].looping}
    total = sum(loops.values())
    # the headroom families (scenarios/families/headroom.py) count with the kind of loop they harden
    stale_like = sum(loops[f] for f in ("stale", "rerun_code", "scroll_stall", "shell_rerun", "failed_write_reread",
                                        "noisy_repeat", "late_loop", "web_revisit",
                                        "editor_review", "editor_rerun", "editor_nomatch")) / total
    para_like = sum(loops[f] for f in ("paraphrased", "redelegate", "search_dead_end", "redelegate_same_page",
                                       "paraphrase_far")) / total
    assert 0.50 <= stale_like <= 0.60 and 0.30 <= para_like <= 0.40
    clean = {f: k for f, k in n.items() if not FAMILIES[f].looping}
    repeating = ("polling", "transient_retry", "edit_test", "compliant", "scroll_paging", "shell_edit_test",
                 "edit_retest_mixed", "editor_edit_test", "editor_edit_view", "editor_reproduce_fix")
    assert 0.05 <= sum(clean[f] for f in repeating) / sum(clean.values()) <= 0.20
    assert all(v >= 10 for v in n.values()), "every family keeps episodes enough to report on"


def test_family_weights_are_checked(tmp_path):
    bad = tmp_path / "s.toml"
    bad.write_text('name = "x"\n[family_weights]\nnope = 2\n')
    with pytest.raises(SuiteError, match="family_weights for unknown family 'nope'"):
        load_suite(str(bad))
    bad.write_text('name = "x"\n[family_weights]\nstale = 0\n')
    with pytest.raises(SuiteError, match="must be a positive number"):
        load_suite(str(bad))
    assert episode_count(40, 0.5) == 20 and episode_count(4, 0.1) == 1


def test_new_families_survive_the_trace_format(tmp_path):
    from sim.scoring.outcomes import episode_outcomes
    from scenarios.trace import read_trace, write_trace

    eps = [generate(make_scenario(f, i)) for f in ("redelegate", "shell_rerun", "write_echo", "shell_edit_test")
           for i in range(3)]
    write_trace(tmp_path / "t.jsonl", eps)
    back = {e.id: e for e in read_trace(tmp_path / "t.jsonl").episodes}
    for ep in eps:
        got = back[ep.id]
        assert [n.call for n in got.tool_nodes()] == [n.call for n in ep.tool_nodes()]
        assert [n.observation for n in got.tool_nodes()] == [n.observation for n in ep.tool_nodes()]
        assert [o.outcome for o in episode_outcomes(got, {})] == [o.outcome for o in episode_outcomes(ep, {})]
