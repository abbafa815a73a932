"""A user's detector plugs in by ``module:Class`` or through the entry-point group, and can run the conformance suite.

The fake third-party package lives in ``tests/fixtures/fake_plugin``; it is made
discoverable for one test by putting it on ``sys.path`` next to a ``dist-info`` folder
written from its own ``pyproject.toml`` — no pip, no network.
"""
import json

import pytest
from click.testing import CliRunner

from detectors import registry
from detectors.registry import DetectorNotFound, available, make_detector
from detectors.testing import check_detector
from sim.cli import main



def test_entry_point_plugin_is_found_by_name(installed):
    assert "repeat_counter" in available()
    det = make_detector("repeat_counter", limit=3)
    assert type(det).__name__ == "RepeatCounter" and det.limit == 3 and det.name == "repeat_counter"


def test_without_the_dist_info_the_name_is_unknown(on_path):
    registry._entry_points.cache_clear()
    try:
        with pytest.raises(DetectorNotFound, match="unknown detector 'repeat_counter'"):
            make_detector("repeat_counter")
    finally:
        registry._entry_points.cache_clear()


def test_module_class_plugin_and_its_conformance(on_path):
    det = make_detector("fake_loopbench_plugin:RepeatCounter", limit=2)
    assert check_detector(det).failures == []


def run_cli(*args):
    return CliRunner().invoke(main, list(args), catch_exceptions=False)


@pytest.mark.parametrize("detectors, param", [
    ("mine=fake_loopbench_plugin:RepeatCounter", "mine.limit=4"),
    ("fake_loopbench_plugin:RepeatCounter", "fake_loopbench_plugin:RepeatCounter.limit=4"),
])
def test_cli_runs_a_module_class_detector_with_parameters(on_path, tmp_path, detectors, param):
    out = tmp_path / "run"
    r = run_cli("run", "--suite", "quick", "--families", "stale,healthy", "--episodes", "2", "--mode", "open",
                "--detectors", f"exact,{detectors}", "--param", param, "--out", str(out), "--no-progress")
    assert r.exit_code == 0, r.output
    manifest = json.loads((out / "manifest.json").read_text())
    mine = manifest["detectors"][1]
    assert mine["class"] == "fake_loopbench_plugin:RepeatCounter" and mine["params"] == {"limit": 4}


def test_cli_runs_an_entry_point_detector(installed, tmp_path):
    r = run_cli("run", "--suite", "quick", "--families", "stale", "--episodes", "2", "--mode", "open",
                "--detectors", "repeat_counter", "--param", "repeat_counter.limit=3", "--out", str(tmp_path / "r"), "--no-progress")
    assert r.exit_code == 0, r.output
    assert "repeat_counter" in (tmp_path / "r" / "metrics.csv").read_text()


def test_cli_rejects_a_parameter_the_plugin_does_not_take(on_path):
    r = run_cli("run", "--suite", "quick", "--detectors", "mine=fake_loopbench_plugin:RepeatCounter",
                "--param", "mine.nope=1", "--no-progress")
    assert r.exit_code == 2 and "no parameter(s) nope" in r.output
