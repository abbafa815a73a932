"""The ``bench/`` scripts import only what the packages still provide.

Benchmark scripts are run by hand, not by the suite, so a module that moved (as
``sim.runner`` did to ``sim.execute.runner``) breaks them silently. Every
``from <our package> import name`` in them, at any depth (imports inside functions
included), must resolve.
"""
from __future__ import annotations

import ast
import importlib
import importlib.util
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
OURS = ("sim", "scenarios", "detectors", "adapters")
SCRIPTS = sorted((ROOT / "bench").glob("*.py"))


def our_imports(path: Path) -> list[tuple[int, str, list[str]]]:
    out = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module and node.module.split(".")[0] in OURS:
            out.append((node.lineno, node.module, [a.name for a in node.names]))
        elif isinstance(node, ast.Import):
            out.extend((node.lineno, a.name, []) for a in node.names if a.name.split(".")[0] in OURS)
    return out


def test_there_are_bench_scripts():
    assert len(SCRIPTS) >= 5


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: p.name)
def test_bench_script_imports_resolve(script: Path):
    missing = []
    for line, module, names in our_imports(script):
        try:
            mod = importlib.import_module(module)
        except ImportError as exc:
            missing.append(f"{script.name}:{line}: {module} ({exc})")
            continue
        missing += [f"{script.name}:{line}: {module}.{n}" for n in names if n != "*" and not hasattr(mod, n)
                    and importlib.util.find_spec(f"{module}.{n}") is None]
    assert not missing, "bench scripts import what no longer exists:\n" + "\n".join(missing)
