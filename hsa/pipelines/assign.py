"""Which split each task goes to, drawn column-wise from the task id.

The draw is ``hsa.augment.seeded.unit`` (FNV-1a of the id mixed with the seed by SplitMix64, the
hashing the variant pick, ``hsa.augment.planner.pick_order``, uses too): the same on every
machine, and depending on the task's own id, never on its position or batch.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import pyarrow as pa

from hsa.augment.seeded import unit


def assign_splits(task_ids: pa.Array, fractions: Mapping[str, float], seed: int) -> np.ndarray:
    """A split name per task id, drawn with the given fractions (same task, same split)."""
    names = list(fractions)
    edges = np.cumsum(np.array([fractions[n] for n in names], dtype=np.float64))
    edges /= edges[-1]
    u = unit(task_ids, "split", seed)
    index = np.minimum(np.searchsorted(edges, u, side="right"), len(names) - 1)
    return np.array(names, dtype=object)[index]
