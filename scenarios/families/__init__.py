"""Scenario families: importing this package registers every built-in family."""
from . import healthy, loops  # noqa: F401  (registration by import)
