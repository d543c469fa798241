"""Splits: hashed from task ids, the same everywhere, spread as asked."""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from hsa.augment.seeded import unit
from hsa.pipelines.assign import assign_splits


def test_splits_follow_fractions_and_tasks() -> None:
    tasks = pa.array([f"task-{i}" for i in range(6000)])
    splits = assign_splits(tasks, {"train": 0.8, "dev": 0.1, "test": 0.1}, 0)
    share = {s: float(np.mean(splits == s)) for s in ("train", "dev", "test")}
    assert abs(share["train"] - 0.8) < 0.03 and abs(share["test"] - 0.1) < 0.02
    again = assign_splits(
        pa.array(["task-7", "task-7"]), {"train": 0.8, "dev": 0.1, "test": 0.1}, 0
    )
    assert again[0] == again[1] == splits[7]
    u = unit(tasks, "x")
    assert ((u >= 0) & (u < 1)).all()
