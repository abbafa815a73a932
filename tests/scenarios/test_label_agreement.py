"""``loopbench agree``: how far two labellings of the same traces agree."""
from __future__ import annotations

import json

from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

from scenarios.label_agreement import Reading, compare, read_side
from scenarios.label_files import write_labels
from scenarios.labeling import calls_sha1
from scenarios.trace import write_trace
from scenarios.tree import linear_episode
from sim.cli import main
from sim.scoring.uncertainty import kappa_interval


def _r(name: str, onset: int | None, kind: str | None = "stale", ambiguous: bool = False, n: int | None = 30) -> Reading:
    return Reading(name, onset is not None, onset, kind if onset is not None else None, ambiguous, n, True)


def test_the_figures_of_a_known_table():
    """Twelve traces both call loops (one a call apart, one of another kind), ten both clean, one
    that only B calls a loop: κ by hand is (22/23 − chance) / (1 − chance), chance from the loop
    shares 12/23 and 13/23."""
    a = {f"l{i}": [_r(f"l{i}", 5)] for i in range(12)}
    b = {f"l{i}": [_r(f"l{i}", 5)] for i in range(12)}
    b["l0"] = [_r("l0", 6)]
    b["l1"] = [_r("l1", 5, "drift")]
    for i in range(10):
        a[f"c{i}"] = b[f"c{i}"] = [_r(f"c{i}", None)]
    a["x"], b["x"] = [_r("x", None)], [_r("x", 9, "drift")]
    ag = compare(a, b, window=0)
    pa, pb = 12 / 23, 13 / 23
    chance = pa * pb + (1 - pa) * (1 - pb)
    assert ag.compared == 23 and ag.table[(True, True)] == 12 and ag.table[(False, True)] == 1
    assert abs(ag.kappa - (22 / 23 - chance) / (1 - chance)) < 1e-12
    assert (ag.same_onset, ag.close_onset, ag.onset_gaps.count(1)) == (11, 11, 1)
    assert (ag.same_kind, ag.kinds_named) == (10, 11)
    assert sorted(r.name for r, _ in ag.disagreements) == ["l0", "l1", "x"]  # l1: the same onset, another kind
    assert compare(a, b, window=1).close_onset == 12


def test_ambiguous_empty_and_unmatched_traces_are_counted_apart():
    a = {"amb": [_r("amb", 3, ambiguous=True)], "empty": [_r("empty", None, n=0)], "only": [_r("only", None)],
         "twice": [_r("t1", 2), _r("t2", None)]}
    b = {"amb": [_r("amb", 3)], "empty": [_r("empty", None, n=0)], "twice": [_r("t1", 2)], "new": [_r("new", 1)]}
    ag = compare(a, b)
    assert (ag.ambiguous, ag.empty, ag.only_a, ag.only_b, ag.compared) == (1, 1, 2, 1, 1)
    assert ag.kappa is None  # one trace, both say it loops: chance agreement is already total


_SIDE = st.dictionaries(st.text("abcdef", min_size=1, max_size=4),
                        st.lists(st.tuples(st.one_of(st.none(), st.integers(0, 20)),
                                           st.sampled_from(["stale", "drift", None]), st.booleans()),
                                 min_size=1, max_size=2),
                        max_size=12)


def _side(raw) -> dict[str, list[Reading]]:
    return {k: [_r(k, onset, kind, amb) for onset, kind, amb in v] for k, v in raw.items()}


@settings(max_examples=200, deadline=None)
@given(_SIDE, _SIDE)
def test_agreement_is_symmetric_and_total_with_itself(raw_a, raw_b):
    a, b = _side(raw_a), _side(raw_b)
    ab, ba = compare(a, b), compare(b, a)
    assert ab.compared == ba.compared and ab.percent_agree == ba.percent_agree
    assert (ab.kappa is None) == (ba.kappa is None) and (ab.kappa is None or abs(ab.kappa - ba.kappa) < 1e-12)
    assert (ab.only_a, ab.only_b, ab.same_onset, ab.close_onset) == (ba.only_b, ba.only_a, ba.same_onset, ba.close_onset)
    assert ab.table[(True, False)] == ba.table[(False, True)]
    self_ag = compare(a, a)
    assert self_ag.disagreements == [] and self_ag.percent_agree in (None, 1.0)
    assert self_ag.kappa in (None, 1.0)


def _files(tmp_path):
    """A labelled trace (what ``loopbench label`` writes) and a person's labels file for it that
    disagrees on one trace."""
    eps = [linear_episode("e1", [("s", {"q": 1}, "r", False, False), ("s", {"q": 1}, "r", False, True)]),
           linear_episode("e2", [("s", {"q": 2}, "r", False, False), ("t", {}, "x", False, False)]),
           linear_episode("e3", [("s", {"q": 3}, "r", False, False), ("u", {}, "y", False, False)])]
    write_trace(tmp_path / "labelled.jsonl", eps)
    write_labels(tmp_path / "person.json", [
        {"episode": "e1", "calls_sha1": calls_sha1(eps[0]), "loops": True, "onset": 1, "kind": "stale"},
        {"episode": "e2", "calls_sha1": calls_sha1(eps[1]), "loops": True, "onset": 1, "kind": "drift"},
        {"episode": "e3", "calls_sha1": calls_sha1(eps[2]), "loops": False},
        {"episode": "gone", "calls_sha1": "0" * 40, "loops": False},
    ])
    return tmp_path / "labelled.jsonl", tmp_path / "person.json"


def test_a_labelled_trace_against_a_labels_file(tmp_path):
    trace, person = _files(tmp_path)
    readings, problems = read_side(trace)
    assert problems == [] and sum(len(v) for v in readings.values()) == 3
    res = CliRunner().invoke(main, ["agree", str(trace), str(person)])
    assert res.exit_code == 0, res.output
    assert "only in A: 0; only in B: 1" in res.output
    assert "agree on 2 of 3 (67 %)" in res.output
    assert "| e2 | clean | loop at call 1 (drift) |" in res.output
    res = CliRunner().invoke(main, ["agree", str(person), str(trace), "--json"])
    doc = json.loads(res.output)
    assert res.exit_code == 0 and doc["compared"] == 3 and doc["a_loop_b_clean"] == 1 and doc["same_onset"] == 1
    assert doc["kappa_lo"] <= doc["kappa"] <= doc["kappa_hi"]
    assert doc["disagreements"] == [{"trace": "e2", "a": {"loops": True, "onset": 1, "kind": "drift"},
                                     "b": {"loops": False, "onset": None, "kind": None}}]


def test_bad_input_is_one_line_and_exit_2(tmp_path):
    trace, person = _files(tmp_path)
    runner = CliRunner()
    res = runner.invoke(main, ["agree", str(tmp_path / "nope.json"), str(person)])
    assert res.exit_code == 2 and res.output.strip() == f"loopbench: error: {tmp_path / 'nope.json'}: no such file"
    (tmp_path / "broken.json").write_text('{"traces": 3}')
    res = runner.invoke(main, ["agree", str(tmp_path / "broken.json"), str(person)])
    assert res.exit_code == 2 and "'traces' list" in res.output and "Traceback" not in res.output
    write_labels(tmp_path / "other.json", [{"calls_sha1": "1" * 40, "loops": False}])
    res = runner.invoke(main, ["agree", str(tmp_path / "other.json"), str(person)])
    assert res.exit_code == 2 and "no trace in common" in res.output
    unlabelled = [linear_episode("e1", [("s", {"q": 1}, "r"), ("s", {"q": 1}, "r")]), linear_episode("e0", [])]
    write_trace(tmp_path / "raw.jsonl", unlabelled)
    res = runner.invoke(main, ["agree", str(tmp_path / "raw.jsonl"), str(person)])
    # a trace without labels: one line (an episode without calls is no labelled trace either)
    assert res.exit_code == 2 and res.output.count("\n") == 1, res.output
    assert "no labelled trace with a tool call in it (1 records skipped; the first:" in res.output
    # what is neither a labels file nor a trace: binary, an array, a labels file cut short, nested too deeply
    (tmp_path / "bin.dat").write_bytes(bytes(range(256)) * 4)
    (tmp_path / "arr.json").write_text("[1, 2]")
    (tmp_path / "cut.json").write_text((tmp_path / "person.json").read_text()[:120])
    (tmp_path / "deep.json").write_text('{"traces": ' + "[" * 100_000 + "]" * 100_000 + "}")
    for name, said in (("bin.dat", "not UTF-8 text"), ("arr.json", "the JSON is an array"),
                       ("cut.json", "not valid JSON"), ("deep.json", "nested too deeply")):
        res = runner.invoke(main, ["agree", str(tmp_path / name), str(person)])
        assert res.exit_code == 2 and res.output.count("\n") == 1 and said in res.output, (name, res.output)
        assert "Traceback" not in res.output


def test_traces_sharing_a_call_list_pair_by_name_and_text_stays_in_its_cells(tmp_path):
    """Two traces with the same calls, listed in another order by the other side, pair by their
    episode ids; a name or kind holding ``|`` or a line break stays inside its table cell; a kind
    that differs at the same onset is a disagreement too; ``"ambiguous": "false"`` is not true."""
    calls = [("s", {"q": 1}, "r", False, False), ("s", {"q": 1}, "r", False, True)]
    eps = [linear_episode("a|1", calls), linear_episode("a\n2", [c[:4] + (False,) for c in calls])]
    write_trace(tmp_path / "t.jsonl", eps)
    sha = calls_sha1(eps[0])
    write_labels(tmp_path / "p.json", [
        {"episode": "a\n2", "calls_sha1": sha, "loops": False, "ambiguous": "false"},
        {"episode": "a|1", "calls_sha1": sha, "loops": True, "onset": 1, "kind": "drift|x"},
    ])
    res = CliRunner().invoke(main, ["agree", str(tmp_path / "t.jsonl"), str(tmp_path / "p.json")])
    assert res.exit_code == 0, res.output
    assert "agree on 2 of 2 (100 %)" in res.output and "0 marked ambiguous" in res.output
    rows = [line for line in res.output.splitlines() if line.startswith("| a")]
    assert rows == ["| a\\|1 | loop at call 1 (stale) | loop at call 1 (drift\\|x) |"]


def test_a_one_record_trace_is_read_as_a_trace(tmp_path):
    """Every line of a trace is a JSON object, so a trace of one record parses as one object too:
    it is still read as a trace (it has no ``traces`` list), not refused as a broken labels file;
    its lone episode has no call, so there is nothing to compare in it."""
    import pytest

    from scenarios.label_agreement import LabelsError

    write_trace(tmp_path / "one.jsonl", [linear_episode("e", [])])
    assert len((tmp_path / "one.jsonl").read_text().splitlines()) == 1
    with pytest.raises(LabelsError, match="no labelled trace with a tool call in it"):
        read_side(tmp_path / "one.jsonl")


def test_kappa_interval_holds_the_point_and_is_deterministic():
    pairs = [(True, True)] * 12 + [(False, False)] * 10 + [(False, True)]
    ci = kappa_interval(pairs)
    ag = compare({str(i): [_r(str(i), 1 if a else None)] for i, (a, _) in enumerate(pairs)},
                 {str(i): [_r(str(i), 1 if b else None)] for i, (_, b) in enumerate(pairs)})
    assert ci is not None and ci[0] < ag.kappa <= ci[1] <= 1.0 and ci == kappa_interval(pairs)
    assert kappa_interval([(True, True)] * 5 + [(False, False)] * 5) == (1.0, 1.0)
    assert kappa_interval([]) is None and kappa_interval([(True, True)] * 4) is None  # one class: κ undefined
