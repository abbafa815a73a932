"""progress_guard's semantic layer counts its model calls and cache hits as the embedding detector does."""
from detectors.embedding_model import Embedder, HashingEncoder
from detectors.progress_guard import ProgressGuard
from detectors.protocol import Observation, ToolCall

QUERIES = ("q3 revenue europe figures", "europe revenue for q3 figures", "figures of q3 revenue in europe")


def test_semantic_layer_counts_model_calls_lookups_and_hits():
    encoder = HashingEncoder()
    guard = ProgressGuard(embedder=Embedder(encode=encoder, model_name="hashing"))
    state = guard.start()
    for i, query in enumerate(QUERIES):
        call = ToolCall("search", {"query": query})
        decision = guard.check(state, call)
        state = guard.record(state, call, decision, Observation(f"[D{i}] a new document {i}"))
    # Check 2 asks for (q2, q1), check 3 for (q3, q2, q1): three distinct texts encoded once each.
    assert guard.semantic_checks == 2
    assert guard.model_calls == encoder.calls == 3
    assert guard.cache_lookups == 5
    assert guard.cache_hits == 2


def test_a_second_guard_on_the_same_embedder_hits_the_cache():
    emb = Embedder(encode=HashingEncoder(), model_name="hashing")
    for expected_calls, expected_hits in ((3, 2), (0, 5)):
        guard = ProgressGuard(embedder=emb)
        state = guard.start()
        for i, query in enumerate(QUERIES):
            call = ToolCall("search", {"query": query})
            state = guard.record(state, call, guard.check(state, call), Observation(f"[D{i}] new {i}"))
        assert (guard.model_calls, guard.cache_hits) == (expected_calls, expected_hits)


def test_getting_the_embedder_imports_no_model_library(tmp_path):
    """A run whose vectors are all cached must not pay for importing torch: progress_guard
    only asks whether sentence-transformers is installed."""
    import subprocess
    import sys

    code = ("import sys\nfrom detectors.progress_guard import ProgressGuard\n"
            "g = ProgressGuard()\nassert g._embedder() is not None and g.semantic\n"
            "print(sorted(m for m in ('torch', 'sentence_transformers', 'transformers') if m in sys.modules))")
    env = {**__import__("os").environ, "LOOPBENCH_EMBED_CACHE": str(tmp_path)}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True)
    assert out.stdout.strip() == "[]"


def test_without_a_backend_installed_the_semantic_layer_is_off(monkeypatch):
    import importlib.util

    import pytest

    real = importlib.util.find_spec
    # Neither backend installed: onnxruntime missing sends the default to torch, which is missing too.
    monkeypatch.delenv("LOOPBENCH_EMBED_BACKEND", raising=False)
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name in ("onnxruntime", "sentence_transformers") else real(name, *a))
    guard = ProgressGuard()
    with pytest.warns(UserWarning, match="sentence_transformers not installed; the semantic layer is off"):
        assert guard._embedder() is None
    assert guard.semantic is False


def test_prefetch_is_counted_and_later_checks_hit_the_cache():
    encoder = HashingEncoder()
    guard = ProgressGuard(embedder=Embedder(encode=encoder, model_name="hashing"))
    calls = [ToolCall("search", {"query": q}) for q in QUERIES + QUERIES[:1]]
    assert guard.prefetch(calls) == 3
    assert (guard.model_calls, guard.cache_lookups, guard.cache_hits) == (3, 3, 0)
    state = guard.start()
    for i, call in enumerate(calls[:3]):
        state = guard.record(state, call, guard.check(state, call), Observation(f"[D{i}] new {i}"))
    assert (guard.model_calls, guard.cache_lookups, guard.cache_hits) == (3, 8, 5)
    assert encoder.calls == 3
