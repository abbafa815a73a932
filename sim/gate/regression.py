"""The regression gate: score detectors on the derandomised CI suite and compare with a committed baseline.

A baseline is a folder of plain files (parsed, never evaluated): ``manifest.json`` (the
suite, its seed, the detectors with their parameters, a fingerprint of the generated
episodes), ``metrics.csv``, ``episodes.csv`` (one outcome per detector and looping path or
clean episode); this machine's ``timings.csv`` and package versions go to ``machine/``,
which is not committed (the timing check is made where that file exists).

Because the suite is derandomised, the baseline and the current run score the *same*
episodes, so each metric is compared with a **paired** bootstrap over episodes: resample
the scored units (clean episodes for the false-alarm rate, looping paths for the others)
and recompute current − baseline on each resample. The rule:

    a metric regresses when (current − baseline) > its tolerance
    AND the paired 95 % interval of the difference lies entirely above 0.

Both conditions, so that neither a tiny but certain change nor a large but noisy one
fails CI. The check is made on every family and on ``all``. Time per check has no
per-episode pairing and varies between machines: it regresses when the current p50 is
more than ``timing_factor`` times the baseline's *and* at least ``TIMING_SLACK_US`` slower.
"""
from __future__ import annotations

import csv
import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Sequence
from xml.etree import ElementTree as ET

import numpy as np
import xxhash

from scenarios.files import atomic_write
from scenarios.injected_suite import is_injected, load_real_episodes, source_corpus
from scenarios.suites import Suite
from scenarios.trace import dumps_events, episode_events
from scenarios.tree import Episode
from sim.config.manifest import build_manifest
from sim.config.provenance import unseen_specs
from sim.config.spec import DetectorSpec
from sim.execute.rows import EPISODE_COLUMNS, METRIC_COLUMNS, TIMING_COLUMNS, metric_rows
from sim.execute.runner import build_scenarios, evaluate_open, generate_episodes
from sim.execute.tasks import OpenResult, run_open
from sim.files import csv_text, write_csv, write_json
from sim.scoring.outcomes import DELTA, load_profiles
from sim.scoring.uncertainty import percentile_interval, unit_weights, weighted_rounds
from sim.numbers import as_float

FORMAT = 1
FILES = ("manifest.json", "metrics.csv", "episodes.csv")
#: The baseline folder's sub-folder for what differs between machines (timings, versions); not committed.
MACHINE = "machine"

#: Tolerances: how much worse a metric may get (absolute: rates in [0, 1], delays in calls).
TOLERANCES: dict[str, float] = {
    "false_alarm_rate": 0.01,  # +1 point of clean episodes with a false alarm
    "early_rate": 0.02,  # +2 points of loops interrupted before their onset
    "miss_rate": 0.02,  # +2 points of loops missed
    "median_delay": 1.0,  # +1 call
}
#: The suffix of a detector's held-out rows on a real suite (:func:`heldout_rows`).
HELD_OUT = " (held out)"
#: Loose by default: CI machines differ. ``--timing-tolerance 1.5`` tightens it on a stable runner.
TIMING_FACTOR = 3.0
TIMING_SLACK_US = 5.0
BOOTSTRAP_ROUNDS = 2000
BOOTSTRAP_SEED = 0


class GateError(ValueError):
    """A baseline or request the gate cannot use (exit code 2), with a one-line reason."""


@dataclass
class GateData:
    """One side of a comparison: what a baseline folder holds, or what the current run produced."""

    manifest: dict[str, Any]
    metrics: list[dict[str, Any]]
    episodes: list[dict[str, Any]]
    timings: list[dict[str, Any]]

    def labels(self) -> list[str]:
        return [d["label"] for d in self.manifest["detectors"]]

    def units(self, label: str) -> dict[tuple[str, str], dict[str, Any]]:
        return {(r["episode"], r["unit"]): r for r in self.episodes if r["detector"] == label}

    def p50(self, label: str) -> float | None:
        for r in self.timings:
            if r["detector"] == label and r.get("mode", "open") == "open":
                return as_float(r.get("p50_us"))
        return None


# -- producing the numbers ----------------------------------------------------------------------------
def suite_record(suite: Suite) -> dict[str, Any]:
    return {
        "name": suite.name, "seed": suite.seed, "episodes": suite.episodes, "families": list(suite.families),
        "family_params": {f: {k: list(v) if isinstance(v, tuple) else v for k, v in p.items()}
                          for f, p in sorted(suite.family_params.items())},
    }


def heldout_label(label: str) -> str:
    """The gate's name for ``label`` scored leave-one-corpus-out (:func:`heldout_rows`)."""
    return f"{label}{HELD_OUT}"


def heldout_rows(specs: Sequence[DetectorSpec], episodes: Sequence[Episode], delta: int,
                 profiles: dict[str, dict[str, float]], corpus_of: Callable[[Episode], str] = lambda ep: ep.family,
                 ) -> tuple[list[dict], list[dict], dict[str, dict[str, str]]]:
    """On real traces (one family per corpus): each detector that declares which corpora its
    rules were written from (``Detector.derived_from``) scored on every corpus without the
    parts written from it — the held-out half of leave-one-corpus-out
    (:func:`sim.config.provenance.unseen_specs`) — as one more detector, :func:`heldout_label`.
    ``corpus_of``: an episode's corpus (its family on ``real-dev``; on ``real-injected`` the
    corpus it was built from). Returns its metric rows, its outcome rows, and per held-out label
    what each corpus was scored with."""
    by_corpus: dict[str, list[Episode]] = {}
    for ep in episodes:
        by_corpus.setdefault(corpus_of(ep), []).append(ep)
    metrics, outcomes, held = [], [], {}
    for spec in specs:
        det = spec.build()
        variants = unseen_specs(spec, sorted(by_corpus), det)
        if not any(v is not None for v in variants.values()):
            continue
        label = heldout_label(spec.label)
        scores, errors = {}, {}
        for corpus, variant in variants.items():
            res = run_open(label, det if variant is None else variant.build(), by_corpus[corpus])
            scores.update(res.scores)
            errors.update(res.errors)
        m, o = metric_rows(label, episodes, OpenResult(label, scores, errors, 0.0), delta, profiles)
        metrics += m
        outcomes += o
        held[label] = {c: "as shipped" if v is None else f"without {c}'s rules" for c, v in variants.items()}
    return metrics, outcomes, held


def evaluate(suite: Suite, specs: Sequence[DetectorSpec], delta: int = DELTA, progress: bool = False) -> GateData:
    """Score ``specs`` on ``suite`` in open loop (through the runner) and return the gate's view
    of it. On a real suite (its shipped traces) each detector that declares where its rules came
    from is also scored held out (:func:`heldout_rows`), so a change that gains on the corpora it
    was written from and loses on the others fails the gate."""
    if suite.real:
        episodes = [ep for ep in load_real_episodes(suite.name) if ep.family in suite.families]
    else:
        scenarios = build_scenarios(suite.families, suite.episodes, suite.seed, suite.family_params, suite.family_weights)
        episodes = generate_episodes(scenarios, progress)
    fingerprint = xxhash.xxh3_128_hexdigest(b"".join(dumps_events(episode_events(ep)) for ep in episodes))
    built = [(d.label, d.build()) for d in specs]
    profiles_version, profiles = load_profiles()
    metrics, outcomes, _calls, timings, errors = evaluate_open(built, episodes, delta, profiles, progress)
    held: dict[str, dict[str, str]] = {}
    corpus_of = (lambda ep: source_corpus(ep.id)) if is_injected(suite.name) else (lambda ep: ep.family)
    if suite.real and len({corpus_of(ep) for ep in episodes}) >= 2:
        m, o, held = heldout_rows(specs, episodes, delta, profiles, corpus_of)
        metrics += m
        outcomes += o
    record = suite_record(suite)
    manifest = build_manifest("baseline", {"suite": record, "delta": delta}, specs, [det for _, det in built],
                              profiles_version=profiles_version, profiles=profiles, seeds={"suite": suite.seed},
                              format=FORMAT, suite=record, delta=delta, episodes_fingerprint=fingerprint,
                              detector_errors=errors, **({"held_out": held} if held else {}))
    # Round-trip through the CSV text so current and baseline numbers are compared in one form.
    return GateData(manifest, _reparse(metrics, METRIC_COLUMNS), _reparse(outcomes, EPISODE_COLUMNS),
                    _reparse(timings, TIMING_COLUMNS))


def _reparse(rows: list[dict], columns: Sequence[str]) -> list[dict[str, Any]]:
    return list(csv.DictReader(csv_text(rows, columns).splitlines()))


def write_baseline(data: GateData, out: Path) -> None:
    """The baseline folder: only deterministic files (``manifest.json`` without package
    versions, ``metrics.csv``, ``episodes.csv``), so a baseline made again from the same code
    is byte-identical. This machine's timings and versions go to ``MACHINE/`` beside them,
    which the folder's own ``.gitignore`` keeps out of commits."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    manifest = {k: v for k, v in data.manifest.items() if k != "versions"}
    write_csv(out / "metrics.csv", data.metrics, METRIC_COLUMNS)
    write_csv(out / "episodes.csv", data.episodes, EPISODE_COLUMNS)
    write_json(out / "manifest.json", manifest)
    (out / "timings.csv").unlink(missing_ok=True)  # where an older loopbench kept them
    atomic_write(out / ".gitignore", f"# This machine's timings and package versions: not part of the baseline.\n{MACHINE}/\n")
    write_csv(out / MACHINE / "timings.csv", data.timings, TIMING_COLUMNS)
    write_json(out / MACHINE / "versions.json", data.manifest.get("versions", {}))


def read_baseline(path: str | Path) -> GateData:
    """Read a baseline folder (or its ``manifest.json``); every problem is a one-line GateError."""
    p = Path(path)
    folder = p.parent if p.name == "manifest.json" else p
    if not folder.is_dir():
        raise GateError(f"{path}: no such baseline folder (create one with `loopbench baseline update`)")
    for name in FILES:
        if not (folder / name).is_file():
            raise GateError(f"{folder / name}: missing (a baseline folder holds {', '.join(FILES)})")
    try:
        manifest = json.loads((folder / "manifest.json").read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise GateError(f"{folder / 'manifest.json'}: not valid JSON ({exc})") from None
    if not isinstance(manifest, dict) or manifest.get("loopbench") != "baseline":
        raise GateError(f"{folder / 'manifest.json'}: not a loopbench baseline manifest")
    if manifest.get("format") != FORMAT:
        raise GateError(f"{folder / 'manifest.json'}: baseline format {manifest.get('format')!r}, this loopbench reads {FORMAT}")
    for key in ("suite", "detectors", "episodes_fingerprint"):
        if key not in manifest:
            raise GateError(f"{folder / 'manifest.json'}: no {key!r}")
    tables = {"timings.csv": []}  # timings only where this machine (or an older baseline) has them
    timing_file = next((p for p in (folder / MACHINE / "timings.csv", folder / "timings.csv") if p.is_file()), None)
    for name, columns in (("metrics.csv", METRIC_COLUMNS), ("episodes.csv", EPISODE_COLUMNS), ("timings.csv", TIMING_COLUMNS)):
        path = timing_file if name == "timings.csv" else folder / name
        if path is None:
            continue
        try:
            with open(path, encoding="utf-8", newline="") as fh:
                reader = csv.DictReader(fh)
                missing = [c for c in ("detector",) + tuple(c for c in columns if c in _NEEDED[name]) if c not in (reader.fieldnames or [])]
                if missing:
                    raise GateError(f"{folder / name}: missing column(s) {', '.join(missing)}")
                tables[name] = list(reader)
        except (UnicodeDecodeError, csv.Error) as exc:
            raise GateError(f"{folder / name}: {exc}") from None
    return GateData(manifest, tables["metrics.csv"], tables["episodes.csv"], tables["timings.csv"])


_NEEDED = {
    "metrics.csv": ("family",),
    "episodes.csv": ("episode", "family", "unit", "outcome", "delay"),
    "timings.csv": ("p50_us",),
}


# -- comparing -----------------------------------------------------------------------------------------
@dataclass
class Row:
    """One line of the diff: a detector's metric on one family (or ``all``)."""

    detector: str
    family: str
    metric: str
    baseline: float | None
    current: float | None
    tolerance: str
    low: float | None = None  # paired 95 % interval of current - baseline
    high: float | None = None
    verdict: str = "ok"  # ok | better | REGRESSION | n/a

    @property
    def delta(self) -> float | None:
        if self.baseline is None or self.current is None:
            return None
        return self.current - self.baseline


@dataclass
class Comparison:
    rows: list[Row] = field(default_factory=list)

    @property
    def regressions(self) -> list[Row]:
        return [r for r in self.rows if r.verdict == "REGRESSION"]

    def shown(self) -> list[Row]:
        """The ``all`` rows, plus every per-family row that regressed."""
        return [r for r in self.rows if r.family == "all" or r.verdict == "REGRESSION"]


_LOOPING = ("early", "tp", "miss")


def _unit_values(metric: str, rows: Sequence[dict[str, Any]]) -> np.ndarray:
    """Per-unit value of ``metric`` (NaN where the unit does not count for it)."""
    out = np.full(len(rows), np.nan)
    for i, r in enumerate(rows):
        o = r["outcome"]
        if metric == "false_alarm_rate" and o in ("tn", "fp"):
            out[i] = o == "fp"
        elif metric in ("miss_rate", "early_rate") and o in _LOOPING:
            out[i] = o == ("miss" if metric == "miss_rate" else "early")
        elif metric == "median_delay" and o == "tp":
            out[i] = as_float(r["delay"])
    return out


def _stat(metric: str, values: np.ndarray, axis: int | None = None) -> Any:
    with np.errstate(all="ignore"):
        import warnings

        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # an all-NaN resample has no value
            return np.nanmedian(values, axis=axis) if metric == "median_delay" else np.nanmean(values, axis=axis)


def paired_interval(metric: str, base: np.ndarray, cur: np.ndarray, weights: np.ndarray) -> tuple[float | None, float | None]:
    """The 95 % percentile interval of stat(current) − stat(baseline) over the same resampling
    rounds for both sides (paired); ``weights`` are the rounds of sim.scoring.uncertainty's
    stratified cluster bootstrap (:func:`~sim.scoring.uncertainty.unit_weights`)."""
    if len(base) == 0:
        return None, None
    median = metric == "median_delay"
    diff = weighted_rounds(cur, weights, median) - weighted_rounds(base, weights, median)
    diff = diff[np.isfinite(diff)]
    if diff.size == 0:
        return None, None
    lo, hi = percentile_interval(diff)
    return float(lo), float(hi)


def _value(metric: str, values: np.ndarray) -> float | None:
    if np.all(np.isnan(values)):
        return None
    return float(_stat(metric, values))


def compare(baseline: GateData, current: GateData, labels: Sequence[str], *, tolerances: dict[str, float] | None = None,
            timing_factor: float | None = TIMING_FACTOR, rounds: int = BOOTSTRAP_ROUNDS) -> Comparison:
    """Compare each detector of ``labels`` metric by metric, on ``all`` and on every family."""
    tol = dict(TOLERANCES if tolerances is None else tolerances)
    out = Comparison()
    for label in labels:
        b_units, c_units = baseline.units(label), current.units(label)
        if set(b_units) != set(c_units):
            raise GateError(f"detector {label!r}: the current run scored other episodes than the baseline "
                            f"({len(set(b_units) ^ set(c_units))} differ); update the baseline")
        keys = sorted(b_units)
        families = sorted({b_units[k]["family"] for k in keys})
        # Units are clustered by episode and stratified by family, as for every interval of the
        # report; the seed is fixed, so the same inputs give the same verdicts.
        weights = unit_weights([b_units[k]["episode"] for k in keys], [b_units[k]["family"] for k in keys],
                               rounds, BOOTSTRAP_SEED)
        col = {k: i for i, k in enumerate(keys)}
        for metric, limit in tol.items():
            for family in ["all"] + families:
                ks = keys if family == "all" else [k for k in keys if b_units[k]["family"] == family]
                b = _unit_values(metric, [b_units[k] for k in ks])
                c = _unit_values(metric, [c_units[k] for k in ks])
                # A unit counts when it counts on either side (a tp that became a miss still pairs).
                keep = ~(np.isnan(b) & np.isnan(c)) if metric != "median_delay" else np.ones(len(ks), bool)
                w = weights[:, [col[k] for k in ks]][:, keep]
                b, c = b[keep], c[keep]
                row = Row(label, family, metric, _value(metric, b), _value(metric, c), f"+{limit:g}")
                if row.baseline is None and row.current is None:
                    if family != "all":
                        continue
                    row.verdict = "n/a"
                else:
                    row.low, row.high = paired_interval(metric, b, c, w)
                    d = row.delta
                    if d is not None and row.low is not None:
                        if d > limit and row.low > 0:
                            row.verdict = "REGRESSION"
                        elif d < -limit and row.high is not None and row.high < 0:
                            row.verdict = "better"
                out.rows.append(row)
        if timing_factor is not None and not label.endswith(HELD_OUT):  # held out: the same checks, timed above
            bp, cp = baseline.p50(label), current.p50(label)
            row = Row(label, "all", "p50_us", bp, cp, f"x{timing_factor:g}")
            if bp is None or cp is None:
                row.verdict = "n/a"
            elif cp > bp * timing_factor and cp - bp >= TIMING_SLACK_US:
                row.verdict = "REGRESSION"
            out.rows.append(row)
    return out


# -- reporting ---------------------------------------------------------------------------------------------
def _fmt(metric: str, v: float | None, signed: bool = False) -> str:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "-"
    if metric.endswith("_rate"):
        return f"{v * 100:+.1f} pt" if signed else f"{v * 100:.1f}%"
    return f"{v:+.2f}" if signed else f"{v:.2f}"


def diff_table(comparison: Comparison) -> str:
    """The readable diff: one line per detector and metric on ``all``, plus each regressed family."""
    header = ["detector", "family", "metric", "baseline", "current", "delta", "95% CI", "tolerance", "verdict"]
    lines = []
    for r in comparison.shown():
        ci = "-" if r.low is None else f"[{_fmt(r.metric, r.low, True)}, {_fmt(r.metric, r.high, True)}]"
        tol = r.tolerance if r.metric == "p50_us" else ("+" + _fmt(r.metric, float(r.tolerance[1:]), True)[1:])
        lines.append([r.detector, r.family, r.metric, _fmt(r.metric, r.baseline), _fmt(r.metric, r.current),
                      _fmt(r.metric, r.delta, True), ci, tol, r.verdict])
    widths = [max(len(h), *(len(line[i]) for line in lines)) if lines else len(h) for i, h in enumerate(header)]
    fmt_line = lambda cells: "  ".join(c.ljust(w) for c, w in zip(cells, widths)).rstrip()  # noqa: E731
    return "\n".join([fmt_line(header), fmt_line(["-" * w for w in widths])] + [fmt_line(line) for line in lines])


def junit_xml(comparison: Comparison, seconds: float = 0.0) -> bytes:
    """JUnit XML: one testcase per detector and metric, a ``failure`` when any family regressed."""
    cases: dict[tuple[str, str], list[Row]] = {}
    for r in comparison.rows:
        cases.setdefault((r.detector, r.metric), []).append(r)
    failures = sum(1 for rows in cases.values() if any(r.verdict == "REGRESSION" for r in rows))
    suites = ET.Element("testsuites", name="loopbench check", tests=str(len(cases)), failures=str(failures), errors="0",
                        time=f"{seconds:.3f}")
    suite = ET.SubElement(suites, "testsuite", name="loopbench.check", tests=str(len(cases)), failures=str(failures),
                          errors="0", skipped="0", time=f"{seconds:.3f}")
    for (detector, metric), rows in cases.items():
        case = ET.SubElement(suite, "testcase", classname=f"loopbench.check.{detector}", name=metric, time="0")
        bad = [r for r in rows if r.verdict == "REGRESSION"]
        if bad:
            text = "\n".join(f"{r.family}: baseline {_fmt(metric, r.baseline)}, current {_fmt(metric, r.current)}, "
                             f"delta {_fmt(metric, r.delta, True)}, 95% CI "
                             f"{'-' if r.low is None else f'[{_fmt(metric, r.low, True)}, {_fmt(metric, r.high, True)}]'}, "
                             f"tolerance {r.tolerance}" for r in bad)
            fam = ", ".join(r.family for r in bad)
            failure = ET.SubElement(case, "failure", type="regression",
                                    message=f"{detector} {metric} regressed ({fam})")
            failure.text = text
    ET.indent(suites)
    return b'<?xml version="1.0" encoding="utf-8"?>\n' + ET.tostring(suites, encoding="utf-8") + b"\n"


def write_junit(path: str | Path, comparison: Comparison, seconds: float = 0.0) -> None:
    atomic_write(path, junit_xml(comparison, seconds))


def check_compatible(baseline: GateData, current_suite: Suite, fingerprint: str | None = None) -> None:
    """The baseline was made on this suite (same seed, episodes, families) and the same generated episodes."""
    want = baseline.manifest["suite"]
    have = suite_record(current_suite)
    diffs = [k for k in ("seed", "episodes", "families", "family_params") if want.get(k) != have.get(k)]
    if diffs:
        raise GateError(f"the baseline was made on suite {want.get('name')!r} with another {', '.join(diffs)} than "
                        f"suite {have['name']!r}; pass the baseline's suite or update the baseline")
    if fingerprint is not None and fingerprint != baseline.manifest["episodes_fingerprint"]:
        raise GateError("the suite generates other episodes than when the baseline was made (the scenario "
                        "generator changed); run `loopbench baseline update` and commit the result")


def baseline_specs(baseline: GateData) -> list[DetectorSpec]:
    """The detectors as the baseline's user gave them (``given``; baselines written before the
    one manifest shape kept those under ``params``)."""
    return [DetectorSpec(d["label"], d["spec"], dict(d.get("given", d.get("params")) or {}))
            for d in baseline.manifest["detectors"]]
