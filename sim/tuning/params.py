"""Detector parameters on the command line: ``--param NAME=V1,V2`` grids and (nested) values."""
from __future__ import annotations

import copy
import math
import re
import tomllib
from dataclasses import dataclass
from typing import Any, Mapping





MAX_CELLS = 400
MISSING = object()


class TuningError(ValueError):
    """A sweep or tuning request that cannot be served, with a one-line reason."""


Overrides = dict[str, dict[str, Any]]


# -- parameters: parsing --param specs and setting (possibly nested) values -------------------------
@dataclass
class ParamGrid:
    """One swept parameter: its (possibly dotted) name and its values in order."""

    name: str
    values: list[Any]


def _scalar(text: str) -> Any:
    text = text.strip()
    if not text:
        raise TuningError("an empty value")
    try:
        return tomllib.loads(f"v = {text}")["v"]
    except tomllib.TOMLDecodeError:
        return text


def _number(text: str, what: str, spec: str) -> int | float:
    v = _scalar(text)
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise TuningError(f"--param {spec!r}: {what} {text.strip()!r} is not a number")
    return v


def parse_param(spec: str) -> ParamGrid:
    """``P=START:STOP:STEP`` (STOP included), ``P=1,2,3,5`` or ``P=VALUE``."""
    name, eq, rhs = spec.partition("=")
    name = name.strip()
    if not eq or not name or not rhs.strip():
        raise TuningError(f"--param {spec!r}: expected PARAM=START:STOP:STEP or PARAM=V1,V2,...")
    if not re.fullmatch(r"[A-Za-z_][\w-]*(\.[\w-]+)*", name):
        raise TuningError(f"--param {spec!r}: {name!r} is not a parameter name")
    if ":" in rhs and not rhs.strip().startswith(("'", '"')):
        parts = rhs.split(":")
        if len(parts) != 3:
            raise TuningError(f"--param {spec!r}: a range is START:STOP:STEP")
        start, stop, step = (_number(p, w, spec) for p, w in zip(parts, ("start", "stop", "step")))
        if step <= 0:
            raise TuningError(f"--param {spec!r}: the step must be positive")
        if stop < start:
            raise TuningError(f"--param {spec!r}: STOP is below START")
        n = int(math.floor((stop - start) / step + 1e-9)) + 1
        if n > MAX_CELLS:
            raise TuningError(f"--param {spec!r}: {n} values, more than {MAX_CELLS}")
        if all(isinstance(x, int) for x in (start, stop, step)):
            values: list[Any] = [start + i * step for i in range(n)]
        else:  # rounded so 0.1 steps print as 0.3, not 0.30000000000000004
            values = [round(start + i * step, 10) for i in range(n)]
    else:
        try:
            values = [_scalar(p) for p in rhs.split(",")]
        except TuningError:
            raise TuningError(f"--param {spec!r}: an empty value in the list") from None
    if len(set(map(repr, values))) != len(values):
        raise TuningError(f"--param {spec!r}: a value is repeated")
    return ParamGrid(name, values)


def get_param(params: Mapping[str, Any], name: str) -> Any:
    """The value at a dotted name (``tool_overrides.http_get.max_repeats``), or ``MISSING``."""
    cur: Any = params
    for part in name.split("."):
        if not isinstance(cur, Mapping) or part not in cur:
            return MISSING
        cur = cur[part]
    return cur


def with_param(params: Mapping[str, Any], name: str, value: Any) -> dict[str, Any]:
    """A deep copy of ``params`` with the dotted ``name`` set (``MISSING`` removes it)."""
    out = copy.deepcopy(dict(params))
    parts = name.split(".")
    cur = out
    for part in parts[:-1]:
        nxt = cur.get(part)
        nxt = dict(nxt) if isinstance(nxt, Mapping) else {}
        cur[part] = nxt
        cur = nxt
    if value is MISSING:
        cur.pop(parts[-1], None)
    else:
        cur[parts[-1]] = value
    return out


def value_text(v: Any) -> str:
    if v is MISSING or v is None:
        return "(unset)"
    if isinstance(v, float):
        return f"{v:g}"
    return str(v)


