"""Named suites: data files saying which families, how many episodes, which seed.

A suite is a TOML file in ``scenarios/suites/`` (or any path). Keys: ``name``,
``description``, ``seed``, ``episodes`` (per family), ``mode`` (open | closed | both),
optional ``families`` (default: every registered family) and ``detectors`` (default:
every registered detector), ``[family_params.NAME]`` tables, a ``[family_defaults]`` table
(parameters for every family that has them, under its own ``[family_params.NAME]``:
``blip_share = 0`` for a suite without blips), ``[detector_params.NAME]``
tables (parameters a suite gives its listed detectors unless the user sets them), and a
``[family_weights]`` table: a family of weight ``w`` gets ``round(w * episodes)`` episodes
(at least one), so that the suite's mix of loops can follow what real traces show.

A *real* suite (``real-dev``) is labelled real traces instead of generated scenarios
(:mod:`scenarios.realsuite`): its families are the corpora, it is scored in open loop only,
and its episodes are loaded, not generated.
"""
from __future__ import annotations

import tomllib
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

from . import injected_suite, realsuite
from .base import FAMILIES, make_scenario, registered


#: The keys a suite file may hold (module docstring).
SUITE_KEYS = frozenset({"name", "description", "seed", "episodes", "mode", "families", "detectors", "family_params",
                        "detector_params", "family_weights", "family_defaults"})


class SuiteError(ValueError):
    """A suite that cannot be used, with a one-line reason."""


@dataclass
class Suite:
    name: str
    description: str = ""
    seed: int = 0
    episodes: int = 10
    mode: str = "both"
    families: list[str] = field(default_factory=list)
    detectors: list[str] = field(default_factory=list)
    family_params: dict[str, dict[str, Any]] = field(default_factory=dict)
    detector_params: dict[str, dict[str, Any]] = field(default_factory=dict)
    #: Labelled real traces (scenarios.realsuite), not generated scenarios.
    real: bool = False
    family_weights: dict[str, float] = field(default_factory=dict)


def episode_count(episodes: int, weight: float) -> int:
    """Episodes of a family of ``weight`` in a suite of ``episodes`` per family."""
    return max(1, round(episodes * weight))


def suite_names() -> list[str]:
    files = [p.name[:-5] for p in resources.files("scenarios").joinpath("suites").iterdir() if p.name.endswith(".toml")]
    return sorted(files + list(realsuite.SUITES) + list(injected_suite.SUITES))


def real_suite(name: str) -> Suite:
    """The suite of labelled real traces ``name``: one family per corpus, open loop."""
    what = "loops injected into clean real agent traces" if injected_suite.is_injected(name) else "labelled real agent traces"
    return Suite(name=name, description=f"{what} ({name})", mode="open",
                 families=injected_suite.families(name), real=True, episodes=0)


def load_suite(name_or_path: str) -> Suite:
    if name_or_path in realsuite.SUITES or injected_suite.is_injected(name_or_path):
        return real_suite(name_or_path)
    registered()

    path = Path(name_or_path)
    if path.suffix == ".toml" and path.exists():
        text, where = path.read_text(), str(path)
    else:
        res = resources.files("scenarios").joinpath("suites", f"{name_or_path}.toml")
        if not res.is_file():
            raise SuiteError(f"unknown suite {name_or_path!r} (known: {', '.join(suite_names())}; or a .toml path)")
        text, where = res.read_text(), f"suite {name_or_path!r}"
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise SuiteError(f"{where}: {exc}") from None
    unknown_keys = sorted(set(data) - SUITE_KEYS)
    if unknown_keys:  # a misspelt table would otherwise be ignored without a word
        raise SuiteError(f"{where}: unknown key(s) {', '.join(unknown_keys)} (known: {', '.join(sorted(SUITE_KEYS))})")
    fams = data.get("families") or sorted(FAMILIES)
    unknown = [f for f in fams if f not in FAMILIES]
    if unknown:
        raise SuiteError(f"{where}: unknown families {', '.join(unknown)}")
    suite = Suite(
        name=str(data.get("name", path.stem)),
        description=str(data.get("description", "")),
        seed=int(data.get("seed", 0)),
        episodes=int(data.get("episodes", 10)),
        mode=str(data.get("mode", "both")),
        families=list(fams),
        detectors=list(data.get("detectors", [])),
        family_params={k: dict(v) for k, v in data.get("family_params", {}).items()},
        detector_params={k: dict(v) for k, v in data.get("detector_params", {}).items() if isinstance(v, dict)},
    )
    for fam, w in data.get("family_weights", {}).items():
        if fam not in FAMILIES:
            raise SuiteError(f"{where}: family_weights for unknown family {fam!r}")
        if isinstance(w, bool) or not isinstance(w, (int, float)) or w <= 0:
            raise SuiteError(f"{where}: family_weights.{fam} must be a positive number, not {w!r}")
        suite.family_weights[fam] = float(w)
    if suite.mode not in ("open", "closed", "both"):
        raise SuiteError(f"{where}: mode must be open, closed or both")
    _apply_family_defaults(suite, data.get("family_defaults", {}), where)
    for fam, params in suite.family_params.items():
        if fam not in FAMILIES:
            raise SuiteError(f"{where}: family_params for unknown family {fam!r}")
        bad = set(params) - set(FAMILIES[fam].defaults)
        if bad:
            raise SuiteError(f"{where}: family {fam!r} has no parameter(s) {', '.join(sorted(bad))}")
        for k, v in params.items():
            if isinstance(v, list):
                params[k] = tuple(v)
        try:  # a value the family cannot use fails here, in one line, not mid-run
            make_scenario(fam, 0, suite.seed, **params)
        except (ValueError, TypeError, IndexError) as exc:
            raise SuiteError(f"{where}: family_params.{fam}: {exc}") from None
    return suite


def _apply_family_defaults(suite: Suite, defaults: Any, where: str) -> None:
    """``[family_defaults]``: each parameter given to every registered family that has it,
    below the family's own ``[family_params.NAME]`` values."""
    if not isinstance(defaults, dict):
        raise SuiteError(f"{where}: family_defaults must be a table of parameters")
    for key in defaults:
        if not any(key in info.defaults for info in FAMILIES.values()):
            raise SuiteError(f"{where}: family_defaults.{key}: no family has this parameter")
    for fam, info in FAMILIES.items():
        given = {k: v for k, v in defaults.items() if k in info.defaults}
        if given:
            suite.family_params[fam] = {**given, **suite.family_params.get(fam, {})}
