"""The openvino-bf16 backend: the bundled model's ONNX graph on OpenVINO in bfloat16, opt-in, cached apart."""
import importlib.util
import os
import warnings

import numpy as np
import pytest

from detectors import embedding_model
from detectors.embedding_model import BACKEND_ENV, Embedder, resolve_backend

HAVE_OV = all(importlib.util.find_spec(m) is not None for m in ("openvino", "onnxruntime", "onnx"))
needs_ov = pytest.mark.skipif(not HAVE_OV, reason="openvino, onnxruntime and onnx are not installed")


def thread_cores() -> set[frozenset[int]]:
    """The cores each thread of this process may run on (Linux; empty elsewhere)."""
    tasks = "/proc/self/task"
    return {frozenset(os.sched_getaffinity(int(t))) for t in os.listdir(tasks)} if os.path.isdir(tasks) else set()


TEXTS = ["q3 revenue europe", "  revenue for Q3  ", "read the file src/core/main.py please",
         "a much longer text " * 40, "été café naïve — unicode", "x", "past the model's 256 pieces " * 60]


@needs_ov
def test_it_is_chosen_only_when_asked_for(monkeypatch):
    monkeypatch.delenv(BACKEND_ENV, raising=False)
    assert resolve_backend() == "onnx"  # the default stays float32: vectors do not depend on the CPU
    monkeypatch.setattr(embedding_model, "cpu_computes_bf16", lambda: True)
    monkeypatch.setenv(BACKEND_ENV, "openvino-bf16")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert resolve_backend() == "openvino-bf16"


@needs_ov
def test_a_cpu_without_bfloat16_falls_back_to_onnx_with_a_warning(monkeypatch):
    # Emulated bfloat16 is slower than float32 and gives other vectors: no reason to use it.
    monkeypatch.setattr(embedding_model, "cpu_computes_bf16", lambda: False)
    with pytest.warns(UserWarning, match=r"'openvino-bf16' needs a CPU with bfloat16 arithmetic .*; using onnx"):
        assert resolve_backend("openvino-bf16") == "onnx"


@pytest.mark.skipif(not all(importlib.util.find_spec(m) for m in ("onnxruntime", "onnx")), reason="no onnxruntime")
def test_without_openvino_it_falls_back_to_onnx_with_a_warning(monkeypatch):
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "openvino" else real(name, *a))
    with pytest.warns(UserWarning, match=r"needs openvino \(pip install 'loopbench\[openvino\]'\); using onnx"):
        assert resolve_backend("openvino-bf16") == "onnx"


@needs_ov
def test_it_has_its_own_cache_key(tmp_path, monkeypatch):
    monkeypatch.setattr(embedding_model, "cpu_computes_bf16", lambda: True)
    (tmp_path / "model.safetensors").write_bytes(b"weights")
    keys = {b: Embedder(tmp_path, backend=b).model_id for b in ("onnx", "openvino-bf16")}
    assert keys["openvino-bf16"] == f"{embedding_model.model_id(tmp_path)}+openvino-bf16" != keys["onnx"]


@pytest.mark.model
@needs_ov
def test_its_vectors_are_the_model_in_bfloat16(tmp_path, monkeypatch):
    if not embedding_model.cpu_computes_bf16():
        pytest.skip("this CPU has no bfloat16 arithmetic")
    monkeypatch.setenv(embedding_model.ONNX_DIR_ENV, str(tmp_path / "onnx"))
    monkeypatch.setattr(embedding_model, "_ENCODERS", {})
    full = Embedder(backend="onnx").embed(TEXTS)
    half = Embedder(backend="openvino-bf16").embed(TEXTS)
    # OpenVINO pins its inference thread to a core unless told not to: two pool workers, one
    # thread each, were pinned to the same core and took twice the wall time.
    assert thread_cores() <= {frozenset(os.sched_getaffinity(0))}
    assert half.dtype == np.float32 and half.shape == full.shape == (len(TEXTS), 384)
    np.testing.assert_allclose(np.linalg.norm(half, axis=1), 1.0, atol=1e-6)
    assert (half * full).sum(1).min() > 0.9995  # the same model, padding and truncation included
    assert np.abs(half - full).max() > 1e-4  # computed in bfloat16, not float32
    # Similarities move by a few thousandths at most (docs/performance.md: 0.0034 over 200,000 pairs).
    assert np.abs(half @ half.T - full @ full.T).max() < 0.01
    # One graph file serves both runtimes.
    assert [p.name for p in (tmp_path / "onnx").rglob("*.onnx")] == ["graph.onnx"]


@pytest.mark.model
@needs_ov
@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_a_forked_child_compiles_its_own_model_and_gets_the_same_vectors(tmp_path, monkeypatch):
    # Pool workers fork from a parent that may have encoded already (as for onnxruntime's session).
    if not embedding_model.cpu_computes_bf16():
        pytest.skip("this CPU has no bfloat16 arithmetic")
    monkeypatch.setenv(embedding_model.ONNX_DIR_ENV, str(tmp_path / "onnx"))
    monkeypatch.setattr(embedding_model, "_ENCODERS", {})
    parent = Embedder(backend="openvino-bf16").embed(TEXTS[:3])
    out = tmp_path / "child.npy"
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child's own exit code is the assertion
        try:
            np.save(out, Embedder(backend="openvino-bf16").embed(TEXTS[:3]))
        finally:
            os._exit(0)
    _, status = os.waitpid(pid, 0)
    assert status == 0
    np.testing.assert_array_equal(np.load(out), parent)


@needs_ov
def test_a_machine_without_openvinos_cpu_plugin_counts_as_without_bfloat16(monkeypatch):
    import openvino

    def no_plugin():
        raise RuntimeError("Device with \"CPU\" name is not registered in the OpenVINO Runtime")

    monkeypatch.setattr(openvino, "Core", no_plugin)
    embedding_model.cpu_computes_bf16.cache_clear()
    try:
        with pytest.warns(UserWarning, match="needs a CPU with bfloat16 arithmetic"):
            assert resolve_backend("openvino-bf16") == "onnx"
    finally:
        embedding_model.cpu_computes_bf16.cache_clear()
