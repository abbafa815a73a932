"""Grade imported runs by a benchmark's evaluation: SWE-bench's ``report.json`` files.

An agent's own output seldom says whether the task was solved; SWE-bench's evaluation
harness decides later and writes ``report.json`` (``{instance_id: {"resolved": bool, ...}}``,
one file per instance under ``logs/run_evaluation/...``, or several merged), then a summary of
the whole run (``<model>.<run_id>.json``, the same as ``sb-cli``'s report: ``{"resolved_ids":
[...], "unresolved_ids": [...], "error_ids": [...], ...}``; an instance whose patch was empty or
whose evaluation failed is unresolved, as SWE-bench counts it). A run whose
format records no outcome takes its instance's ``resolved`` as ``success`` / ``failure``, so
a replay's deploy figures (successful runs stopped, failed runs' calls saved) can be read.

The instance a run is: its episode id after the file stem (``openhands``: ``<stem>:<instance>``)
or the id itself (one file per instance: ``swe-agent``'s ``<instance>``, a mini-swe-agent
``<instance>.traj.json`` read by ``openai``), without a ``#k`` duplicate mark or a ``.traj``
suffix.
"""
from __future__ import annotations

from pathlib import Path

import orjson

from scenarios.outcome import FAILURE, OUTCOME_KEY, SUCCESS, UNKNOWN, run_outcome
from scenarios.trace import TraceError
from scenarios.tree import Episode

from ._common import MAX_FILE_BYTES


class ReportError(ValueError):
    """An evaluation report that cannot be read; the message names the file."""


def read_reports(path: str | Path) -> dict[str, bool]:
    """``instance_id -> resolved`` from a ``report.json`` file or a run's summary, or every
``report.json`` under a folder.

    Raises :class:`scenarios.trace.TraceError` when the path does not exist and
    :class:`ReportError` for a file that is not a report (it names the file).
    """
    path = Path(path)
    if not path.exists():
        raise TraceError(f"{path}: no such file or directory")
    files = sorted(path.rglob("report.json")) if path.is_dir() else [path]
    found: dict[str, bool] = {}
    for file in files:
        if file.stat().st_size > MAX_FILE_BYTES:
            raise ReportError(f"{file}: over the {MAX_FILE_BYTES}-byte limit for a report")
        try:
            data = orjson.loads(file.read_bytes())
        except orjson.JSONDecodeError as exc:
            raise ReportError(f"{file}: not valid JSON ({str(exc).split(':')[0]})") from None
        if not isinstance(data, dict):
            raise ReportError(f"{file}: expected an object {{instance_id: {{\"resolved\": true|false}}}}")
        if isinstance(data.get("resolved_ids"), list):  # the run's summary
            for key, resolved in _SUMMARY_LISTS:
                ids = data.get(key) or []
                if not isinstance(ids, list):
                    raise ReportError(f"{file}: '{key}' must be a list of instance ids")
                found.update((str(iid), resolved) for iid in ids)
            continue
        for iid, rep in data.items():
            if isinstance(rep, dict) and isinstance(rep.get("resolved"), bool):
                found[iid] = rep["resolved"]
    return found


#: A run summary's lists of instance ids and what each says, resolved last so it wins a clash.
_SUMMARY_LISTS = (("empty_patch_ids", False), ("error_ids", False), ("unresolved_ids", False), ("resolved_ids", True))


def instance_of(ep: Episode) -> str:
    """The SWE-bench instance an imported run is (see the module's docstring)."""
    return ep.id.split(":", 1)[-1].split("#", 1)[0].removesuffix(".traj")


def grade(episodes: list[Episode], resolved: dict[str, bool]) -> int:
    """Set the outcome of each run that has none from its instance's report; how many were graded."""
    graded = 0
    for ep in episodes:
        if run_outcome(ep.meta) == UNKNOWN and instance_of(ep) in resolved:
            ep.meta[OUTCOME_KEY] = SUCCESS if resolved[instance_of(ep)] else FAILURE
            graded += 1
    return graded
