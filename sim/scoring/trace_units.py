"""The scoring units of a trace file, kept for the file a run has just written.

A run scores its episodes from memory; its report reads them back from ``trace.jsonl``
(on the default suite, 0.8 s to parse 27 MB and 0.2 s more to work out the units).
When the report follows the run in the same process (``loopbench run``), the units the
run worked out are those of the file it wrote, so they are kept, keyed by the file's
identity on disk (device, inode, size, modification time in ns), and handed out instead
of reading the file again. A file changed or replaced since has another key and is read.
Only the last file is kept: a process that runs many configurations (``tune``) holds
one suite's units, not one per run.
"""
from __future__ import annotations

import os
from dataclasses import replace
from pathlib import Path
from typing import Mapping

from scenarios.trace import read_trace
from sim.scoring.outcomes import ScoringUnits, units_by_id

_kept: tuple[tuple, dict[str, ScoringUnits]] | None = None


def _identity(path: Path) -> tuple | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (str(Path(path).resolve()), st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)


def keep_trace_units(path: str | Path, units: Mapping[str, ScoringUnits]) -> None:
    """Remember ``units`` as the scoring units of the trace file at ``path``, as it is now."""
    global _kept
    key = _identity(Path(path))
    _kept = (key, dict(units)) if key is not None else None


def trace_units(path: str | Path, prefix: str = "") -> dict[str, ScoringUnits]:
    """The scoring units of every episode in the trace at ``path``, keyed by ``prefix`` + episode id
    (the kept units when the file is the one they were kept for, else the file read and worked out)."""
    path = Path(path)
    kept = _kept
    if kept is not None and kept[0] == _identity(path):
        units = kept[1]
    else:
        units = units_by_id(read_trace(path).episodes)
    if not prefix:
        return dict(units)
    return {prefix + eid: replace(u, episode=prefix + u.episode) for eid, u in units.items()}
