"""What a user asked for: detectors with their parameters, and the run they belong to."""
from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from detectors.protocol import Detector
from detectors.registry import make_detector
from scenarios.suites import Suite
from sim.scoring.outcomes import DELTA

#: CPU seconds one detector call may use before its episode fails (``--check-timeout``).
DEFAULT_CHECK_TIMEOUT = 5.0


@dataclass
class DetectorSpec:
    """A detector as the user named it: a label, what to build, and its parameters."""

    label: str
    spec: str
    params: dict[str, Any] = field(default_factory=dict)
    #: Where its closed loop is played (``loopbench run --harness``): the built-in harness or
    #: a framework's agent loop (``sim.play.frameworks``). The run's, set on every spec so
    #: that workers on any engine get it with the spec; recorded in the run's configuration.
    harness: str = "builtin"

    def build(self) -> Detector:
        return make_detector(self.spec, **self.params)


def config_hash(resolved: dict[str, Any]) -> str:
    """The one configuration hash: 16 hex digits of the resolved configuration's canonical JSON."""
    blob = json.dumps(resolved, sort_keys=True, default=str).encode()
    return hashlib.sha256(blob).hexdigest()[:16]


@dataclass
class RunConfig:
    suite: Suite
    detectors: list[DetectorSpec]
    families: list[str]
    episodes: int
    seed: int
    mode: str = "both"
    delta: int = DELTA
    out: Path = Path("runs/latest")
    progress: bool = True
    #: Where tasks run (a ``sim.execute.engines.Engine``; None = the local pool); never part
    #: of the results or the hash.
    engine: Any = None
    check_timeout: float | None = DEFAULT_CHECK_TIMEOUT  # CPU seconds per detector call; None = no limit
    resume: bool = False  # reuse the finished tasks checkpointed in ``out/.parts`` (sim.execute.checkpoint)
    #: A real suite's local copy of the corpora (for traces not shipped as package data).
    corpus_dir: str | None = None
    #: A labels file (the corpora's ``dev.json`` schema) scored instead of the suite's own
    #: labels: another half, or your own; its traces are converted from ``corpus_dir``.
    labels_path: str | None = None
    #: Where closed loop is played: "builtin" or a framework (``sim.play.frameworks.HARNESSES``).
    harness: str = "builtin"

    def resolved(self) -> dict[str, Any]:
        if self.suite.real:
            out = {"suite": self.suite.name, "real": True, "families": self.families, "mode": self.mode,
                   "delta": self.delta, "corpus": self.corpus_dir,
                   "detectors": [{"label": d.label, "spec": d.spec, "params": d.params} for d in self.detectors]}
            if self.labels_path is not None:
                # Its content, not only its name, decides the results (and whether --resume may reuse them).
                out["labels"] = {"path": self.labels_path,
                                 "sha256": hashlib.sha256(Path(self.labels_path).read_bytes()).hexdigest()}
            return out
        return {
            "suite": self.suite.name,
            "families": self.families,
            "episodes_per_family": self.episodes,
            "family_weights": {f: w for f, w in sorted(self.suite.family_weights.items()) if f in self.families},
            "seed": self.seed,
            "mode": self.mode,
            "delta": self.delta,
            "family_params": {f: {k: list(v) if isinstance(v, tuple) else v for k, v in p.items()}
                              for f, p in sorted(self.suite.family_params.items()) if f in self.families},
            "detectors": [{"label": d.label, "spec": d.spec, "params": d.params} for d in self.detectors],
            # Only when not the built-in harness: earlier runs' configuration hashes stay valid.
            **({"harness": self.harness} if self.harness != "builtin" else {}),
        }

    def config_hash(self) -> str:
        return config_hash(self.resolved())
