"""The Markdown scoreboard of a run folder, regenerated from its files alone."""
from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Callable

import pandas as pd

from scenarios.base import healthy_families, loop_families, registered

from scenarios.files import atomic_write
from sim.config.manifest import harness_text
from sim.config.runfolder import read_run_manifest
from sim.numbers import number_text
from sim.scoring.deploy import LABEL_ORACLE


def _family_table(m: pd.DataFrame, dets: list[str], families: list[str], cell: Callable[[pd.Series], str]) -> str:
    """One row per detector, one column per family: ``cell`` of its metrics row, ``–`` where it has none."""
    # Each (detector, family)'s first row, found in one pass: filtering the table per cell
    # (a thousand cells on the default suite) took most of the scoreboard's 0.9 s.
    first: dict[tuple, int] = {}
    for i, key in enumerate(zip(m["detector"], m["family"])):
        first.setdefault(key, i)
    rows = []
    for d in dets:
        row = [f"`{d}`"]
        for f in families:
            i = first.get((d, f))
            row.append(cell(m.iloc[i]) if i is not None else "–")
        rows.append(row)
    return _table(["detector"] + families, rows)


def _table(header: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(lines)


def scoreboard_text(run_dir: Path) -> str:
    run_dir = Path(run_dir)
    manifest = read_run_manifest(run_dir)  # refuses files of another run
    parts = [f"# loopbench scoreboard — suite `{manifest['config'].get('suite', 'replay')}`", ""]
    parts.append(f"Config hash `{manifest['config_hash']}`, profile weights v{manifest.get('profiles_version', '?')}, "
                 f"{manifest['episodes']} episodes, {manifest['tool_calls']} tool calls, window Δ = "
                 f"{manifest['config'].get('delta')} calls, wall time {manifest.get('wall_seconds')} s.")
    parts.append("")
    mpath = run_dir / "metrics.csv"
    if mpath.exists() and mpath.stat().st_size > 0:
        m = pd.read_csv(mpath, keep_default_na=False, na_values=[""])
        if len(m):
            timings = pd.read_csv(run_dir / "timings.csv") if (run_dir / "timings.csv").exists() else pd.DataFrame()
            p50 = {}
            if len(timings):
                for _, r in timings[timings["mode"] == "open"].iterrows():
                    p50[r["detector"]] = r["p50_us"]
            allrows = m[m["family"] == "all"].copy()
            if "score_standard" in allrows and allrows["score_standard"].notna().any():
                allrows = allrows.sort_values("score_standard", ascending=False, kind="stable")
            parts.append("## Ranking (open loop, halt at first alarm)")
            parts.append("")
            parts.append("Score: NAB-shaped composite, 0 = never fires, 100 = catches every loop at its onset with no "
                         "false alarm. FAR = false-alarm rate on clean episodes; miss = share of looping paths not "
                         "caught within Δ (late = fired after the window); delay in calls after the onset.")
            parts.append("")
            rows = []
            for _, r in allrows.iterrows():
                rows.append([f"`{r['detector']}`", number_text(r.get("score_standard")), number_text(r.get("score_low_FP")),
                             number_text(r.get("score_low_FN")), number_text(r["false_alarm_rate"], pct=True), number_text(r["miss_rate"], pct=True),
                             number_text(r["early_rate"], pct=True), str(int(r["late"])), number_text(r["median_delay"]),
                             number_text(r["alarms_per_1k"]), number_text(p50.get(r["detector"]), digits=2), str(int(r["errors"]))])
            parts.append(_table(["detector", "score", "low-FP", "low-FN", "FAR", "miss", "early", "late", "median delay",
                                 "alarms/1k clean calls", "p50 µs/check", "errors"], rows))
            parts.append("")
            fams = [f for f in m["family"].unique() if f != "all"]
            loops, healthy = family_tables(m, fams)
            dets = list(allrows["detector"])
            if loops:
                parts.append("## Loop families: miss rate (lower is better), median delay in brackets")
                parts.append("")
                parts.append(_family_table(m, dets, loops, lambda r: f"{number_text(r['miss_rate'], pct=True, digits=0)} "
                                                                     f"({number_text(r['median_delay'], digits=0)})"))
                parts.append("")
            if healthy:
                parts.append("## Healthy families: false-alarm rate (lower is better)")
                parts.append("")
                parts.append(_family_table(m, dets, healthy,
                                           lambda r: number_text(r["false_alarm_rate"], pct=True, digits=0)))
                parts.append("")
            parts += _deploy_part(run_dir, dets)
    cpath = run_dir / "closed_metrics.csv"
    if cpath.exists():
        c = pd.read_csv(cpath, keep_default_na=False, na_values=[""])
        call = c[c["family"] == "all"].sort_values("wasted_spend", kind="stable")
        parts.append("## Closed loop (the detector sits in the harness)")
        parts.append("")
        parts.append(f"Harness: {harness_text(manifest)}.")
        parts.append("")
        rows = []
        for _, r in call.iterrows():
            rows.append([f"`{r['detector']}`", number_text(r["success_rate"], pct=True), str(int(r["wasted_calls"])),
                         f"${r['wasted_spend']:.3f}", str(int(r["nudges"])), str(int(r["prunes"])),
                         str(int(r["escalations"])), str(int(r["stops"])), str(int(r["false_interventions"])),
                         str(r["ended"]).replace(";", ", ")])
        parts.append(_table(["detector", "task success", "wasted calls", "wasted spend", "nudges", "prunes",
                             "escalations", "stops", "false interventions", "how episodes ended"], rows))
        parts.append("")
    failures = detector_failures(run_dir)
    if failures:
        parts.append("## Detector failures")
        parts.append("")
        parts.append("A failed episode scores as the worst outcome (a miss on a loop, a false alarm on a clean "
                     "episode; in closed loop, a failed task). The first distinct errors:")
        parts.append("")
        for label, (counts, messages) in failures.items():
            where = ", ".join(f"{n} {mode}-loop episode(s)" for mode, n in counts.items() if n)
            parts.append(f"- `{label}` failed on {where}:")
            parts += [f"  - {m}" for m in messages]
        parts.append("")
    parts.append("## Detectors")
    parts.append("")
    for d in manifest.get("detectors", []):
        parts.append(f"- `{d['label']}`: `{d['class']}` {json.dumps(d['params'], sort_keys=True)}")
    parts.append("")
    return "\n".join(parts)


def _deploy_part(run_dir: Path, dets: list[str]) -> list[str]:
    """What each guard does to runs, from ``deploy.csv``, when the runs' outcomes are known."""
    path = run_dir / "deploy.csv"
    if not path.exists() or path.stat().st_size == 0:
        return []
    d = pd.read_csv(path, keep_default_na=False, na_values=[""])
    by = {(r["detector"], r["action"], r["metric"]): r for _, r in d.iterrows()}
    if not any(k[2] in ("successes_stopped", "failed_calls_saved") and pd.notna(r["value"]) for k, r in by.items()):
        return []  # no run outcome known: the deploy view says why

    def cell(det: str, action: str, metric: str) -> str:
        r = by.get((det, action, metric))
        if r is None or pd.isna(r["value"]):
            return "–"
        if metric == "nudges_per_100_clean":
            return number_text(r["value"], 2)
        return f"{number_text(r['value'], pct=True)} ({int(r['count'])}/{int(r['of'])})"

    rows = [[f"`{x}`", cell(x, "halt", "successes_stopped"), cell(x, "halt", "failed_calls_saved"),
             cell(x, "configured", "successes_stopped"), cell(x, "configured", "failed_calls_saved"),
             cell(x, "configured", "runaway_caught"), cell(x, "nudge", "nudges_per_100_clean")] for x in dets]
    rows.append(["label oracle (halts at each labelled onset)", cell(LABEL_ORACLE, "halt", "successes_stopped"),
                 cell(LABEL_ORACLE, "halt", "failed_calls_saved"), "", "", "", ""])
    return ["## What a guard does to runs (`deploy.csv`)", "",
            "Halting at the first alarm, and as configured (only the guard's own stop / escalate verdicts end a run): "
            "successful runs stopped, calls of failed runs saved, runaway loops caught; nudges per 100 calls not "
            "labelled as loops. The label oracle is what the labels allow any guard. Intervals and the nudge view: "
            "`deploy.csv`, the report's deployment section.", "",
            _table(["detector", "first alarm: successes stopped", "failed-run calls saved",
                    "as configured: successes stopped", "failed-run calls saved", "runaway caught",
                    "nudges / 100 clean calls"], rows), ""]


def detector_failures(run_dir: Path, limit: int = 3) -> dict[str, tuple[dict[str, int], list[str]]]:
    """Per detector: failed episodes in open and closed loop, and its first ``limit`` distinct errors."""
    run_dir = Path(run_dir)
    out: dict[str, tuple[dict[str, int], list[str]]] = {}
    seen: dict[str, set] = {}
    for mode, name in (("open", "episodes.csv"), ("closed", "closed.csv")):
        path = run_dir / name
        if not path.exists():
            continue
        with open(path, encoding="utf-8", newline="") as fh:
            for row in csv.DictReader(fh):
                err = row.get("error") or ""
                if not err:
                    continue
                counts, messages = out.setdefault(row["detector"], ({"open": 0, "closed": 0}, []))
                # episodes.csv has one row per scored unit (path); count episodes once.
                key = (mode, row["episode"])
                if key not in seen.setdefault(row["detector"], set()):
                    seen[row["detector"]].add(key)
                    counts[mode] += 1
                text = err if len(err) <= 200 else err[:197] + "..."
                if text not in messages and len(messages) < limit:
                    messages.append(text)
    return out


def write_scoreboard(run_dir: Path) -> Path:
    path = Path(run_dir) / "scoreboard.md"
    atomic_write(path, scoreboard_text(run_dir))
    return path


def family_tables(metrics, fams: list[str]) -> tuple[list[str], list[str]]:
    """(loop families, healthy families) of a metrics table, registered ones in registration
    order. A registered family's kind is its own (``FamilyInfo.looping``); a family the registry
    does not know (a replayed corpus) goes under each kind it has episodes of."""
    known = registered()
    loops = [f for f in loop_families() if f in fams]
    healthy = [f for f in healthy_families() if f in fams]
    for f in sorted(set(fams) - set(known)):
        rows = metrics[metrics["family"] == f]
        if (rows["tp"] + rows["miss"] + rows["early"]).sum() > 0:
            loops.append(f)
        if (rows["tn"] + rows["fp"]).sum() > 0:
            healthy.append(f)
    return loops, healthy
