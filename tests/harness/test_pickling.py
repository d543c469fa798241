"""Quick pickling of the frozen dataclasses that travel between processes."""

from __future__ import annotations

import pickle
from dataclasses import dataclass, field

from hsa.augment import default_recipe, plan
from hsa.harness.model import Harness, Tool
from hsa.harness.pickling import by_fields


@by_fields
@dataclass(frozen=True, slots=True)
class _Point:
    x: int
    y: tuple[int, ...] = ()
    label: str = field(default="", compare=False)


def test_a_class_pickles_by_its_fields_in_order() -> None:
    point = _Point(1, (2, 3), "p")
    assert point.__getstate__() == (1, (2, 3), "p")
    copy = pickle.loads(pickle.dumps(point))
    assert copy == point and copy.label == "p" and copy is not point


def test_planned_variants_come_back_equal() -> None:
    tools = tuple(
        Tool(
            f"find_item_{i}",
            "Find an item.",
            {"type": "object", "properties": {"sku": {"type": "string", "enum": ["a_b", "c"]}}},
        )
        for i in range(3)
    )
    variants = plan(Harness("shop", tools=tools), default_recipe())
    copies = pickle.loads(pickle.dumps(variants))
    assert copies == variants
    for variant, copy in zip(variants, copies, strict=True):
        assert copy.mapping == variant.mapping and copy.mapping.to_json() == variant.mapping_json()
        assert copy.harness.tools == variant.harness.tools and copy.rules == variant.rules
