"""The ONNX backends of the bundled model: chosen by LOOPBENCH_EMBED_BACKEND, cached apart, same vectors as torch."""
import importlib.util
import json
import multiprocessing
import os
import time
import warnings

import numpy as np
import pytest

from detectors import embedding_model
from detectors.embedding_model import BACKEND_ENV, Embedder, resolve_backend

HAVE_ORT = all(importlib.util.find_spec(m) is not None for m in ("onnxruntime", "onnx"))


def test_an_unknown_backend_is_one_clear_error(monkeypatch):
    monkeypatch.setenv(BACKEND_ENV, "tensorflow")
    with pytest.raises(ValueError, match="LOOPBENCH_EMBED_BACKEND: unknown embedding backend 'tensorflow'"):
        resolve_backend()


def test_onnx_without_onnxruntime_falls_back_to_torch_with_a_warning(monkeypatch):
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "onnxruntime" else real(name, *a))
    with pytest.warns(UserWarning, match="needs onnxruntime"):
        assert resolve_backend("onnx") == "torch"


@pytest.mark.skipif(not HAVE_ORT, reason="onnxruntime and onnx are not installed")
def test_onnx_is_the_default_backend(monkeypatch):
    monkeypatch.delenv(BACKEND_ENV, raising=False)
    assert resolve_backend() == "onnx"
    assert Embedder().backend == "onnx"


def test_the_default_falls_back_to_torch_without_onnxruntime_and_without_a_warning(monkeypatch):
    # An install with sentence-transformers alone (no embedding extra) gets torch, unasked for.
    monkeypatch.delenv(BACKEND_ENV, raising=False)
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "onnxruntime" else real(name, *a))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert resolve_backend() == "torch"


def _export_once_slowly(model_dir, target):
    # Stands in for the ~10 s export: notes who exported, then writes the file as the real one does.
    with open(target.parent.parent / "exports.log", "a") as fh:
        fh.write(f"{os.getpid()}\n")
    time.sleep(0.5)
    target.write_bytes(b"graph")
    return target


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_processes_that_need_the_onnx_file_at_once_wait_for_one_export(tmp_path, monkeypatch):
    from detectors import onnx_encoder

    monkeypatch.setattr(onnx_encoder, "export_onnx", _export_once_slowly)
    ctx = multiprocessing.get_context("fork")
    procs = [ctx.Process(target=onnx_encoder.onnx_file, args=(tmp_path, "m", False, tmp_path / "onnx"))
             for _ in range(3)]
    for proc in procs:
        proc.start()
    for proc in procs:
        proc.join(30)
    assert [proc.exitcode for proc in procs] == [0, 0, 0]
    assert len((tmp_path / "onnx" / "exports.log").read_text().split()) == 1
    assert (tmp_path / "onnx" / "m" / "model.onnx").read_bytes() == b"graph"


@pytest.mark.skipif(not HAVE_ORT, reason="onnxruntime and onnx are not installed")
def test_each_backend_has_its_own_cache_key(tmp_path):
    (tmp_path / "model.safetensors").write_bytes(b"weights")
    keys = {b: Embedder(tmp_path, backend=b).model_id for b in ("torch", "onnx", "onnx-int8")}
    assert keys["torch"] == embedding_model.model_id(tmp_path)  # existing torch caches stay valid
    assert len(set(keys.values())) == 3


@pytest.mark.model
@pytest.mark.skipif(not HAVE_ORT, reason="onnxruntime and onnx are not installed")
@pytest.mark.parametrize("made, file", [("written", "graph.onnx"), ("traced", "model.onnx")])
def test_onnx_vectors_equal_torch_vectors(tmp_path, monkeypatch, made, file):
    from detectors import onnx_graph

    monkeypatch.setenv(embedding_model.ONNX_DIR_ENV, str(tmp_path / "onnx"))
    monkeypatch.setattr(embedding_model, "_ENCODERS", {})  # not this process's encoder from another directory
    if made == "traced":  # a model the graph writer does not know goes through torch
        monkeypatch.setattr(onnx_graph, "supports", lambda model_dir: False)
    texts = ["q3 revenue europe", "  revenue for Q3  ", "read the file src/core/main.py please",
             "a much longer text " * 40, "été café naïve — unicode", "x", "past the model's 256 pieces " * 60]
    torch_vecs = Embedder(backend="torch").embed(texts)
    onnx_vecs = Embedder(backend="onnx").embed(texts)
    assert onnx_vecs.shape == torch_vecs.shape == (len(texts), 384)
    # The same vectors, padding and truncation included, to float32 rounding.
    assert np.abs(onnx_vecs - torch_vecs).max() < 1e-5
    assert np.abs(onnx_vecs @ onnx_vecs.T - torch_vecs @ torch_vecs.T).max() < 1e-5
    # The file was written whole under its final name, nothing half-written left beside it.
    files = sorted(p.name for p in (tmp_path / "onnx").rglob("*") if p.is_file())
    assert files == [".export.lock", file]  # and the lock that made other processes wait


NO_TORCH = """
import sys
from detectors.embedding_model import Embedder
vectors = Embedder(backend="onnx").embed(["q3 revenue", "revenue for q3", "weather in paris"])
assert vectors[0] @ vectors[1] > 0.9 > vectors[0] @ vectors[2], vectors @ vectors.T
print(sorted(m for m in ("torch", "transformers", "sentence_transformers") if m in sys.modules))
"""


@pytest.mark.model
@pytest.mark.skipif(not HAVE_ORT, reason="onnxruntime and onnx are not installed")
def test_the_bundled_model_is_made_and_run_on_onnx_without_torch(tmp_path):
    import subprocess
    import sys
    from pathlib import Path

    env = {**os.environ, embedding_model.ONNX_DIR_ENV: str(tmp_path / "onnx")}
    env.pop(BACKEND_ENV, None)
    proc = subprocess.run([sys.executable, "-c", NO_TORCH], env=env, capture_output=True, text=True, timeout=120,
                          cwd=Path(__file__).resolve().parents[2])
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.strip() == "[]"
    assert [p.name for p in (tmp_path / "onnx").rglob("*.onnx")] == ["graph.onnx"]


def test_the_graph_writer_takes_only_models_it_reproduces(tmp_path):
    from detectors import onnx_graph

    assert onnx_graph.supports(embedding_model.bundled_model_path())
    for config, pooling in [({"model_type": "roberta", "hidden_act": "gelu"}, {"pooling_mode_mean_tokens": True}),
                            ({"model_type": "bert", "hidden_act": "gelu"}, {"pooling_mode_cls_token": True}),
                            ({"model_type": "bert", "hidden_act": "gelu_new"}, {"pooling_mode_mean_tokens": True})]:
        (tmp_path / "1_Pooling").mkdir(exist_ok=True)
        (tmp_path / "config.json").write_text(json.dumps(config))
        (tmp_path / "1_Pooling" / "config.json").write_text(json.dumps(pooling))
        (tmp_path / "model.safetensors").write_bytes(b"")
        (tmp_path / "modules.json").write_text('["sentence_transformers.models.Normalize"]')
        assert not onnx_graph.supports(tmp_path), config
    with pytest.raises(ValueError, match="not a BERT sentence model"):
        onnx_graph.build(tmp_path)
