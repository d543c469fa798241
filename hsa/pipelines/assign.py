"""Which variants each trajectory is rendered under, and which split each task goes to.

Both are decided by hashing identifiers, column-wise: a 64-bit FNV-1a hash of the UTF-8 id,
mixed with the seed by SplitMix64. Integer arithmetic only, so the choice is the same on every
machine and with every library version, and it depends on the row's own id, never on its
position in the input or on which batch it falls in.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import pyarrow as pa

from hsa.augment.draw import derive_seed
from hsa.augment.engine.jsontext import byte_view

_FNV_OFFSET = np.uint64(0xCBF29CE484222325)
_FNV_PRIME = np.uint64(0x100000001B3)


def fnv1a(ids: pa.Array) -> np.ndarray:
    """The 64-bit FNV-1a hash of each string's UTF-8 bytes (null hashes as "")."""
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


def pick(ids: pa.Array, available: np.ndarray, k: int, seed: int) -> np.ndarray:
    """For each id, ``min(k, available)`` distinct slots out of ``range(available)``.

    Returns an ``(n, k)`` array of slots in increasing order, -1 where fewer are available;
    the caller reports those ids (the augment job counts them in its manifest), since a row
    that silently gets fewer variants than asked reads as a smaller dataset than configured.
    """
    n = len(ids)
    width = int(available.max()) if n else 0
    if width == 0 or k == 0:
        return np.full((n, k), -1, dtype=np.int64)
    base = fnv1a(ids)
    salts = np.array([derive_seed("pick", seed, s) for s in range(width)], dtype=np.uint64)
    keys = splitmix64(base[:, None] ^ salts[None, :])
    keys[np.arange(width)[None, :] >= available[:, None]] = np.iinfo(np.uint64).max
    width_k = min(k, width)
    order = np.argsort(keys, axis=1, kind="stable")[:, :width_k]  # the smallest keys
    taken = np.arange(width_k)[None, :] < np.minimum(available, width_k)[:, None]
    big = np.iinfo(np.int64).max
    chosen = np.where(taken, order, big)
    chosen.sort(axis=1)
    out = np.full((n, k), -1, dtype=np.int64)
    out[:, :width_k] = np.where(chosen == big, -1, chosen)
    return out


def assign_splits(task_ids: pa.Array, fractions: Mapping[str, float], seed: int) -> np.ndarray:
    """A split name per task id, drawn with the given fractions (same task, same split)."""
    names = list(fractions)
    edges = np.cumsum(np.array([fractions[n] for n in names], dtype=np.float64))
    edges /= edges[-1]
    u = unit(task_ids, "split", seed)
    index = np.minimum(np.searchsorted(edges, u, side="right"), len(names) - 1)
    return np.array(names, dtype=object)[index]
