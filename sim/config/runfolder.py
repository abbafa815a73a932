"""Run folders that cannot lie: one run's files, and nothing else, under one run id.

A run (or replay) writes its result files, then ``manifest.json`` with a fresh ``run_id``
and the SHA-256 of every result file it wrote. A reader (scoreboard, report) calls
:func:`read_run_manifest`, which refuses a folder holding a result file the run did not
write (left by an earlier run into the same folder), one the run wrote but that is gone,
or one changed since. A command about to write a run folder calls :func:`prepare_folder`,
which refuses a folder that is not empty unless asked to empty it (``--force``).
"""
from __future__ import annotations

import hashlib
import json
import shutil
import uuid
from pathlib import Path
from typing import Any, Iterable

#: Every result file a run or replay may write and a report reads; ``manifest.json`` lists the ones written.
RESULT_FILES = ("trace.jsonl", "metrics.csv", "episodes.csv", "calls.csv", "timings.csv", "closed.csv",
                "closed_metrics.csv", "fires.csv", "agreement.csv")
#: What marks a folder as a loopbench run folder (so ``--force`` may empty it).
MARKERS = ("manifest.json", ".parts", "scoreboard.md", "report.md", *RESULT_FILES)


class RunFolderError(ValueError):
    """A run folder that cannot be written or read as one run: a one-line reason with a way out."""


def new_run_id() -> str:
    return uuid.uuid4().hex[:16]


def digest(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def file_digests(folder: Path, names: Iterable[str] = RESULT_FILES) -> dict[str, str]:
    """``{name: sha256}`` of the files among ``names`` present in ``folder``."""
    return {n: digest(Path(folder) / n) for n in names if (Path(folder) / n).is_file()}


def read_run_manifest(run_dir: Path) -> dict[str, Any]:
    """The manifest of ``run_dir`` after checking that its result files are exactly the run's.

    A manifest without ``files`` (written before run ids) is read as it is."""
    run_dir = Path(run_dir)
    mpath = run_dir / "manifest.json"
    if not mpath.is_file():
        raise RunFolderError(f"{run_dir}: not a finished run folder (no manifest.json)")
    try:
        manifest = json.loads(mpath.read_text(encoding="utf-8"))
    except (ValueError, UnicodeDecodeError) as exc:
        raise RunFolderError(f"{mpath}: unreadable ({exc})") from None
    files = manifest.get("files") if isinstance(manifest, dict) else None
    if files is None:
        return manifest
    rid = manifest.get("run_id", "?")
    for name in RESULT_FILES:
        path = run_dir / name
        if name in files:
            if not path.is_file():
                raise RunFolderError(f"{path}: missing; run {rid} wrote it (run again with --force)")
            if digest(path) != files[name]:
                raise RunFolderError(f"{path}: changed since run {rid} wrote it (run again with a new --out or --force)")
        elif path.exists():
            raise RunFolderError(f"{path}: left by another run, not written by run {rid} (run again with a new "
                                 "--out or --force)")
    return manifest


def clear_results(out: Path) -> None:
    """Remove the result files and manifest an earlier run left in ``out``, so a new run's
    folder holds only its own (user files are left alone)."""
    for name in ("manifest.json", *RESULT_FILES):
        (Path(out) / name).unlink(missing_ok=True)


def prepare_folder(out: Path, *, force: bool = False) -> None:
    """Make ``out`` ready for a new run: refuse a non-empty folder, or with ``force`` empty
    a run folder first (a folder without any run file is never emptied)."""
    out = Path(out)
    if out.exists() and not out.is_dir():
        raise RunFolderError(f"--out {out}: not a folder")
    if not out.exists() or not any(out.iterdir()):
        return
    if not force:
        raise RunFolderError(f"--out {out} is not empty (an earlier run?); use a new --out, add --force to empty "
                             "it first, or --resume to finish an interrupted run")
    if not any((out / m).exists() for m in MARKERS):
        raise RunFolderError(f"--out {out} is not empty and holds no run files; --force empties only run folders, "
                             "use a new --out")
    for child in out.iterdir():
        if child.is_dir() and not child.is_symlink():
            shutil.rmtree(child)
        else:
            child.unlink()
