"""A cache that a pool run filled with a suite's texts is marked as holding them, and the
next run of the same suite skips the encoding shards (issue 18: on a warm default run the
shards spent their time working out texts only to find them all cached). A run that lost a
shard leaves no mark, and the mark names what the texts follow from."""
from __future__ import annotations

import contextlib
import os
import sqlite3
from pathlib import Path

from click.testing import CliRunner

from detectors.embedding_model import DiskCache
from scenarios.tree import linear_episode
from sim.cli import main
from sim.config.spec import DetectorSpec
from sim.execute.pool import prefetch_mark

ROOT = Path(__file__).resolve().parents[2]
FAULTS = ROOT / "tests" / "fixtures" / "faults"
SUITE = ["--suite", "quick", "--families", "stale,healthy", "--episodes", "2", "--no-progress", "--mode", "both",
         "--detectors", "exact,pf=fault_guards:PrefetchFailsOnce", "--workers", "2"]
RESULTS = ("metrics.csv", "closed_metrics.csv", "episodes.csv", "calls.csv")


def run(out: Path, cache: Path) -> str:
    old = os.getcwd()
    os.chdir(FAULTS)  # where ``fault_guards`` is importable
    try:
        r = CliRunner().invoke(main, ["run", *SUITE, "--embed-cache", str(cache), "--out", str(out)], catch_exceptions=False)
    finally:
        os.chdir(old)
    assert r.exit_code == 0, r.output
    return r.output


def prefetches(log: Path) -> int:
    """Prefetch calls since the last look: one per encoding shard, one in the detector's task."""
    n = len(log.read_text().splitlines()) if log.exists() else 0
    log.unlink(missing_ok=True)
    return n


def marks(cache: Path) -> int:
    with contextlib.closing(sqlite3.connect(cache / DiskCache.FILE)) as db:
        return db.execute("SELECT COUNT(*) FROM marks").fetchone()[0]


def test_a_marked_cache_skips_the_shards_with_the_same_results(tmp_path, monkeypatch):
    log = tmp_path / "prefetch.log"
    monkeypatch.setenv("FAULT_PREFETCH_LOG", str(log))
    monkeypatch.delenv("FAULT_PREFETCH_MARK", raising=False)
    cache = tmp_path / "cache"
    said = f"embedding cache {cache}: encoding this suite's texts for pf first, in 2 shards"
    assert said in run(tmp_path / "first", cache)  # a first run says why it takes longer
    assert prefetches(log) == 3  # two shards (one per worker), then the task's own
    assert marks(cache) == 1
    assert "encoding this suite's texts" not in run(tmp_path / "second", cache)
    assert prefetches(log) == 1  # the task's own only
    for name in RESULTS:
        assert (tmp_path / "first" / name).read_bytes() == (tmp_path / "second" / name).read_bytes(), name
    run(tmp_path / "elsewhere", tmp_path / "other-cache")  # another cache has no mark
    assert prefetches(log) == 3


def test_a_run_that_lost_a_shard_leaves_no_mark(tmp_path, monkeypatch):
    log = tmp_path / "prefetch.log"
    monkeypatch.setenv("FAULT_PREFETCH_LOG", str(log))
    monkeypatch.setenv("FAULT_PREFETCH_MARK", str(tmp_path / "failed-once"))
    cache = tmp_path / "cache"
    assert "warning: encoding shard" in run(tmp_path / "lost", cache)
    assert marks(cache) == 0
    prefetches(log)
    assert "warning: encoding shard" not in run(tmp_path / "again", cache)
    assert prefetches(log) == 3  # the shards ran again, and this time all of them finished
    assert marks(cache) == 1


def test_the_mark_names_the_specs_and_the_calls():
    eps = [linear_episode("e", [("search", {"q": "x"}, "r"), ("search", {"q": "x"}, "r")])]
    other = [linear_episode("e", [("search", {"q": "y"}, "r"), ("search", {"q": "x"}, "r")])]
    spec = DetectorSpec("embedding", "embedding")
    mark = prefetch_mark([spec], eps)
    assert mark == prefetch_mark([DetectorSpec("embedding", "embedding")], eps)
    assert mark != prefetch_mark([spec], other)
    assert mark != prefetch_mark([DetectorSpec("embedding", "embedding", {"threshold": 0.9})], eps)
    assert mark != prefetch_mark([spec, DetectorSpec("progress_guard", "progress_guard")], eps)


def test_any_arguments_a_trace_may_hold_make_a_mark():
    """Arguments JSON cannot carry as they are (an integer beyond 64 bits, a lone surrogate,
    both of which a trace may hold) still name their own mark."""
    spec = [DetectorSpec("embedding", "embedding")]
    odd = [linear_episode("e", [("t", {"n": 1 << 70}, "r"), ("t", {"q": "\ud800"}, "r")])]
    other = [linear_episode("e", [("t", {"n": (1 << 70) + 1}, "r"), ("t", {"q": "\ud800"}, "r")])]
    assert prefetch_mark(spec, odd) == prefetch_mark(spec, odd) != prefetch_mark(spec, other)
    big = [DetectorSpec("embedding", "embedding", {"threshold": 1 << 70})]
    assert prefetch_mark(big, odd) != prefetch_mark(spec, odd)


def test_the_mark_ignores_file_times():
    """A CI job restores the cache into a fresh checkout and install, where every file is
    new: the mark must still be the one the last job left."""
    import detectors.exact as source

    eps = [linear_episode("e", [("search", {"q": "x"}, "r")])]
    spec = [DetectorSpec("embedding", "embedding")]
    before = prefetch_mark(spec, eps)
    path = Path(source.__file__)
    st = path.stat()
    try:
        os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 10**9))
        assert prefetch_mark(spec, eps) == before
    finally:
        os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
