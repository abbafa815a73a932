"""The ONNX backends of the bundled model: chosen by LOOPBENCH_EMBED_BACKEND, cached apart, same vectors as torch."""
import importlib.util
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
def test_onnx_vectors_equal_torch_vectors(tmp_path, monkeypatch):
    monkeypatch.setenv(embedding_model.ONNX_DIR_ENV, str(tmp_path / "onnx"))
    monkeypatch.setattr(embedding_model, "_ENCODERS", {})  # not this process's encoder from another directory
    texts = ["q3 revenue europe", "  revenue for Q3  ", "read the file src/core/main.py please",
             "a much longer text " * 40, "été café naïve — unicode", "x"]
    torch_vecs = Embedder(backend="torch").embed(texts)
    onnx_vecs = Embedder(backend="onnx").embed(texts)
    assert onnx_vecs.shape == torch_vecs.shape == (len(texts), 384)
    np.testing.assert_allclose((onnx_vecs * torch_vecs).sum(1), 1.0, atol=1e-4)
    # The export was written whole under its final name, nothing half-written left beside it.
    files = sorted(p.name for p in (tmp_path / "onnx").rglob("*") if p.is_file())
    assert files == [".export.lock", "model.onnx"]  # and the lock that made other processes wait
