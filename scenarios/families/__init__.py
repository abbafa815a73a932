"""Scenario families: importing this package registers every built-in family (the order of
the imports is the order families are listed in: the SPEC's first, then those modelled on
real traces)."""
from . import loops, healthy, real_loops, hard_negatives, shell_agent  # noqa: F401,I001  (registration by import)
from . import headroom  # noqa: F401,E402  (registration by import: the headroom families, last)
from . import coding_agent  # noqa: F401,E402  (registration by import: the multi-tool coding persona)
