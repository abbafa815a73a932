"""Test settings: a derandomised hypothesis profile for CI, the default one locally; the fake
third-party package (tests/fixtures/fake_plugin) as an importable or as an installed plug-in."""
import os
import sys
import tomllib
from pathlib import Path

import pytest

from hypothesis import HealthCheck, settings

settings.register_profile("ci", derandomize=True, max_examples=60, deadline=None,
                          suppress_health_check=[HealthCheck.too_slow])
settings.register_profile("dev", max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("ci" if os.environ.get("CI") else os.environ.get("HYPOTHESIS_PROFILE", "dev"))


PLUGIN = Path(__file__).resolve().parent / "fixtures" / "fake_plugin"


@pytest.fixture
def on_path(monkeypatch):
    """The fake package importable by ``module:Class``, but not installed (no entry points)."""
    monkeypatch.syspath_prepend(str(PLUGIN))
    yield
    for name in [m for m in sys.modules if m.startswith("fake_loopbench_plugin")]:
        sys.modules.pop(name, None)


@pytest.fixture
def installed(tmp_path, on_path, monkeypatch):
    """The fake package as pip would leave it: a dist-info with METADATA and entry_points.txt,
    written from its own pyproject.toml (no pip, no network). Its detector and its scenario
    families are found through the entry-point groups, then forgotten after the test."""
    from detectors import registry
    from scenarios import base

    meta = tomllib.loads((PLUGIN / "pyproject.toml").read_text())["project"]
    dist = tmp_path / f"{meta['name'].replace('-', '_')}-{meta['version']}.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {meta['name']}\nVersion: {meta['version']}\n")
    lines = []
    for group, eps in meta["entry-points"].items():
        lines.append(f"[{group}]")
        lines += [f"{name} = {target}" for name, target in eps.items()]
    (dist / "entry_points.txt").write_text("\n".join(lines) + "\n")
    families_before = dict(base.registered())
    monkeypatch.syspath_prepend(str(tmp_path))
    registry._entry_points.cache_clear()
    yield
    registry._entry_points.cache_clear()
    base.FAMILIES.clear()
    base.FAMILIES.update(families_before)
    base._LOADED[:] = [n for n in base._LOADED if n == "builtin"]
