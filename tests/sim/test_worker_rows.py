"""The local pool's workers turn each finished task into its rows of the result files
(``sim.execute.rows.RowMaker``): the parent receives exactly the rows it would have made from
the raw result, falls back to making them itself when a worker cannot, and a run's
checkpoints keep them exactly (``--resume``)."""
from __future__ import annotations

import os

import orjson
import pytest

from scenarios.suites import load_suite
from sim.config.spec import DetectorSpec
from sim.execute import pool
from sim.execute.checkpoint import decode, dumps, encode
from sim.execute.rows import ClosedRows, OpenRows, RowMaker
from sim.execute.runner import build_scenarios
from sim.execute.tasks import OpenResult
from sim.play.harness import Tape, generate
from sim.scoring.outcomes import load_profiles

TASKS = [(kind, DetectorSpec(d, d)) for kind in ("open", "closed") for d in ("exact", "no_progress", "layered")]
PARENT = os.getpid()


@pytest.fixture(scope="module")
def suite():
    s = load_suite("quick")
    # ``stale``: a family every task catches some loops of, so the rows compared are not all misses
    scenarios = build_scenarios([*s.families[:4], "stale"], 3, 7, s.family_params)
    tapes = {sc.id: Tape() for sc in scenarios}
    episodes = [generate(sc, tape=tapes[sc.id]) for sc in scenarios]
    return scenarios, tapes, episodes


@pytest.fixture(scope="module")
def raw(suite):
    scenarios, tapes, episodes = suite
    return pool.run_tasks(TASKS, episodes, scenarios, workers=1, tapes=tapes)  # in this process: raw results


def _maker(suite, cls=RowMaker):
    scenarios, _, episodes = suite
    return cls(episodes, scenarios, 5, load_profiles()[1])


def test_workers_send_the_rows_the_parent_would_make(suite, raw):
    scenarios, tapes, episodes = suite
    sent = pool.run_tasks(TASKS, episodes, scenarios, workers=2, tapes=tapes, rows=_maker(suite))
    assert sent.keys() == raw.keys()
    parent = _maker(suite)
    for key, (got, timing) in sent.items():
        assert isinstance(got, OpenRows if key[0] == "open" else ClosedRows), key  # made in a worker
        want, _ = parent(key, raw[key])
        assert got == want, key
        assert timing["checks"] == raw[key][1]["checks"]
    assert any(r["tp"] for key, (got, _) in sent.items() if key[0] == "open" for r in got.metrics)
    assert all(got.calls.count("\n") == sum(len(ep.tool_nodes()) for ep in episodes)
               for key, (got, _) in sent.items() if key[0] == "open")


class FailsInWorkers(RowMaker):
    def __call__(self, key, value):
        if os.getpid() != PARENT:
            raise RuntimeError("no rows here")
        return super().__call__(key, value)


def test_a_worker_that_cannot_make_rows_sends_the_raw_result(suite, raw):
    scenarios, tapes, episodes = suite
    sent = pool.run_tasks(TASKS, episodes, scenarios, workers=2, tapes=tapes, rows=_maker(suite, FailsInWorkers))
    parent = _maker(suite)
    for key, value in sent.items():
        assert isinstance(value[0], OpenResult if key[0] == "open" else dict), key
        assert parent(key, value)[0] == parent(key, raw[key])[0]


def test_checkpoints_keep_rows_exactly(suite, raw):
    parent = _maker(suite)
    for (kind, label), value in raw.items():
        rows = parent((kind, label), value)
        back = decode(kind, label, orjson.loads(dumps(encode(kind, rows))))
        assert back == rows
        for table in ("metrics", "outcomes") if kind == "open" else ("metrics", "episodes"):
            assert [list(r) for r in getattr(back[0], table)] == [list(r) for r in getattr(rows[0], table)]  # column order
        # a part saved raw (a task the parent got from Ray, or failed) still reads back as before
        assert parent((kind, label), decode(kind, label, orjson.loads(dumps(encode(kind, value)))))[0] == rows[0]
