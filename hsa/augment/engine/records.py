"""Messages as flat records: numpy columns of references into string pools, then Arrow.

Both renderers -- the vectorised one and the exact, per-row one -- describe their output the
same way: one record per message, grouped by output row, each string field a reference into a
``Pool``. ``merge`` interleaves the two by output row and ``to_arrow`` builds the ``messages``
column. Message contents stay dictionary-encoded (a system prompt is stored once per pool, not
once per row); every other string is materialised.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from hsa.harness.messages import MESSAGE

ROLES = ("system", "user", "assistant", "tool")
SYSTEM, USER, ASSISTANT, TOOL = range(4)


def distinct(keys: np.ndarray, *, first: bool = False):
    """``np.unique(keys, return_index=first, return_inverse=True)`` for non-negative integer
    keys; in linear time when the keys are small (ids of variants, templates, leaves)."""
    keys = np.asarray(keys, dtype=np.int64)
    bound = int(keys.max()) + 1 if len(keys) else 0
    if bound > 4 * len(keys) + 4096:
        if first:
            return np.unique(keys, return_index=True, return_inverse=True)
        return np.unique(keys, return_inverse=True)
    seen = np.zeros(bound, dtype=bool)
    seen[keys] = True
    uniq = np.flatnonzero(seen)
    position = np.zeros(bound, dtype=np.int64)
    position[uniq] = np.arange(len(uniq))
    inverse = position[keys]
    if not first:
        return uniq, inverse
    firsts = np.full(len(uniq), len(keys), dtype=np.int64)
    np.minimum.at(firsts, inverse, np.arange(len(keys), dtype=np.int64))
    return uniq, firsts, inverse


def first_seen(keys: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The distinct ``keys`` in order of first appearance, where each first appears, and the
    position of every key among them.

    Strings enter the pools in this order, so the bytes written depend on the rows alone and
    not on ids (of variants, templates) that earlier batches happened to assign.
    """
    uniq, first, inverse = distinct(keys, first=True)
    order = np.argsort(first, kind="stable")
    rank = np.empty(len(order), dtype=np.int64)
    rank[order] = np.arange(len(order))
    return uniq[order], first[order], rank[inverse]


def exclusive(counts: np.ndarray) -> np.ndarray:
    """Offsets from counts: ``[0, c0, c0 + c1, ...]`` (one more entry than ``counts``)."""
    out = np.zeros(len(counts) + 1, dtype=np.int64)
    np.cumsum(counts, out=out[1:])
    return out


def run_starts(sorted_keys: np.ndarray) -> np.ndarray:
    """Where each run of equal values starts in a sorted array."""
    if not len(sorted_keys):
        return np.zeros(0, dtype=np.int64)
    return np.flatnonzero(np.concatenate(([True], sorted_keys[1:] != sorted_keys[:-1])))


class Pool:
    """Strings gathered from many arrays; ``add`` returns the offset of the added block.

    The blocks are never concatenated: ``take`` reads each block it needs directly, so adding
    a large column costs nothing until its strings are used.
    """

    def __init__(self) -> None:
        self._parts: list[pa.Array] = []
        self._starts: list[int] = []
        self.size = 0

    def add(self, values: pa.Array | Sequence[str | None]) -> int:
        if not isinstance(values, pa.Array):
            values = pa.array(list(values), pa.large_string())
        base = self.size
        self._parts.append(values.cast(pa.large_string()))
        self._starts.append(base)
        self.size += len(values)
        return base

    def take_sorted(self, refs: np.ndarray) -> pa.Array:
        """The strings at ``refs`` (distinct, increasing), as one large_string array.

        Blocks used whole are not copied before the one concatenation.
        """
        starts = np.array([*self._starts, self.size])
        cuts = np.searchsorted(refs, starts)
        chunks = []
        for p, part in enumerate(self._parts):
            local = refs[cuts[p] : cuts[p + 1]] - starts[p]
            if len(local) == len(part):
                chunks.append(part)
            elif len(local):
                chunks.append(part.take(pa.array(local)))
        return pa.concat_arrays(chunks) if chunks else pa.array([], pa.large_string())

    def take(self, refs: np.ndarray) -> pa.Array:
        """The strings at ``refs`` (-1 gives null), as a large_string array."""
        refs = np.asarray(refs, dtype=np.int64)
        null = refs < 0
        if null.all():
            return pa.nulls(len(refs), pa.large_string())
        part = np.searchsorted(np.array(self._starts), refs, side="right") - 1
        out = None
        for p in np.flatnonzero(np.bincount(part[~null])).tolist():
            mine = part == p
            local = np.where(mine, refs - self._starts[p], 0)
            # a masked index takes a null: each block fills its own rows, coalesce joins them
            picked = self._parts[p].take(pa.array(local, mask=~mine))
            out = picked if out is None else pc.coalesce(out, picked)
        return out


@dataclass(frozen=True, slots=True)
class Part:
    """What one render stage writes: for the messages at ``slot``, the fields it sets (None:
    fields it leaves alone). ``assemble`` applies the parts in order."""

    slot: np.ndarray
    content: np.ndarray | None = None
    reasoning: np.ndarray | None = None
    call_id: np.ndarray | None = None
    is_error: np.ndarray | None = None
    ncalls: np.ndarray | None = None


@dataclass(slots=True)
class Records:
    """Messages of a set of output rows; string fields refer to ``text`` (contents) or
    ``aux`` (everything else); -1 is null. Calls are listed in message order; ``ncalls`` is
    each message's number of calls (-1: no ``tool_calls``)."""

    per_row: np.ndarray
    role: np.ndarray
    content: np.ndarray
    reasoning: np.ndarray
    call_id: np.ndarray
    is_error: np.ndarray
    ncalls: np.ndarray
    call_ids: np.ndarray
    call_names: np.ndarray
    call_args: np.ndarray
    text: Pool
    aux: Pool

    @classmethod
    def empty(cls, text: Pool, aux: Pool) -> Records:
        z = np.zeros(0, dtype=np.int64)
        return cls(z, z.astype(np.int8), z, z, z, z.astype(bool), z, z, z, z, text, aux)


#: what a message field is before a part sets it
_UNSET = {"content": -1, "reasoning": -1, "call_id": -1, "is_error": False, "ncalls": -1}


def column(n: int, parts: Sequence[Part], name: str) -> np.ndarray:
    """Field ``name`` of ``n`` messages as ``parts`` set it, applied in order."""
    unset = _UNSET[name]
    out = np.full(n, unset, dtype=bool if isinstance(unset, bool) else np.int64)
    for part in parts:
        values = getattr(part, name)
        if values is not None:
            out[part.slot] = values
    return out


def assemble(
    per_row: np.ndarray,
    role: np.ndarray,
    parts: Sequence[Part],
    calls: tuple[np.ndarray, np.ndarray, np.ndarray],
    text: Pool,
    aux: Pool,
) -> Records:
    """Records of messages with ``role`` (``per_row`` of them per output row) whose fields are
    set by ``parts``, applied in order; ``calls`` are the (id, name, arguments) references of
    every ``tool_calls`` entry, in message order."""
    fields = {name: column(len(role), parts, name) for name in _UNSET}
    ids, names, args = calls
    return Records(
        per_row, role, **fields, call_ids=ids, call_names=names, call_args=args, text=text, aux=aux
    )


def merge(first: Records, second: Records, second_rows: np.ndarray) -> Records:
    """Rows of ``first`` and ``second`` interleaved: ``second_rows`` marks, per output row,
    whether it comes from ``second`` (both keep their own row order). The pools must be the
    same objects."""
    if not len(second.per_row):
        return first
    if not len(first.per_row):
        return second
    n = len(second_rows)
    per_row = np.zeros(n, dtype=np.int64)
    per_row[~second_rows] = first.per_row
    per_row[second_rows] = second.per_row
    order = _interleave(first.per_row, second.per_row, second_rows)
    calls = np.concatenate((np.maximum(first.ncalls, 0), np.maximum(second.ncalls, 0)))
    call_order = _interleave_by(calls, order)

    def cat(name: str, which: np.ndarray) -> np.ndarray:
        return np.concatenate((getattr(first, name), getattr(second, name)))[which]

    return Records(
        per_row=per_row,
        role=cat("role", order),
        **{name: cat(name, order) for name in _UNSET},
        **{name: cat(name, call_order) for name in ("call_ids", "call_names", "call_args")},
        text=first.text,
        aux=first.aux,
    )


def _interleave(a_counts: np.ndarray, b_counts: np.ndarray, b_rows: np.ndarray) -> np.ndarray:
    """Record order for rows interleaved by ``b_rows`` (records of ``a`` come first in the
    concatenation)."""
    n = len(b_rows)
    counts = np.zeros(n, dtype=np.int64)
    counts[~b_rows] = a_counts
    counts[b_rows] = b_counts
    starts = np.zeros(n, dtype=np.int64)
    a_start = np.concatenate(([0], np.cumsum(a_counts)))[:-1]
    b_start = np.concatenate(([0], np.cumsum(b_counts)))[:-1] + int(a_counts.sum())
    starts[~b_rows] = a_start
    starts[b_rows] = b_start
    return ranges(starts, counts)


def _interleave_by(counts: np.ndarray, order: np.ndarray) -> np.ndarray:
    """Child order when parents (with ``counts`` children, in concatenation order) are
    reordered by ``order``."""
    starts = np.concatenate(([0], np.cumsum(counts)))[:-1]
    return ranges(starts[order], counts[order])


def ranges(starts: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """The concatenation of ``range(start, start + count)`` for each pair."""
    total = int(counts.sum())
    if total == 0:
        return np.zeros(0, dtype=np.int64)
    owner = np.repeat(np.arange(len(counts), dtype=np.int64), counts)
    first = np.concatenate(([0], np.cumsum(counts)))[:-1]
    return starts[owner] + (np.arange(total, dtype=np.int64) - first[owner])


def _offsets(counts: np.ndarray) -> pa.Array:
    out = np.zeros(len(counts) + 1, dtype=np.int32)
    np.cumsum(counts, out=out[1:])
    return pa.array(out)


def _content(records: Records) -> pa.Array:
    """Message contents, dictionary-encoded over the distinct strings they use.

    A Parquet writer given a dictionary with repeated values falls back to writing every
    value in full, so the dictionary is reduced to the referenced strings, each once, in pool
    order (which the renderer keeps independent of earlier batches).
    """
    refs = records.content
    null = refs < 0
    marked = np.zeros(records.text.size + 1, dtype=bool)
    marked[refs[~null]] = True
    used = np.flatnonzero(marked)
    position = np.zeros(records.text.size + 1, dtype=np.int64)
    position[used] = np.arange(len(used))
    encoded = pc.fill_null(records.text.take_sorted(used), "").dictionary_encode()
    codes = encoded.indices.to_numpy(zero_copy_only=False).astype(np.int32)
    indices = np.zeros(len(refs), dtype=np.int32)
    indices[~null] = codes[position[refs[~null]]]
    return pa.DictionaryArray.from_arrays(pa.array(indices, mask=null), encoded.dictionary)


def unique_dictionary(indices: np.ndarray, values: Sequence[str | None]) -> pa.Array:
    """A dictionary array of ``values[indices]`` whose dictionary holds each value once, in
    order of first use (so the bytes do not depend on the order of ``values``); a None value
    is a null entry (an index, never a dictionary value: Parquet writes no null there)."""
    seen: dict[str, int] = {}
    codes = np.zeros(len(values), dtype=np.int32)
    missing = np.array([v is None for v in values], dtype=bool)
    order = distinct(indices, first=True)[1] if len(indices) else np.zeros(0, int)
    for i in np.sort(order).tolist():
        j = int(indices[i])
        value = values[j]
        if value is not None:
            codes[j] = seen.setdefault(value, len(seen))
    taken = codes[indices] if len(indices) else np.zeros(0, np.int32)
    mask = missing[indices] if len(indices) else None
    return pa.DictionaryArray.from_arrays(
        pa.array(taken, mask=mask if mask is not None and mask.any() else None),
        pa.array(list(seen), pa.string()),
    )


def to_arrow(records: Records) -> pa.Array:
    """The ``messages`` column (one list of messages per output row)."""
    content = _content(records)
    role = pa.DictionaryArray.from_arrays(pa.array(records.role), pa.array(ROLES))
    calls = pa.StructArray.from_arrays(
        [
            records.aux.take(records.call_ids),
            pa.DictionaryArray.from_arrays(
                pa.array(np.zeros(len(records.call_ids), dtype=np.int8)), pa.array(["function"])
            ),
            pa.StructArray.from_arrays(
                [records.aux.take(records.call_names), records.aux.take(records.call_args)],
                names=["name", "arguments"],
            ),
        ],
        names=["id", "type", "function"],
    )
    no_calls = records.ncalls < 0
    tool_calls = pa.ListArray.from_arrays(
        _offsets(np.maximum(records.ncalls, 0)), calls, mask=pa.array(no_calls)
    )
    error = pa.array(records.is_error, mask=~records.is_error)
    message = pa.StructArray.from_arrays(
        [
            role,
            content,
            records.aux.take(records.reasoning),
            tool_calls,
            records.aux.take(records.call_id),
            error,
        ],
        names=[f.name for f in MESSAGE],
    )
    return pa.ListArray.from_arrays(_offsets(records.per_row), message)
