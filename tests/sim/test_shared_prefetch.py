"""A cold run encodes its suite's texts once, split over every pool worker.

The detector below stands in for a model-backed one: its ``prefetch`` goes through an
``Embedder`` on the shared disk cache (``$LOOPBENCH_EMBED_CACHE``), with a counting
encoder instead of the model, and each process appends what it encoded to a log file.
"""
from __future__ import annotations

import json
import os
from pathlib import Path

from detectors.embedding_model import CACHE_ENV, Embedder, HashingEncoder
from detectors.exact import ExactDetector
from detectors.protocol import ToolCall

LOG_ENV = "LOOPBENCH_TEST_PREFETCH_LOG"
_EMBEDDERS: dict[str, Embedder] = {}


def call_text(call: ToolCall) -> str:
    return f"{call.tool} {json.dumps(call.args, sort_keys=True, default=str)}"


class CountingModelDetector(ExactDetector):
    """``exact`` with a model-backed ``prefetch``: it encodes every call's text."""

    def prefetch(self, calls):
        cache = os.environ[CACHE_ENV]
        emb = _EMBEDDERS.setdefault(cache, Embedder(encode=HashingEncoder(32), model_name="counting", cache_dir=cache))
        encoded = emb.prefetch([call_text(c) for c in calls])
        with open(os.environ[LOG_ENV], "a") as log:
            log.write(f"{os.getpid()} {encoded}\n")
        return encoded


def test_a_cold_cache_is_filled_by_every_worker_once_and_the_tasks_then_encode_nothing(tmp_path: Path, monkeypatch):
    from sim.config.spec import DetectorSpec
    from sim.execute import pool
    from sim.execute.runner import build_scenarios, generate_episodes

    log = tmp_path / "encoded.log"
    monkeypatch.setenv(CACHE_ENV, str(tmp_path / "cache"))
    monkeypatch.setenv(LOG_ENV, str(log))
    scenarios = build_scenarios(["stale", "healthy", "paraphrased"], 3, 0, {})
    episodes = generate_episodes(scenarios)
    spec = DetectorSpec("counting", f"{__name__}:CountingModelDetector", {})
    tasks = [("open", spec), ("closed", spec), ("open", DetectorSpec("exact", "exact", {}))]
    assert pool.shared_prefetch(tasks) == [spec]

    out = pool.run_tasks(tasks, episodes, scenarios, workers=2)

    assert set(out) == {("open", "counting"), ("closed", "counting"), ("open", "exact")}
    distinct = {call_text(n.call) for ep in episodes for n in ep.tool_nodes()}
    rows = [tuple(map(int, line.split())) for line in log.read_text().splitlines()]
    shares = [count for _, count in rows if count]
    # Two shares, in two processes, that together encode every distinct text once ...
    assert len(shares) == 2 and sum(shares) == len(distinct) and min(shares) > 0
    assert len({pid for pid, count in rows if count}) == 2
    # ... and the two tasks' own prefetches find everything in the cache.
    assert len(rows) == 4 and sorted(count for _, count in rows)[:2] == [0, 0]
