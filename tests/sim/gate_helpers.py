"""Detectors for the gate's tests: a deliberately worse variant of ``exact``, named as module:Class."""
from detectors.exact import ExactDetector


class LateExact(ExactDetector):
    """``exact`` that lets every call repeat once before pruning it: later, and misses short loops."""

    def __init__(self, *, max_repeats_per_signature: int = 2, tool_overrides=None):
        super().__init__(max_repeats_per_signature=max_repeats_per_signature, tool_overrides=tool_overrides)
