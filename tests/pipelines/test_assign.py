"""Splits: hashed from task ids, the same everywhere, spread as asked, whatever the order of
the fractions."""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from hsa.augment.seeded import unit
from hsa.datasets.manifest import config_hash
from hsa.pipelines.assign import SPLIT_VERSION, assign_splits
from hsa.pipelines.augment import AugmentConfig


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


def test_splits_do_not_depend_on_the_order_fractions_are_given_in() -> None:
    # the manifest and the config hash record the fractions by name, sorted: two configs
    # listing them in other orders are one dataset, so they must draw the same splits
    tasks = pa.array([f"task-{i}" for i in range(2000)])
    given = assign_splits(tasks, {"train": 0.6, "dev": 0.2, "test": 0.2}, 0)
    reordered = assign_splits(tasks, {"dev": 0.2, "test": 0.2, "train": 0.6}, 0)
    assert (given == reordered).all()
    assert set(given.tolist()) == {"train", "dev", "test"}


def test_a_dataset_records_the_split_draw_and_not_the_order_of_fractions() -> None:
    given = AugmentConfig(splits={"train": 0.6, "dev": 0.2, "test": 0.2}).to_dict()
    reordered = AugmentConfig(splits={"dev": 0.2, "test": 0.2, "train": 0.6}).to_dict()
    assert config_hash(given) == config_hash(reordered)
    assert given["split_draw"] == SPLIT_VERSION
