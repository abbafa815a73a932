"""``progress_guard``'s ``skip_layers``: a layer switched off, for every tool or for one tool, and nothing else."""
import pytest

from detectors.guard import LoopGuard
from detectors.params import ParamError, check_params
from detectors.progress_guard import LAYERS, ProgressGuard
from detectors.protocol import Verdict


def _same_error(g: LoopGuard, tool: str = "book") -> Verdict:
    for i in range(2):  # the same refusal for two cards: the rule calls a third card a loop
        g.record(tool, {"payment": f"gift_{i}"}, "Error: gift card balance is not enough", error=True)
    return g.check(tool, {"payment": "gift_9"}).verdict


def _signature(g: LoopGuard, tool: str = "search") -> Verdict:
    g.record(tool, {"query": "Q3 revenue"}, "[D1] Revenue Q3 was 4.1M")
    return g.check(tool, {"query": "Q3 revenue"}).verdict


def _drift(g: LoopGuard, tool: str = "list_items") -> Verdict:
    g.record(tool, {"limit": 9}, "No items in the archive")  # nothing found: the next number is drift
    return g.check(tool, {"limit": 10}).verdict


def _no_progress(g: LoopGuard, tool: str = "lookup_record") -> Verdict:
    g.record("get_index", {"id": "start"}, "records: alpha, beta, gamma")
    for name in ("alpha", "beta", "gamma"):  # three different calls, each answered with nothing new
        g.record(tool, {"name": name}, "records: alpha, beta, gamma")
    return g.check(tool, {"name": "delta"}).verdict


CASES = {"same_error": _same_error, "signature": _signature, "drift": _drift, "no_progress": _no_progress}


@pytest.mark.parametrize("layer", sorted(CASES))
def test_skipping_a_layer_silences_that_layer_and_no_other(layer):
    assert CASES[layer](LoopGuard(semantic=False)) is Verdict.NUDGE  # the case is that layer's finding
    assert CASES[layer](LoopGuard(semantic=False, skip_layers=[layer])) is Verdict.ALLOW
    for other in CASES:
        if other != layer:
            assert CASES[other](LoopGuard(semantic=False, skip_layers=[layer])) is not Verdict.ALLOW, other


def test_a_layer_can_be_skipped_for_one_tool():
    overrides = {"book": {"skip_layers": ["same_error"]}}
    assert _same_error(LoopGuard(semantic=False, tool_overrides=overrides), "book") is Verdict.ALLOW
    assert _same_error(LoopGuard(semantic=False, tool_overrides=overrides), "pay") is Verdict.NUDGE
    # an override's empty list switches the layer back on for that tool
    both = {"book": {"skip_layers": []}}
    assert _same_error(LoopGuard(semantic=False, skip_layers=["same_error"], tool_overrides=both), "book") is Verdict.NUDGE


def test_the_event_names_a_layer_that_skip_layers_takes():
    g = LoopGuard(semantic=False)
    g.record("search", {"query": "Q3 revenue"}, "[D1] Revenue Q3")
    d = g.check("search", {"query": "Q3 revenue"})
    assert d.events[0][1]["layer"] in LAYERS


def test_an_unknown_layer_is_refused_with_the_layers_it_could_be():
    with pytest.raises(ParamError, match="skip_layers"):
        check_params(ProgressGuard, {"skip_layers": ["signatures"]})
    check_params(ProgressGuard, {"skip_layers": list(LAYERS)})
    with pytest.raises(ValueError, match=r"tool 'book': skip_layers .*'typo'"):  # when the guard is built
        LoopGuard(semantic=False, tool_overrides={"book": {"skip_layers": ["typo"]}})


def test_a_typo_in_a_per_tool_skip_layers_is_one_cli_line_before_any_work(tmp_path):
    from click.testing import CliRunner

    from sim.cli import main

    cfg = tmp_path / "guard.toml"
    cfg.write_text('[detectors.progress_guard.tool_overrides.search]\nskip_layers = ["typo"]\n')
    r = CliRunner().invoke(main, ["run", "--suite", "quick", "--families", "stale", "--episodes", "1", "--mode", "open",
                                  "--detectors", "progress_guard", "--config", str(cfg), "--out", str(tmp_path / "run"),
                                  "--no-progress"])
    assert r.exit_code == 2 and "tool 'search': skip_layers must name layers among" in r.stderr
    assert not (tmp_path / "run").exists()
