"""A run's scoring units, kept for the report that follows it in the same process."""
import pytest
from click.testing import CliRunner

import sim.scoring.trace_units as tu
from scenarios.suites import load_suite
from scenarios.trace import read_trace, write_trace
from sim.cli import main
from sim.execute.runner import build_scenarios, generate_episodes
from sim.scoring.outcomes import scoring_units


@pytest.fixture(scope="module")
def episodes():
    s = load_suite("quick")
    return generate_episodes(build_scenarios(s.families, s.episodes, s.seed, s.family_params, s.family_weights))


def _unread(monkeypatch):
    def refuse(path):
        raise AssertionError(f"{path} was read")

    monkeypatch.setattr(tu, "read_trace", refuse)


def _written_and_kept(path, episodes, monkeypatch):
    """``episodes`` written to ``path`` and their units kept for it; reading a trace then fails."""
    write_trace(path, episodes)
    units = {ep.id: scoring_units(ep) for ep in episodes}
    tu.keep_trace_units(path, units)
    _unread(monkeypatch)
    return units


def test_kept_units_are_handed_out_without_reading_the_file(tmp_path, episodes, monkeypatch):
    path = tmp_path / "trace.jsonl"
    units = _written_and_kept(path, episodes, monkeypatch)
    assert tu.trace_units(path) == units
    # and they are the file's own units, in its order
    monkeypatch.undo()
    from_file = {ep.id: scoring_units(ep) for ep in read_trace(path).episodes}
    assert list(from_file) == list(units) and from_file == units


def test_a_file_written_again_is_read_again(tmp_path, episodes):
    path = tmp_path / "trace.jsonl"
    write_trace(path, episodes)
    tu.keep_trace_units(path, {ep.id: scoring_units(ep) for ep in episodes})
    write_trace(path, episodes[:3])  # same path, other content: another identity
    assert list(tu.trace_units(path)) == [ep.id for ep in episodes[:3]]


def test_another_file_with_the_same_content_is_read(tmp_path, episodes, monkeypatch):
    a, b = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    write_trace(b, episodes)
    _written_and_kept(a, episodes, monkeypatch)
    with pytest.raises(AssertionError, match="was read"):
        tu.trace_units(b)


def test_a_prefix_renames_the_episodes(tmp_path, episodes, monkeypatch):
    path = tmp_path / "trace.jsonl"
    units = _written_and_kept(path, episodes, monkeypatch)
    got = tu.trace_units(path, "r1:")
    assert list(got) == ["r1:" + k for k in units]
    assert all(u.episode == k and u.looping == units[k[3:]].looping for k, u in got.items())
    assert tu.trace_units(path) == units  # the kept units themselves are unchanged


def test_the_report_after_a_run_equals_a_report_of_its_folder(tmp_path, monkeypatch):
    out = tmp_path / "run"
    _unread(monkeypatch)  # the report at the end of the run takes the run's units
    r = CliRunner().invoke(main, ["run", "--suite", "quick", "--detectors", "exact,no_progress", "--out", str(out),
                                  "--no-progress"], catch_exceptions=False)
    assert r.exit_code == 0, r.output
    assert "report not written" not in r.output and (out / "report.md").is_file()
    monkeypatch.undo()
    monkeypatch.setattr(tu, "_kept", None)  # as `loopbench report` in a new process
    again = tmp_path / "again"
    r = CliRunner().invoke(main, ["report", str(out), "--out", str(again)], catch_exceptions=False)
    assert r.exit_code == 0, r.output
    for name in ("thresholds.csv", "threshold_curves.csv", "delta_sensitivity.csv", "intervals.csv", "paired.csv"):
        assert (again / name).read_bytes() == (out / name).read_bytes(), name
