"""Dev and held-out side by side: the same detectors scored on the shipped dev labels and on another labels file.

A labels file of the corpora's ``dev.json`` schema (the held-out half the maintainers keep,
or labels of your own) is scored exactly as the dev half is — ``loopbench run --suite
real-dev --corpus DIR --labels FILE`` then ``loopbench report`` — and every figure is printed
beside its dev value: per detector and corpus, the standard score (95% interval), recall,
early rate, false-alarm rate and recall − FAR; the paired bootstrap of ``--pair`` A − B on
both label sets; and what halting at the first alarm, and the guard as configured, does to
runs (successful runs stopped, failed-run calls saved). ``--targets`` checks the held-out
figures against issue 38's bar for the recommended guard. ``--config`` / ``--param`` apply to
both runs: a halt level picked on dev (``loopbench tune --objective deploy``) is judged here on
the held-out labels, in successful runs stopped and failed-run calls saved.

    python bench/bench_heldout.py --labels HELDOUT.json [--corpus DIR] [--detectors a,b]
                                  [--pair progress_guard,exact] [--rounds 1000] [--out DIR]
                                  [--targets] [--config FILE] [--param DET.P=V ...]
"""
from __future__ import annotations

import argparse
import csv
import json
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))

from bench_loco import default_corpus  # noqa: E402  (where the corpora sit beside a checkout)

#: Issue 38's bar for the recommended guard on held-out traces.
TARGETS = {"recall": (">=", 0.85), "early_rate": ("<=", 0.03), "false_alarm_rate": ("<=", 0.01)}


def _loopbench(args: list[str]) -> None:
    cmd = [sys.executable, "-m", "sim.cli", *args]
    print("$ loopbench " + " ".join(args), flush=True)
    done = subprocess.run(cmd, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    if done.returncode:
        sys.exit(f"bench_heldout: loopbench {args[0]} failed: {done.stderr.strip().splitlines()[-1]}")


def run_and_report(out: Path, corpus: Path, detectors: str, rounds: int, labels: Path | None,
                   extra: tuple[str, ...] | list[str] = ()) -> Path:
    t0 = time.perf_counter()
    _loopbench(["run", "--suite", "real-dev", "--corpus", str(corpus), "--detectors", detectors, "--out", str(out),
                "--no-progress", "--no-report", "--force", *extra] + (["--labels", str(labels)] if labels else []))
    _loopbench(["report", str(out), "--rounds", str(rounds)])
    print(f"  {time.perf_counter() - t0:.1f} s", flush=True)
    return out


def _rows(path: Path) -> list[dict[str, str]]:
    with open(path, newline="", encoding="utf-8") as f:
        return list(csv.DictReader(f))


def figures(run: Path) -> dict:
    """What the tables print, read from a reported run folder."""
    metrics = {(r["detector"], r["family"]): r for r in _rows(run / "metrics.csv")}
    ci = {(r["detector"], r["family"], r["metric"]): r for r in _rows(run / "intervals.csv")}
    paired = {(r["detector_a"], r["detector_b"], r["metric"]): r for r in _rows(run / "paired.csv")}
    deploy = {(r["detector"], r["action"], r["metric"]): r for r in _rows(run / "deploy.csv")}
    manifest = json.loads((run / "manifest.json").read_text(encoding="utf-8"))
    return {"metrics": metrics, "ci": ci, "paired": paired, "deploy": deploy, "run": run,
            "problems": manifest.get("label_problems") or []}


def _num(v: str | None) -> float | None:
    return None if v in (None, "") else float(v)


def _score(fig: dict, det: str, fam: str) -> str:
    m = fig["metrics"].get((det, fam))
    if m is None:
        return "–"
    c = fig["ci"].get((det, fam, "score_standard"))
    s = f"{float(m['score_standard']):.1f}"
    return s + (f" [{float(c['lo']):.1f}, {float(c['hi']):.1f}]" if c and c["lo"] and c["hi"] else "")


def _metric(fig: dict, det: str, fam: str, name: str) -> str:
    m = fig["metrics"].get((det, fam))
    if m is None or m.get(name) in (None, ""):
        return "–"
    return f"{float(m[name]):.3f}"


def _r_minus_far(fig: dict, det: str, fam: str) -> str:
    m = fig["metrics"].get((det, fam))
    if m is None or m["recall"] == "" or m["false_alarm_rate"] == "":
        return "–"
    return f"{float(m['recall']) - float(m['false_alarm_rate']):.3f}"


def _counts(fig: dict, det: str, fam: str) -> str:
    m = fig["metrics"].get((det, fam))
    if m is None:
        return "–"
    loops = sum(int(float(m[k])) for k in ("tp", "miss", "early"))
    clean = sum(int(float(m[k])) for k in ("tn", "fp"))
    return f"{loops}/{clean}"


def _deploy(fig: dict, det: str, action: str, metric: str) -> str:
    r = fig["deploy"].get((det, action, metric))
    if r is None or r["value"] == "":
        return "–"
    share = f"{100 * float(r['value']):.1f}%"
    return share + (f" ({r['count']}/{r['of']})" if r.get("count") not in (None, "") and metric.endswith("_stopped") else "")


def _pair_diff(fig: dict, a: str, b: str) -> tuple[float, float | None, float | None] | None:
    """A − B of the standard score and its paired interval (``paired.csv`` holds one order)."""
    r, sign = fig["paired"].get((a, b, "score_standard")), 1.0
    if r is None:
        r, sign = fig["paired"].get((b, a, "score_standard")), -1.0
    if r is None:
        return None
    lo, hi = _num(r["lo"]), _num(r["hi"])
    if lo is None or hi is None:
        return sign * float(r["diff"]), None, None
    lo, hi = sorted((sign * lo, sign * hi))
    return sign * float(r["diff"]), lo, hi


def _paired(fig: dict, a: str, b: str) -> str:
    got = _pair_diff(fig, a, b)
    if got is None:
        return "–"
    d, lo, hi = got
    if lo is None:
        return f"{d:+.1f}"
    return f"{d:+.1f} [{lo:.1f}, {hi:.1f}]" + (" ≠0" if lo > 0 or hi < 0 else "")


def tables(dev: dict, held: dict, pair: tuple[str, str]) -> list[str]:
    """The side-by-side tables as markdown lines."""
    dets = sorted({d for d, _ in dev["metrics"]} | {d for d, _ in held["metrics"]})
    fams = sorted({f for _, f in dev["metrics"]} | {f for _, f in held["metrics"]}, key=lambda f: (f != "all", f))
    out = ["| detector | corpus | loops/clean dev | held-out | score dev | held-out | recall dev | held-out | "
           "early dev | held-out | FAR dev | held-out | R−FAR dev | held-out |", "|---" * 14 + "|"]
    for det in dets:
        for fam in fams:
            cells = [_counts(dev, det, fam), _counts(held, det, fam), _score(dev, det, fam), _score(held, det, fam)]
            for name in ("recall", "early_rate", "false_alarm_rate"):
                cells += [_metric(dev, det, fam, name), _metric(held, det, fam, name)]
            cells += [_r_minus_far(dev, det, fam), _r_minus_far(held, det, fam)]
            out.append(f"| {det} | {'pooled' if fam == 'all' else fam} | " + " | ".join(cells) + " |")
    a, b = pair
    out += ["", f"paired bootstrap {a} − {b}, standard score, pooled (≠0: the 95% interval excludes 0): "
                f"dev {_paired(dev, a, b)}; held-out {_paired(held, a, b)}", ""]
    out += ["What a guard does to runs, pooled (halt = stop at the first alarm; configured = only the guard's own "
            "stop / escalate verdicts end a run):", "",
            "| detector | successes stopped (halt) dev | held-out | failed-run calls saved (halt) dev | held-out | "
            "successes stopped (configured) dev | held-out | failed-run calls saved (configured) dev | held-out |",
            "|---" * 9 + "|"]
    for det in dets + ["label_oracle"]:
        cells = []
        for action, metric in (("halt", "successes_stopped"), ("halt", "failed_calls_saved"),
                               ("configured", "successes_stopped"), ("configured", "failed_calls_saved")):
            cells += [_deploy(dev, det, action, metric), _deploy(held, det, action, metric)]
        out.append(f"| {det} | " + " | ".join(cells) + " |")
    return out


def target_lines(held: dict, guard: str, reference: str) -> list[str]:
    """Issue 38's bar on the held-out labels, one line per target, met or not."""
    m = held["metrics"].get((guard, "all"))
    if m is None:
        return [f"targets: {guard} is not in the run"]
    lines = [f"issue 38's targets for {guard} on the held-out labels:"]
    for name, (op, bar) in TARGETS.items():
        v = float(m[name]) if m[name] != "" else None
        ok = v is not None and (v >= bar if op == ">=" else v <= bar)
        lines.append(f"- {name} {'–' if v is None else f'{v:.3f}'} {op} {bar}: {'met' if ok else 'NOT met'}")
    got = _pair_diff(held, guard, reference)
    if got is not None:
        ok = got[1] is not None and got[1] > 0
        lines.append(f"- ahead of {reference} by a paired-bootstrap margin (the interval's low end > 0): "
                     f"{_paired(held, guard, reference)}: {'met' if ok else 'NOT met'}")
    return lines


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--labels", type=Path, required=True, help="The labels to hold out (the schema of dev.json).")
    ap.add_argument("--corpus", type=Path, default=None, help="Local copy of the corpora. [default: ../shared]")
    ap.add_argument("--detectors", default="progress_guard,exact")
    ap.add_argument("--pair", default="progress_guard,exact", help="A,B: paired bootstrap of A − B on both label sets.")
    ap.add_argument("--rounds", type=int, default=1000, help="Bootstrap rounds of the reports.")
    ap.add_argument("--out", type=Path, default=Path("runs/bench-heldout"), help="Where the two runs go (dev/, heldout/).")
    ap.add_argument("--targets", action="store_true", help="Check the held-out figures against issue 38's bar.")
    ap.add_argument("--config", type=Path, default=None, help="A TOML configuration for both runs (e.g. the file "
                                                              "`loopbench tune --objective deploy` wrote on dev).")
    ap.add_argument("--param", action="append", default=[], help="DETECTOR.PARAM=VALUE for both runs (repeatable).")
    args = ap.parse_args(argv)
    corpus = args.corpus or default_corpus()
    if not corpus.is_dir():
        ap.error(f"--corpus: {corpus}: no corpora there")
    if not args.labels.is_file():
        ap.error(f"--labels: {args.labels}: no such file")
    pair = tuple(args.pair.split(","))
    if len(pair) != 2:
        ap.error("--pair takes A,B")
    out, corpus = args.out.resolve(), corpus.resolve()  # the runs are made from the repository root
    if args.config is not None and not args.config.is_file():
        ap.error(f"--config: {args.config}: no such file")
    extra = (["--config", str(args.config.resolve())] if args.config else []) + [a for p in args.param
                                                                                 for a in ("--param", p)]
    dev = figures(run_and_report(out / "dev", corpus, args.detectors, args.rounds, None, extra))
    held = figures(run_and_report(out / "heldout", corpus, args.detectors, args.rounds, args.labels.resolve(), extra))
    lines = [f"dev: the shipped real-dev labels; held-out: {args.labels}"]
    for name, fig in (("dev", dev), ("held-out", held)):
        if fig["problems"]:
            lines.append(f"{name}: {len(fig['problems'])} labels not used (their traces are missing or convert to other "
                         f"calls; label_problems in {fig['run'] / 'manifest.json'}), e.g. {fig['problems'][0]}")
    lines += [""] + tables(dev, held, pair)
    if args.targets:
        lines += [""] + target_lines(held, pair[0], pair[1])
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
