"""Which of ``progress_guard``'s layers and rules earn their place, and on which corpus: one off at a time.

For every layer in ``detectors.progress_guard.LAYERS`` (and, with ``--rules``, every rule in
``RULES``, the exceptions and refinements inside the layers) the guard runs once more with
that one switched off (``skip_layers`` / ``skip_rules``), beside the full guard and ``exact``, on each suite
named (the product path: ``loopbench run --suite S --mode open``). It prints, per suite and
per corpus of a real suite (one family per corpus), the standard score of each variant and
its change against the full guard, with the true and false alarms it gains or loses; for
``real-injected`` (whose families are the injected kinds) also where those alarms move, by
the corpus each episode was built from. On the real suites one more row, **held out**: each
corpus (each injected episode by the corpus it was built from) scored by the guard without the
rules and layers written from that corpus (``RULES_FROM``, ``LAYERS_FROM``), pooled over every
episode — the leave-one-corpus-out figure of ``bench_loco.py``.

A second table per suite gives each switch in a deployer's terms (``deploy.csv``: successful
runs stopped and failed-run calls saved as configured, loops caught, nudges per 100 clean
calls): a rule that moves no first alarm can still move which runs the guard stops after its
nudges (``write_acts`` moves none of the first and one of the second on ``real-dev``).

A layer whose removal moves one corpus only was, on this evidence, fitted to that corpus;
one whose removal moves nothing on real traces earns its place only on the synthetic
suites; one whose removal *raises* a score costs more than it catches there. The adoption
protocol (docs/detectors.md) reads the table that way: a layer stays in the defaults when it
helps some corpus it was not derived from and harms none.

    python bench/bench_ablation.py [--suites real-dev,real-injected,default] [--corpus DIR | --shipped-only]
                                   [--layers a,b] [--rules all | --rules a,b] [--out DIR]
"""
from __future__ import annotations

import argparse
import csv
import json
import subprocess
import sys
import tempfile
import time
from collections import Counter, defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from bench_loco import default_corpus  # noqa: E402  (where the corpora sit beside a checkout)
from detectors.progress_guard import LAYERS, RULES, ProgressGuard  # noqa: E402
from sim.report.analysis import outcome_objects  # noqa: E402
from sim.scoring.outcomes import composite, load_profiles  # noqa: E402
from sim.config.provenance import unseen_params  # noqa: E402
from scenarios.realsuite import SUITES as REAL_SUITES  # noqa: E402  (one family per corpus)

GUARD = "detectors.progress_guard:ProgressGuard"


def switches(layers: list[str], rules: list[str]) -> list[tuple[str, str]]:
    """What is switched off, one variant each: (parameter, name), layers first."""
    return [("skip_layers", x) for x in layers] + [("skip_rules", x) for x in rules]


#: The label of the guard without the rules and layers written from ``corpus`` (``RULES_FROM``,
#: ``LAYERS_FROM``): what leave-one-corpus-out scores that corpus with.
HELD_OUT = "held_out_{}"


def held_out_corpora() -> list[str]:
    """The corpora some rule or layer of the guard was written from."""
    return sorted({c for parts in ProgressGuard.derived_from.values() for cs in parts.values() for c in cs})


def _variants(off: list[tuple[str, str]], held_out: bool = False) -> tuple[str, list[str]]:
    """The ``--detectors`` value and the ``--param`` options: the full guard, one variant per
    layer or rule switched off, exact; with ``held_out``, one variant per corpus without the
    rules written from it."""
    names = ["progress_guard"] + [f"without_{name}={GUARD}" for _, name in off] + ["exact"]
    params: list[str] = []
    for param, name in off:
        params += ["--param", f"without_{name}.{param}={json.dumps([name])}"]
    if held_out:
        for corpus in held_out_corpora():
            label = HELD_OUT.format(corpus)
            names.append(f"{label}={GUARD}")
            for param, value in unseen_params(ProgressGuard(), corpus).items():
                params += ["--param", f"{label}.{param}={json.dumps(value)}"]
    return ",".join(names), params


def _run(suite: str, out: Path, layers: list[tuple[str, str]], corpus: Path | None) -> Path:
    detectors, params = _variants(layers, held_out=suite.startswith("real"))
    cmd = [sys.executable, "-m", "sim.cli", "run", "--suite", suite, "--mode", "open", "--no-progress", "--no-report",
           "--force", "--out", str(out), "--detectors", detectors, *params]
    if corpus is not None and suite.startswith("real"):
        cmd += ["--corpus", str(corpus)]
    print("$ loopbench " + " ".join(cmd[3:]), flush=True)
    t0 = time.perf_counter()
    subprocess.run(cmd, cwd=ROOT, check=True, stdout=subprocess.DEVNULL)
    print(f"run: {time.perf_counter() - t0:.1f} s", flush=True)
    return out


def _metrics(run: Path) -> dict[tuple[str, str], dict[str, str]]:
    with open(run / "metrics.csv", newline="", encoding="utf-8") as f:
        return {(r["detector"], r["family"]): r for r in csv.DictReader(f)}


def _by_source(run: Path) -> dict[tuple[str, str], Counter]:
    """Per detector and source corpus (the episode id's prefix): true and false-or-early alarms."""
    out: dict[tuple[str, str], Counter] = defaultdict(Counter)
    with open(run / "episodes.csv", newline="", encoding="utf-8") as f:
        for r in csv.DictReader(f):
            outcome = r["outcome"]
            kind = "tp" if outcome == "tp" else "false" if outcome in ("fp", "early") else None
            if kind:
                out[(r["detector"], r["episode"].split(":")[0])][kind] += 1
    return out


def held_out_pooled(run: Path) -> tuple[float, Counter, float, Counter]:
    """The whole suite scored held out — each episode by the guard without the rules written
    from the corpus it comes from (its id's prefix) — and as shipped: (score, tp/false counts)
    each way, the standard composite over every episode."""
    import pandas as pd

    _, profiles = load_profiles()
    eps = pd.read_csv(run / "episodes.csv", keep_default_na=False, na_values=[""])
    present = set(eps["detector"])
    src = eps["episode"].str.split(":").str[0]
    wanted = src.map(lambda c: HELD_OUT.format(c) if HELD_OUT.format(c) in present else "progress_guard")
    held = outcome_objects(eps[eps["detector"] == wanted])
    shipped = outcome_objects(eps[eps["detector"] == "progress_guard"])

    def counts(outs):
        return Counter("tp" if o.outcome == "tp" else "false" for o in outs if o.outcome in ("tp", "fp", "early"))
    std = profiles["standard"]
    return composite(held, std), counts(held), composite(shipped, std), counts(shipped)


def _alarms(dtp: int, dfalse: int) -> list[str]:
    return ([f"tp {dtp:+d}"] if dtp else []) + ([f"false {dfalse:+d}"] if dfalse else [])


def _score_cell(score: float, base: float, dtp: int, dfalse: int) -> str:
    """A score, with its change against the full guard and the alarms it gains or loses when any moved."""
    d = score - base
    moved = abs(d) >= 0.05 or dtp or dfalse
    return f"{score:.1f}" + (" (" + ", ".join([f"{d:+.1f}"] + _alarms(dtp, dfalse)) + ")" if moved else "")


def _metrics_cell(r: dict[str, str], base: dict[str, str]) -> str:
    def n(row, k):
        return int(float(row[k]))
    return _score_cell(float(r["score_standard"]), float(base["score_standard"]), n(r, "tp") - n(base, "tp"),
                       n(r, "fp") + n(r, "early") - n(base, "fp") - n(base, "early"))


def source_table(run: Path, suite: str, layers: list[tuple[str, str]]) -> list[str]:
    """Where each variant's true and false alarms move, per source corpus of an injected suite
    (its families are the injected kinds, so the score table cannot say which corpus moved)."""
    c = _by_source(run)
    sources = sorted({src for _, src in c})
    rows = [(f"− {name}", lambda src, d=f"without_{name}": d) for _, name in layers] + [("`exact`", lambda src: "exact")]
    if any(det.startswith(HELD_OUT.format("")) for det, _ in c):
        # each corpus by its own variant; one nothing was written from, by the guard itself
        rows.append(("held out: each corpus without its own rules",
                     lambda src: HELD_OUT.format(src) if (HELD_OUT.format(src), src) in c else "progress_guard"))
    lines = [f"{suite}, by the corpus each episode was built from (true / false-or-early alarms gained or lost "
             "against the full guard):", "", "| variant | " + " | ".join(sources) + " |", "|---" * (len(sources) + 1) + "|"]
    for label, det in rows:
        cells = []
        for src in sources:
            got, base = c[(det(src), src)], c[("progress_guard", src)]
            cells.append(", ".join(_alarms(got["tp"] - base["tp"], got["false"] - base["false"])) or "–")
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    return lines + [""]


def table(run: Path, suite: str, layers: list[tuple[str, str]]) -> list[str]:
    """The suite's ablation table as markdown lines: score per column, change vs the full guard."""
    m = _metrics(run)
    families = sorted({fam for _, fam in m if fam != "all"})
    # Per corpus on a real suite (one family per corpus); the whole suite only, elsewhere.
    cols = ["all"] + (families if suite in REAL_SUITES else [])
    rows = ["progress_guard"] + [f"without_{name}" for _, name in layers] + ["exact"]
    lines = [f"### {suite}", "", "| variant | " + " | ".join(cols) + " |", "|---" * (len(cols) + 1) + "|"]
    for det in rows:
        cells = []
        for col in cols:
            r, base = m.get((det, col)), m.get(("progress_guard", col))
            if r is None:
                cells.append("–")
            elif det != "progress_guard" and base is not None:
                cells.append(_metrics_cell(r, base))
            else:
                cells.append(f"{float(r['score_standard']):.1f}")
        label = "the guard" if det == "progress_guard" else ("`exact`" if det == "exact" else f"− {det[len('without_'):]}")
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    if any(det.startswith(HELD_OUT.format("")) for det, _ in m):
        score, got, base_score, base = held_out_pooled(run)
        cells = [_score_cell(score, base_score, got["tp"] - base["tp"], got["false"] - base["false"])]
        for col in cols[1:]:
            cells.append(_metrics_cell(m.get((HELD_OUT.format(col), col)) or m[("progress_guard", col)],
                                       m[("progress_guard", col)]))
        lines.append("| held out: each corpus without its own rules | " + " | ".join(cells) + " |")
    return lines + [""]


#: The deployment figures of ``deploy.csv`` the second table shows: (action, metric, heading).
DEPLOY_SHOWN = (("configured", "successes_stopped", "successful runs stopped, as configured"),
                ("configured", "failed_calls_saved", "failed-run calls saved, as configured"),
                ("configured", "loops_caught", "loops caught, as configured"),
                ("nudge", "nudges_per_100_clean", "nudges per 100 clean calls"))


def deploy_table(run: Path, suite: str, layers: list[tuple[str, str]]) -> list[str]:
    """What each switch does in a deployer's terms (``deploy.csv``, the whole suite): the guard
    as configured — its nudges let a run go on, its stops end it — so a switch that moves no
    first alarm, and no score above, can still move which runs the guard stops."""
    with open(run / "deploy.csv", newline="", encoding="utf-8") as f:
        d = {(r["detector"], r["action"], r["metric"]): r for r in csv.DictReader(f)}

    def cell(det: str, action: str, metric: str) -> str:
        r, base = d.get((det, action, metric)), d.get(("progress_guard", action, metric))
        if r is None or r["value"] == "":
            return "–"
        value = float(r["value"])
        shown = f"{value:.2f}" if metric.startswith("nudges") else (
            f"{r['count']}/{r['of']}" if metric.endswith("stopped") or metric.startswith("loops") else f"{100 * value:.1f}%")
        if det == "progress_guard" or base is None or base["value"] == "":
            return shown
        change = value - float(base["value"])
        if abs(change) < 1e-12:
            return "–"
        if metric.startswith("nudges"):
            return f"{shown} ({change:+.2f})"
        if metric.endswith("stopped") or metric.startswith("loops"):
            return f"{shown} ({int(float(r['count'])) - int(float(base['count'])):+d})"
        return f"{shown} ({100 * change:+.1f} points)"

    rows = ["progress_guard"] + [f"without_{name}" for _, name in layers] + ["exact"]
    lines = [f"{suite}, in a deployer's terms (deploy.csv; – where nothing moved against the full guard):", "",
             "| variant | " + " | ".join(h for _, _, h in DEPLOY_SHOWN) + " |", "|---" * (len(DEPLOY_SHOWN) + 1) + "|"]
    for det in rows:
        label = "the guard" if det == "progress_guard" else ("`exact`" if det == "exact" else f"− {det[len('without_'):]}")
        lines.append(f"| {label} | " + " | ".join(cell(det, a, m) for a, m, _ in DEPLOY_SHOWN) + " |")
    return lines + [""]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--suites", default="real-dev,real-injected,default")
    ap.add_argument("--corpus", default=None, help="local copy of the real corpora (real-dev's Who&When traces) "
                                                   "[default: ../shared/corpora/real when it is there]")
    ap.add_argument("--shipped-only", action="store_true", help="the real suites' shipped traces alone (no --corpus)")
    ap.add_argument("--layers", default=",".join(LAYERS), help="layers to switch off one at a time ('' for none)")
    ap.add_argument("--rules", default="", help="rules to switch off one at a time: names, or 'all' [default: none]")
    ap.add_argument("--out", default=None, help="where the runs go [default: a temporary folder]")
    args = ap.parse_args(argv)
    layers = [x for x in args.layers.split(",") if x]
    unknown = [x for x in layers if x not in LAYERS]
    if unknown:
        ap.error(f"--layers: {unknown[0]!r} is no layer ({', '.join(LAYERS)})")
    rules = list(RULES) if args.rules == "all" else [x for x in args.rules.split(",") if x]
    unknown = [x for x in rules if x not in RULES]
    if unknown:
        ap.error(f"--rules: {unknown[0]!r} is no rule ({', '.join(RULES)})")
    off = switches(layers, rules)
    if not off:
        ap.error("--layers and --rules: nothing to switch off")
    if args.shipped_only and args.corpus:
        ap.error("--shipped-only and --corpus: give one")
    corpus = (None if args.shipped_only else
              Path(args.corpus) if args.corpus else (default_corpus() if default_corpus().is_dir() else None))
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(args.out) if args.out else Path(tmp)
        out: list[str] = ["Standard score; in brackets the change against the full guard, and true alarms (tp) and "
                          "false or early alarms gained (+) or lost (−).", ""]
        for suite in [s for s in args.suites.split(",") if s]:
            run = _run(suite, base / suite, off, corpus)
            out += table(run, suite, off)
            out += deploy_table(run, suite, off)
            if suite == "real-injected":
                out += source_table(run, suite, off)
        print("\n".join(out))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
