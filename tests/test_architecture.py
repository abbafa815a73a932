"""The layout's rules, enforced: import-linter's contracts (pyproject.toml), no import cycle
between modules (function-level imports included), no private name imported across modules."""
from __future__ import annotations

import ast
import shutil
import subprocess
import sys
from pathlib import Path

import grimp
import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("detectors", "scenarios", "sim", "adapters")


def test_import_linter_contracts_are_kept():
    exe = shutil.which("lint-imports") or str(Path(sys.executable).with_name("lint-imports"))
    proc = subprocess.run([exe, "--no-cache"], cwd=ROOT, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    assert "0 broken" in proc.stdout


def _cycles(graph) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan, iterative)."""
    modules = sorted(graph.modules)
    edges = {m: sorted(graph.find_modules_directly_imported_by(m)) for m in modules}
    index, low, on_stack, stack, out = {}, {}, set(), [], []
    counter = [0]
    for root in modules:
        if root in index:
            continue
        work = [(root, 0)]
        while work:
            node, i = work.pop()
            if i == 0:
                index[node] = low[node] = counter[0]
                counter[0] += 1
                stack.append(node)
                on_stack.add(node)
            recurse = False
            for j in range(i, len(edges[node])):
                nxt = edges[node][j]
                if nxt not in index:
                    work.append((node, j + 1))
                    work.append((nxt, 0))
                    recurse = True
                    break
                if nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
            if recurse:
                continue
            if work and low[node] < low[work[-1][0]]:
                low[work[-1][0]] = low[node]
            if low[node] == index[node]:
                comp = []
                while True:
                    m = stack.pop()
                    on_stack.discard(m)
                    comp.append(m)
                    if m == node:
                        break
                if len(comp) > 1:
                    out.append(sorted(comp))
    return out


def test_no_import_cycle_between_modules():
    graph = grimp.build_graph(*PACKAGES, cache_dir=None)
    # A package's __init__ importing its own submodules to register them is not a cycle of design.
    for pkg in list(graph.modules):
        for child in graph.find_children(pkg) if pkg in graph.modules else ():
            if graph.direct_import_exists(importer=pkg, imported=child):
                graph.remove_import(importer=pkg, imported=child)
    assert _cycles(graph) == []


def _package_files():
    for pkg in PACKAGES:
        yield from sorted((ROOT / pkg).rglob("*.py"))


def _module_name(path: Path) -> str:
    rel = path.relative_to(ROOT).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


@pytest.mark.parametrize("path", list(_package_files()), ids=lambda p: str(p.relative_to(ROOT)))
def test_no_private_name_imported_from_another_module(path):
    tree = ast.parse(path.read_text(encoding="utf-8"))
    here = _module_name(path)
    bad = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0 and node.module.split(".")[0] in PACKAGES:
            if node.module == here:
                continue
            bad += [f"line {node.lineno}: from {node.module} import {a.name}" for a in node.names
                    if a.name.startswith("_") and not a.name.startswith("__")]
    assert bad == []
