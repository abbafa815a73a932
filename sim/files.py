"""Run-folder files (CSV, JSON, PNG): written atomically, formatted deterministically."""
from __future__ import annotations

import csv
import io
import json
import math
import os
from pathlib import Path
from typing import Any, Iterable, Sequence

from scenarios.files import atomic_write


def fmt(value: Any) -> Any:
    """Deterministic cell text: floats rounded to 6 places, None as empty."""
    t = type(value)
    if t is str or t is int:  # most cells of the big files: ids, names, indices
        return value
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        if value != value:
            return "nan"
        if math.isinf(value):
            return "inf" if value > 0 else "-inf"
        text = f"{value:.6f}".rstrip("0").rstrip(".")
        return "0" if text in ("-0", "") else text
    return value


# The csv module quotes a field that holds its delimiter, its quote or a character of its
# line terminator. Ours is "\n", so a bare "\r" (trace text is anyone's) would be written
# unquoted, and every CSV reader, pandas included, takes it for a line break. Rows holding
# one are written with "\r\n" as the terminator, which quotes it, then ended with "\n".
_CRLF = {"lineterminator": "\r\n"}


def _quoted_row(row: Sequence[Any]) -> str:
    """One row's fields, "\r" quoted like "\n", without a line end."""
    buf = io.StringIO()
    csv.writer(buf, **_CRLF).writerow(row)
    return buf.getvalue()[:-2]


def cells_text(rows: Iterable[Sequence[Any]], columns: Sequence[str]) -> str:
    """CSV text of a header and rows given as cells in ``columns`` order, each a ``str`` or an
    ``int`` or passed through :func:`fmt`."""
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(columns)
    for row in rows:
        if any(type(c) is str and "\r" in c for c in row):
            buf.write(_quoted_row(row) + "\n")
        else:
            w.writerow(row)
    return buf.getvalue()


def csv_field(value: str) -> str:
    """``value`` as :func:`cells_text` writes it among other fields of a row (quoted when it
    holds a comma, a quote or a line break), for rows put together from ready-made pieces."""
    return _quoted_row([value, ""])[:-1]  # "value,": never a lone empty field


def write_lines(path: str | os.PathLike, chunks: Iterable[str], columns: Sequence[str]) -> None:
    """A CSV file of a header and ``chunks``, each whole lines of ready-made fields."""
    atomic_write(path, cells_text((), columns) + "".join(chunks))


def csv_text(rows: Iterable[dict[str, Any]], columns: Sequence[str]) -> str:
    return cells_text(([fmt(row.get(c)) for c in columns] for row in rows), columns)


def write_csv(path: str | os.PathLike, rows: Iterable[dict[str, Any]], columns: Sequence[str]) -> None:
    atomic_write(path, csv_text(rows, columns))


def read_table(path: Path):
    """A result CSV as the report reads it (empty cells are missing; a pandas DataFrame), empty when absent."""
    import pandas as pd

    if not path.exists() or path.stat().st_size == 0:
        return pd.DataFrame()
    return pd.read_csv(path, keep_default_na=False, na_values=[""], low_memory=False)


def write_json(path: str | os.PathLike, obj: Any) -> None:
    atomic_write(path, json.dumps(obj, indent=2, sort_keys=True, default=str) + "\n")


def save_figure(fig, path: str | os.PathLike, dpi: int = 110) -> Path:
    """A matplotlib figure written as PNG atomically (never half a picture)."""
    import io as _io

    buf = _io.BytesIO()
    fig.savefig(buf, format="png", dpi=dpi, bbox_inches="tight")
    atomic_write(path, buf.getvalue())
    return Path(path)
