"""The ``loopbench`` command line: ``app`` holds the group and what commands share; each
command lives in a module of its own and registers itself on ``main`` when imported."""
from sim.cli.app import main
from sim.cli import families, gate, imports, label, listing, replay, report, run, tune  # noqa: F401,E402  (registration)
from sim.cli import adopt, inject  # noqa: F401,E402  (registration)

__all__ = ["main"]
