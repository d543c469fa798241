"""Seeded randomness: generators derived from stable keys, and draws that rules share.

Besides per-draw generators, column-wise draws for many ids at once (``unit``, and the
variant pick built on it in ``hsa.augment.planner``): a 64-bit FNV-1a hash of each UTF-8 id,
mixed with a seed by SplitMix64. Integer arithmetic only, so a draw is the same on every
machine and with every library version, and it depends on the id itself, never on its
position in the input or on which batch it falls in.
"""

from __future__ import annotations

import hashlib
import json
import random
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

import numpy as np
import pyarrow as pa

T = TypeVar("T")

_FNV_OFFSET = np.uint64(0xCBF29CE484222325)
_FNV_PRIME = np.uint64(0x100000001B3)


def derive_seed(*parts: Any) -> int:
    """A 64-bit seed from JSON-serialisable ``parts``, the same on every machine and run: the
    first 8 bytes of the SHA-256 of ``parts`` as compact JSON."""
    if all(type(p) is str or type(p) is int for p in parts):
        # what json.dumps writes for strings and integers, written directly: planning derives
        # a seed for every rule of every variant
        text = "[" + ",".join(_quote(p) if type(p) is str else str(p) for p in parts) + "]"
    else:
        text = json.dumps(parts, ensure_ascii=False, sort_keys=True, separators=(",", ":"))
    return int.from_bytes(hashlib.sha256(text.encode("utf-8")).digest()[:8], "big")


#: how ``json.dumps(..., ensure_ascii=False)`` writes a string
_quote: Callable[[str], str] = json.encoder.encode_basestring


def generator(*parts: Any) -> random.Random:
    """A ``random.Random`` seeded from ``parts`` (never from the clock)."""
    return random.Random(derive_seed(*parts))


def shuffled(items: Sequence[T], rng: random.Random) -> list[T]:
    """A permutation of ``items`` that differs from the input whenever it can."""
    items = list(items)
    if len(items) < 2:
        return items
    out = list(items)
    for _ in range(8):
        rng.shuffle(out)
        if out != items:
            return out
    return out[1:] + out[:1]


def id_array(ids: Sequence[str]) -> pa.Array:
    """``ids`` as an Arrow string array (for ``fnv1a``), built from its buffers: ``pa.array``
    of Python values first imports pandas when it is installed (a fifth of a second) to look
    for its types, which a few ids to hash are not worth."""
    from hsa.augment.engine.jsontext import string_array

    data = [i.encode("utf-8") for i in ids]
    offsets = np.zeros(len(data) + 1, dtype=np.int64)
    np.cumsum([len(b) for b in data], out=offsets[1:])
    return string_array(offsets, np.frombuffer(b"".join(data), dtype=np.uint8))


def fnv1a(ids: pa.Array) -> np.ndarray:
    """The 64-bit FNV-1a hash of each string's UTF-8 bytes (null hashes as "")."""
    # Imported here: the engine imports the planner, which imports this module.
    from hsa.augment.engine.jsontext import byte_view

    offsets, data = byte_view(ids)
    n = len(offsets) - 1
    lengths = np.diff(offsets)
    h = np.full(n, _FNV_OFFSET, dtype=np.uint64)
    starts = offsets[:-1]
    with np.errstate(over="ignore"):
        for j in range(int(lengths.max()) if n else 0):
            live = np.flatnonzero(lengths > j)
            h[live] = (h[live] ^ data[starts[live] + j].astype(np.uint64)) * _FNV_PRIME
    return h


def splitmix64(x: np.ndarray) -> np.ndarray:
    """SplitMix64's finaliser: a well-mixed 64-bit function of ``x``."""
    with np.errstate(over="ignore"):
        z = x.astype(np.uint64) + np.uint64(0x9E3779B97F4A7C15)
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        return z ^ (z >> np.uint64(31))


def unit(ids: pa.Array, *salt: object) -> np.ndarray:
    """A uniform number in [0, 1) per id, fixed by ``salt``."""
    mixed = splitmix64(fnv1a(ids) ^ np.uint64(derive_seed("unit", *salt)))
    return (mixed >> np.uint64(11)).astype(np.float64) / float(1 << 53)
