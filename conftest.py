"""Collects README.md and docs/*.md: every code block in them runs (tests/docblocks.py)."""
from sybil import Sybil
from sybil.parsers.markdown import SkipParser

from tests.docblocks import FencedBlocks, setup, teardown

pytest_collect_file = Sybil(
    parsers=[SkipParser(), FencedBlocks()],
    patterns=["README.md", "docs/*.md"],
    setup=setup,
    teardown=teardown,
).pytest()
