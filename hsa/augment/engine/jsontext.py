"""JSON objects taken apart in bulk: skeletons (structure and keys) and leaves (scalar values).

The engine never parses argument objects one row at a time. ``scan`` reads the bytes of a whole
column with numpy -- which bytes are inside strings, which strings are keys, where each scalar
starts and ends -- and splits every object into a *skeleton* and its *leaves*. The skeleton is
the object with each string value written ``""``, each integer ``0`` and each float ``1``
(keys, booleans, nulls and all structure kept); the leaves are the raw JSON text of those
values in document order. Objects with the same skeleton share one template
(``hsa.augment.engine.templates``), whose slots the leaves fill.

Whitespace outside strings is dropped: the reference semantics re-serialise the parsed value,
so it never reaches the output. A row the scan cannot take apart exactly (not an object, a
control character inside a string, ``NaN``, an odd number of quotes, ...) is marked not ``ok``
and goes through the exact, per-row path, which also reports it if it is not JSON at all.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

#: leaf kinds
STRING, INT, FLOAT = 0, 1, 2

_QUOTE, _BACKSLASH = 34, 92
_STRUCTURE = np.zeros(256, dtype=bool)
_STRUCTURE[[ord(c) for c in "{}[]:,"]] = True
_SPACE = np.zeros(256, dtype=bool)
_SPACE[[32, 9, 10, 13]] = True
_INT = r"^-?(?:0|[1-9][0-9]*)$"
_FLOAT = r"^-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][-+]?[0-9]+)?$"


def lit(text: str) -> pa.Scalar:
    """A large_string scalar, the string type every engine column uses."""
    return pa.scalar(text, pa.large_string())


@dataclass(frozen=True, slots=True)
class Scan:
    """A column of JSON objects taken apart; see the module docstring.

    ``leaf_start`` has one entry per row plus one: the leaves of row ``i`` are
    ``leaf_start[i]:leaf_start[i + 1]``. Rows that are not ``ok`` have no leaves and an empty
    skeleton.
    """

    ok: np.ndarray
    skeleton: pa.Array
    leaf_start: np.ndarray
    leaf_kind: np.ndarray
    leaf_text: pa.Array

    @property
    def leaf_row(self) -> np.ndarray:
        """The row of every leaf."""
        counts = np.diff(self.leaf_start)
        return np.repeat(np.arange(len(counts), dtype=np.int64), counts)


def byte_view(array: pa.Array) -> tuple[np.ndarray, np.ndarray]:
    """(offsets, bytes) of a string array, as numpy views; offsets start at 0."""
    array = array.cast(pa.large_string())
    if array.null_count:
        array = pc.fill_null(array, "")
    bufs = array.buffers()
    n = len(array)
    offsets = np.frombuffer(bufs[1], dtype=np.int64)[array.offset : array.offset + n + 1]
    data = np.frombuffer(bufs[2], dtype=np.uint8) if bufs[2] is not None else np.zeros(0, np.uint8)
    data = data[offsets[0] : offsets[-1]]
    return offsets - offsets[0], data


def string_array(offsets: np.ndarray, data: np.ndarray) -> pa.Array:
    """A large_string array from numpy offsets (int64, starting at 0) and bytes."""
    n = len(offsets) - 1
    return pa.Array.from_buffers(
        pa.large_string(),
        n,
        [None, pa.py_buffer(np.ascontiguousarray(offsets, dtype=np.int64)), pa.py_buffer(data)],
    )


def spans_mask(starts: np.ndarray, ends: np.ndarray, size: int) -> np.ndarray:
    """A boolean mask of ``size`` that is True inside the disjoint spans ``[start, end)``."""
    marks = np.zeros(size + 1, dtype=np.int8)
    marks[starts] += 1  # disjoint spans: no start (or end) repeats, so += is safe
    marks[ends] -= 1
    return np.cumsum(marks[:size], dtype=np.int8) > 0


def gather_spans(data: np.ndarray, starts: np.ndarray, ends: np.ndarray) -> pa.Array:
    """The byte spans ``[start, end)`` of ``data`` (sorted, disjoint) as a string array."""
    lengths = ends - starts
    offsets = np.zeros(len(starts) + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    if len(starts) == 0:
        return string_array(offsets, np.zeros(0, np.uint8))
    return string_array(offsets, data[spans_mask(starts, ends, len(data))])


def scan(column: pa.Array) -> Scan:
    """Take apart a column of JSON object texts (null and ``""`` read as ``{}``)."""
    column = column.cast(pa.large_string())
    column = pc.if_else(pc.equal(pc.fill_null(column, ""), ""), lit("{}"), column)
    offsets, data = byte_view(column)
    n = len(offsets) - 1
    size = len(data)
    bad = np.zeros(n, dtype=bool)

    # Real (unescaped) quotes: a quote is escaped by an odd run of backslashes before it.
    quotes = np.flatnonzero(data == _QUOTE)
    is_bs = data == _BACKSLASH
    if len(quotes) and is_bs.any():
        last_plain = np.maximum.accumulate(np.where(is_bs, -1, np.arange(size, dtype=np.int64)))
        before = quotes - 1
        run = np.where(before >= 0, before - last_plain[np.maximum(before, 0)], 0)
        quotes = quotes[(run & 1) == 0]
    quote_row = np.searchsorted(offsets, quotes, side="right") - 1
    odd = (np.bincount(quote_row, minlength=n) & 1).astype(bool)
    bad |= odd
    quotes = quotes[~odd[quote_row]]
    opens, closes = quotes[0::2], quotes[1::2]
    in_string = spans_mask(opens, closes + 1, size)

    outside = ~in_string
    structure = outside & _STRUCTURE[data]
    space = outside & _SPACE[data]
    scalar = outside & ~structure & ~space

    # Control characters inside strings are not JSON; let the exact path report the row.
    controls = np.flatnonzero(in_string & (data < 32))
    if len(controls):
        bad[np.searchsorted(offsets, controls, side="right") - 1] = True

    # An object starts with "{" and ends with "}" (after optional whitespace). Compact JSON,
    # what hsa writes, has no whitespace outside strings: then every byte is significant.
    compact = not space.any()
    if compact:
        lengths = np.diff(offsets)
        bad |= lengths == 0
        nonempty = lengths > 0
        firsts = offsets[:-1][nonempty]
        bad[nonempty] |= data[firsts] != ord("{")
        bad[nonempty] |= data[offsets[1:][nonempty] - 1] != ord("}")
    else:
        significant = np.flatnonzero(~space)
        first = np.searchsorted(significant, offsets[:-1], side="left")
        last = np.searchsorted(significant, offsets[1:], side="left") - 1
        bad |= first > last
        if len(significant):
            safe_first = significant[np.minimum(first, len(significant) - 1)]
            safe_last = significant[np.maximum(last, 0)]
            bad |= data[safe_first] != ord("{")
            bad |= data[safe_last] != ord("}")

    # Keys: strings followed (after whitespace) by ":".
    if len(closes) and compact:
        after = closes + 1
        is_key = (after < size) & (data[np.minimum(after, size - 1)] == ord(":"))
    elif len(closes) and len(significant):
        after = np.searchsorted(significant, closes, side="right")
        nxt = significant[np.minimum(after, len(significant) - 1)]
        is_key = (after < len(significant)) & (data[nxt] == ord(":"))
    else:
        is_key = np.zeros(len(closes), dtype=bool)

    # Scalars: maximal runs of scalar bytes, never crossing a row boundary.
    row_start = np.zeros(size + 1, dtype=bool)
    row_start[offsets[:-1]] = True
    prev = np.concatenate(([False], scalar[:-1])) & ~row_start[:size]
    nxt_run = np.concatenate((scalar[1:], [False])) & ~row_start[1:]
    run_starts = np.flatnonzero(scalar & ~prev)
    run_ends = np.flatnonzero(scalar & ~nxt_run) + 1
    runs = gather_spans(data, run_starts, run_ends)
    is_true = pc.equal(runs, "true").to_numpy(zero_copy_only=False)
    is_false = pc.equal(runs, "false").to_numpy(zero_copy_only=False)
    is_null = pc.equal(runs, "null").to_numpy(zero_copy_only=False)
    is_int = pc.match_substring_regex(runs, _INT).to_numpy(zero_copy_only=False)
    is_float = pc.match_substring_regex(runs, _FLOAT).to_numpy(zero_copy_only=False) & ~is_int
    static = is_true | is_false | is_null
    number = is_int | is_float
    invalid = ~(static | number)
    if invalid.any():
        bad[np.searchsorted(offsets, run_starts[invalid], side="right") - 1] = True
    if not compact and number.any():
        # Numbers with only whitespace between them ("1e5 2") are not JSON, but their
        # skeleton ("10") would be: the byte before such a number is another scalar's.
        num = run_starts[number]
        at = np.searchsorted(significant, num, side="left")
        prev = significant[np.maximum(at - 1, 0)]
        glued = (at > 0) & scalar[prev]
        if glued.any():
            bad[np.searchsorted(offsets, num[glued], side="right") - 1] = True

    # The skeleton keeps structure, keys and static scalars whole, the quotes of string
    # leaves, and the first byte of each number (rewritten to 0 for ints, 1 for floats).
    leaf_open, leaf_close = opens[~is_key], closes[~is_key]
    keep = structure.copy()
    keep |= spans_mask(opens[is_key], closes[is_key] + 1, size)
    keep |= spans_mask(run_starts[static], run_ends[static], size)
    keep[leaf_open] = True
    keep[leaf_close] = True
    num_starts = run_starts[number]
    keep[num_starts] = True
    kept = np.flatnonzero(keep)  # positions of the skeleton's bytes
    skeleton_bytes = data[kept]
    skeleton_bytes[np.searchsorted(kept, num_starts)] = np.where(is_int[number], ord("0"), ord("1"))
    skeleton_offsets = np.searchsorted(kept, offsets)
    skeleton = string_array(skeleton_offsets, skeleton_bytes)

    # Leaves in document order: string leaves and numbers, merged by position.
    starts = np.concatenate((leaf_open, num_starts))
    ends = np.concatenate((leaf_close + 1, run_ends[number]))
    kinds = np.concatenate(
        (
            np.full(len(leaf_open), STRING, dtype=np.int8),
            np.where(is_int[number], INT, FLOAT).astype(np.int8),
        )
    )
    order = np.argsort(starts, kind="stable")
    starts, ends, kinds = starts[order], ends[order], kinds[order]
    leaf_row = np.searchsorted(offsets, starts, side="right") - 1
    keep_leaf = ~bad[leaf_row]
    starts, ends, kinds, leaf_row = (
        starts[keep_leaf],
        ends[keep_leaf],
        kinds[keep_leaf],
        leaf_row[keep_leaf],
    )
    leaf_start = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(np.bincount(leaf_row, minlength=n), out=leaf_start[1:])
    return Scan(
        ok=~bad,
        skeleton=skeleton,
        leaf_start=leaf_start,
        leaf_kind=kinds,
        leaf_text=gather_spans(data, starts, ends),
    )
