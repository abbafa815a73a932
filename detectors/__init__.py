"""Loop detectors for LLM-agent harnesses: the protocol, the registry and the detectors.

This package imports nothing from ``sim`` or ``scenarios``, so a harness can use it alone.
"""
from .protocol import UNRECORDED, Decision, Detector, Message, Observation, ToolCall, Verdict, ran, result_known, unrecorded
from .registry import available, detector_class, make_detector

__all__ = [
    "Decision",
    "Detector",
    "Message",
    "Observation",
    "ToolCall",
    "UNRECORDED",
    "Verdict",
    "available",
    "detector_class",
    "make_detector",
    "ran",
    "result_known",
    "unrecorded",
]
