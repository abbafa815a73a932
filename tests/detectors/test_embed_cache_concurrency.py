"""Two processes filling one embedding cache directory at once: no error, no torn row, every text readable."""
import sqlite3
import subprocess
import sys
from pathlib import Path

import numpy as np

from detectors.embedding_model import DiskCache, Embedder, HashingEncoder, normalise

ROOT = Path(__file__).resolve().parents[2]
WRITER = """
import sys
from detectors.embedding_model import Embedder, HashingEncoder
emb = Embedder(encode=HashingEncoder(dim=64), model_name="hashing-64", cache_dir=sys.argv[1])
start = int(sys.argv[2])
texts = [f"text number {i} of the shared suite" for i in range(start, start + 1500)]
for i in range(0, len(texts), 25):  # many small transactions, so the two writers interleave
    emb.embed(texts[i : i + 25])
print(emb.model_calls)
"""


def test_two_processes_write_the_same_cache(tmp_path):
    cache = tmp_path / "cache"
    cache.mkdir()
    # Overlapping ranges: texts 500..1499 are written by both processes.
    procs = [subprocess.Popen([sys.executable, "-c", WRITER, str(cache), str(start)], cwd=ROOT,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for start in (0, 500)]
    encoded = []
    for proc in procs:
        out, err = proc.communicate(timeout=300)
        assert proc.returncode == 0, err[-2000:]
        encoded.append(int(out.strip()))
    # Each process encodes what the disk did not have when it asked: together at least every text once.
    assert sum(encoded) >= 2000 and max(encoded) <= 1500
    db = sqlite3.connect(cache / DiskCache.FILE)
    assert db.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    db.close()
    texts = [f"text number {i} of the shared suite" for i in range(2000)]
    reader = Embedder(encode=HashingEncoder(dim=64), model_name="hashing-64", cache_dir=cache)
    vectors = reader.embed(texts)
    assert reader.model_calls == 0 and reader.disk_hits == 2000
    np.testing.assert_allclose(vectors, normalise(HashingEncoder(dim=64)(texts)), atol=1e-6)


def test_opening_a_new_cache_waits_for_another_process_creating_it(tmp_path):
    """A cache file another connection is still creating (its first write not yet committed)
    opens once that write commits. SQLite answers ``PRAGMA journal_mode=WAL`` with "database
    is locked" at once in that state, without waiting out the busy timeout: two pool workers
    opening a fresh cache together lost one's encoding shard that way (issue 18)."""
    import threading
    import time

    creator = sqlite3.connect(tmp_path / DiskCache.FILE, isolation_level=None, check_same_thread=False)
    creator.execute("BEGIN IMMEDIATE")  # a write in progress, as the other process's CREATE TABLE
    committed = threading.Event()

    def commit_later() -> None:
        time.sleep(0.3)
        creator.execute("COMMIT")
        committed.set()

    threading.Thread(target=commit_later).start()
    cache = DiskCache(tmp_path, "m")
    assert committed.is_set()  # it waited for the write rather than failing before it
    cache.put(["a"], np.ones((1, 4), dtype=np.float32))
    assert len(cache) == 1
    cache.close()
    assert creator.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    creator.close()
