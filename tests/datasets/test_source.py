"""Trajectory readers: the teacher's ``verification`` carried as lineage, one meaning throughout."""

from __future__ import annotations

import json

import pyarrow as pa
import pyarrow.parquet as pq

from hsa.datasets.source import INPUT_SCHEMA, conform, open_source


def test_verification_is_carried_as_it_is(livestream_table):
    given = [json.dumps({"verified": True, "reason": "ok", "checks": {"score": True}})] * 2
    table = livestream_table.slice(0, 2).drop_columns(["verification"])
    table = table.append_column("verification", pa.array(given))
    assert conform(table, file="x").column("verification").to_pylist() == given


def test_a_reason_without_verification_becomes_its_json_object(tmp_path, livestream_table):
    table = livestream_table.slice(0, 4).drop_columns(["verification", "reason"])
    reasons = ["ok", None, 'score: "total" wrong', "ok"]
    table = table.append_column("reason", pa.array(reasons, pa.string()))
    pq.write_table(table, tmp_path / "a.parquet", row_group_size=1)  # one chunk per row
    rows, _ = open_source(tmp_path / "a.parquet").read(0, 4)
    found = rows.column("verification").to_pylist()
    assert found[1] is None
    assert [json.loads(v) for v in found if v] == [{"reason": r} for r in reasons if r]
    assert rows.schema == INPUT_SCHEMA


def test_no_lineage_gives_null_verification(livestream_table):
    lineage = ["split", "teacher", "verified", "reason", "verification"]
    table = conform(livestream_table.slice(0, 3).drop_columns(lineage), file="x")
    assert table.column("verification").null_count == 3
