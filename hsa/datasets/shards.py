"""Parquet shards: pinned writer options, atomic writes, checksums, and reading with clear errors.

Every shard hsa writes goes through ``write_shard``: the table is written under a temporary
name in the destination folder, flushed to disk and renamed, and the folder flushed too
(``hsa.harness.files``, the one way hsa writes a file), so a shard that exists is complete.
The writer's options are fixed here, in one place, so the same rows always give the same
bytes (no timestamps are written; ``created_by`` names the Arrow version).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from hsa.errors import DatasetError
from hsa.harness import files

#: Writer options every shard is written with (changing one changes every checksum).
WRITE_OPTIONS: dict[str, Any] = {
    "compression": "zstd",
    "compression_level": 3,
    "use_dictionary": True,
    "dictionary_pagesize_limit": 1 << 30,
    "write_statistics": True,
    "version": "2.6",
    "data_page_version": "1.0",
    "store_schema": False,
    "row_group_size": 1 << 30,
}


#: the characters of a split name: a folder's name that ``datasets`` takes as a split's (its
#: own pattern is ``\w+(\.\w+)*``, and ``all``, in any case, means every split there)
_SPLIT_CHARS = re.compile(r"[A-Za-z0-9_]+")


def split_name_problem(name: str) -> str | None:
    """Why ``name`` cannot name a split, or None."""
    if name.lower() == "all":
        return f"split name {name!r} is taken: `datasets` reads it as every split together"
    if not 1 <= len(name) <= 64:
        return f"split name {name!r} must be 1-64 characters long"
    if not _SPLIT_CHARS.fullmatch(name):
        odd = "".join(dict.fromkeys(c for c in name if not _SPLIT_CHARS.fullmatch(c)))
        return (
            f"split name {name!r} holds {odd!r}: only letters, digits and _ (a folder "
            "`datasets` loads as a split)"
        )
    return None


def part_name(index: int) -> str:
    return f"part-{index:05d}.parquet"


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def write_atomic(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` atomically and durably (``hsa.harness.files``); a
    ``DatasetError`` naming ``path`` when it cannot be written."""
    files.write_atomic(path, data, error=DatasetError)


def write_shard(path: Path, table: pa.Table) -> dict[str, Any]:
    """Write ``table`` to ``path`` atomically (``hsa.harness.files``); returns
    ``{"rows", "sha256"}``."""
    return write_shard_groups(path, table.schema, [table])


def write_shard_groups(path: Path, schema: pa.Schema, groups: Iterable[pa.Table]) -> dict[str, Any]:
    """``write_shard`` for a table that comes in parts: each of ``groups`` one row group,
    written as it comes (so the whole table is never in memory); ``write_shard`` is one.

    A group without rows is not written: ``datasets`` reads a file by row groups, and one of
    0 rows stops it ("BatchSize must be greater than 0"); a file of no rows is its schema
    alone, which every reader takes as no rows."""
    options = {k: v for k, v in WRITE_OPTIONS.items() if k != "row_group_size"}
    rows = 0
    try:
        with files.replacing(path, error=DatasetError) as temporary:
            with pq.ParquetWriter(temporary, schema, **options) as writer:
                size = WRITE_OPTIONS["row_group_size"]
                for group in groups:
                    if group.num_rows:
                        writer.write_table(group, row_group_size=size)
                        rows += group.num_rows
            digest = sha256_file(temporary)
    except pa.ArrowException as exc:
        raise DatasetError(f"cannot write shard: {exc}", file=str(path)) from None
    return {"rows": rows, "sha256": digest}


def open_parquet(path: Path) -> pq.ParquetFile:
    """A Parquet file opened for reading; a ``DatasetError`` naming it when it cannot be."""
    try:
        return pq.ParquetFile(path)
    except FileNotFoundError:
        raise DatasetError("no such file", file=str(path)) from None
    except (OSError, pa.ArrowException) as exc:
        raise DatasetError(
            f"not a readable Parquet file ({exc}); it may be truncated: restore or delete it",
            file=str(path),
        ) from None


def read_table(path: Path, columns: list[str] | None = None) -> pa.Table:
    """A whole Parquet file; a ``DatasetError`` naming it when it is unreadable."""
    try:
        return open_parquet(path).read(columns=columns)
    except DatasetError:
        raise
    except (OSError, pa.ArrowException) as exc:
        raise DatasetError(
            f"cannot read Parquet data ({exc}); the file may be truncated or corrupt",
            file=str(path),
        ) from None


def shard_entry(root: Path, path: Path) -> dict[str, Any]:
    """The manifest entry of a written shard: its path under ``root``, rows, verified rows
    (rows whose ``verified`` is true) and sha256."""
    table = read_table(path, columns=["verified"])
    return {
        "path": path.relative_to(root).as_posix(),
        "rows": table.num_rows,
        "verified": count_true(table.column("verified")),
        "sha256": sha256_file(path),
    }


def count_true(column: pa.ChunkedArray | pa.Array) -> int:
    return int(pc.sum(pc.fill_null(column, False)).as_py() or 0)


def shard_ids(path: Path) -> list[str]:
    """The row ids of an existing shard (``DatasetError`` naming it if it cannot be read)."""
    return read_table(path, columns=["id"]).column("id").to_pylist()
