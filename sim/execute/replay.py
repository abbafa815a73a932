"""``loopbench replay``: detectors over recorded traces, into the same run folder as a run."""
from __future__ import annotations

import time
from collections import defaultdict
from pathlib import Path
from typing import Any, Sequence

from sim.files import write_csv, write_json, write_lines
from sim.config.manifest import build_manifest
from sim.config.runfolder import clear_results, file_digests, new_run_id
from sim.config.spec import DetectorSpec
from sim.execute.rows import CALL_COLUMNS, EPISODE_COLUMNS, METRIC_COLUMNS, TIMING_COLUMNS
from sim.execute.runner import evaluate_open
from sim.scoring.outcomes import DELTA, load_profiles, units_by_id
from sim.scoring.trace_units import keep_trace_units
from scenarios.trace import ReadResult, read_trace, write_trace
from scenarios.tree import Episode

FIRES_COLUMNS = ["detector", "family", "traces", "fired", "fired_share", "median_first_alarm"]
AGREEMENT_COLUMNS = ["detector_a", "detector_b", "both", "only_a", "only_b", "neither", "agreement"]


def load_traces(paths: Sequence[Path], fmt: str = "trace") -> tuple[list[Episode], list[str], list[str]]:
    """Episodes from trace files (or an importer's format), with problems and warnings."""
    episodes, problems, warnings = [], [], []
    for path in paths:
        if fmt == "trace":
            res: ReadResult = read_trace(path)
            episodes += res.episodes
            problems += res.problems
            warnings += res.warnings
        else:
            from scenarios.importers import import_file

            eps, probs = import_file(fmt, path)
            episodes += eps
            problems += probs
    seen: set[str] = set()
    for ep in episodes:
        if ep.id in seen:
            n = 2
            while f"{ep.id}#{n}" in seen:
                n += 1
            warnings.append(f"episode id {ep.id!r} appears in more than one file; renamed {ep.id}#{n}")
            ep.id = f"{ep.id}#{n}"
        seen.add(ep.id)
    return episodes, problems, warnings


def replay(episodes: Sequence[Episode], detectors: Sequence[DetectorSpec], out: Path, sources: Sequence[str],
           delta: int = DELTA, progress: bool = True, check_timeout: float | None = None,
           keep_trace: bool = False) -> dict[str, Any]:
    """Score ``detectors`` over ``episodes`` into the run folder ``out``. With ``keep_trace`` the
    episodes as replayed go to ``trace.jsonl`` too — what a report re-scores (threshold sweeps,
    the Δ view, ``--cv-param``) when the sources are no trace files it can read (an importer's
    format) or the episodes carry what the sources do not (labels, graded outcomes)."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    clear_results(out)
    t0 = time.perf_counter()
    if keep_trace:
        write_trace(out / "trace.jsonl", episodes)
        keep_trace_units(out / "trace.jsonl", units_by_id(episodes))
    version, profiles = load_profiles()
    built = [(d.label, d.build()) for d in detectors]
    metrics, outcomes, calls, timings, errors = evaluate_open(built, episodes, delta, profiles, progress, check_timeout)
    fires, agreement = fire_summary(outcomes)
    write_csv(out / "metrics.csv", [r for r in metrics if r["episodes"]], METRIC_COLUMNS)
    write_csv(out / "episodes.csv", outcomes, EPISODE_COLUMNS)
    write_lines(out / "calls.csv", calls, CALL_COLUMNS)
    write_csv(out / "timings.csv", timings, TIMING_COLUMNS)
    write_csv(out / "fires.csv", fires, FIRES_COLUMNS)
    write_csv(out / "agreement.csv", agreement, AGREEMENT_COLUMNS)
    config = {"suite": "replay", "sources": list(sources), "delta": delta,
              "detectors": [{"label": d.label, "spec": d.spec, "params": d.params} for d in detectors]}
    manifest = build_manifest("replay", config, detectors, [det for _, det in built], profiles_version=version,
                              profiles=profiles, seeds={}, episodes=len(episodes),
                              tool_calls=sum(len(e.tool_nodes()) for e in episodes), detector_errors=errors,
                              wall_seconds=round(time.perf_counter() - t0, 3), run_id=new_run_id(),
                              files=file_digests(out))
    write_json(out / "manifest.json", manifest)
    return {"out": str(out), "episodes": len(episodes), "fires": fires, "agreement": agreement,
            "metrics": [r for r in metrics if r["family"] == "all" and r["episodes"]], "detector_errors": errors}


def fire_summary(outcomes: Sequence[dict[str, Any]]) -> tuple[list[dict], list[dict]]:
    """Per detector and family: how many traces it fires on and where; pairwise agreement."""
    fired: dict[str, dict[str, bool]] = defaultdict(dict)
    first: dict[tuple[str, str], list[int]] = defaultdict(list)
    per: dict[tuple[str, str], list[bool]] = defaultdict(list)
    for o in outcomes:
        fires = o["first_alarm"] is not None
        key = (o["detector"], o["family"])
        fired[o["detector"]][o["episode"]] = fired[o["detector"]].get(o["episode"], False) or fires
        per[key].append(fires)
        per[(o["detector"], "all")].append(fires)
        if fires:
            first[key].append(o["first_alarm"])
            first[(o["detector"], "all")].append(o["first_alarm"])
    rows = []
    for (det, fam), vals in sorted(per.items()):
        alarms = sorted(first[(det, fam)])
        rows.append({"detector": det, "family": fam, "traces": len(vals), "fired": sum(vals),
                     "fired_share": sum(vals) / len(vals) if vals else None,
                     "median_first_alarm": alarms[len(alarms) // 2] if alarms else None})
    dets = sorted(fired)
    agree = []
    for i, a in enumerate(dets):
        for b in dets[i + 1:]:
            eps = sorted(set(fired[a]) | set(fired[b]))
            both = sum(fired[a].get(e, False) and fired[b].get(e, False) for e in eps)
            oa = sum(fired[a].get(e, False) and not fired[b].get(e, False) for e in eps)
            ob = sum(fired[b].get(e, False) and not fired[a].get(e, False) for e in eps)
            nei = len(eps) - both - oa - ob
            agree.append({"detector_a": a, "detector_b": b, "both": both, "only_a": oa, "only_b": ob, "neither": nei,
                          "agreement": (both + nei) / len(eps) if eps else None})
    return rows, agree
