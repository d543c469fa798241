"""The rows of one split of one batch, their statistics, and the facts rows are planned from."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from hsa.augment import arguments as undeclared
from hsa.augment.engine import Engine
from hsa.augment.engine.records import unique_dictionary
from hsa.augment.planner import Sight, Variant
from hsa.datasets.card import batch_stats, estimate_tokens
from hsa.datasets.schema import ROW_SCHEMA
from hsa.harness.model import Harness


def used_by(table: pa.Table) -> tuple[list[tuple[str, ...]], list[tuple[str, ...]]]:
    """The sorted tool names each trajectory calls and skill ids it loads, column-wise."""
    found = _ids(table, (("tool_call", "tool"), ("skill_load", "skill_id")))
    tools, skills = (_per_row(table.num_rows, *kind) for kind in found)
    return tools, skills


def undeclared_by(table: pa.Table, harnesses: Sequence[Harness]) -> list[undeclared.Arguments]:
    """Each trajectory's undeclared arguments (``hsa.augment.arguments``) under its canonical
    harness (``harnesses``, one a row): ``()`` for most."""
    n = table.num_rows
    events = table.column("events").combine_chunks()
    offsets = events.offsets.to_numpy(zero_copy_only=False).astype(np.int64)
    flat = events.flatten()
    children = dict(zip([f.name for f in flat.type], flat.flatten(), strict=True))
    row = np.repeat(np.arange(n), np.diff(offsets))
    sel = pa.array(np.flatnonzero(pc.equal(children["kind"], "tool_call").fill_null(False)))
    calls: list[list[tuple[str, str | None]]] = [[] for _ in range(n)]
    tools = children["tool"].take(sel).to_pylist()
    texts = children["args"].take(sel).to_pylist()
    for r, tool, text in zip(row[sel.to_numpy()].tolist(), tools, texts, strict=True):
        calls[r].append((tool, text))
    return [
        undeclared.of_texts(harnesses[r], found) if found else () for r, found in enumerate(calls)
    ]


def sights_of(table: pa.Table) -> tuple[list[Sight], np.ndarray]:
    """The distinct sights of the trajectories (the skills each loads and hooks that fire in
    it: ``Sight``), and each one's index into them, column-wise: each trajectory's set as a
    bit mask over the batch's distinct ids, where there are at most 63 of them."""
    found = _ids(table, (("skill_load", "skill_id"), ("hook", "hook_id")))
    labels = [(kind, name) for kind, (_, dictionary, _) in enumerate(found) for name in dictionary]
    n = table.num_rows
    if not labels:
        return [Sight()], np.zeros(n, dtype=np.int64)
    if len(labels) > 63:  # (a batch of that many distinct skills and hooks: row by row)
        skills, hooks = (_per_row(n, *kind) for kind in found)
        keys: dict[Sight, int] = {}
        at = [keys.setdefault(Sight(s, h), len(keys)) for s, h in zip(skills, hooks, strict=True)]
        return list(keys), np.array(at, dtype=np.int64)
    mask = np.zeros(n, dtype=np.uint64)
    first = 0
    for rows_of, dictionary, codes_of in found:
        bits = np.left_shift(np.uint64(1), (codes_of + first).astype(np.uint64))
        np.bitwise_or.at(mask, rows_of, bits)
        first += len(dictionary)
    masks, inverse = np.unique(mask, return_inverse=True)
    sights = []
    for value in masks.tolist():
        held = [labels[i] for i in range(len(labels)) if value >> i & 1]
        sights.append(
            Sight(
                tuple(sorted(name for kind, name in held if kind == 0)),
                tuple(sorted(name for kind, name in held if kind == 1)),
            )
        )
    return sights, inverse.astype(np.int64).reshape(-1)


def _per_row(
    n: int, rows_of: np.ndarray, dictionary: list[str], codes_of: np.ndarray
) -> list[tuple[str, ...]]:
    """Each of ``n`` trajectories' sorted names, from ``_ids``' pairs of one kind."""
    per_row: list[list[str]] = [[] for _ in range(n)]
    for r, c in zip(rows_of.tolist(), codes_of.tolist(), strict=True):
        per_row[r].append(dictionary[c])
    return [tuple(sorted(x)) for x in per_row]


def _ids(
    table: pa.Table, kinds: Sequence[tuple[str, str]]
) -> list[tuple[np.ndarray, list[str], np.ndarray]]:
    """Per event kind (and the field naming what it uses): the distinct (trajectory, name)
    pairs of the batch, as trajectories, the names, and each pair's index into the names."""
    events = table.column("events").combine_chunks()
    offsets = events.offsets.to_numpy(zero_copy_only=False).astype(np.int64)
    flat = events.flatten()
    names = [f.name for f in flat.type]
    children = dict(zip(names, flat.flatten(), strict=True))
    row = np.repeat(np.arange(table.num_rows), np.diff(offsets))
    out: list[tuple[np.ndarray, list[str], np.ndarray]] = []
    for kind, column in kinds:
        sel = np.flatnonzero(pc.equal(children["kind"], kind).to_numpy(zero_copy_only=False))
        if not len(sel):
            out.append((np.zeros(0, dtype=np.int64), [], np.zeros(0, dtype=np.int64)))
            continue
        coded = children[column].take(pa.array(sel)).dictionary_encode()
        codes = coded.indices.to_numpy(zero_copy_only=False).astype(np.int64)
        dictionary = coded.dictionary.to_pylist()
        pairs = np.unique(row[sel] * len(dictionary) + codes)
        rows_of, codes_of = np.divmod(pairs, len(dictionary))
        out.append((rows_of, dictionary, codes_of))
    return out


def rule_params(variant: Variant) -> str:
    return json.dumps(
        [{"name": n, "version": v, "params": dict(p)} for n, v, p in variant.rules],
        ensure_ascii=False,
        sort_keys=True,
        separators=(",", ":"),
    )


def rows(
    table: pa.Table,
    out_traj: np.ndarray,
    out_var: np.ndarray,
    messages: pa.Array,
    engine: Engine,
    split: str,
) -> pa.Table:
    """The dataset rows of one split of a batch (per-variant columns dictionary-encoded)."""
    variants = [p.variant for p in engine.plans]
    take = pa.array(out_traj, pa.int64())
    ids = table.column("id").take(take)
    variant_ids = unique_dictionary(out_var, [v.variant_id for v in variants])
    rules = pa.array([[n for n, _, _ in v.rules] for v in variants], pa.list_(pa.string()))
    canonical = np.array([v.is_canonical for v in variants], dtype=bool)
    params = [""] * len(variants)  # as JSON, made for the variants this split's rows use
    for used in np.unique(out_var).tolist():
        params[used] = rule_params(variants[used])
    columns = [
        pc.binary_join_element_wise(ids, variant_ids.cast(pa.string()), "/"),
        ids,
        table.column("task_id").take(take),
        unique_dictionary(out_var, [v.harness_id for v in variants]),
        variant_ids,
        pa.array(canonical[out_var], pa.bool_()),
        rules.take(pa.array(out_var, pa.int64())),
        unique_dictionary(out_var, params),
        engine.protocol_column(out_var),
        messages,
        engine.tools_column(out_var),
        pa.DictionaryArray.from_arrays(
            pa.array(np.zeros(len(out_var), dtype=np.int8)), pa.array([split])
        ),
        table.column("source").take(take),
        table.column("teacher").take(take),
        table.column("verified").take(take),
        table.column("verification").take(take),
        table.column("metadata").take(take),
    ]
    return pa.Table.from_arrays(
        columns,
        schema=pa.schema(
            [pa.field(f.name, c.type, f.nullable) for f, c in zip(ROW_SCHEMA, columns, strict=True)]
        ),
    )


def stats(
    table: pa.Table,
    out_traj: np.ndarray,
    out_var: np.ndarray,
    messages: pa.Array,
    engine: Engine,
    split: str,
) -> dict[str, Any]:
    plans = engine.plans
    events = table.column("events").combine_chunks()
    ev_rows = np.repeat(
        np.arange(table.num_rows), pc.list_value_length(events).to_numpy(zero_copy_only=False)
    )
    kinds = events.flatten().field("kind")
    is_call = pc.is_in(kinds, value_set=pa.array(["tool_call", "skill_load"]))
    calls = np.bincount(ev_rows[is_call.to_numpy(zero_copy_only=False)], minlength=table.num_rows)
    return batch_stats(
        split=split,
        variant_counts=np.bincount(out_var, minlength=len(plans)),
        protocols=[p.protocol for p in plans],
        rules=[tuple(n for n, _, _ in p.variant.rules) for p in plans],
        canonical=[p.variant.is_canonical for p in plans],
        messages=pc.list_value_length(messages).to_numpy(zero_copy_only=False),
        calls=calls[out_traj],
        prompt_chars=np.array([len(p.prompt) for p in plans], dtype=np.int64)[out_var],
        tokens=estimate_tokens(messages, _tools_chars(plans)[out_var]),
        trajectories=table.num_rows,
        unverified=int(_failed(table.column("verified"))[out_traj].sum()),
        verified=int(_passed(table.column("verified"))[out_traj].sum()),
    )


def _tools_chars(plans: Sequence[Any]) -> np.ndarray:
    """The characters of each plan's ``tools`` column (none where it is null)."""
    return np.array([len(p.tools_value or "") for p in plans], dtype=np.int64)


def _passed(verified: pa.ChunkedArray) -> np.ndarray:
    """Which trajectories passed verification (``verified`` true)."""
    return pc.fill_null(verified, False).to_numpy(zero_copy_only=False).astype(bool)


def _failed(verified: pa.ChunkedArray) -> np.ndarray:
    """Which trajectories failed verification (``verified`` false; null is not checked)."""
    failed = pc.fill_null(pc.invert(verified), False)
    return failed.to_numpy(zero_copy_only=False).astype(bool)
