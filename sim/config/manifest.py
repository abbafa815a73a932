"""The one ``manifest.json`` shape, for run folders, replays and gate baselines alike.

Every manifest records which command wrote it, the resolved configuration and its hash,
the scoring weights, package versions, seeds, each detector's registered name, class,
the parameters the user gave and the parameters it actually ran with, and the embedding
backend the model-backed detectors used.
"""
from __future__ import annotations

import json
import platform
from importlib import metadata
from typing import Any, Sequence

from detectors.embedding_model import resolve_backend
from detectors.protocol import prefetches
from sim.config.spec import DetectorSpec, config_hash

_PACKAGES = ("loopbench", "numpy", "pandas", "matplotlib", "orjson", "xxhash", "onnxruntime", "onnx",
             "sentence-transformers", "torch")


def versions() -> dict[str, str]:
    """Python's and the installed packages' versions that can change results."""
    out = {"python": platform.python_version()}
    for pkg in _PACKAGES:
        try:
            out[pkg] = metadata.version(pkg)
        except metadata.PackageNotFoundError:
            pass
    return out


def jsonable(obj: Any) -> Any:
    """``obj`` as plain JSON values (anything else by its repr)."""
    return json.loads(json.dumps(obj, default=repr))


def detector_records(specs: Sequence[DetectorSpec], built: Sequence[Any]) -> list[dict[str, Any]]:
    """Per detector: label, registered name, class, given and resolved parameters."""
    return [{"label": spec.label, "spec": spec.spec, "name": getattr(det, "name", spec.label),
             "class": f"{type(det).__module__}:{type(det).__qualname__}", "given": jsonable(spec.params),
             "params": jsonable(det.get_params() if hasattr(det, "get_params") else {})}
            for spec, det in zip(specs, built)]


def build_manifest(command: str, config: dict[str, Any], specs: Sequence[DetectorSpec], built: Sequence[Any], *,
                   profiles_version: str, profiles: dict[str, Any], seeds: dict[str, Any],
                   **extra: Any) -> dict[str, Any]:
    """A manifest for ``command`` (run, replay, baseline); ``extra`` adds command-specific keys.

    ``embedding_backend`` is how the bundled model ran (``$LOOPBENCH_EMBED_BACKEND``) when a
    model-backed detector took part, else ``None``: backends differ in the vectors' last
    decimals, and ``torch-bf16`` moves a few verdicts."""
    model_backed = any(prefetches(det) for det in built)
    return {
        "loopbench": command,
        "config_hash": config_hash(config),
        "config": config,
        "profiles_version": profiles_version,
        "profiles": profiles,
        "versions": versions(),
        "seeds": seeds,
        "detectors": detector_records(specs, built),
        "embedding_backend": resolve_backend() if model_backed else None,
        **extra,
    }


def harness_text(manifest: dict[str, Any]) -> str:
    """Where a run's closed loop was played, in words (``loopbench run --harness``)."""
    h = manifest.get("harness") or {}
    if not h or h.get("name", "builtin") == "builtin":
        return "`builtin` (loopbench's own)"
    return (f"`{h['name']}` (the framework's own agent loop, the guard installed through its adapter), "
            f"{h.get('played')} linear scenarios of {h.get('scenarios')}: {h.get('left_out_branching')} "
            "branching ones left out, as a framework's run has one path")
