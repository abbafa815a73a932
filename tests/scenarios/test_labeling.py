"""The hindsight labeller: the rubric's general rules, trees, human labels kept, files."""
from __future__ import annotations

import json

import pytest

from detectors.protocol import UNRECORDED, Observation, ToolCall
from scenarios.label_files import LabelsError, label_traces, read_labels, write_labels
from scenarios.labeling import args_match, calls_sha1, label_episodes, propose
from scenarios.trace import read_trace, write_trace
from scenarios.tree import Episode, ToolNode, linear_episode


def _onset(steps):
    _, p = propose(linear_episode("e", steps))
    return p.onset, p.kind


def test_exact_repeat_with_same_result_is_stale():
    assert _onset([("search", {"q": "a"}, "r1"), ("open", {"id": 1}, "x"), ("search", {"q": "a"}, "r1")]) == (2, "stale")


def test_repeat_whose_result_is_new_is_not_a_loop():
    # polling that sees a changed state / paging that reveals new text
    assert _onset([("status", {"id": 1}, "pending"), ("status", {"id": 1}, "shipped today")]) == (None, None)


def test_retry_after_error_that_succeeds_is_not_a_loop():
    ep = linear_episode("e", [("fetch", {"u": "x"}, "Error: timeout", True), ("fetch", {"u": "x"}, "page body", False)])
    assert propose(ep)[1].onset is None


def test_identical_failing_retry_is_stale():
    ep = linear_episode("e", [("book", {"f": 1}, "Error: sold out", True), ("book", {"f": 1}, "Error: sold out", True)])
    assert propose(ep)[1].onset == 1


_FILE = "\n".join(f"{n:6}\tvalue_{n} = compute({n}, mode='fast')" for n in range(1, 81))


def _slices(*between):
    """A file viewed whole, then whatever ``between`` holds, then a slice of lines already shown."""
    view = ("bash", {"command": "nl -ba src/calc.py"}, _FILE)
    part = "\n".join(_FILE.split("\n")[39:60])
    return [view, *between, ("bash", {"command": "nl -ba src/calc.py | sed -n '40,60p'"}, part)]


def test_a_slice_of_lines_already_shown_is_drift():
    """The rubric's drift, read from the lines a view shows (an editor's or ``nl``'s gutter), not
    from its words: nothing new, whatever the slice's numbers."""
    grep = ("bash", {"command": "grep -n compute src/other.py"}, "3:    compute(x)")
    assert _onset(_slices(grep))[0] == 2
    editor = [("str_replace_editor", {"command": "view", "path": "/r/calc.py"}, _FILE),
              ("str_replace_editor", {"command": "view", "path": "/r/calc.py", "view_range": [40, 60]},
               "\n".join(_FILE.split("\n")[39:60]))]
    assert _onset(editor) == (1, "drift")
    # a write to the file makes its lines news again, and so does a shell write whose files are
    # not known; a refused editor edit wrote nothing
    edit = ("str_replace_editor", {"command": "str_replace", "path": "src/calc.py", "old_str": "a", "new_str": "b"},
            "The file src/calc.py has been edited.")
    assert _onset(_slices(edit)) == (None, None)
    script = ("bash", {"command": "python fix.py > src/calc.py.new && mv src/calc.py.new src/calc.py"},
              "<returncode>0</returncode>")
    assert _onset(_slices(script)) == (None, None)
    failed = ("bash", {"command": "python fix.py > src/calc.py && python -m pytest -q"}, "<returncode>1</returncode>", True)
    assert _onset(_slices(failed)) == (None, None)  # it wrote, then its tests failed
    refused = ("str_replace_editor", {"command": "str_replace", "path": "src/calc.py", "old_str": "zz", "new_str": "b"},
               "No replacement was performed, old_str `zz` did not appear verbatim.", True)
    assert _onset(_slices(refused))[0] == 2
    other = ("str_replace_editor", {"command": "create", "path": "src/new.py", "file_text": "x = 1"}, "File created")
    assert _onset(_slices(other))[0] == 2  # a write to another file


def test_a_line_that_reruns_commands_an_earlier_line_ran_after_its_patch_is_stale():
    """The rubric's re-issue, for a shell line whose commands were parts of earlier lines: the
    check a patching line ran, run again alone with nothing written since, shows nothing new."""
    patch = ("bash", {"command": "cat > fix.py <<'EOF'\nopen('a.py', 'w').write(fixed)\nEOF\npython fix.py && python check.py"},
             "<returncode>0</returncode>\n<output>\nPASS test_total 42\n</output>")
    grep = ("bash", {"command": "grep -n total a.py"}, "<returncode>0</returncode>\n<output>\n3:total = 42\n</output>")
    check = ("bash", {"command": "python check.py"}, "<returncode>0</returncode>\n<output>\nPASS test_total 42\n</output>")
    assert _onset([patch, grep, check]) == (2, "stale")
    edit = ("str_replace_editor", {"command": "str_replace", "path": "a.py", "old_str": "42", "new_str": "43"},
            "The file a.py has been edited.")
    assert _onset([patch, edit, check]) == (None, None)  # a re-test after a write
    moved = ("bash", {"command": "cd sub && ls"}, "<returncode>0</returncode>\n<output>\ncheck.py\n</output>")
    assert _onset([patch, moved, check]) == (None, None)  # a lasting shell may now run another check.py
    failed = (patch[0], patch[1], "<returncode>1</returncode>\n<output>\nSyntaxError\n</output>", True)
    assert _onset([failed, grep, check])[0] is None  # the line may have stopped before its check


def test_a_write_in_other_words_after_a_write_is_another_change():
    """Two ``sed -i`` lines that share their words are two edits, whatever their empty results
    say; a search in other words after a search that found it is still a paraphrase."""
    ok = "<returncode>0</returncode>\n<output>\n</output>"
    first = ("bash", {"command": "sed -i 's/raise ValueError(name)/raise ValueError(\"empty name\")/' src/app.py"}, ok)
    second = ("bash", {"command": "sed -i 's/raise ValueError(\"empty name\")/raise ValueError(\"name may not be empty\")/' src/app.py"}, ok)
    assert _onset([first, second]) == (None, None)
    hit = "src/app.py:12: raise ValueError(name)"
    assert _onset([("search", {"q": "where is ValueError raised for an empty name"}, hit),
                   ("search", {"q": "where is the ValueError for an empty name raised"}, hit)]) == (1, "paraphrased")


def test_fan_out_over_ids_is_not_a_loop():
    steps = [("get_reservation", {"reservation_id": f"R{i}X9"}, "Error: not found") for i in range(4)]
    assert _onset(steps) == (None, None)


def test_cosmetic_and_paraphrased_and_drift_re_issues():
    assert args_match({"q": "Paris France"}, {"q": "'paris'  france"}) == ("cosmetic", 1.0)
    kind, sim = args_match({"q": "population of Paris in 2020"}, {"q": "Paris population 2020 figure"})
    assert kind == "paraphrased" and sim >= 0.5
    assert args_match({"date": "2024-05-13", "origin": "LAX"}, {"date": "2024-05-14", "origin": "LAX"})[0] == "drift"
    assert args_match({"q": "weather in Oslo"}, {"q": "stock price of ACME"}) is None
    # changed code is a re-test, cosmetic code edits are not
    code = "import x\na = 1\nb = 2\nprint(a + b)\n"
    assert args_match({"code": code}, {"code": code.replace("print(a + b)", "print(a + b)  # the sum")})[0] == "cosmetic"
    assert args_match({"code": code}, {"code": "import y\nz = load()\nw = z * 2\nsave(w)\nprint(w)\n"}) is None


def test_same_request_about_another_quoted_item_is_fan_out():
    ask = "Please look up the opening hours of '{}' in the city guide and report them."
    assert args_match({"instruction": ask.format("Blue Door Cafe")}, {"instruction": ask.format("Harbour Grill")}) is None
    # the same item under a longer name is still the same request
    kind, _ = args_match({"instruction": ask.format("Harbour Grill")},
                         {"instruction": ask.format("Harbour Grill - Seafood and Steaks")})
    assert kind == "paraphrased"
    # an apostrophe is not a quote: no items, the wording decides
    assert args_match({"q": "Kang's gym hours today"}, {"q": "Kang's gym hours"})[0] == "paraphrased"
    steps = [("ask", {"instruction": ask.format(name)}, "No hours listed on this page.") for name in ("Blue Door Cafe", "Harbour Grill")]
    assert _onset(steps) == (None, None)


def test_echo_of_the_query_is_not_news():
    # A failed search echoes its own query; with no new suggestion it brings nothing.
    steps = [("search", {"query": "Foo Bar"}, "Could not find Foo Bar. Similar: ['Baz', 'Qux']"),
             ("search", {"query": "foo bar"}, "Could not find foo bar. Similar: ['Baz', 'Qux']")]
    assert _onset(steps) == (1, "cosmetic")


def _page(extra: list[str]) -> str:
    """A browser's view: where it is (a URL line), then page text of 100 distinct words plus ``extra``."""
    return ("Here is a screenshot of [Library](https://library.example/catalogue). The viewport shows 40% of the page.\n"
            + " ".join([f"shelf{i}" for i in range(100)] + extra))


def _delegations(second_target: str) -> Episode:
    # orchestrator -> browser agent; the agent's own action follows, its reply echoed in the delegation's result
    steps = []
    for instruction, target, page in (
            ("Please open the catalogue and find the opening hours of the library.", "Catalogue", _page([])),
            ("Please find the opening hours of the library in its catalogue page.", second_target,
             _page([f"hours{i}" for i in range(16)]))):
        steps.append(("Browser", {"instruction": instruction}, f"I clicked '{target}'.\n\n{page}"))
        steps.append(("click", {"target": target}, page))
    return linear_episode("d", steps)


def test_new_action_on_a_known_page_is_judged_without_the_screen_noise_allowance():
    # Re-worded instruction, same page, 16 new words in ~135 (12%): after a click on a control
    # never clicked before, that is the click's effect, not OCR noise ...
    assert propose(_delegations("Opening hours"))[1].onset is None
    # ... while the same change after re-clicking the same control is screen noise.
    assert propose(_delegations("Catalogue"))[1].onset == 2


def test_think_notes_are_never_judged():
    assert _onset([("think", {"t": "plan the trip"}, ""), ("think", {"t": "plan the trip now"}, "")]) == (None, None)


def test_call_after_a_successful_write_is_not_a_loop():
    steps = [("get_order", {"order": "A"}, "status open"), ("cancel_order", {"order": "A"}, "ok"),
             ("get_order", {"order": "A"}, "status open")]
    assert _onset(steps) == (None, None)


def test_repeat_without_result_of_a_fulfilled_request():
    ep = linear_episode("e", [("ask", {"q": "x"}, "answer")])
    ep.add(ToolNode("c1", "c0", ToolCall("ask", {"q": "x"}, "c1"), None))
    _, p = propose(ep)
    assert p.onset == 1 and p.evidence[0]["note"] == "no result recorded"
    assert p.confidence < propose(linear_episode("f", [("ask", {"q": "x"}, "a"), ("ask", {"q": "x"}, "a")]))[1].confidence


def test_repeat_of_a_request_that_never_got_a_reply_is_not_judged_fulfilled():
    # Both delegations ran without a recorded reply: nothing says the request was ever
    # fulfilled, so the second is not "no reply to a request already fulfilled".
    ep = Episode("u")
    ep.add(ToolNode("a", None, ToolCall("ask", {"q": "x"}, "a"), UNRECORDED))
    ep.add(ToolNode("b", "a", ToolCall("ask", {"q": "x"}, "b"), UNRECORDED))
    assert propose(ep)[1].onset is None
    # ... while an unrecorded re-issue of an answered request is one.
    ep.add(ToolNode("c", "b", ToolCall("ask", {"q": "y"}, "c"), Observation("answer y", False)))
    ep.add(ToolNode("d", "c", ToolCall("ask", {"q": "y"}, "d"), UNRECORDED))
    _, p = propose(ep)
    assert p.onset == 3 and p.evidence[0]["note"] == "no result recorded"


def test_tree_branches_judged_on_their_own_path():
    # root -> a ; root's child b repeats a only on the same path
    ep = Episode("t")
    ep.add(ToolNode("a", None, ToolCall("s", {"q": 1}, "a"), Observation("r", False)))
    ep.add(ToolNode("b", "a", ToolCall("s", {"q": 1}, "b"), Observation("r", False)))
    ep.add(ToolNode("c", None, ToolCall("s", {"q": 1}, "c"), Observation("r", False)))  # another root: first on its path
    labels, p = propose(ep)
    assert labels["b"].loop and not labels["a"].loop and not labels["c"].loop
    assert p.onset == 1


def test_every_call_labelled_and_deterministic(tmp_path):
    eps = [linear_episode("e1", [("s", {"q": 1}, "r"), ("s", {"q": 1}, "r")]), linear_episode("e2", [("s", {"q": 2}, "r")])]
    write_trace(tmp_path / "in.jsonl", eps)
    label_traces(tmp_path / "in.jsonl", tmp_path / "a.jsonl", tmp_path / "ra.json")
    label_traces(tmp_path / "in.jsonl", tmp_path / "b.jsonl", tmp_path / "rb.json")
    assert (tmp_path / "a.jsonl").read_bytes() == (tmp_path / "b.jsonl").read_bytes()
    assert (tmp_path / "ra.json").read_bytes() == (tmp_path / "rb.json").read_bytes()
    out = read_trace(tmp_path / "a.jsonl").episodes
    assert all(n.label is not None for e in out for n in e.tool_nodes())
    review = json.loads((tmp_path / "ra.json").read_text())["traces"]
    assert {t["episode"] for t in review} == {"e1", "e2"}
    e1 = next(t for t in review if t["episode"] == "e1")
    assert e1["onset"] == 1 and e1["evidence"][0]["repeats"] == 0 and e1["evidence"][0]["similarity"] == 1.0
    assert e1["calls_sha1"] == calls_sha1(eps[0])


def test_labels_file_errors(tmp_path):
    (tmp_path / "bad.json").write_text("{")
    with pytest.raises(LabelsError, match="not valid JSON"):
        read_labels(tmp_path / "bad.json")
    write_labels(tmp_path / "l.json", [{"calls_sha1": "x", "loops": True}, {"calls_sha1": "y", "loops": False}])
    good, problems = read_labels(tmp_path / "l.json")
    assert len(good) == 1 and len(problems) == 1 and "onset" in problems[0]


def test_human_labels_survive_a_second_run(tmp_path):
    ep = linear_episode("e", [("s", {"q": 1}, "r"), ("s", {"q": 1}, "r"), ("t", {}, "x")])
    write_trace(tmp_path / "in.jsonl", [ep])
    write_labels(tmp_path / "labels.json", [{"calls_sha1": calls_sha1(ep), "loops": True, "onset": 2, "kind": "drift",
                                             "decision": "corrected", "source": "human"}])
    run = label_traces(tmp_path / "in.jsonl", tmp_path / "h.jsonl", labels_path=tmp_path / "labels.json")
    assert run.imported == 1
    again = label_traces(tmp_path / "h.jsonl", tmp_path / "h2.jsonl")
    assert again.human == 1
    out = read_trace(tmp_path / "h2.jsonl").episodes[0]
    assert [n.label.loop for n in out.tool_nodes()] == [False, False, True]
    assert out.tool_nodes()[2].label.kind == "drift" and out.meta["label_source"] == "human"


def test_agreement_with_hand_labels_on_tau_bench():
    # τ-bench's dev traces ship with the package (scenarios/data/real), labels and all.
    from scenarios.realsuite import load_suite

    eps = [e for e in load_suite("real-dev").episodes if e.meta["source"] == "tau-bench-airline-gpt4o"]
    assert len(eps) == 100
    agree = 0
    for ep in eps:
        hand = next((i for i, n in enumerate(ep.tool_nodes()) if n.label.loop), None)
        agree += (propose(ep)[1].onset is None) == (hand is None)
    assert agree >= 90
