"""``variants.parquet``: every variant a dataset's rows were rendered under, so each row can be
traced (and inverted) from its ``variant_id``."""

from __future__ import annotations

import heapq
import json
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import pyarrow as pa

from hsa.augment.planner import Variant
from hsa.datasets.shards import open_parquet, write_shard_groups
from hsa.pipelines.rows import rule_params

VARIANTS_FILE = "variants.parquet"

VARIANTS_SCHEMA = pa.schema(
    [
        pa.field("variant_id", pa.string(), nullable=False),
        pa.field("harness_id", pa.string(), nullable=False),
        pa.field("canonical", pa.bool_(), nullable=False),
        pa.field("rules", pa.list_(pa.string()), nullable=False),
        pa.field("rule_params", pa.string(), nullable=False),
        pa.field("protocol", pa.string(), nullable=False),
        pa.field("seed", pa.uint64(), nullable=False),
        pa.field("harness", pa.string(), nullable=False),  # the variant harness as JSON
        pa.field("mapping", pa.string(), nullable=False),  # canonical -> surface, as JSON
    ]
)


#: rows per row group of the variants file (it is written as it is merged, a group at a time)
GROUP_ROWS = 4096
#: rows per row group of a part (``write_variants``' ``parts``), and per read of one while
#: merging: a merge holds this many rows of each part it reads
PART_ROWS = 256


def variant_row(variant: Variant) -> dict[str, Any]:
    """The variants-file row of ``variant``."""
    return {
        "variant_id": variant.variant_id,
        "harness_id": variant.harness_id,
        "canonical": variant.is_canonical,
        "rules": [n for n, _, _ in variant.rules],
        "rule_params": rule_params(variant),
        "protocol": variant.harness.protocol.label,
        "seed": variant.seed,
        "harness": variant.harness.to_json(keep=False),
        "mapping": variant.mapping_json(),
    }


def row_order(row: Mapping[str, Any]) -> tuple[str, bool, str]:
    """The variants file's order: by harness, its canonical variant first, then by id."""
    return (row["harness_id"], not row["canonical"], row["variant_id"])


def write_variants(
    path: Path,
    variants: Sequence[Variant],
    parts: Sequence[Path] = (),
    *,
    group_rows: int = GROUP_ROWS,
) -> int:
    """Write ``variants`` and the rows of ``parts`` (variants files written earlier by the
    same job, each in ``row_order``) as one variants file in ``row_order``, each variant
    once, in row groups of ``group_rows`` (``PART_ROWS`` for a part). The parts are merged as
    they are read, ``PART_ROWS`` rows of each at a time, so a job that let go of its variants
    as it went (``parts``) never holds them all again. Returns the rows written."""
    rows = sorted(map(variant_row, variants), key=row_order)
    streams = [iter(rows), *(_part_rows(p) for p in parts)]
    merged = heapq.merge(*streams, key=row_order)

    def groups() -> Iterator[pa.Table]:
        group: list[dict[str, Any]] = []
        last = None
        for row in merged:
            if row["variant_id"] == last:
                continue  # the same variant, used again after its plan was let go
            last = row["variant_id"]
            group.append(row)
            if len(group) == group_rows:
                yield pa.Table.from_pylist(group, schema=VARIANTS_SCHEMA)
                group = []
        if group:
            yield pa.Table.from_pylist(group, schema=VARIANTS_SCHEMA)

    rows_written: int = write_shard_groups(path, VARIANTS_SCHEMA, groups())["rows"]
    return rows_written


def _part_rows(path: Path) -> Iterator[dict[str, Any]]:
    for batch in open_parquet(path).iter_batches(batch_size=PART_ROWS):
        yield from batch.to_pylist()


def read_variants(path: str | Path) -> dict[str, Variant]:
    """The variants of a dataset directory (or its ``variants.parquet``), by id."""
    from hsa.augment.mapping import RewriteMapping
    from hsa.datasets.shards import read_table
    from hsa.harness.io import loads

    path = Path(path)
    if path.is_dir():
        path = path / VARIANTS_FILE
    out = {}
    for row in read_table(path).to_pylist():
        rules = tuple(
            (item["name"], item["version"], item["params"])
            for item in json.loads(row["rule_params"])
        )
        out[row["variant_id"]] = Variant(
            row["variant_id"],
            row["harness_id"],
            rules,
            loads(row["harness"], file=str(path)),
            RewriteMapping.from_json(row["mapping"]),
            int(row["seed"]),
        )
    return out
