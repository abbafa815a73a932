"""Finding detectors by name: the entry-point group ``loopbench.detectors`` or ``module:Class``.

Built-in detectors are listed in this distribution's own entry points, so they are
found by exactly the path a third-party package uses. Nothing is imported until a
detector is asked for by name.
"""
from __future__ import annotations

import importlib
import os
import sys
from functools import lru_cache
from importlib.metadata import entry_points
from typing import Any

from .params import check_params
from .protocol import Detector

GROUP = "loopbench.detectors"


class DetectorNotFound(LookupError):
    """Raised with a one-line message when a detector name cannot be resolved."""


@lru_cache(maxsize=1)
def _entry_points() -> dict[str, Any]:
    return {ep.name: ep for ep in entry_points(group=GROUP)}


def available() -> list[str]:
    """Registered detector names, sorted."""
    return sorted(_entry_points())


def detector_class(spec: str) -> type[Detector]:
    """The class for a registered name or a ``module:Class`` spec."""
    if ":" in spec:
        module_name, _, attr = spec.partition(":")
        if os.getcwd() not in sys.path:
            # A user's own module in the working directory, as `python -m` would find it.
            sys.path.append(os.getcwd())
        try:
            module = importlib.import_module(module_name)
        except ImportError as exc:
            raise DetectorNotFound(f"cannot import detector module {module_name!r}: {exc}") from None
        try:
            cls = getattr(module, attr)
        except AttributeError:
            raise DetectorNotFound(f"module {module_name!r} has no detector {attr!r}") from None
    else:
        ep = _entry_points().get(spec)
        if ep is None:
            known = ", ".join(available()) or "none"
            raise DetectorNotFound(f"unknown detector {spec!r} (known: {known}; or give module:Class)")
        cls = ep.load()
    if not (isinstance(cls, type) and issubclass(cls, Detector)):
        # Duck-typed detectors are accepted if they speak the protocol.
        if not all(hasattr(cls, m) for m in ("start", "check", "record")):
            raise DetectorNotFound(f"{spec!r} is not a detector (needs start, check and record)")
    return cls


def build(cls: type, params: dict[str, Any]) -> Any:
    """``cls(**params)`` after its parameter checks: the class's ``validate_params`` (a
    ``ParamError`` names the parameter, the value and what is allowed), or, for a duck-typed
    class, the types of its constructor's defaults."""
    validate = getattr(cls, "validate_params", None)
    if callable(validate):
        validate(params)
    else:
        check_params(cls, params)
    return cls(**params)


def make_detector(spec: str, **params: Any) -> Detector:
    """Build a detector from a name or ``module:Class`` with keyword parameters.

    The instance's ``name`` is the spec it was asked for, so results show what the
    user typed.
    """
    try:
        det = build(detector_class(spec), params)
    except TypeError as exc:
        raise DetectorNotFound(f"bad parameters for detector {spec!r}: {exc}") from None
    try:
        det.name = spec
    except AttributeError:
        pass
    return det
