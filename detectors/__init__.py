"""Loop detectors for LLM-agent harnesses: the protocol, the registry and the detectors.

This package imports nothing from ``sim`` or ``scenarios``, so a harness can use it alone.
"""
from .protocol import Decision, Detector, Message, Observation, ToolCall, Verdict
from .registry import available, detector_class, make_detector

__all__ = [
    "Decision",
    "Detector",
    "Message",
    "Observation",
    "ToolCall",
    "Verdict",
    "available",
    "detector_class",
    "make_detector",
]
