"""Checkpoints of a run: each finished detector task saved in the run folder, for ``--resume``.

A run folder being written holds ``.parts/``: ``run.json`` (the config hash and resolved
config) and one ``<kind>-<label>-<hash>.json`` per finished task (a detector in open or
closed loop), each written atomically as soon as the task ends. ``loopbench run --resume
--out RUN`` checks that the config hash is the same, loads the finished parts, runs only
the missing tasks and assembles the same files a clean run writes: the parts hold every
figure the files are made of (a task's rows, as the local pool's workers make them, or its
raw scores), floats as exact JSON round trips. Parts are plain JSON,
parsed and never executed; the folder is removed once the run's files are complete.
"""
from __future__ import annotations

import hashlib
import json
import re
import shutil
from dataclasses import fields
from collections import Counter
from pathlib import Path
from typing import Any, Callable

import orjson

from detectors.protocol import Verdict

from scenarios.files import atomic_write
from sim.play.harness import ClosedLoopStats
from sim.execute.rows import ClosedRows, OpenRows
from sim.execute.tasks import OpenResult
from sim.scoring.outcomes import VERDICT_TEXT, CallScore

PARTS = ".parts"
FORMAT = 1


class ResumeError(Exception):
    """The run folder cannot be resumed with this configuration: a one-line reason."""


def part_name(kind: str, label: str) -> str:
    safe = re.sub(r"[^A-Za-z0-9_.-]", "_", label)[:60]
    return f"{kind}-{safe}-{hashlib.sha256(label.encode()).hexdigest()[:8]}.json"


# Saved per episode; ``check_ns`` (every check's time) is in the task's timing row already.
_CLOSED_FIELDS = tuple(f.name for f in fields(ClosedLoopStats) if f.name not in ("check_ns", "interventions"))


def _row_pairs(rows: list[dict]) -> list[list]:
    return [list(r.items()) for r in rows]  # pairs: the parts' keys are sorted, the rows keep their order


def encode(kind: str, value: Any) -> dict[str, Any]:
    """A task's result (as ``sim.execute.pool`` returns it: raw, or as its rows) as JSON-ready data."""
    result, timing = value
    if isinstance(result, OpenRows):
        return {"rows": {"metrics": _row_pairs(result.metrics), "outcomes": _row_pairs(result.outcomes),
                         "calls": result.calls, "errors": result.errors}, "timing": timing}
    if isinstance(result, ClosedRows):
        return {"rows": {"metrics": _row_pairs(result.metrics), "episodes": _row_pairs(result.episodes)},
                "timing": timing}
    if kind == "open":
        verdict = VERDICT_TEXT
        return {
            "scores": {ep: [[s.node_id, s.call_index, s.depth, s.score, verdict[s.verdict], s.ns] for s in calls]
                       for ep, calls in result.scores.items()},
            "errors": result.errors, "seconds": result.seconds, "timing": timing,
        }
    closed = {}
    for sid, st in result.items():
        d = {name: getattr(st, name) for name in _CLOSED_FIELDS}
        d["interventions"] = dict(st.interventions)
        closed[sid] = d
    return {"stats": closed, "timing": timing}


def dumps(data: dict[str, Any]) -> bytes:
    """``data`` as JSON with sorted keys: orjson (an open task's part holds ~40k scores, and
    the parent writes each part while the workers run), the standard library for what
    orjson does not take (keys that are not plain ``str``)."""
    try:
        return orjson.dumps(data, option=orjson.OPT_SORT_KEYS)
    except TypeError:
        return json.dumps(data, sort_keys=True).encode()


def decode(kind: str, label: str, data: dict[str, Any]) -> Any:
    """The inverse of :func:`encode`."""
    if "rows" in data:
        got = data["rows"]
        if kind == "open":
            rows: Any = OpenRows([dict(r) for r in got["metrics"]], [dict(r) for r in got["outcomes"]], str(got["calls"]),
                                 int(got["errors"]))
        else:
            rows = ClosedRows([dict(r) for r in got["metrics"]], [dict(r) for r in got["episodes"]])
        return rows, data["timing"]
    if kind == "open":
        scores = {ep: [CallScore(n, i, d, float(sc), Verdict(v), int(ns)) for n, i, d, sc, v, ns in calls]
                  for ep, calls in data["scores"].items()}
        return OpenResult(label, scores, dict(data["errors"]), float(data["seconds"])), data["timing"]
    names = {f.name for f in fields(ClosedLoopStats)}
    stats = {}
    for sid, d in data["stats"].items():
        st = ClosedLoopStats(**{k: v for k, v in d.items() if k in names and k != "interventions"})
        st.interventions = Counter(d.get("interventions", {}))
        stats[sid] = st
    return stats, data["timing"]


class Checkpoints:
    """The ``.parts`` folder of one run: start fresh, or resume a matching one."""

    def __init__(self, out: Path, config_hash: str, config: dict[str, Any]) -> None:
        self.dir = Path(out) / PARTS
        self.config_hash = config_hash
        self.config = config

    def start(self, resume: bool) -> None:
        if resume:
            meta = self.dir / "run.json"
            if not meta.is_file():
                raise ResumeError(f"{self.dir.parent}: nothing to resume (no {PARTS}/run.json: the run never "
                                  "started there, or it finished)")
            try:
                saved = json.loads(meta.read_text(encoding="utf-8"))
            except (ValueError, UnicodeDecodeError) as exc:
                raise ResumeError(f"{meta}: unreadable ({exc})") from None
            if not isinstance(saved, dict) or saved.get("config_hash") != self.config_hash:
                theirs = saved.get("config_hash") if isinstance(saved, dict) else None
                raise ResumeError(f"{self.dir.parent} was started with another configuration (config hash {theirs}, "
                                  f"now {self.config_hash}); resume with the same options, or use a new --out")
            return
        if self.dir.exists():
            shutil.rmtree(self.dir)
        atomic_write(self.dir / "run.json", json.dumps({"format": FORMAT, "config_hash": self.config_hash,
                                                          "config": self.config}, sort_keys=True, default=str))

    def load(self, tasks: list[tuple[str, Any]], log: Callable[[str], None] = lambda s: None) -> dict:
        """The results of the finished ``(kind, spec)`` tasks, by ``(kind, label)``."""
        done = {}
        for kind, spec in tasks:
            path = self.dir / part_name(kind, spec.label)
            if not path.is_file():
                continue
            try:
                data = json.loads(path.read_text(encoding="utf-8"))
                if data.get("config_hash") != self.config_hash or data.get("kind") != kind or data.get("label") != spec.label:
                    raise ValueError("it belongs to another run")
                done[(kind, spec.label)] = decode(kind, spec.label, data["result"])
            except (ValueError, KeyError, TypeError, UnicodeDecodeError) as exc:
                log(f"{path}: unusable part ({str(exc).splitlines()[0] if str(exc) else type(exc).__name__}); "
                    "running that task again")
        return done

    def save(self, key: tuple[str, str], value: Any) -> None:
        kind, label = key
        data = {"format": FORMAT, "config_hash": self.config_hash, "kind": kind, "label": label,
                "result": encode(kind, value)}
        atomic_write(self.dir / part_name(kind, label), dumps(data))

    def finish(self) -> None:
        shutil.rmtree(self.dir, ignore_errors=True)
