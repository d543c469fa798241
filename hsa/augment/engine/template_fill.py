"""Filling templates in bulk: leaves rendered column-wise, then one gather and one join.

Each item (a call, a hook firing) names a template and the first of its leaves. The templates'
tokens are expanded per item, slots are resolved to rendered leaves, and every item's text is
the concatenation of its tokens -- a list column joined by Arrow. Leaves are rendered once per
(renderer, leaf) with vectorised string kernels; only values a kernel cannot render exactly
(escapes, characters Python's ``repr`` escapes) go through Python, once per distinct value.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Hashable
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from hsa.augment.engine.jsontext import FLOAT, INT, STRING, Scan, lit
from hsa.augment.engine.records import distinct
from hsa.augment.engine.templates import LEAF_RENDERERS, NUMBER, Slot, Template, lookup


@lru_cache(maxsize=1)
def _printable_class() -> str:
    """An RE2 class of exactly the characters ``str.isprintable`` accepts, minus quotes and
    backslash (which never reach it), from Python's own Unicode tables."""
    ranges: list[tuple[int, int]] = []
    start = None
    for code in range(0x20, 0x110000):
        ok = code < 0xD800 or code > 0xDFFF
        ok = ok and chr(code).isprintable() and chr(code) not in "\\\"'"
        if ok and start is None:
            start = code
        elif not ok and start is not None:
            ranges.append((start, code - 1))
            start = None
    if start is not None:
        ranges.append((start, 0x10FFFF))
    return "".join(f"\\x{{{a:x}}}-\\x{{{b:x}}}" if a != b else f"\\x{{{a:x}}}" for a, b in ranges)


@lru_cache(maxsize=1)
def _repr_safe() -> str:
    return f"^[{_printable_class()}']*$"


def _has(values: pa.Array, needle: str) -> pa.Array:
    return pc.match_substring(values, needle)


def _xml(values: pa.Array, attr: bool) -> pa.Array:
    out = pc.replace_substring(values, "&", "&amp;")
    out = pc.replace_substring(out, "<", "&lt;")
    out = pc.replace_substring(out, ">", "&gt;")
    return pc.replace_substring(out, '"', "&quot;") if attr else out


def _py(values: pa.Array) -> pa.Array:
    quote = pc.if_else(_has(values, "'"), lit('"'), lit("'"))
    return pc.binary_join_element_wise(quote, values, quote, lit(""))


#: vectorised renderers of simple values (no escapes in their JSON, every character printable)
_KERNELS: dict[str, Callable[[pa.Array], pa.Array]] = {
    "raw": lambda v: v,
    "py": _py,
    "py_tag": lambda v: pc.replace_substring(_py(v), "<", "\\x3c"),
    "xml_attr": lambda v: _xml(v, True),
    "xml_text": lambda v: _xml(v, False),
    "xml_attr_py": lambda v: _xml(_py(v), True),
    "xml_text_py": lambda v: _xml(_py(v), False),
}


@dataclass(slots=True)
class Leaves:
    """The leaves of one ``Scan``, with their canonical JSON text and values worked out lazily."""

    scan: Scan
    python_values: int = 0  # distinct values that needed Python
    _json: pa.Array | None = None
    _value: pa.Array | None = None
    _simple: np.ndarray | None = None

    @property
    def kind(self) -> np.ndarray:
        return self.scan.leaf_kind

    def json_text(self) -> pa.Array:
        """Each leaf as ``json.dumps`` writes its value (floats as ``repr``, escapes as Python)."""
        if self._json is None:
            text = self.scan.leaf_text
            kind = self.kind
            odd = (
                ((kind == STRING) & self.escaped())
                | (kind == FLOAT)
                | ((kind == INT) & pc.starts_with(text, "-0").to_numpy(zero_copy_only=False))
            )
            self._json = self._python(
                text, odd, lambda t: json.dumps(json.loads(t), ensure_ascii=False)
            )
        return self._json

    def exotic_items(self) -> np.ndarray:
        """Per scanned row: whether a number in it reads as infinite in Python (``1e400``).

        Formats write infinity differently (``Infinity``, ``1e999``, ``inf``), so such rows
        take the exact path.
        """
        floats = np.flatnonzero(self.kind == FLOAT)
        out = np.zeros(len(self.scan.ok), dtype=bool)
        if len(floats):
            text = self.json_text().take(pa.array(floats))
            odd = pc.is_in(text, value_set=pa.array(["Infinity", "-Infinity", "NaN"]))
            rows = self.scan.leaf_row[floats[odd.to_numpy(zero_copy_only=False)]]
            out[rows] = True
        return out

    def escaped(self) -> np.ndarray:
        if self._simple is None:
            self._simple = ~pc.match_substring(self.scan.leaf_text, "\\").to_numpy(
                zero_copy_only=False
            )
        return ~self._simple

    def values(self) -> pa.Array:
        """String leaves decoded (other leaves hold their JSON text)."""
        if self._value is None:
            text = self.scan.leaf_text
            strings = self.kind == STRING
            inner = pc.utf8_slice_codeunits(text, 1, -1)
            plain = pc.if_else(pa.array(strings), inner, text)
            self._value = self._python(plain, strings & self.escaped(), None, source=text)
        return self._value

    def _python(
        self,
        base: pa.Array,
        mask: np.ndarray,
        fn: Callable[[str], str] | None,
        *,
        source: pa.Array | None = None,
    ) -> pa.Array:
        """``base`` with the masked entries replaced by ``fn`` of ``source`` (per distinct
        value); ``fn`` None decodes JSON strings."""
        if not mask.any():
            return base
        where = np.flatnonzero(mask)
        src = (source if source is not None else base).take(pa.array(where))
        uniq = pc.unique(src)
        self.python_values += len(uniq)
        convert = fn or json.loads
        done = pa.array([convert(t) for t in uniq.to_pylist()], pa.large_string())
        fixed = done.take(pc.index_in(src, value_set=uniq))
        return _scatter(base, where, fixed)

    def render(self, renderer: str, idx: np.ndarray) -> pa.Array:
        """Leaves ``idx`` as ``renderer`` writes them."""
        if renderer == NUMBER or renderer == "json":
            return self.json_text().take(pa.array(idx))
        if renderer == "json_safe":
            out = self.json_text().take(pa.array(idx))
            out = pc.replace_substring(out, "<", "\\u003c")
            out = pc.replace_substring(out, ">", "\\u003e")
            return pc.replace_substring(out, "&", "\\u0026")
        values = self.values().take(pa.array(idx))
        fn = LEAF_RENDERERS[renderer]
        if renderer == "raw":
            return values
        ascii_ = pc.string_is_ascii(values).to_numpy(zero_copy_only=False)
        if renderer.startswith("py") or renderer.endswith("_py"):
            # ASCII without DEL is printable (JSON strings hold no raw control characters);
            # other strings are checked against Python's own table of printable characters.
            simple_np = ascii_ & ~pc.match_substring(values, "\x7f").to_numpy(zero_copy_only=False)
            wide = np.flatnonzero(~ascii_)
            if len(wide):
                checked = pc.match_substring_regex(values.take(pa.array(wide)), _repr_safe())
                simple_np[wide] = checked.to_numpy(zero_copy_only=False)
        else:
            simple_np = ascii_.copy()
            wide = np.flatnonzero(~ascii_)
            if len(wide):
                odd = pc.match_substring_regex(values.take(pa.array(wide)), "[\\x{fffe}\\x{ffff}]")
                simple_np[wide] = ~odd.to_numpy(zero_copy_only=False)
        escaped = self.escaped()[idx]
        hard = ~simple_np | escaped
        out = _KERNELS[renderer](values)
        if hard.any():
            where = np.flatnonzero(hard)
            picked = values.take(pa.array(where))
            uniq = pc.unique(picked)
            self.python_values += len(uniq)
            done = pa.array([fn(v) for v in uniq.to_pylist()], pa.large_string())
            out = _scatter(out, where, done.take(pc.index_in(picked, value_set=uniq)))
        return out


def _scatter(base: pa.Array, where: np.ndarray, values: pa.Array) -> pa.Array:
    """``base`` with positions ``where`` replaced by ``values``."""
    base = base.cast(pa.large_string())
    n = len(base)
    source = np.arange(n, dtype=np.int64)
    source[where] = n + np.arange(len(where), dtype=np.int64)
    return pa.concat_arrays([base, values.cast(pa.large_string())]).take(pa.array(source))


@dataclass(slots=True)
class TemplateBook:
    """Templates by key, derived on first use and kept for later batches.

    Each template is also compiled into flat token arrays: ``slot`` (the leaf a token takes,
    -1 for literal text) and ``ref`` (the literal's id, or the slot's renderer-key id), so
    filling needs no Python loop over templates or tokens.
    """

    templates: list[Template | None] = field(default_factory=list)
    literals: list[str] = field(default_factory=list)
    render_keys: list[tuple[str, tuple]] = field(default_factory=list)
    _ids: dict[Hashable, int] = field(default_factory=dict)
    _literal_ids: dict[str, int] = field(default_factory=dict)
    _key_ids: dict[tuple[str, str], int] = field(default_factory=dict)
    _slot: list[int] = field(default_factory=list)
    _ref: list[int] = field(default_factory=list)
    _start: list[int] = field(default_factory=lambda: [0])
    _arrays: tuple | None = None

    def id(self, key: Hashable, derive: Callable[[], Template | None]) -> int:
        """The id of the template for ``key``; -1 when it cannot be derived."""
        found = self._ids.get(key)
        if found is None:
            template = derive()
            found = len(self.templates) if template is not None else -1
            if template is not None:
                self.templates.append(template)
                self._compile(template)
            self._ids[key] = found
        return found

    def _compile(self, template: Template) -> None:
        for token in template:
            if isinstance(token, Slot):
                rkey = (token.renderer, json.dumps(token.enums, ensure_ascii=False, default=str))
                if rkey not in self._key_ids:
                    self._key_ids[rkey] = len(self.render_keys)
                    self.render_keys.append((token.renderer, token.enums))
                self._slot.append(token.leaf)
                self._ref.append(self._key_ids[rkey])
            else:
                if token not in self._literal_ids:
                    self._literal_ids[token] = len(self.literals)
                    self.literals.append(token)
                self._slot.append(-1)
                self._ref.append(self._literal_ids[token])
        self._start.append(len(self._slot))
        self._arrays = None

    def arrays(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, pa.Array]:
        """(token start per template + end, token slots, token refs, literal texts)."""
        if self._arrays is None:
            self._arrays = (
                np.array(self._start, dtype=np.int64),
                np.array(self._slot, dtype=np.int64),
                np.array(self._ref, dtype=np.int64),
                pa.array(self.literals, pa.large_string()),
            )
        return self._arrays


def _enum_map(renderer: str, kind: int, enums: tuple) -> tuple[list[str], list[str]]:
    """(canonical JSON texts, rendered surface values) of an enum chain on leaves of ``kind``."""
    want = {STRING: str, INT: int, FLOAT: float}[kind]
    seen: dict[str, Any] = {}
    for table in enums:
        for canonical, _ in table:
            if type(canonical) is want:
                seen.setdefault(json.dumps(canonical, ensure_ascii=False), canonical)
    keys, out = [], []
    for text, canonical in seen.items():
        value = canonical
        for table in enums:
            value = lookup(table, value)
        keys.append(text)
        if renderer == NUMBER:
            out.append(repr(value))
        elif renderer == "json":
            out.append(json.dumps(value, ensure_ascii=False))
        else:
            out.append(LEAF_RENDERERS[renderer](value))
    return keys, out


def fill(book: TemplateBook, tid: np.ndarray, base: np.ndarray, leaves: Leaves) -> pa.Array:
    """The text of each item: template ``tid`` filled from the leaves starting at ``base``."""
    n = len(tid)
    if n == 0:
        return pa.array([], pa.large_string())
    starts, slots, refs, literal_texts = book.arrays()
    first = starts[tid]
    per_item = starts[tid + 1] - first
    item_of = np.repeat(np.arange(n, dtype=np.int64), per_item)
    item_first = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(per_item, out=item_first[1:])
    token = first[item_of] + (np.arange(item_first[-1], dtype=np.int64) - item_first[item_of])
    slot = slots[token]
    ref = refs[token]
    is_slot = slot >= 0

    # every literal of the book, then each renderer's leaves: one pool, one gather
    pool: list[pa.Array] = [literal_texts]
    pool_size = len(literal_texts)
    pool_idx = np.where(is_slot, 0, ref)
    leaf = np.where(is_slot, base[item_of] + slot, 0)
    kinds = leaves.kind
    for k in np.flatnonzero(np.bincount(ref[is_slot])).tolist() if is_slot.any() else []:
        renderer, enums = book.render_keys[k]
        mine = is_slot & (ref == k)
        uniq, inverse = distinct(leaf[mine])
        rendered = leaves.render(renderer, uniq)
        if enums:
            rendered = _apply_enums(rendered, leaves, uniq, renderer, enums, kinds)
        pool.append(rendered.cast(pa.large_string()))
        pool_idx[mine] = pool_size + inverse
        pool_size += len(uniq)
    texts = pa.concat_arrays(pool).take(pa.array(pool_idx))
    lists = pa.LargeListArray.from_arrays(pa.array(item_first), texts)
    return pc.binary_join(lists, lit(""))


def _apply_enums(
    rendered: pa.Array, leaves: Leaves, idx: np.ndarray, renderer: str, enums: tuple, kinds
) -> pa.Array:
    canon = leaves.json_text().take(pa.array(idx))
    out = rendered
    for kind in (STRING, INT, FLOAT):
        of_kind = kinds[idx] == kind
        if not of_kind.any():
            continue
        keys, values = _enum_map(renderer, kind, enums)
        if not keys:
            continue
        hit = pc.index_in(canon, value_set=pa.array(keys, pa.large_string()))
        hit_np = pc.fill_null(hit, -1).to_numpy(zero_copy_only=False)
        where = np.flatnonzero((hit_np >= 0) & of_kind)
        if len(where):
            replaced = pa.array(values, pa.large_string()).take(pa.array(hit_np[where]))
            out = _scatter(out, where, replaced)
    return out
