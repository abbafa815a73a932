"""Cost of the ``embedding`` detector: model load, encoding throughput, per-check time, cache effect.

Run: ``python bench/bench_embedding.py`` (about a minute on 2 cores). Every figure is
measured on this machine when the script runs; nothing is hard-coded.

Sections:
1. model load time (imports of torch + sentence-transformers, then the weights);
2. texts encoded per second, batched and one at a time;
3. time per check along a 50-call path, with the path's vectors reused from the path
   state (what the detector does) and, for comparison only, without: re-stacking the
   path's cached vectors at every check, and re-encoding the path's texts at every check;
4. ``suite_wall_time_cold_vs_warm``: for now a synthetic 2,000-call workload (40 paths of
   50 calls) scored in a fresh process with an empty and then a warm disk cache. Once
   ``loopbench run`` exists this section should time the default suite instead.
"""
from __future__ import annotations

import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402

from detectors.embedding import EmbeddingDetector  # noqa: E402
from detectors.embedding_model import Embedder, load_model  # noqa: E402
from detectors.protocol import Observation, ToolCall  # noqa: E402

WORDS = (
    "revenue quarter q3 q4 annual report growth margin europe asia customers churn pricing forecast "
    "python asyncio tutorial error timeout retry database index migration schema backup latency "
    "weather paris london berlin hotel flight train museum opening hours tickets review best cheap "
    "kubernetes pod restart memory leak cpu profile benchmark release notes changelog version security "
    "vulnerability patch dependency license author paper citation dataset model training evaluation"
).split()
FILES = [f"src/{m}/{f}.py" for m in ("core", "api", "db", "ui") for f in ("main", "utils", "models", "views", "tests")]


def synthetic_calls(n: int, seed: int) -> list[ToolCall]:
    """A path of plausible calls: searches (some reworded repeats), file reads, status polls."""
    rng = random.Random(seed)
    calls: list[ToolCall] = []
    for i in range(n):
        r = rng.random()
        if r < 0.55:
            words = rng.sample(WORDS, rng.randint(2, 5))
            if calls and rng.random() < 0.15:  # a reworded repeat of an earlier search
                earlier = [c for c in calls if c.tool == "search"]
                if earlier:
                    words = rng.choice(earlier).args["query"].split()
                    rng.shuffle(words)
            calls.append(ToolCall("search", {"query": " ".join(words), "limit": 10}, call_id=f"s{seed}-{i}"))
        elif r < 0.85:
            calls.append(ToolCall("read_file", {"path": rng.choice(FILES)}, call_id=f"s{seed}-{i}"))
        else:
            calls.append(ToolCall("check_status", {"job": f"job-{rng.randint(1, 5)}"}, call_id=f"s{seed}-{i}"))
    return calls


def timed(fn, repeat: int = 1) -> float:
    t0 = time.perf_counter()
    for _ in range(repeat):
        fn()
    return (time.perf_counter() - t0) / repeat


# -- 1. model load ------------------------------------------------------------------------
def model_load() -> dict:
    t0 = time.perf_counter()
    os.environ["HF_HUB_OFFLINE"] = "1"
    os.environ["TRANSFORMERS_OFFLINE"] = "1"
    import sentence_transformers  # noqa: F401
    import torch  # noqa: F401

    t1 = time.perf_counter()
    model = load_model(Embedder().model_path)
    t2 = time.perf_counter()
    model.encode(["warm-up"])
    return {"import_s": t1 - t0, "weights_s": t2 - t1, "total_s": t2 - t0}


# -- 2. throughput --------------------------------------------------------------------------
def throughput(n_batched: int = 512, n_single: int = 64) -> dict:
    rng = random.Random(1)
    texts = list(dict.fromkeys(" ".join(rng.sample(WORDS, rng.randint(2, 6))) for _ in range(n_batched * 2)))
    batched = texts[:n_batched]
    emb = Embedder()
    t_batched = timed(lambda: emb.embed(batched))
    model = load_model(emb.model_path)
    # The first forward pass at a new sequence length is much slower (kernels are set up per
    # shape), so single texts are timed once cold and then on other texts of seen lengths.
    first = texts[n_batched : n_batched + n_single]
    again = texts[n_batched + n_single : n_batched + 2 * n_single]
    t_first = timed(lambda: [model.encode([t], normalize_embeddings=True) for t in first])
    t_again = timed(lambda: [model.encode([t], normalize_embeddings=True) for t in again])
    return {
        "batched_texts_per_s": n_batched / t_batched,
        "single_texts_per_s": n_single / t_again,
        "single_ms_per_text": 1000 * t_again / n_single,
        "single_first_ms_per_text": 1000 * t_first / n_single,
    }


# -- 3. per check along a 50-call path ------------------------------------------------------
def per_check(path_len: int = 50, repeats: int = 50) -> dict:
    rng = random.Random(2)
    calls = [ToolCall("search", {"query": " ".join(rng.sample(WORDS, rng.randint(2, 5)))}) for _ in range(path_len)]
    det = EmbeddingDetector(threshold=2.0)  # never alarms: every check does the full comparison
    det.prefetch(calls)
    obs = Observation("ok")
    states = []

    def detector_path() -> None:
        states.clear()
        state = det.start()
        for call in calls:
            states.append(state)
            state = det.record(state, call, det.check(state, call), obs)

    emb = det._embedder()
    texts = [c.args["query"] for c in calls]
    detector_path()  # warm-up, and the states whose stored vectors "reuse" compares against

    def reuse() -> None:  # what check() does: the path's vectors are already stacked in its state
        for i, text in enumerate(texts):
            vec = emb.vector(text)
            rows = states[i].rows
            if i:
                (rows.vectors[:i] @ vec).max()

    def restack() -> None:  # comparison only: rebuild the path matrix from cached vectors each check
        for i, text in enumerate(texts):
            vec = emb.vector(text)
            if i:
                matrix = np.stack([emb.vector(t) for t in texts[:i]])
                (matrix @ vec).max()

    model = load_model(emb.model_path)

    def reencode() -> None:  # comparison only: encode the whole path again at every check
        for i in range(len(texts)):
            vecs = model.encode(texts[: i + 1], normalize_embeddings=True, batch_size=64)
            if i:
                (vecs[:i] @ vecs[i]).max()

    reencode()  # warm-up: first passes at new shapes are slow
    return {
        "path_len": path_len,
        "detector_us": 1e6 * timed(detector_path, repeats) / path_len,
        "reuse_us": 1e6 * timed(reuse, repeats) / path_len,
        "restack_us": 1e6 * timed(restack, repeats) / path_len,
        "reencode_us": 1e6 * timed(reencode, 1) / path_len,
    }


# -- 4. cold vs warm disk cache ----------------------------------------------------------------
def _workload_once(cache_dir: str) -> dict:
    """Score the synthetic 2,000-call workload in this (fresh) process; prints nothing else."""
    t0 = time.perf_counter()
    det = EmbeddingDetector(cache_dir=cache_dir)
    paths = [synthetic_calls(50, seed) for seed in range(40)]
    det.prefetch(c for path in paths for c in path)
    obs = Observation("ok")
    alarms = 0
    for path in paths:
        state = det.start()
        for call in path:
            decision = det.check(state, call)
            alarms += decision.alarm
            state = det.record(state, call, decision, obs)
    return {
        "wall_s": time.perf_counter() - t0,
        "calls": sum(len(p) for p in paths),
        "alarms": alarms,
        "model_calls": det.model_calls,
        "cache_hits": det.cache_hits,
        "cache_lookups": det.cache_lookups,
        "torch_imported": "torch" in sys.modules,
    }


def suite_wall_time_cold_vs_warm() -> dict:
    """Wall time of a 2,000-call synthetic workload, cold vs warm disk cache, each in a fresh process.

    Placeholder workload until ``loopbench run`` exists: then time the default suite here.
    """
    out = {}
    with tempfile.TemporaryDirectory() as cache_dir:
        for label in ("cold", "warm"):
            t0 = time.perf_counter()
            proc = subprocess.run(
                [sys.executable, __file__, "--workload-once", cache_dir], capture_output=True, text=True, check=True
            )
            result = json.loads(proc.stdout.strip().splitlines()[-1])
            result["process_s"] = time.perf_counter() - t0  # includes interpreter start and imports
            out[label] = result
    return out


def main() -> None:
    print("embedding detector cost (bundled all-MiniLM-L6-v2, CPU, torch threads = min(2, CPUs))")
    load = model_load()
    print(f"1. model load: {load['total_s']:.2f} s  (imports {load['import_s']:.2f} s + weights {load['weights_s']:.2f} s)")
    tp = throughput()
    print(f"2. encoding: batched {tp['batched_texts_per_s']:.0f} texts/s; single {tp['single_texts_per_s']:.0f} texts/s "
          f"({tp['single_ms_per_text']:.1f} ms/text; {tp['single_first_ms_per_text']:.1f} ms/text at unseen lengths)")
    pc = per_check()
    print(f"3. per check along a {pc['path_len']}-call path (texts cached; mean over the path's checks):")
    print(f"   detector check + record, whole call:         {pc['detector_us']:10.1f} us")
    print(f"   comparison, path vectors reused from state:  {pc['reuse_us']:10.1f} us")
    print(f"   comparison, re-stacking cached vectors:      {pc['restack_us']:10.1f} us")
    print(f"   comparison, re-encoding the path:            {pc['reencode_us']:10.1f} us")
    sw = suite_wall_time_cold_vs_warm()
    print("4. suite_wall_time_cold_vs_warm — SYNTHETIC 2,000-call workload (40 paths x 50 calls), not yet the default suite:")
    for label, r in sw.items():
        rate = r["cache_hits"] / r["cache_lookups"] if r["cache_lookups"] else 0.0
        print(f"   {label}: {r['wall_s']:.2f} s in-process ({r['process_s']:.2f} s with interpreter start), "
              f"model_calls={r['model_calls']}, cache hits {r['cache_hits']}/{r['cache_lookups']} ({rate:.0%}), "
              f"alarms={r['alarms']}, torch imported: {r['torch_imported']}")


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--workload-once":
        print(json.dumps(_workload_once(sys.argv[2])))
    else:
        main()
