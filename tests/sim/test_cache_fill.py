"""A pool run fills the embedding cache in one disjoint shard per worker before the
model-backed tasks start (issue 18): those tasks then encode nothing the open loop has, and
the run scores exactly as a one-process run that encodes its own texts."""
from __future__ import annotations

import csv
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("sentence_transformers")

ROOT = Path(__file__).resolve().parents[2]
SUITE = ["--suite", "quick", "--families", "paraphrased,refinement,search_dead_end", "--episodes", "2",
         "--detectors", "embedding,exact", "--mode", "both", "--no-progress"]


def run(out: Path, cache: Path, workers: int) -> None:
    proc = subprocess.run([sys.executable, "-m", "sim.cli", "run", *SUITE, "--workers", str(workers),
                           "--embed-cache", str(cache), "--out", str(out)],
                          cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]


def rows(path: Path) -> list[dict]:
    with open(path, newline="") as fh:
        return list(csv.DictReader(fh))


def cached(cache: Path) -> int:
    (db,) = cache.glob("*.sqlite")
    with sqlite3.connect(db) as con:
        return con.execute("SELECT COUNT(*) FROM embeddings").fetchone()[0]


def test_sharded_fill_encodes_each_text_once_and_scores_as_one_process(tmp_path):
    run(tmp_path / "pool", tmp_path / "pool-cache", workers=2)
    run(tmp_path / "alone", tmp_path / "alone-cache", workers=1)
    pool = {(r["detector"], r["mode"]): int(r["model_calls"]) for r in rows(tmp_path / "pool" / "timings.csv")}
    alone = {(r["detector"], r["mode"]): int(r["model_calls"]) for r in rows(tmp_path / "alone" / "timings.csv")}
    # One process: the open-loop task encodes the suite's texts, the closed-loop task only
    # what its own paths add. In the pool the shards encoded every open-loop text before
    # either task started: the open task encodes nothing, the closed one the same as alone.
    assert alone[("embedding", "open")] > 0
    assert pool[("embedding", "open")] == 0
    assert pool[("embedding", "closed")] == alone[("embedding", "closed")]
    # Together the shards and the tasks left the same texts in the cache as one process did.
    assert cached(tmp_path / "pool-cache") == cached(tmp_path / "alone-cache") > 0
    for name in ("metrics.csv", "closed_metrics.csv", "episodes.csv"):
        assert (tmp_path / "pool" / name).read_bytes() == (tmp_path / "alone" / name).read_bytes(), name
    verdicts = [[(r["node"], r["verdict"]) for r in rows(tmp_path / d / "calls.csv")] for d in ("pool", "alone")]
    assert verdicts[0] == verdicts[1]
