"""Where a detector's rules came from, and the detector without those written from one corpus.

A detector may declare which real corpora each part it can switch off was written from
(``Detector.derived_from``: a list parameter that switches parts off -> part -> corpora;
``progress_guard``'s ``RULES_FROM`` and ``LAYERS_FROM``). Leave-one-corpus-out scores a
corpus with those parts off — the detector as it would be had that corpus never been read —
in the report (:mod:`sim.tuning.loco`), in ``tune --objective deploy`` and in the regression
gate on real suites (:mod:`sim.gate.regression`).
"""
from __future__ import annotations

from typing import Any, Iterable, Mapping

from detectors.protocol import Detector

from sim.config.spec import DetectorSpec


def unseen_params(det: Detector, corpus: str, params: Mapping[str, Any] | None = None) -> dict | None:
    """The parameters ``params`` (those ``det`` was built with) plus, in each list parameter of
    ``det.derived_from``, every part written from ``corpus`` (switched off); None when no part was."""
    params = dict(params or {})
    changed = False
    for param, parts in type(det).derived_from.items():
        off = [name for name, corpora in parts.items() if corpus in corpora]
        if off:
            have = list(getattr(det, param, None) or params.get(param) or ())
            params[param] = have + [n for n in off if n not in have]
            changed = True
    return params if changed else None


def unseen_specs(spec: DetectorSpec, corpora: Iterable[str], det: Detector | None = None) -> dict[str, DetectorSpec | None]:
    """Per corpus: ``spec`` without the parts written from that corpus, labelled
    ``"LABEL without CORPUS"``; None for a corpus nothing was written from (the spec as it is
    scores it). ``det``: ``spec`` already built, to skip building it again."""
    det = det if det is not None else spec.build()
    out: dict[str, DetectorSpec | None] = {}
    for corpus in corpora:
        params = unseen_params(det, corpus, spec.params)
        out[corpus] = None if params is None else DetectorSpec(f"{spec.label} without {corpus}", spec.spec, params)
    return out
