"""A user's scenario families plug in through the ``loopbench.families`` entry-point group, and
are listed, generated and scored like the built-ins, each under its own kind."""
from click.testing import CliRunner

from scenarios.base import healthy_families, loop_families, make_scenario, registered
from sim.cli import main
from sim.play.harness import generate
from sim.play.validate import scored_looping_paths


def test_plugin_families_register_with_their_kind(installed):
    assert "reread_loop" in loop_families() and "many_reads" in healthy_families()
    assert registered()["many_reads"].looping is False
    ep = generate(make_scenario("reread_loop", 0, 1))
    assert scored_looping_paths(ep)
    assert not scored_looping_paths(generate(make_scenario("many_reads", 0, 1)))


def test_without_the_plugin_its_families_are_unknown(on_path):
    assert "reread_loop" not in registered()


def test_plugin_family_and_detector_in_list_and_scoreboard(installed, tmp_path):
    runner = CliRunner()
    listed = runner.invoke(main, ["list"], catch_exceptions=False).output
    assert "repeat_counter" in listed
    lines = {ln.split()[0]: ln for ln in listed.splitlines() if ln.startswith("  ")}
    assert "loop" in lines["reread_loop"].split()[1] and "healthy" in lines["many_reads"].split()[1]
    out = tmp_path / "run"
    r = runner.invoke(main, ["run", "--suite", "quick", "--families", "reread_loop,many_reads", "--episodes", "3",
                             "--mode", "open", "--detectors", "exact,repeat_counter", "--out", str(out),
                             "--no-progress"], catch_exceptions=False)
    assert r.exit_code == 0, r.output
    board = (out / "scoreboard.md").read_text()
    loops = board.split("## Loop families")[1].split("##")[0]
    healthy = board.split("## Healthy families")[1].split("##")[0]
    assert "reread_loop" in loops and "many_reads" not in loops
    assert "many_reads" in healthy and "reread_loop" not in healthy
    assert "repeat_counter" in board


def test_entry_points_are_read_again_only_when_the_import_path_changes(tmp_path, monkeypatch):
    """Reading them opens every installed package's metadata (~5 ms); the validator asks per episode."""
    import importlib.metadata
    import os

    from scenarios import base

    reads = []
    real = importlib.metadata.entry_points
    monkeypatch.setattr(importlib.metadata, "entry_points", lambda **kw: reads.append(kw) or real(**kw))
    monkeypatch.syspath_prepend(str(tmp_path))
    registered()
    registered()
    assert len(reads) == 1
    (tmp_path / "new_plugin-1.0.dist-info").mkdir()  # what installing a package into a folder on the path does
    os.utime(tmp_path, ns=(0, os.stat(tmp_path).st_mtime_ns + 1))  # even within the clock's resolution
    registered()
    assert len(reads) == 2
    monkeypatch.syspath_prepend(str(tmp_path / "other"))
    registered()
    assert len(reads) == 3
    assert set(base.FAMILIES) >= {"stale", "healthy"}
