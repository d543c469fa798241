"""``variants.parquet``: every variant a dataset's rows were rendered under, so each row can be
traced (and inverted) from its ``variant_id``."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import pyarrow as pa

from hsa.augment.planner import Variant
from hsa.datasets.shards import write_shard
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


def write_variants(path: Path, variants: Sequence[Variant]) -> None:
    table = pa.Table.from_pylist(
        [
            {
                "variant_id": v.variant_id,
                "harness_id": v.harness_id,
                "canonical": v.is_canonical,
                "rules": [n for n, _, _ in v.rules],
                "rule_params": rule_params(v),
                "protocol": v.harness.protocol.label,
                "seed": v.seed,
                "harness": v.harness.to_json(),
                "mapping": v.mapping.to_json(),
            }
            for v in variants
        ],
        schema=VARIANTS_SCHEMA,
    )
    write_shard(path, table)


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
