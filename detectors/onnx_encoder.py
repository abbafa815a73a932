"""The bundled sentence model on ONNX Runtime: the same weights as the torch backend, no torch at run time.

sentence-transformers' own ONNX backend goes through ``optimum-onnx``, which pins
``transformers<4.58`` (this project runs 5.x), so the graph is made here instead, once,
mean pooling and L2 normalisation included, so that it returns the sentence vector the
torch backend returns, and kept on disk (``onnx_dir``). The bundled model's graph is
written from its weights (``onnx_graph``: under a second, no torch); another model is
traced with ``torch.onnx.export``. Processes load only onnxruntime and the fast tokenizer.

``int8`` is the same graph with its weights quantised (onnxruntime's dynamic
quantisation), made from the fp32 file. Both are made offline from the installed
package's files. A file is written under a temporary name and renamed into place, so a
reader never sees half of one, and a lock file beside it makes the processes that need it
at once (a cold run's pool workers) wait for one export instead of each making its own.

The texts of one call are tokenised once, sorted by length and cut into batches, so a
batch pads to the length of its own longest text, not of the whole request.

The same fp32 graph also runs on OpenVINO with bfloat16 inference precision
(``runtime="openvino-bf16"``): on a CPU with AMX the matrix products run in bfloat16
tiles, about three times onnxruntime's float32 speed, with every vector within a cosine
of 0.9999 of the float32 one (docs/performance.md).
"""
from __future__ import annotations

import contextlib
import json
import os
import tempfile
import threading
from pathlib import Path
from typing import Sequence

import numpy as np

#: Where exported ONNX files go when no directory is given: beside the default embedding cache.
DEFAULT_ONNX_DIR = Path.home() / ".cache" / "loopbench" / "onnx"
_INPUTS = ("input_ids", "attention_mask", "token_type_ids")
_EXPORT_LOCK = threading.Lock()
#: Sessions a forked child inherited from its parent (see ``OnnxEncoder.session``).
_INHERITED_SESSIONS: list = []
#: What runs the graph: onnxruntime in float32, or OpenVINO in bfloat16.
RUNTIMES = ("onnxruntime", "openvino-bf16")


def max_tokens(model_dir: Path) -> int:
    """The word pieces the model reads, as sentence-transformers computes it (its config, capped by the tokenizer's)."""
    limit = 512
    config = model_dir / "sentence_bert_config.json"
    if config.is_file():
        limit = int(json.loads(config.read_text()).get("max_seq_length") or limit)
    tok_config = model_dir / "tokenizer_config.json"
    if tok_config.is_file():
        limit = min(limit, int(json.loads(tok_config.read_text()).get("model_max_length") or limit))
    return limit


@contextlib.contextmanager
def _written_atomically(target: Path):
    """A temporary path beside ``target`` for the block to write; renamed onto ``target`` when
    the block ends without error, removed in any case."""
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, name = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
    os.close(fd)
    tmp = Path(name)
    os.chmod(tmp, 0o644)  # a cache directory shared by users or restored by CI: readable like any file
    try:
        yield tmp
        os.replace(tmp, target)
    finally:
        tmp.unlink(missing_ok=True)


def export_onnx(model_dir: Path, target: Path) -> Path:
    """Trace the model at ``model_dir`` (weights, mean pooling, normalisation) into ``target``."""
    os.environ["HF_HUB_OFFLINE"] = "1"
    os.environ["TRANSFORMERS_OFFLINE"] = "1"
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    import warnings

    import torch
    from transformers import AutoModel

    # The eager attention traces to plain matmuls; the fused kernel's trace is shape-specialised.
    bert = AutoModel.from_pretrained(str(model_dir), attn_implementation="eager")
    bert.eval()

    class SentenceVector(torch.nn.Module):
        def __init__(self, inner: torch.nn.Module):
            super().__init__()
            self.inner = inner

        def forward(self, input_ids, attention_mask, token_type_ids):
            hidden = self.inner(input_ids=input_ids, attention_mask=attention_mask,
                                token_type_ids=token_type_ids).last_hidden_state
            weights = attention_mask.unsqueeze(-1).to(hidden.dtype)
            mean = (hidden * weights).sum(1) / weights.sum(1).clamp(min=1e-9)
            return torch.nn.functional.normalize(mean, p=2, dim=1)

    example = tuple(torch.ones(2, 8, dtype=torch.long) for _ in _INPUTS)
    axes = {name: {0: "batch", 1: "tokens"} for name in _INPUTS}
    axes["embedding"] = {0: "batch"}
    with _written_atomically(target) as tmp, torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the tracer's notes on Python control flow it froze
        torch.onnx.export(SentenceVector(bert), example, str(tmp), input_names=list(_INPUTS),
                          output_names=["embedding"], dynamic_axes=axes, opset_version=17, dynamo=False)
    return target


def quantize_int8(source: Path, target: Path) -> Path:
    """``source`` with its weights quantised to int8 (onnxruntime dynamic quantisation), into ``target``."""
    from onnxruntime.quantization import QuantType, quantize_dynamic

    with _written_atomically(target) as tmp:
        quantize_dynamic(str(source), str(tmp), weight_type=QuantType.QInt8)
    return target


def write_graph(model_dir: Path, target: Path) -> Path:
    """The graph of the model at ``model_dir`` written from its weights (``onnx_graph``) into ``target``."""
    import onnx

    from .onnx_graph import build

    with _written_atomically(target) as tmp:
        onnx.save(build(model_dir), str(tmp))
    return target


def onnx_file(model_dir: Path, model_key: str, int8: bool, onnx_dir: Path | None = None) -> Path:
    """The ONNX file of the model (``model_key`` names its version), made or quantised on first use:
    written from the weights when ``onnx_graph`` knows the model (``graph.onnx``), else traced with
    torch (``model.onnx``)."""
    from .onnx_graph import supports

    folder = Path(onnx_dir or DEFAULT_ONNX_DIR) / model_key
    written = supports(model_dir)
    fp32 = folder / ("graph.onnx" if written else "model.onnx")
    wanted = fp32.with_name(f"{fp32.stem}-int8.onnx") if int8 else fp32
    if wanted.is_file():
        return wanted
    with _EXPORT_LOCK, _file_lock(folder / ".export.lock"):
        if not fp32.is_file():
            (write_graph if written else export_onnx)(model_dir, fp32)
        if int8 and not wanted.is_file():
            quantize_int8(fp32, wanted)
    return wanted


@contextlib.contextmanager
def _file_lock(path: Path):
    """An exclusive lock on ``path`` between processes: the pool's workers of a cold run all
    need the file, and one export serves them all (a trace imports torch: ~10 s)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        import fcntl
    except ImportError:  # pragma: no cover - Windows: each process may export; the rename keeps files whole
        yield
        return
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)  # an empty file, never written: only locked
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # closing releases the lock


class OnnxEncoder:
    """Texts to unit vectors with an ONNX sentence model; deterministic for a given file and thread count.

    The session is made lazily and again in a forked child: onnxruntime's thread pool,
    like torch's, does not survive ``fork()``.
    """

    # Small batches are faster here: on one thread, 3,000 of the default suite's texts (length-
    # sorted) encoded at 392, 381, 357 and 307 texts per CPU second in batches of 8, 16, 32 and 64.
    def __init__(self, model_dir: Path, model_file: Path, threads: int, batch_size: int = 16,
                 runtime: str = "onnxruntime"):
        if runtime not in RUNTIMES:
            raise ValueError(f"unknown ONNX runtime {runtime!r} (one of {', '.join(RUNTIMES)})")
        self.model_dir = Path(model_dir)
        self.model_file = Path(model_file)
        self.threads = max(1, threads)
        self.batch_size = batch_size
        self.runtime = runtime
        self._session = None
        self._pid = -1
        from tokenizers import Tokenizer

        self.tokenizer = Tokenizer.from_file(str(self.model_dir / "tokenizer.json"))
        # tokenizer.json carries a fixed 128-token padding and truncation; the model reads up to max_tokens.
        self.tokenizer.no_padding()
        self.tokenizer.enable_truncation(max_tokens(self.model_dir))

    def session(self):
        if self._session is None or self._pid != os.getpid():
            if self._session is not None:
                # A session made before fork(): its thread pool's threads are not in this
                # process, so destroying it waits on them for ever. Keep it, never used.
                _INHERITED_SESSIONS.append(self._session)
            self._session = self._new_session()
            self._pid = os.getpid()
        return self._session

    def _new_session(self):
        if self.runtime == "openvino-bf16":
            return _OpenVinoSession(self.model_file, self.threads)
        import onnxruntime as ort

        options = ort.SessionOptions()
        options.intra_op_num_threads = self.threads
        options.inter_op_num_threads = 1
        options.log_severity_level = 3
        return ort.InferenceSession(str(self.model_file), options, providers=["CPUExecutionProvider"])

    def __call__(self, texts: Sequence[str]) -> np.ndarray:
        # sentence-transformers strips each text before tokenising; so do we, to read the same pieces.
        encodings = self.tokenizer.encode_batch([t.strip() for t in texts])
        lengths = np.fromiter((len(e.ids) for e in encodings), dtype=np.int64, count=len(encodings))
        order = np.argsort(-lengths, kind="stable")
        session = self.session()
        out: np.ndarray | None = None
        for start in range(0, len(order), self.batch_size):
            rows = order[start : start + self.batch_size]
            width = int(lengths[rows].max())
            ids = np.zeros((len(rows), width), dtype=np.int64)
            mask = np.zeros_like(ids)
            types = np.zeros_like(ids)
            for r, i in enumerate(rows):
                enc = encodings[i]
                n = len(enc.ids)
                ids[r, :n] = enc.ids
                mask[r, :n] = 1
                types[r, :n] = enc.type_ids
            vectors = session.run(None, {"input_ids": ids, "attention_mask": mask, "token_type_ids": types})[0]
            if out is None:
                out = np.zeros((len(texts), vectors.shape[1]), dtype=np.float32)
            out[rows] = vectors
        return out if out is not None else np.zeros((0, 0), dtype=np.float32)

    def padded_tokens(self, texts: Sequence[str]) -> tuple[int, int]:
        """(real word pieces, word pieces fed including padding) for ``texts`` in this encoder's batching."""
        lengths = np.sort(np.array([len(e.ids) for e in self.tokenizer.encode_batch([t.strip() for t in texts])]))[::-1]
        fed = sum(int(lengths[i]) * len(lengths[i : i + self.batch_size]) for i in range(0, len(lengths), self.batch_size))
        return int(lengths.sum()), fed


class _OpenVinoSession:
    """The graph compiled by OpenVINO's CPU plugin to compute in bfloat16, behind onnxruntime's ``run``."""

    def __init__(self, model_file: Path, threads: int):
        import openvino

        # One stream, latency-bound: a call encodes its batches one after another, as onnxruntime does.
        # No pinning: OpenVINO pins its threads to cores by default, and two pool workers with
        # one thread each were both pinned to the first core, taking twice the wall time.
        self._model = openvino.Core().compile_model(str(model_file), "CPU", {
            "INFERENCE_PRECISION_HINT": "bf16", "INFERENCE_NUM_THREADS": threads, "NUM_STREAMS": 1,
            "PERFORMANCE_HINT": "LATENCY", "ENABLE_CPU_PINNING": False})

    def run(self, _outputs, feeds: dict) -> list:
        return [self._model(feeds)[0]]
