"""Result files: written atomically, formatted deterministically."""
from __future__ import annotations

import csv
import io
import json
import math
import os
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any, Iterable, Iterator, Sequence


@contextmanager
def atomic_file(path: str | os.PathLike, binary: bool = False) -> Iterator[IO]:
    """An open temporary file beside ``path``, renamed into place only if the block ends
    normally: a reader sees the old file or the whole new one, never half of one, even
    if the process is killed (the temporary file is then removed, or left as ``.NAME.*.tmp``
    after a SIGKILL)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        with open(tmp, "wb" if binary else "w", **({} if binary else {"encoding": "utf-8", "newline": ""})) as fh:
            yield fh
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def atomic_write(path: str | os.PathLike, data: str | bytes) -> None:
    """Write ``data`` to ``path`` atomically (see :func:`atomic_file`)."""
    with atomic_file(path, binary=isinstance(data, bytes)) as fh:
        fh.write(data)


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


def save_figure(fig, path: str | os.PathLike, dpi: int = 110) -> Path:
    """A matplotlib figure written as PNG atomically (never half a picture)."""
    import io as _io

    buf = _io.BytesIO()
    fig.savefig(buf, format="png", dpi=dpi, bbox_inches="tight")
    atomic_write(path, buf.getvalue())
    return Path(path)
