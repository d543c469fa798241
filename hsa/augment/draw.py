"""Seeded randomness: generators derived from stable keys, and draws that rules share."""

from __future__ import annotations

import hashlib
import json
import random
from collections.abc import Sequence
from typing import Any, TypeVar

T = TypeVar("T")


def derive_seed(*parts: Any) -> int:
    """A 64-bit seed from JSON-serialisable ``parts``, the same on every machine and run."""
    text = json.dumps(parts, ensure_ascii=False, sort_keys=True, separators=(",", ":"))
    return int.from_bytes(hashlib.sha256(text.encode("utf-8")).digest()[:8], "big")


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
