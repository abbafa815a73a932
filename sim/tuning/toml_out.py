"""Tuned overrides written as a ``run --config`` TOML file a user can paste into their harness."""
from __future__ import annotations

import json
import math
import re
from typing import Any, Mapping, Sequence





from sim.tuning.params import Overrides


# -- TOML output ------------------------------------------------------------------------------------
def toml_key(key: str) -> str:
    return key if re.fullmatch(r"[A-Za-z0-9_-]+", key) else json.dumps(key)


def toml_value(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        if math.isinf(v):
            return "inf" if v > 0 else "-inf"
        if math.isnan(v):
            return "nan"
        return repr(v)
    if isinstance(v, str):
        return json.dumps(v, ensure_ascii=False)
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(toml_value(x) for x in v) + "]"
    raise TypeError(f"no TOML form for {type(v).__name__}")


def _tomlable(v: Any) -> bool:
    try:
        toml_value(v)
        return True
    except TypeError:
        return False


def overrides_toml(label: str, params: Mapping[str, Any], overrides: Overrides, header: Sequence[str] = ()) -> str:
    """A configuration file ``loopbench run --config`` reads: global parameters and per-tool tables."""
    lines = [f"# {h}" if h else "#" for h in header]
    if lines:
        lines.append("")
    table = f"detectors.{toml_key(label)}"
    lines.append(f"[{table}]")
    for k, v in params.items():
        if k != "tool_overrides" and v is not None and _tomlable(v):
            lines.append(f"{toml_key(k)} = {toml_value(v)}")
    for tool in sorted(overrides):
        lines += ["", f"[{table}.tool_overrides.{toml_key(tool)}]"]
        for k, v in overrides[tool].items():
            lines.append(f"{toml_key(k)} = {toml_value(v)}")
    return "\n".join(lines) + "\n"
