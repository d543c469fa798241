"""Seeded draws: the same on every machine, from ids and names, never from the clock."""

from __future__ import annotations

import hashlib
import json
import random

import numpy as np
import pyarrow as pa
from hypothesis import given
from hypothesis import strategies as st

from hsa.augment.seeded import (
    derive_seed,
    fnv1a,
    generator,
    id_array,
    shuffled,
    splitmix64,
    unit,
)


def test_fnv1a_matches_the_reference_vectors() -> None:
    # FNV-1a 64-bit of "", "a" and "foobar" (from the FNV reference test suite)
    got = fnv1a(pa.array(["", "a", "foobar"])).tolist()
    assert got == [0xCBF29CE484222325, 0xAF63DC4C8601EC8C, 0x85944171F73967E8]
    assert fnv1a(pa.array([None, "a"])).tolist()[0] == 0xCBF29CE484222325  # null hashes as ""


def test_splitmix64_matches_the_reference_sequence() -> None:
    # SplitMix64 seeded with 0 gives 0xE220A8397B1DCDAF, then 0x6E789E6AA1B965F4 (its state
    # advances by the golden gamma before each output, which ``splitmix64`` adds itself)
    gamma = np.uint64(0x9E3779B97F4A7C15)
    got = splitmix64(np.array([0, gamma], dtype=np.uint64)).tolist()
    assert got == [0xE220A8397B1DCDAF, 0x6E789E6AA1B965F4]


def test_unit_is_uniform_per_id_and_fixed_by_its_salt() -> None:
    ids = pa.array([f"task-{i}" for i in range(5000)])
    u = unit(ids, "x", 1)
    assert ((u >= 0) & (u < 1)).all() and abs(float(u.mean()) - 0.5) < 0.02
    assert (unit(ids, "x", 1) == u).all() and (unit(ids, "x", 2) != u).any()
    assert unit(ids[3:4], "x", 1)[0] == u[3]  # an id's draw does not depend on its neighbours


def test_seeds_and_generators_come_from_their_parts() -> None:
    assert derive_seed("a", 1) == derive_seed("a", 1) != derive_seed("a", 2)
    assert derive_seed("variant", 7, "h-1", 0, 3) == 0x43F7B79400911F12  # fixed: plans depend on it
    assert generator("a", 1).random() == generator("a", 1).random()
    items = list(range(5))
    assert shuffled(items, random.Random(0)) != items
    assert shuffled([1], random.Random(0)) == [1]


@given(st.lists(st.one_of(st.text(), st.integers(), st.booleans(), st.none(), st.floats())))
def test_a_seed_is_the_hash_of_its_parts_as_json(parts: list) -> None:
    # strings and integers are written without json.dumps, as json.dumps writes them
    text = json.dumps(parts, ensure_ascii=False, sort_keys=True, separators=(",", ":"))
    digest = hashlib.sha256(text.encode("utf-8")).digest()
    assert derive_seed(*parts) == int.from_bytes(digest[:8], "big")


@given(st.lists(st.text(max_size=12), max_size=20))
def test_an_id_array_holds_the_ids_and_hashes_as_pyarrow_s_own(ids: list[str]) -> None:
    built = id_array(ids)
    assert built.to_pylist() == ids
    assert (fnv1a(built) == fnv1a(pa.array(ids, pa.string()))).all()
