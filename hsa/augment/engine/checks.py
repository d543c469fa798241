"""What the reference refuses before it renders, found column by column.

``render`` only ever sees trajectories that ``Trajectory.from_row`` accepted: a string id, a list
of events, metadata that is a JSON object, events of known kinds with their fields set,
tool-call arguments that are a JSON object, hook payloads that are a JSON object of strings.
``refuse`` finds the trajectories that may break one of these rules with Arrow and numpy over
whole columns (JSON texts are taken apart by ``jsontext.scan``; each distinct skeleton is
parsed once). The test is conservative -- ``NaN`` in arguments, which Python reads, is
suspect too -- so each suspect trajectory is then read by ``from_row`` itself: the engine
refuses exactly the rows the reference refuses, with the reference's own message.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from hsa.augment.engine.events import CALL, HOOK, REQUIRED, Events
from hsa.augment.engine.jsontext import STRING, Scan, scan
from hsa.errors import DatasetError, HsaError
from hsa.harness.events import Trajectory
from hsa.harness.jsonvalues import UNWRITABLE_TEXT, WIDE_TEXT

if TYPE_CHECKING:
    from hsa.augment.engine.batch import Locate

#: a JSON string token whose escapes Python's ``json`` reads (control characters are already
#: refused by the scan)
_STRING_TOKEN = r'^"(?:[^"\\]|\\(?:["\\/bfnrt]|u[0-9a-fA-F]{4}))*"$'


def valid_objects(sc: Scan, *, flat_strings: bool = False) -> np.ndarray:
    """Per scanned row: whether ``json.loads`` certainly reads it as an object (null and ``""``
    count as ``{}``), and with ``flat_strings`` whether every value of that object is a string.

    False does not mean invalid: rows the scan cannot take apart are False.
    """
    ok = sc.ok.copy()
    if not ok.any():
        return ok
    skeletons = sc.skeleton.dictionary_encode()
    fine = np.array(
        [_skeleton_fits(s, flat_strings) for s in skeletons.dictionary.to_pylist()], dtype=bool
    )
    if len(fine):
        codes = skeletons.indices.to_numpy(zero_copy_only=False).astype(np.int64)
        ok &= fine[codes]
    strings = np.flatnonzero(sc.leaf_kind == STRING)
    if len(strings):
        text = sc.leaf_text.take(pa.array(strings))
        escaped = pc.match_substring(text, "\\").to_numpy(zero_copy_only=False)
        if escaped.any():
            picked = text.take(pa.array(np.flatnonzero(escaped)))
            good = pc.match_substring_regex(picked, _STRING_TOKEN).to_numpy(zero_copy_only=False)
            ok[sc.leaf_row[strings[np.flatnonzero(escaped)[~good]]]] = False
    return ok


def _skeleton_fits(skeleton: str, flat_strings: bool) -> bool:
    try:
        value = json.loads(skeleton)
    except (ValueError, RecursionError):
        return False
    if not isinstance(value, dict):
        return False
    # a skeleton writes every string value as "" (numbers as 0 or 1)
    return not flat_strings or all(v == "" for v in value.values())


def suspects(table: pa.Table, ev: Events) -> np.ndarray:
    """Per trajectory of ``table``: whether ``Trajectory.from_row`` may refuse it."""
    n = table.num_rows
    out = np.zeros(n, dtype=bool)
    out |= table.column("id").is_null().to_numpy(zero_copy_only=False)
    out |= table.column("events").is_null().to_numpy(zero_copy_only=False)
    if "metadata" in table.column_names:
        out |= ~_valid_column(table.column("metadata"))
    bad = ev.kind < 0  # null events and unknown kinds
    for code, names in REQUIRED.items():
        of_kind = ev.kind == code
        for name in names:
            bad |= of_kind & ev.fields[name].is_null().to_numpy(zero_copy_only=False)
    for name, code, flat in (("args", CALL, False), ("payload", HOOK, True)):
        at, _, sc = ev.json_field(name, code)
        bad[at[~valid_objects(sc, flat_strings=flat)]] = True
        pattern = f"{WIDE_TEXT}|{UNWRITABLE_TEXT}" if name == "args" else UNWRITABLE_TEXT
        suspect = pc.match_substring_regex(ev.fields[name], pattern)
        bad |= (ev.kind == code) & suspect.fill_null(False).to_numpy(zero_copy_only=False)
    out[ev.traj[bad]] = True
    return out


def _valid_column(column: pa.ChunkedArray) -> np.ndarray:
    """``valid_objects`` of a column, scanning each distinct text once (metadata repeats); a
    text that may hold what no row can (``UNWRITABLE_TEXT``: NaN, an infinity, a surrogate
    escape, which may be half of a pair) counts as invalid, for ``from_row`` to judge."""
    column = column.combine_chunks().cast(pa.large_string())
    uniq = pc.unique(column)
    suspect = pc.match_substring_regex(uniq, UNWRITABLE_TEXT).fill_null(False)
    good = valid_objects(scan(uniq)) & ~suspect.to_numpy(zero_copy_only=False)
    position = pc.index_in(column, value_set=uniq, skip_nulls=False)
    return good[position.to_numpy(zero_copy_only=False).astype(np.int64)]


def refuse(table: pa.Table, ev: Events, order: np.ndarray, locate: Locate) -> None:
    """Raise what ``Trajectory.from_row`` raises for the first trajectory of ``order`` (row
    indexes of ``table``) that it refuses, as a ``DatasetError`` naming the row."""
    suspect = suspects(table, ev)
    for row in order[suspect[order]].tolist():
        file, name = locate(row)
        try:
            Trajectory.from_row(table.slice(row, 1).to_pylist()[0], where=name)
        except HsaError as exc:
            raise DatasetError(exc.message, file=file, where=exc.where) from None
        except RecursionError:
            raise DatasetError("JSON nested too deeply to read", file=file, where=name) from None
