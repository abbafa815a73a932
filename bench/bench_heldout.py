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
the held-out labels, in successful runs stopped and failed-run calls saved. When the runs span two
corpora or more, leave-one-corpus-out follows on each label set, side by side (``cv.csv``): the
``--pair`` detectors as run and held out by corpus, and the held-out difference to ``exact``.
As run, that asks whether the rules carry over to new runs of the same agents; leave-one-corpus-out
asks whether they carry over to other agents. ``--transfer SYNTHETIC_RUN`` (a run of the default
suite) adds how far its ranking of the detectors holds on each label set (``loopbench report
SYNTHETIC_RUN --transfer``): Kendall's τ-b pooled and per corpus, as run and leave-one-corpus-out,
dev beside held-out; without ``--detectors`` the real runs then score every registered detector.

    python bench/bench_heldout.py [--labels HELDOUT.json] [--corpus DIR] [--detectors a,b]
                                  [--pair progress_guard,exact] [--rounds 1000] [--out DIR]
                                  [--targets] [--config FILE] [--param DET.P=V ...]
                                  [--transfer SYNTHETIC_RUN]
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
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from bench_loco import default_corpus  # noqa: E402  (where the corpora sit beside a checkout)
from sim.report.transfer import tau_text, transfer  # noqa: E402

#: The held-out half labelled for loopbench (the maintainers' own stays back): docs/traces.md.
SELF_HELDOUT = ROOT / "scenarios" / "data" / "real" / "real-heldout-self-labels.json"
#: Issue 38's bar for the recommended guard on held-out traces.
TARGETS = {"recall": (">=", 0.85), "early_rate": ("<=", 0.03), "false_alarm_rate": ("<=", 0.01)}
#: ... and for the synthetic suite's ranking of the detectors there (with the same top pick).
TRANSFER_TARGET = 0.8


def run_loopbench(args: list[str], who: str = "bench_heldout") -> None:
    """``loopbench ARGS`` in a subprocess, echoed; a failure ends ``who`` with loopbench's last line."""
    cmd = [sys.executable, "-m", "sim.cli", *args]
    print("$ loopbench " + " ".join(args), flush=True)
    done = subprocess.run(cmd, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    if done.returncode:
        sys.exit(f"{who}: loopbench {args[0]} failed: {done.stderr.strip().splitlines()[-1]}")


def run_and_report(out: Path, corpus: Path, detectors: str | None, rounds: int, labels: Path | None,
                   extra: tuple[str, ...] | list[str] = ()) -> Path:
    """Run real-dev (with ``labels`` in place of the shipped ones) and report it; ``detectors``
    None scores every registered detector. The shipped held-out half runs as its own suite,
    ``real-heldout-self``, which carries its loops' severities too."""
    t0 = time.perf_counter()
    suite = "real-dev"
    if labels is not None and labels.resolve() == SELF_HELDOUT:
        suite, labels = "real-heldout-self", None
    run_loopbench(["run", "--suite", suite, "--corpus", str(corpus), "--out", str(out), "--no-progress",
                "--no-report", "--force", *extra] + (["--detectors", detectors] if detectors else [])
               + (["--labels", str(labels)] if labels else []))
    run_loopbench(["report", str(out), "--rounds", str(rounds)])
    print(f"  {time.perf_counter() - t0:.1f} s", flush=True)
    return out


def read_rows(path: Path) -> list[dict[str, str]]:
    with open(path, newline="", encoding="utf-8") as f:
        return list(csv.DictReader(f))


def figures(run: Path) -> dict:
    """What the tables print, read from a reported run folder."""
    metrics = {(r["detector"], r["family"]): r for r in read_rows(run / "metrics.csv")}
    ci = {(r["detector"], r["family"], r["metric"]): r for r in read_rows(run / "intervals.csv")}
    paired = {(r["detector_a"], r["detector_b"], r["metric"]): r for r in read_rows(run / "paired.csv")}
    deploy = {(r["detector"], r["action"], r["metric"]): r for r in read_rows(run / "deploy.csv")}
    manifest = json.loads((run / "manifest.json").read_text(encoding="utf-8"))
    # ``loopbench report`` writes cv.csv for a run over two corpora or more.
    cv = ({(r["detector"], r["corpus"], r["metric"]): r for r in read_rows(run / "cv.csv")}
          if (run / "cv.csv").is_file() else {})
    return {"metrics": metrics, "ci": ci, "paired": paired, "deploy": deploy, "cv": cv, "run": run,
            "problems": manifest.get("label_problems") or []}


def num(v: str | None) -> float | None:
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
    lo, hi = num(r["lo"]), num(r["hi"])
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


def _cv_cell(fig: dict, det: str, corpus: str, col: str) -> str:
    r = fig["cv"].get((det, corpus, "score_standard"))
    if r is None or num(r.get(col)) is None or (col == "vs_reference" and r.get("reference") == det):
        return "–"
    lo, hi = num(r.get(f"{col}_lo")), num(r.get(f"{col}_hi"))
    sign = "+" if col == "vs_reference" else ""
    text = f"{float(r[col]):{sign}.1f}"
    if lo is None or hi is None:
        return text
    return text + f" [{lo:.1f}, {hi:.1f}]" + (" ≠0" if col == "vs_reference" and (lo > 0 or hi < 0) else "")


def loco_lines(dev: dict, held: dict, detectors: tuple[str, ...]) -> list[str]:
    """Leave-one-corpus-out on each label set, side by side: the rules and thresholds a corpus
    did not shape, on the dev traces and on the held-out ones (``cv.csv`` of each run)."""
    if not dev["cv"] or not held["cv"]:
        return []
    refs = {r["reference"] for fig in (dev, held) for r in fig["cv"].values() if r.get("reference")}
    ref = next(iter(refs)) if len(refs) == 1 else "the reference"
    out = ["Leave-one-corpus-out on each label set (every threshold chosen on the other corpora; a detector that "
           "declares its rules' corpora scored on each corpus without the rules written from it; `loopbench report "
           "--cv corpus`), standard score:", "",
           f"| detector | corpus | as run dev | held-out | LOCO dev | held-out | LOCO − {ref} dev | held-out |",
           "|---" * 8 + "|"]
    corpora = sorted({c for fig in (dev, held) for _, c, _ in fig["cv"]}, key=lambda c: (c == "pooled", c))
    for det in detectors:
        for c in corpora:
            cells = [_cv_cell(fig, det, c, col) for col in ("as_run", "heldout", "vs_reference") for fig in (dev, held)]
            if any(x != "–" for x in cells):
                out.append(f"| {det} | {c} | " + " | ".join(cells) + " |")
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


def transfer_rows(synthetic: Path, real: Path, out: Path, rounds: int = 1000) -> dict[str, dict]:
    """How far the synthetic run's ranking holds on the real run, by corpus and pooled: τ-b as run
    (each run's ``metrics.csv``) and, where the real run has two corpora or more, leave-one-corpus-out
    (``loopbench report SYNTHETIC --transfer REAL`` into ``out``: its ``transfer_cv.csv``)."""
    def scores(metrics: list[dict[str, str]], family: str) -> dict[str, float]:
        return {r["detector"]: float(r["score_standard"]) for r in metrics
                if r["family"] == family and num(r["score_standard"]) is not None}

    syn = scores(read_rows(synthetic / "metrics.csv"), "all")
    real_metrics = read_rows(real / "metrics.csv")
    families = sorted({r["family"] for r in real_metrics} - {"all"})
    rows: dict[str, dict] = {}
    for corpus, family in [(f, f) for f in families] + [("pooled", "all")]:
        _, summary = transfer(syn, scores(real_metrics, family))
        rows[corpus] = {"tau_as_run": summary["kendall_tau"], "top_as_run": summary["top_real"],
                        "synthetic_top": summary["top_synthetic"]}
    # ``rounds`` bootstrap rounds give the held-out τ-b their intervals (about 7 s for 1000).
    run_loopbench(["report", str(synthetic), "--transfer", str(real), "--out", str(out), "--rounds", str(rounds)])
    if (out / "transfer_cv.csv").is_file():
        for r in read_rows(out / "transfer_cv.csv"):
            rows.setdefault(r["corpus"], {}).update({k: num(r.get(k)) for k in (
                "tau_heldout", "tau_heldout_lo", "tau_heldout_hi",
                "tau_both_heldout", "tau_both_heldout_lo", "tau_both_heldout_hi")})
    return rows


def transfer_lines(dev: dict[str, dict[str, str]], held: dict[str, dict[str, str]]) -> list[str]:
    """Kendall τ-b of the synthetic ranking against each label set's, dev beside held-out."""
    def tau(rows: dict, corpus: str, col: str) -> str:
        r = rows.get(corpus, {})
        return tau_text(r.get(col), r.get(f"{col}_lo"), r.get(f"{col}_hi"))

    cols = (("tau_as_run", "as run"), ("tau_heldout", "LOCO"), ("tau_both_heldout", "both held out"))
    out = ["Transfer: Kendall τ-b between the synthetic run's ranking and the real one (as run: the thresholds the "
           "runs used; LOCO: each threshold chosen on the other corpora, and progress_guard without the rules written "
           "from the corpus; both held out: the synthetic side at its "
           "leave-one-family-out thresholds too; LOCO needs two corpora or more; in brackets the 95% bootstrap "
           "interval over the real traces):", "",
           "| corpus | " + " | ".join(f"{name} dev | held-out" for _, name in cols) + " | real top (as run) dev | held-out |",
           "|---" * (2 * len(cols) + 3) + "|"]
    corpora = sorted(set(dev) | set(held), key=lambda c: (c == "pooled", c))
    for c in corpora:
        cells = [f"{tau(dev, c, col)} | {tau(held, c, col)}" for col, _ in cols]
        tops = [rows.get(c, {}).get("top_as_run") or "–" for rows in (dev, held)]
        out.append(f"| {c} | " + " | ".join(cells) + f" | {tops[0]} | {tops[1]} |")
    return out


def transfer_target(held: dict[str, dict[str, str]]) -> str:
    """Issue 38's transfer bar on the held-out labels: τ-b as run, pooled, and the same top pick."""
    pooled = held.get("pooled", {})
    v = pooled.get("tau_as_run")
    same = pooled.get("top_as_run") == pooled.get("synthetic_top")
    ok = v is not None and v >= TRANSFER_TARGET and same
    return (f"- Kendall τ-b {'–' if v is None else f'{v:.2f}'} >= {TRANSFER_TARGET} with the same top pick "
            f"(synthetic `{pooled.get('synthetic_top')}`, held-out `{pooled.get('top_as_run')}`): "
            f"{'met' if ok else 'NOT met'}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--labels", type=Path, default=SELF_HELDOUT,
                    help="The labels to hold out (the schema of dev.json). [default: the held-out half labelled here, "
                         "scenarios/data/real/real-heldout-self-labels.json]")
    ap.add_argument("--corpus", type=Path, default=None, help="Local copy of the corpora. [default: ../shared]")
    ap.add_argument("--detectors", default=None,
                    help="[default: progress_guard,exact; with --transfer, every registered detector]")
    ap.add_argument("--pair", default="progress_guard,exact", help="A,B: paired bootstrap of A − B on both label sets.")
    ap.add_argument("--rounds", type=int, default=1000, help="Bootstrap rounds of the reports.")
    ap.add_argument("--out", type=Path, default=Path("runs/bench-heldout"), help="Where the two runs go (dev/, heldout/).")
    ap.add_argument("--targets", action="store_true", help="Check the held-out figures against issue 38's bar.")
    ap.add_argument("--config", type=Path, default=None, help="A TOML configuration for both runs (e.g. the file "
                                                              "`loopbench tune --objective deploy` wrote on dev).")
    ap.add_argument("--param", action="append", default=[], help="DETECTOR.PARAM=VALUE for both runs (repeatable).")
    ap.add_argument("--transfer", type=Path, default=None, help="A synthetic run (the default suite): how far its "
                                                               "ranking of the detectors holds on each label set.")
    args = ap.parse_args(argv)
    if args.transfer is not None and not (args.transfer / "metrics.csv").is_file():
        ap.error(f"--transfer: {args.transfer}: not a run folder (no metrics.csv)")
    detectors = args.detectors or (None if args.transfer is not None else "progress_guard,exact")
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
    dev = figures(run_and_report(out / "dev", corpus, detectors, args.rounds, None, extra))
    held = figures(run_and_report(out / "heldout", corpus, detectors, args.rounds, args.labels.resolve(), extra))
    lines = [f"dev: the shipped real-dev labels; held-out: {args.labels}"]
    for name, fig in (("dev", dev), ("held-out", held)):
        if fig["problems"]:
            lines.append(f"{name}: {len(fig['problems'])} labels not used (their traces are missing or convert to other "
                         f"calls; label_problems in {fig['run'] / 'manifest.json'}), e.g. {fig['problems'][0]}")
    lines += [""] + tables(dev, held, pair)
    loco = loco_lines(dev, held, pair)
    if loco:
        lines += [""] + loco
    moved = None
    if args.transfer is not None:
        synthetic = args.transfer.resolve()
        moved = (transfer_rows(synthetic, out / "dev", out / "transfer-dev", args.rounds),
                 transfer_rows(synthetic, out / "heldout", out / "transfer-heldout", args.rounds))
        lines += [""] + transfer_lines(*moved)
    if args.targets:
        lines += [""] + target_lines(held, pair[0], pair[1])
        if moved is not None:
            lines.append(transfer_target(moved[1]))
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
