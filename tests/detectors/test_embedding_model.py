"""The Embedder: one encode per distinct text, counters, the on-disk cache; the model loads offline."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from detectors import embedding_model
from detectors.embedding_model import CACHE_ENV, DiskCache, Embedder, HashingEncoder, shared_embedder


def fake(model_name: str = "fake-bow") -> tuple[Embedder, HashingEncoder]:
    enc = HashingEncoder()
    return Embedder(encode=enc, model_name=model_name), enc


def test_each_distinct_text_is_encoded_once_and_counted():
    emb, enc = fake()
    out = emb.embed(["alpha beta", "gamma", "alpha beta"])
    assert out.shape == (3, 4096)
    assert np.allclose(np.linalg.norm(out, axis=1), 1.0)
    assert np.array_equal(out[0], out[2])
    assert (emb.lookups, emb.hits, emb.model_calls, enc.calls) == (2, 0, 2, 2)
    emb.vector("gamma")
    emb.embed(["gamma", "delta"])
    assert (emb.lookups, emb.hits, emb.model_calls, enc.calls) == (5, 2, 3, 3)
    assert emb.encode_batches == 2


def test_prefetch_encodes_a_suite_in_one_batch():
    emb, enc = fake()
    texts = [f"query number {i % 7}" for i in range(50)]
    assert emb.prefetch(texts) == 7
    assert emb.encode_batches == 1
    assert emb.prefetch(texts) == 0
    assert enc.calls == 7


def test_long_texts_are_clipped_before_they_become_keys():
    emb, _ = fake()
    long = "word " * 5000
    emb.vector(long)
    (key,) = emb._memory
    assert len(key) == embedding_model.MAX_TEXT_CHARS


def test_disk_cache_round_trip_needs_no_model(tmp_path):
    writer = Embedder(encode=HashingEncoder(), model_name="fake-bow", cache_dir=tmp_path)
    texts = ["q3 revenue", "revenue for q3", "weather in paris"]
    first = writer.embed(texts)
    assert writer.model_calls == 3

    enc = HashingEncoder()
    reader = Embedder(encode=enc, model_name="fake-bow", cache_dir=tmp_path)
    again = reader.embed(texts)
    assert np.array_equal(first, again)
    assert (reader.model_calls, reader.hits, reader.disk_hits, enc.calls) == (0, 3, 3, 0)

    # Another model never reads these vectors.
    other = Embedder(encode=HashingEncoder(), model_name="another-model", cache_dir=tmp_path)
    other.embed(texts)
    assert other.model_calls == 3
    assert len(DiskCache(tmp_path, "fake-bow")) == 3


def test_a_text_without_a_utf8_form_is_encoded_but_not_cached_on_disk(tmp_path):
    # a lone surrogate (a broken escape in an untrusted trace): SQLite stores UTF-8 only
    emb = Embedder(encode=HashingEncoder(), model_name="m", cache_dir=tmp_path)
    vecs = emb.embed(["bad \ud800 text", "good text", "caf\u00e9 menu"])
    assert vecs.shape[0] == 3 and emb.model_calls == 3
    assert len(DiskCache(tmp_path, "m")) == 2
    reader = Embedder(encode=HashingEncoder(), model_name="m", cache_dir=tmp_path)
    assert np.array_equal(reader.embed(["bad \ud800 text", "caf\u00e9 menu"]), vecs[[0, 2]])
    assert (reader.model_calls, reader.disk_hits) == (1, 1)


def test_a_torn_disk_row_is_re_encoded(tmp_path):
    cache = DiskCache(tmp_path, "m")
    cache._db.execute("INSERT INTO embeddings VALUES ('m', 'broken', 4096, ?)", (b"\x00" * 12,))
    cache._db.commit()
    emb = Embedder(encode=HashingEncoder(), model_name="m", cache_dir=tmp_path)
    emb.vector("broken")
    assert emb.model_calls == 1


def test_shared_embedder_takes_the_cache_directory_from_the_environment(tmp_path, monkeypatch):
    monkeypatch.setenv(CACHE_ENV, str(tmp_path))
    emb = shared_embedder()
    assert emb.cache_dir == tmp_path
    assert shared_embedder() is emb
    monkeypatch.delenv(CACHE_ENV)
    assert shared_embedder().cache_dir is None


def test_model_id_changes_with_the_model_files(tmp_path):
    (tmp_path / "config.json").write_text("{}")
    a = embedding_model.model_id(tmp_path)
    (tmp_path / "config.json").write_text('{"x": 1}')
    assert embedding_model.model_id(tmp_path) != a


@pytest.mark.model
def test_bundled_model_loads_offline_once_and_encodes():
    emb = Embedder(backend="torch")  # the bundled all-MiniLM-L6-v2, by directory, in sentence-transformers
    vecs = emb.embed(["q3 revenue", "revenue for Q3", "weather in Paris"])
    assert vecs.shape == (3, 384)
    assert vecs[0] @ vecs[1] > 0.9 > vecs[0] @ vecs[2]
    import os

    assert os.environ["HF_HUB_OFFLINE"] == "1" and os.environ["TRANSFORMERS_OFFLINE"] == "1"
    model = embedding_model.load_model(emb.model_path)
    assert embedding_model.load_model(str(emb.model_path)) is model


FORK_AFTER_ENCODE = """
import sys
from detectors.embedding_model import Embedder
from scenarios.suites import load_suite
from sim.execute.pool import run_tasks
from sim.config.spec import DetectorSpec
from sim.execute.runner import build_scenarios, generate_episodes

Embedder().embed(["the parent encodes first", "so torch's thread pool is running"])
suite = load_suite("quick")
scenarios = build_scenarios(["paraphrased", "healthy"], 2, 3, suite.family_params)
episodes = generate_episodes(scenarios)
spec = DetectorSpec("embedding", "embedding")
out = run_tasks([("open", spec), ("closed", spec)], episodes, scenarios, workers=2)
res, _ = out[("open", "embedding")]
assert not res.errors and len(res.scores) == 4, res.errors
assert not any(st.detector_error for st in out[("closed", "embedding")][0].values())
print("ok")
"""


def _have_onnx() -> bool:
    import importlib.util

    return all(importlib.util.find_spec(m) for m in ("onnxruntime", "onnx"))


@pytest.mark.model
@pytest.mark.parametrize("backend", ["torch", pytest.param("onnx", marks=pytest.mark.skipif(
    not _have_onnx(), reason="onnxruntime and onnx are not installed"))])
def test_pool_workers_forked_after_the_parent_encoded_do_not_hang(tmp_path, backend):
    # torch's thread pool deadlocks in a forked child once the parent has used it; the
    # pool's workers are forked, so the child must drop to one thread (register_at_fork).
    # With ONNX, a child that dropped the session it inherited hung in the session's
    # destructor, joining two threads that exist only in the parent (hung every time
    # here with two threads before the fix).
    import os
    import subprocess
    import sys

    import signal

    env = {**os.environ, "LOOPBENCH_EMBED_CACHE": str(tmp_path / "cache"),  # cold: the workers encode
           "LOOPBENCH_EMBED_BACKEND": backend, "LOOPBENCH_TORCH_THREADS": "2",
           "LOOPBENCH_ONNX_DIR": str(tmp_path / "onnx")}
    proc = subprocess.Popen([sys.executable, "-c", FORK_AFTER_ENCODE], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, cwd=Path(__file__).resolve().parents[2],
                            start_new_session=True)
    try:
        out, err = proc.communicate(timeout=240)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)  # the hung workers too
        proc.communicate()
        pytest.fail("a pool worker forked after the parent encoded hung")
    assert proc.returncode == 0 and out.strip() == "ok", err[-2000:]


def test_encoding_shards_split_the_work_and_keep_no_blank(tmp_path):
    """``loopbench run`` fills the cache in one shard per worker: together the shards encode
    every distinct text exactly once, and no shard keeps a row it did not encode."""
    from detectors.embedding_model import encoding_shard, in_shard

    texts = [f"request number {i} about topic {i % 13}" for i in range(300)]
    encoded = []
    for index in range(3):
        emb = Embedder(encode=HashingEncoder(dim=64), model_name="hashing-64", cache_dir=tmp_path)
        with encoding_shard(index, 3):
            rows = emb.embed(texts + texts[:10])
        mine = [t for t in texts if in_shard(t, index, 3)]
        assert 0 < len(mine) < len(texts) and emb.model_calls == len(mine)
        # It looks up and holds only its own texts (not even the earlier shards' from the
        # disk they filled); the other shards' rows are blank.
        assert set(emb._memory) == set(mine) and emb.disk_hits == 0
        assert not rows[[i for i, t in enumerate(texts) if t not in set(mine)]].any()
        assert rows[[i for i, t in enumerate(texts) if t in set(mine)]].any(axis=1).all()
        encoded.append(emb.model_calls)
    assert sum(encoded) == len(texts)
    # Outside a shard, everything comes from the disk the shards filled, equal to a fresh encoding.
    reader = Embedder(encode=HashingEncoder(dim=64), model_name="hashing-64", cache_dir=tmp_path)
    vectors = reader.embed(texts)
    assert reader.model_calls == 0 and reader.disk_hits == len(texts)
    fresh = Embedder(encode=HashingEncoder(dim=64), model_name="hashing-64").embed(texts)
    np.testing.assert_allclose(vectors, fresh, atol=1e-6)
    with pytest.raises(ValueError):
        with encoding_shard(3, 3):
            pass


def test_texts_the_tokenizer_cannot_tell_apart_share_one_key():
    """The bundled model lower-cases before tokenising, so a query in another case or spacing
    is the same model input: one cache key, one encoding. Only plain text is folded; a text
    with a control character the tokenizer drops (\\x0b, \\x1f) keeps its own key."""
    tokenizers = pytest.importorskip("tokenizers")
    from detectors.embedding_model import bundled_model_path, tokenizer_lowercases

    path = bundled_model_path()
    assert tokenizer_lowercases(path)
    emb = Embedder(path)
    tok = tokenizers.Tokenizer.from_file(str(path / "tokenizer.json"))
    texts = ["Poll Results And Dashboards", "poll results  and\tdashboards\n", "  Q3 revenue, EMEA (2024)!  ",
             "read_file({\"path\": \"SRC/Main.py\"})", "x\x0bY", "a\x1fB", "Ünïcode Straße", "tab\tand\r\nCRLF"]
    keys = [emb._key(t) for t in texts]
    assert keys[0] == keys[1] == "poll results and dashboards"
    assert keys[4] == "x\x0bY" and keys[5] == "a\x1fB" and keys[6] == "Ünïcode Straße"
    for text, key in zip(texts, keys):
        assert tok.encode(text).ids == tok.encode(key).ids, text
    # A replacement encoder is not assumed to be case-blind: its texts keep their case.
    assert fake()[0]._key("Poll Results") == "Poll Results"
    assert not tokenizer_lowercases(Path("/nonexistent"))
