"""Result files: written atomically, formatted deterministically."""
from __future__ import annotations

import csv
import io
import json
import os
from pathlib import Path
from typing import Any, Iterable, Sequence


def atomic_write(path: str | os.PathLike, data: str | bytes) -> None:
    """Write to a temporary file beside ``path`` and rename it into place: never half a file."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    mode = "wb" if isinstance(data, bytes) else "w"
    with open(tmp, mode, **({} if isinstance(data, bytes) else {"encoding": "utf-8", "newline": ""})) as fh:
        fh.write(data)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)


def fmt(value: Any) -> Any:
    """Deterministic cell text: floats rounded to 6 places, None as empty."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        if value != value:
            return "nan"
        if value in (float("inf"), float("-inf")):
            return "inf" if value > 0 else "-inf"
        text = f"{value:.6f}".rstrip("0").rstrip(".")
        return "0" if text in ("-0", "") else text
    return value


def csv_text(rows: Iterable[dict[str, Any]], columns: Sequence[str]) -> str:
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(columns)
    for row in rows:
        w.writerow([fmt(row.get(c)) for c in columns])
    return buf.getvalue()


def write_csv(path: str | os.PathLike, rows: Iterable[dict[str, Any]], columns: Sequence[str]) -> None:
    atomic_write(path, csv_text(rows, columns))


def write_json(path: str | os.PathLike, obj: Any) -> None:
    atomic_write(path, json.dumps(obj, indent=2, sort_keys=True, default=str) + "\n")
