"""Files written atomically: a reader sees the old file or the whole new one, never half."""
from __future__ import annotations

import os
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Iterator


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
