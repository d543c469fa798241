"""Parquet shards: what ``write_shard`` writes, readers read."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from hsa.datasets.shards import write_shard


def test_a_shard_without_rows_is_read_as_none_beside_others(tmp_path: Path) -> None:
    import datasets

    table = pa.table({"id": ["a", "b"], "n": [1, 2]})
    empty = write_shard(tmp_path / "part-00000.parquet", table.schema.empty_table())
    full = write_shard(tmp_path / "part-00001.parquet", table)
    assert empty["rows"] == 0 and full["rows"] == 2
    # no row group of 0 rows: `datasets` stops at one ("BatchSize must be greater than 0")
    assert pq.ParquetFile(tmp_path / "part-00000.parquet").metadata.num_row_groups == 0
    assert pq.read_table(tmp_path / "part-00000.parquet").schema == table.schema
    files = [str(tmp_path / name) for name in ("part-00000.parquet", "part-00001.parquet")]
    loaded = datasets.load_dataset(
        "parquet", data_files=files, split="train", cache_dir=str(tmp_path / "cache")
    )
    assert loaded["id"] == ["a", "b"]
