"""The shipped suite ``real-injected``: loops injected into the clean traces of ``real-dev``.

It ships no data of its own: it is built when loaded, deterministically, from the
τ-bench and ReAct traces shipped for ``real-dev`` (``data/real/real-dev.jsonl.gz``) —
every clean trace gets one injection of each kind of :mod:`scenarios.inject` it can
be built from (seed ``SEED``). Its families are the injection kinds (``inj_stale``,
…, and the hard negatives ``inj_reread_after_write``, ``inj_paging``,
``inj_retry_success``), so a run's scoreboard reads recall per kind and false alarms
per hard negative. With ``corpus_dir`` (``loopbench run --corpus``) the clean Who&When
traces of a local copy of the corpora are used too; nothing of them is shipped.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from scenarios.inject import FAMILY_PREFIX, KINDS, inject_episodes
from scenarios.realsuite import FAMILIES, RealSuiteError, load_real_suite
from scenarios.tree import Episode


@dataclass(frozen=True)
class InjectedSuite:
    base: str  # the real suite whose clean traces are injected into
    seed: int
    per_kind: int = 1


#: Suite name -> how it is built.
SUITES = {"real-injected": InjectedSuite(base="real-dev", seed=0)}
#: Its families: one per injection kind.
INJECTED_FAMILIES = [FAMILY_PREFIX + k for k in KINDS]


def is_injected(name: str) -> bool:
    return name in SUITES


def source_corpus(episode_id: str) -> str:
    """The corpus an injected episode was built from: its id's prefix, the real trace's corpus
    (``tau_bench_airline:task10_trial0~stale`` -> ``tau_bench_airline``)."""
    return episode_id.split(":", 1)[0]


def families(name: str) -> list[str]:
    """The families a real suite reports under: the corpora, or for an injected suite the injection kinds."""
    return list(INJECTED_FAMILIES) if is_injected(name) else list(FAMILIES.values())


def load_injected_suite(name: str = "real-injected", corpus_dir: str | Path | None = None,
                        problems: list[str] | None = None) -> list[Episode]:
    """The injected episodes of ``name``; the base suite's unmatched labels go to ``problems``, or
    are warned about when it is None (as :func:`scenarios.realsuite.load_real_suite` does)."""
    spec = SUITES[name]
    sources = load_real_suite(spec.base, corpus_dir, problems)
    return inject_episodes(sources, KINDS, spec.seed, spec.per_kind).episodes


def load_real_episodes(name: str, corpus_dir: str | Path | None = None,
                       problems: list[str] | None = None, labels_path: str | Path | None = None) -> list[Episode]:
    """The episodes of real suite ``name``, labelled (``real-dev``, or ``labels_path``'s labels
    of the corpora) or injected (``real-injected``)."""
    if is_injected(name):
        if labels_path is not None:
            raise RealSuiteError(f"{name}: its labels come from the injection; a labels file is for real-dev")
        return load_injected_suite(name, corpus_dir, problems)
    return load_real_suite(name, corpus_dir, problems, labels_path)
