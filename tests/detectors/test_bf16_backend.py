"""The torch-bf16 backend: the bundled model under CPU autocast to bfloat16, cached apart from torch."""
import numpy as np
import pytest

from detectors import embedding_model
from detectors.embedding_model import Embedder

TEXTS = ["q3 revenue europe", "  revenue for Q3  ", "read the file src/core/main.py please",
         "a much longer text " * 40, "été café naïve — unicode", "x", "search(query='quarterly revenue')"]


def test_bf16_has_its_own_cache_key(tmp_path):
    (tmp_path / "model.safetensors").write_bytes(b"weights")
    torch_key, bf16_key = (Embedder(tmp_path, backend=b).model_id for b in ("torch", "torch-bf16"))
    assert torch_key == embedding_model.model_id(tmp_path)
    assert bf16_key == f"{torch_key}+torch-bf16"


@pytest.mark.model
def test_bf16_vectors_are_the_model_in_bfloat16():
    full = Embedder(backend="torch").embed(TEXTS)
    half = Embedder(backend="torch-bf16").embed(TEXTS)
    assert half.dtype == np.float32 and half.shape == full.shape == (len(TEXTS), 384)
    np.testing.assert_allclose(np.linalg.norm(half, axis=1), 1.0, atol=1e-6)
    cos = (half * full).sum(1)
    assert cos.min() > 0.9995  # the same model
    assert np.abs(half - full).max() > 1e-4  # but not float32: the autocast took effect
    # Similarities between texts move by a few thousandths at most (docs/performance.md).
    assert np.abs(half @ half.T - full @ full.T).max() < 0.01


@pytest.mark.parametrize("env, detectors, recorded", [
    (None, ["exact"], None),  # no model-backed detector: nothing to record
    (None, ["exact", "progress_guard"], embedding_model.resolve_backend(embedding_model.DEFAULT_BACKEND)),
    ("torch-bf16", ["embedding"], "torch-bf16"),
])
def test_the_manifest_records_the_backend_of_model_backed_runs(monkeypatch, env, detectors, recorded):
    from detectors.registry import make_detector
    from sim.config.manifest import build_manifest
    from sim.config.spec import DetectorSpec

    if env is None:
        monkeypatch.delenv(embedding_model.BACKEND_ENV, raising=False)
    else:
        monkeypatch.setenv(embedding_model.BACKEND_ENV, env)
    specs = [DetectorSpec(d, d) for d in detectors]
    manifest = build_manifest("run", {}, specs, [make_detector(d) for d in detectors], profiles_version="v1",
                              profiles={}, seeds={})
    assert manifest["embedding_backend"] == recorded
