"""Numbers in and out of text, one way for the whole of ``sim``: CSV cells read back, table cells written."""
from __future__ import annotations

import math
import sys
from typing import Any

MISSING = "–"


def as_float(value: Any) -> float | None:
    """A number from a CSV cell or a computation; None for empty, NaN or not a number."""
    if value is None or value == "":
        return None
    try:
        v = float(value)
    except (TypeError, ValueError):
        return None
    return None if math.isnan(v) else v


_TRUE = frozenset({"true", "1", "yes"})
_FALSE = frozenset({"false", "0", "no"})


def as_bool(value: Any) -> bool | None:
    """A yes/no from a CSV cell or a computation: a bool (numpy's too) as it is; the text
    true/1/yes or false/0/no in any case; None for empty, NaN or anything else."""
    np = sys.modules.get("numpy")  # a numpy bool exists only once numpy is loaded: no import here
    if isinstance(value, bool) or (np is not None and isinstance(value, np.bool_)):
        return bool(value)
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return None
    text = str(value).strip().lower()
    return True if text in _TRUE else False if text in _FALSE else None


def number_text(value: Any, digits: int = 1, pct: bool = False, missing: str = MISSING) -> str:
    """A table cell: ``missing`` for no value (None, NaN), a percentage with ``pct``, a float
    with ``digits`` decimals, anything else (an integer count, a name) as it is."""
    if isinstance(value, (int, float, str)) and not isinstance(value, bool) and (pct or isinstance(value, float)):
        v = as_float(value)
        if v is None:
            return missing
        return f"{100 * v:.{digits}f}%" if pct else f"{v:.{digits}f}"
    if value is None:
        return missing
    try:
        if value != value:  # NaN of another numeric type (numpy, pandas)
            return missing
    except (TypeError, ValueError):
        pass
    if hasattr(value, "__float__") and not isinstance(value, (int, bool)):
        return number_text(float(value), digits, pct, missing)
    return str(value)
