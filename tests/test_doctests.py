"""The examples in the public modules' docstrings run, and show what they really print."""
import doctest
import importlib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
MODULES = sorted(
    ".".join(p.relative_to(ROOT).with_suffix("").parts)
    for pkg in ("detectors", "scenarios", "sim")
    for p in (ROOT / pkg).rglob("*.py")
    if ">>>" in p.read_text(encoding="utf-8")
)


def test_the_public_modules_have_examples():
    assert MODULES, "no docstring example found: the doctest collection is broken"


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name):
    module = importlib.import_module(name)
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    assert result.attempted > 0
    assert result.failed == 0
