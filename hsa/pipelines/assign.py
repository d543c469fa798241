"""Which split each task goes to, drawn column-wise from the task id.

The draw is ``hsa.augment.seeded.unit`` (FNV-1a of the id mixed with the seed by SplitMix64, the
hashing the variant pick, ``hsa.augment.planner.pick_order``, uses too): the same on every
machine, and depending on the task's own id, never on its position or batch. The fractions
are laid out by split name, sorted, as the manifest and the config hash record them: the order
a config lists them in changes nothing.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from hsa.augment.seeded import unit

#: the version of the split draw, recorded by the datasets the augment job writes (2: the
#: fractions are laid out in sorted split-name order; they were in the order the config listed
#: them, which the config hash does not record, so the same hash named other splits)
SPLIT_VERSION = 2


def assign_splits(task_ids: pa.Array, fractions: Mapping[str, float], seed: int) -> np.ndarray:
    """A split name per task id, drawn with the given fractions (same task, same split)."""
    names = sorted(fractions)
    edges = np.cumsum(np.array([fractions[n] for n in names], dtype=np.float64))
    edges /= edges[-1]
    u = unit(task_ids, "split", seed)
    index = np.minimum(np.searchsorted(edges, u, side="right"), len(names) - 1)
    return np.array(names, dtype=object)[index]


def row_splits(
    task_ids: pa.Array, given: pa.Array, fractions: Mapping[str, float], seed: int
) -> pa.Array:
    """Each row's split: its own (``given``: a teacher's task split), or where it has none,
    the one its task id draws (``assign_splits``)."""
    given = given.cast(pa.string())
    missing = pc.is_null(given)
    if not pc.any(missing).as_py():
        return given
    drawn = assign_splits(task_ids.filter(missing), fractions, seed)
    return pc.replace_with_mask(given, missing, pa.array(drawn, pa.string()))
