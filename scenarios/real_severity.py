"""Severities for a real suite's loops, proposed by the hindsight labeller (SPEC §11).

The hand labels of ``real-dev`` locate each loop's onset but mark every call from there on,
so they cannot say whether a loop was one redundant call or ran to the end. The labeller
reads each call's result along the trace, so for every labelled onset it proposes the
persistence (redundant calls in a row from the onset, the onset included), whether it
lasts to the end, and the severity (``runaway`` / ``blip``). The file holds labels and
numbers only, keyed by the trace's ``calls_sha1`` with the onset it was judged at:

    {"format": "loopbench-severities", "rubric_version": 1, "suite": "real-dev",
     "traces": [{"calls_sha1": "...", "episode": "...", "onset": 3, "persistence": 1,
                 "to_end": false, "severity": "blip", "source": "labeller"}, ...]}

``source`` is ``labeller`` until a person confirms an entry on the review page (then
``human``); a rebuild keeps the entries a person decided.

    python -m scenarios.real_severity --corpus ../shared/corpora/real
"""
from __future__ import annotations

import argparse
import json
from collections import Counter
from pathlib import Path

from scenarios.files import atomic_file
from scenarios.labeling import HUMAN, LABELLER, RUBRIC_VERSION, hindsight_severity
from scenarios.realsuite import SEVERITIES, RealSuiteError, label_onset, load_severities, load_suite
from scenarios.severity import severity_meta

FORMAT = "loopbench-severities"


def propose_severities(name: str, corpus_dir: str | Path) -> list[dict]:
    """One entry per looping episode of suite ``name`` (converted from ``corpus_dir``)."""
    kept = {sha: t for sha, t in load_severities(name).items() if t.get("source") == HUMAN}
    load = load_suite(name, corpus_dir, from_corpus_only=True)
    if load.problems:
        raise RealSuiteError(f"{len(load.problems)} labels do not match the corpus, e.g. {load.problems[0]}")
    entries = []
    for ep in load.episodes:
        onset = label_onset(ep)
        if onset is None:
            continue
        sha = ep.meta["calls_sha1"]
        if sha in kept and kept[sha].get("onset") == onset:
            entries.append(kept[sha])
            continue
        sev = hindsight_severity(ep, onset)
        entries.append({"calls_sha1": sha, "episode": ep.id, "onset": onset, **severity_meta(sev, LABELLER)})
    return entries


def write_severities(name: str, entries: list[dict], out_dir: str | Path) -> Path:
    out = Path(out_dir) / SEVERITIES[name]
    doc = {"format": FORMAT, "rubric_version": RUBRIC_VERSION, "suite": name, "traces": entries}
    with atomic_file(out) as fh:
        fh.write(json.dumps(doc, indent=1, ensure_ascii=False) + "\n")
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m scenarios.real_severity", description=__doc__.splitlines()[0])
    ap.add_argument("--corpus", required=True, help="the corpora folder (e.g. ../shared/corpora/real)")
    ap.add_argument("--suite", default="real-dev", choices=sorted(SEVERITIES))
    ap.add_argument("--out", default=str(Path(__file__).parent / "data" / "real"))
    args = ap.parse_args(argv)
    try:
        entries = propose_severities(args.suite, args.corpus)
    except RealSuiteError as exc:
        print(f"error: {exc}")
        return 2
    out = write_severities(args.suite, entries, args.out)
    counts = Counter((e["episode"].split(":")[0], e["severity"]) for e in entries)
    print(f"wrote {out}: {len(entries)} loops; " + ", ".join(f"{f} {s} {n}" for (f, s), n in sorted(counts.items())))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
