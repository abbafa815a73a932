"""Scenario families: importing this package registers every built-in family."""
from . import hard_negatives, healthy, loops, real_loops, shell_agent  # noqa: F401  (registration by import)
