"""Declared tool effects from the TOML configuration, through the CLI (docs/detectors.md)."""
import csv
import json

from click.testing import CliRunner

from sim.cli import main


def test_a_tools_table_declares_effects_for_a_run(tmp_path):
    cfg = tmp_path / "effects.toml"
    cfg.write_text('[tools.notes]\ncommand_arg = "action"\nread_commands = ["show"]\n\n'
                   '[tools.edit]\neffects = "str_replace_editor"\n')
    out = tmp_path / "run"
    r = CliRunner().invoke(main, ["run", "--suite", "quick", "--families", "editor_edit_test,editor_rerun",
                                  "--detectors", "progress_guard", "--config", str(cfg), "--mode", "open",
                                  "--out", str(out), "--no-progress", "--no-report", "--workers", "1", "--json"])
    assert r.exit_code == 0, r.output
    rows = {m["family"]: m for m in csv.DictReader((out / "metrics.csv").open())}
    assert rows["editor_edit_test"]["fp"] == "0" and rows["editor_rerun"]["miss"] == "0"
    assert int(rows["editor_rerun"]["tp"]) > 0 and json.loads(r.stdout)["metrics"]


def test_a_bad_declaration_is_one_line_naming_tool_and_key(tmp_path):
    cfg = tmp_path / "bad.toml"
    cfg.write_text('[detectors.progress_guard.tool_overrides.notes]\nwrites = "yes"\n')
    r = CliRunner().invoke(main, ["run", "--suite", "quick", "--detectors", "progress_guard", "--config", str(cfg),
                                  "--out", str(tmp_path / "run"), "--no-progress"])
    assert r.exit_code == 2, r.output
    lines = [line for line in r.stderr.splitlines() if line.startswith("loopbench: error")]
    assert len(lines) == 1 and "tool 'notes': writes must be true or false" in lines[0]
    assert "Traceback" not in r.output
