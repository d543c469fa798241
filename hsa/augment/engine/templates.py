"""Templates: what one skeleton renders to, with slots where its leaves go.

A template is derived, once per (renderer, surface name, argument steps, skeleton), by running
the *reference* code on a stand-in object: the skeleton with every leaf replaced by a unique
sentinel value goes through ``apply_steps`` and the real formatter (``json.dumps``, a call
format, a hook message), and the sentinels are then looked up in the output. The text between
them is literal; each sentinel found becomes a slot that names its leaf and how the formatter
wrote it (``LEAF_RENDERERS``). So the engine follows render, parse and the call formats by
construction; it only needs vectorised versions of the few leaf renderers.

Enum renames are the one step that changes values: they are left out of the stand-in run and
recorded per slot (which leaf each enum step reached), then applied to leaf texts in bulk.
A skeleton the derivation cannot explain (duplicate keys, a formatter that writes a value
twice, an enum that changes a value's type) yields None: its rows take the exact path.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from hsa.augment.engine.jsontext import FLOAT, INT, STRING
from hsa.augment.mapping import Step, apply_steps, respelling
from hsa.harness.protocols.hermes import json_safe
from hsa.harness.protocols.xmlcalls import escape_attr, escape_text

#: How formatters write a string value. Every renderer is a pure function of the value, applied
#: character by character, so a leaf renders the same wherever it sits in the output.
LEAF_RENDERERS: dict[str, Callable[[str], str]] = {
    "json": lambda v: json.dumps(v, ensure_ascii=False),
    "json_safe": json_safe,
    "py": repr,
    "py_tag": lambda v: repr(v).replace("<", "\\x3c"),
    "xml_attr": escape_attr,
    "xml_text": escape_text,
    "xml_attr_py": lambda v: escape_attr(repr(v)),
    "xml_text_py": lambda v: escape_text(repr(v)),
    "raw": lambda v: v,
}
#: Numbers render as their canonical JSON text (Python's repr) in every format.
NUMBER = "number"


@dataclass(frozen=True, slots=True)
class Slot:
    """Where leaf ``leaf`` goes, written by ``renderer``, after the enum tables ``enums``."""

    leaf: int
    renderer: str
    enums: tuple[tuple[tuple[Any, Any], ...], ...] = ()


Template = tuple[str | Slot, ...]


class _Dupes(ValueError):
    pass


def _pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out = dict(pairs)
    if len(out) != len(pairs):
        raise _Dupes
    return out


def _string_sentinel(k: int) -> str:
    # Private-use delimiters keep sentinels apart; < & ' " and a newline make every renderer
    # write the sentinel differently, so the renderer can be told from the output.
    return f"\ue000{k}\ue001<&'\">\n"


@lru_cache(maxsize=256)
def _written(k: int) -> tuple[tuple[str, str], ...]:
    """String sentinel ``k`` as each leaf renderer writes it, by renderer name."""
    sentinel = _string_sentinel(k)
    return tuple((name, fn(sentinel)) for name, fn in LEAF_RENDERERS.items())


def _int_sentinel(k: int) -> int:
    return 987_654_000_000_000 + k


def _float_sentinel(k: int) -> float:
    return float(f"1234567{k:06d}.5")


def stand_in(skeleton: str) -> tuple[Any, list[int]] | None:
    """The skeleton as a value whose leaves are sentinels, and each leaf's kind (None if the
    skeleton has duplicate keys or is not JSON)."""
    try:
        value = json.loads(skeleton, object_pairs_hook=_pairs)
    except (ValueError, RecursionError):
        return None
    kinds: list[int] = []

    def walk(node: Any) -> Any:
        if isinstance(node, dict):
            return {k: walk(v) for k, v in node.items()}
        if isinstance(node, list):
            return [walk(v) for v in node]
        if isinstance(node, str):
            kinds.append(STRING)
            return _string_sentinel(len(kinds) - 1)
        if isinstance(node, bool) or node is None:
            return node
        kinds.append(INT if node == 0 else FLOAT)
        k = len(kinds) - 1
        return _int_sentinel(k) if node == 0 else _float_sentinel(k)

    return walk(value), kinds


def _sentinel(kind: int, k: int) -> Any:
    return (
        _string_sentinel(k)
        if kind == STRING
        else _int_sentinel(k)
        if kind == INT
        else _float_sentinel(k)
    )


def _enum_reach(value: Any, steps: Sequence[Step], kinds: list[int]) -> dict[int, list]:
    """For each leaf, the enum tables (in order) that reach it through ``steps``."""
    reach: dict[int, list] = {}
    structural: list[Step] = []
    for step in steps:
        if step.kind != "enum":
            structural.append(step)
            continue
        marks = tuple((_sentinel(kind, k), ["\ue002", k]) for k, kind in enumerate(kinds))
        probe = Step("enum", step.path, values=marks)
        marked = apply_steps(value, [*structural, probe])
        for k in _marked(marked):
            reach.setdefault(k, []).append(step.values)
    return reach


def _marked(node: Any) -> list[int]:
    if isinstance(node, dict):
        return [k for v in node.values() for k in _marked(v)]
    if isinstance(node, list):
        if len(node) == 2 and node[0] == "\ue002" and isinstance(node[1], int):
            return [node[1]]
        return [k for v in node for k in _marked(v)]
    return []


def _scalar_type(value: Any) -> type | None:
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, str | int | float):
        return type(value)
    return None


def _enums_fit(kind: int, tables: list) -> bool:
    """Whether enum tables keep a leaf of ``kind`` a scalar of the same JSON type."""
    want = {STRING: str, INT: int, FLOAT: float}[kind]
    for table in tables:
        for canonical, surface in table:
            if _scalar_type(canonical) is want and _scalar_type(surface) is not want:
                return False
    return True


def derive(
    render: Callable[[Any], str], skeleton: str, steps: Sequence[Step] = ()
) -> Template | None:
    """The template of ``render(apply_steps(skeleton value, steps))``; None if underivable.

    ``render`` raising (the reference refusing the value) propagates: every row with this
    skeleton would make the reference raise too.
    """
    made = stand_in(skeleton)
    if made is None:
        return None
    value, kinds = made
    reach = _enum_reach(value, steps, kinds) if any(s.kind == "enum" for s in steps) else {}
    for k, tables in reach.items():
        if not _enums_fit(kinds[k], tables):
            return None
    structural = [s for s in steps if s.kind != "enum"]
    text = render(apply_steps(value, structural) if structural else value)
    found: list[tuple[int, int, Slot]] = []
    for k, kind in enumerate(kinds):
        if kind == STRING:
            hits = [(name, written) for name, written in _written(k) if written in text]
        else:
            hits = [(NUMBER, repr(_sentinel(kind, k)))]
            if hits[0][1] not in text:
                hits = []
        if not hits:
            continue  # the leaf was dropped
        if len(hits) > 1 or text.count(hits[0][1]) != 1:
            return None
        name, written = hits[0]
        start = text.index(written)
        found.append((start, start + len(written), Slot(k, name, tuple(reach.get(k, ())))))
    found.sort(key=lambda item: item[0])
    out: list[str | Slot] = []
    position = 0
    for start, end, slot in found:
        if start < position:
            return None
        if start > position:
            out.append(text[position:start])
        out.append(slot)
        position = end
    if position < len(text):
        out.append(text[position:])
    return tuple(out)


def fill(template: Template, leaves: Sequence[Any]) -> str:
    """A template filled with Python values (the slow path and the tests use it)."""
    parts: list[str] = []
    for item in template:
        if isinstance(item, str):
            parts.append(item)
            continue
        value = leaves[item.leaf]
        for table in item.enums:
            value = lookup(table, value)
        parts.append(
            repr(value) if item.renderer == NUMBER else LEAF_RENDERERS[item.renderer](value)
        )
    return "".join(parts)


def lookup(table: Sequence[tuple[Any, Any]], value: Any) -> Any:
    """An enum table applied to one value, with ``apply_steps``' type-strict comparison."""
    return respelling(table, value, value)
