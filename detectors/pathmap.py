"""A persistent counter for path-local state, with structural sharing.

The seed extends a path by copying the whole map (``new Map(parent)``): simple, but a
tree of N nodes then holds N copies whose sizes grow with depth, and each extension
costs O(distinct signatures). ``PathCounts`` copies at most a small top layer; full
layers are frozen and shared by every descendant. Frozen layers are merged like a
binary counter (a new layer merges with the one below while that one is no larger),
so layer sizes double downwards: a lookup probes at most about log2(n / 32) + 1
dicts, each entry is copied O(log n) times, and a chain of n calls retains
O(n log n) entries in all, not the O(n²) of merging everything every few layers.
Extending never touches the parent, so sibling branches share it safely.
"""
from __future__ import annotations

from collections.abc import Mapping
from typing import Hashable, Iterator

_LOCAL_MAX = 32  # entries copied per extension, at most


class PathCounts(Mapping):
    """An immutable map (``key -> count`` by default); ``incremented(key)`` and
    ``set(key, value)`` return extended copies.

    >>> a = PathCounts()
    >>> b = a.incremented("x")
    >>> c = b.incremented("x")
    >>> (a.get("x", 0), b["x"], c["x"])
    (0, 1, 2)
    """

    __slots__ = ("_local", "_base", "_layers")

    def __init__(self, local: dict | None = None, base: "PathCounts | None" = None, layers: int = 0):
        self._local = local if local is not None else {}
        self._base = base
        self._layers = layers

    def get(self, key: Hashable, default=None):
        value = self._local.get(key)
        if value is not None:
            return value
        layer = self._base
        while layer is not None:
            value = layer._local.get(key)
            if value is not None:
                return value
            layer = layer._base
        return default

    def __contains__(self, key: object) -> bool:
        return self.get(key) is not None

    def missing(self, keys) -> set:
        """The keys of ``keys`` that are not in the map (set arithmetic per layer, in C)."""
        out = set(keys)
        layer: PathCounts | None = self
        while layer is not None and out:
            out.difference_update(layer._local.keys())
            layer = layer._base
        return out

    def __getitem__(self, key: Hashable) -> int:
        value = self.get(key)
        if value is None:
            raise KeyError(key)
        return value

    def incremented(self, key: Hashable, by: int = 1) -> "PathCounts":
        return self.set(key, self.get(key, 0) + by)

    def set(self, key: Hashable, value) -> "PathCounts":
        """A copy with ``key`` bound to ``value`` (never ``None``); this map is unchanged."""
        cls = type(self)
        if key in self._local or len(self._local) < _LOCAL_MAX:
            local = self._local.copy()
            local[key] = value
            return cls(local, self._base, self._layers)
        # The top layer is full: freeze it (it is never written again) and start a new one.
        base = self._frozen(self._local, self._base)
        return cls({key: value}, base, base._layers + 1)

    def with_all(self, keys, value=1) -> "PathCounts":
        """A copy with every key of ``keys`` bound to ``value``: one new layer, not one per key."""
        keys = list(keys)
        if not keys:
            return self
        cls = type(self)
        if len(self._local) + len(keys) <= _LOCAL_MAX:
            local = self._local.copy()
            local.update(dict.fromkeys(keys, value))
            return cls(local, self._base, self._layers)
        base = self._frozen(self._local, self._base) if self._local else self._base
        return cls(dict.fromkeys(keys, value), base, (base._layers + 1) if base is not None else 0)

    @classmethod
    def _frozen(cls, local: dict, base: "PathCounts | None") -> "PathCounts":
        """``local`` as a frozen layer on ``base``, merged with the layers below it that are no larger."""
        while base is not None and len(base._local) <= len(local):
            merged = base._local.copy()
            merged.update(local)  # the newer layer wins
            local, base = merged, base._base
        return cls(local, base, (base._layers + 1) if base is not None else 0)

    def _flat(self) -> dict:
        chain = []
        layer: PathCounts | None = self
        while layer is not None:
            chain.append(layer._local)
            layer = layer._base
        merged: dict = {}
        for local in reversed(chain):  # newer layers win
            merged.update(local)
        return merged

    def __iter__(self) -> Iterator:
        return iter(self._flat())

    def __len__(self) -> int:
        return len(self._flat())

    def __repr__(self) -> str:
        return f"PathCounts({self._flat()!r})"

    def __reduce__(self):
        return (type(self), (self._flat(),))


EMPTY = PathCounts()
