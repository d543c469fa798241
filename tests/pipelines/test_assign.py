"""Variant picks and splits: hashed from ids, the same everywhere, spread as asked."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
from hypothesis import given, settings
from hypothesis import strategies as st

from hsa.pipelines.assign import assign_splits, fnv1a, pick, unit


def test_fnv1a_matches_the_reference_vectors() -> None:
    # FNV-1a 64-bit of "", "a" and "foobar" (from the FNV reference test suite)
    got = fnv1a(pa.array(["", "a", "foobar"])).tolist()
    assert got == [0xCBF29CE484222325, 0xAF63DC4C8601EC8C, 0x85944171F73967E8]


@settings(max_examples=50, deadline=None)
@given(
    ids=st.lists(st.text(min_size=1, max_size=12), min_size=1, max_size=40, unique=True),
    k=st.integers(0, 6),
    seed=st.integers(0, 1000),
    data=st.data(),
)
def test_pick_is_distinct_in_range_sorted_and_repeatable(ids, k, seed, data) -> None:
    available = np.array(
        data.draw(st.lists(st.integers(0, 8), min_size=len(ids), max_size=len(ids)))
    )
    slots = pick(pa.array(ids), available, k, seed)
    assert slots.shape == (len(ids), k)
    for row, n in zip(slots, available, strict=True):
        chosen = row[row >= 0]
        assert len(chosen) == min(k, n)
        assert (chosen < n).all() and len(set(chosen)) == len(chosen)
        assert list(chosen) == sorted(chosen)
    # a row's pick depends on its id only, not on its neighbours
    alone = pick(pa.array(ids[:1]), available[:1], k, seed)
    assert (alone[0] == slots[0]).all()
    assert (pick(pa.array(ids), available, k, seed) == slots).all()


def test_picks_spread_over_variants_and_seeds_change_them() -> None:
    ids = pa.array([f"traj-{i}" for i in range(4000)])
    slots = pick(ids, np.full(4000, 8), 2, 0)
    counts = np.bincount(slots.ravel(), minlength=8)
    assert counts.min() > 0.8 * counts.mean()
    assert (pick(ids, np.full(4000, 8), 2, 1) != slots).any()


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
