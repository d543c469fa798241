"""Reading a dataset directory: a Polars LazyFrame, TRL conversational rows, a Hugging Face
``datasets.Dataset``."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import polars as pl

from hsa.datasets import manifest as mf
from hsa.datasets.schema import ROW_SCHEMA, trl_messages
from hsa.datasets.shards import read_table
from hsa.errors import DatasetError


def shards(path: str | Path, split: str | None = None) -> list[Path]:
    """The shard files of a complete dataset directory (of one split, when given)."""
    root = Path(path)
    manifest = root / mf.MANIFEST
    if not manifest.is_file():
        if (root / mf.STATE / "run.json").is_file():
            raise DatasetError(
                "the dataset is not complete (no manifest.json): rerun the job to finish it",
                file=str(root),
            )
        raise DatasetError("not a dataset directory: no manifest.json", file=str(root))
    entries = mf.read_json(manifest).get("shards", [])
    found = [root / e["path"] for e in entries]
    if split is not None:
        found = [p for p in found if p.parent.name == split]
        if not found:
            splits = sorted({(root / e["path"]).parent.name for e in entries})
            raise DatasetError(
                f"no split {split!r}; the dataset has {', '.join(splits) or 'none'}",
                file=str(root),
            )
    return found


def load(path: str | Path, split: str | None = None) -> pl.LazyFrame:
    """The rows of a dataset directory as a Polars ``LazyFrame`` (columns of ``ROW_SCHEMA``)."""
    files = shards(path, split)
    if not files:
        return pl.LazyFrame(schema=pl.from_arrow(ROW_SCHEMA.empty_table()).schema)
    return pl.scan_parquet([str(f) for f in files])


def iter_rows(path: str | Path, split: str | None = None) -> Iterator[dict[str, Any]]:
    """Rows as Python dicts, shard by shard (OpenAI form: arguments as JSON text)."""
    for file in shards(path, split):
        yield from read_table(file).to_pylist()


def trl_row(row: dict[str, Any]) -> dict[str, Any]:
    """A dataset row in TRL's conversational form: ``messages`` with tool-call arguments as
    dicts and ``tools`` as a list of tool definitions; lineage columns kept as they are."""
    out = dict(row)
    out["messages"] = trl_messages(row["messages"])
    out["tools"] = json.loads(row["tools"]) if row.get("tools") else []
    return out


def iter_trl(path: str | Path, split: str | None = None) -> Iterator[dict[str, Any]]:
    """TRL conversational rows (``trl_row``), shard by shard."""
    for row in iter_rows(path, split):
        yield trl_row(row)


def hf_features():
    """The ``datasets.Features`` of TRL rows: JSON values where JSON Schemas and arguments go."""
    from datasets import Features, Json, List, Value

    call = {
        "id": Value("string"),
        "type": Value("string"),
        "function": {"name": Value("string"), "arguments": Json()},
    }
    message = {
        "role": Value("string"),
        "content": Value("string"),
        "reasoning_content": Value("string"),
        "tool_calls": List(call),
        "tool_call_id": Value("string"),
        "is_error": Value("bool"),
    }
    columns = {name: Value("string") for name in ROW_SCHEMA.names}
    columns.update(
        messages=List(message),
        tools=List(Json()),
        rules=List(Value("string")),
        canonical=Value("bool"),
        verified=Value("bool"),
    )
    return Features(columns)


def to_hf(path: str | Path, split: str | None = None):
    """The dataset (one split, or all rows) as a Hugging Face ``datasets.Dataset`` of TRL
    conversational rows. Needs the ``datasets`` package (``pip install 'hsa[train]'``)."""
    try:
        from datasets import Dataset
    except ImportError:
        raise DatasetError(
            "to_hf needs the 'datasets' package: pip install 'hsa[train]'", file=str(path)
        ) from None
    features = hf_features()
    rows = [_for_hf(row) for row in iter_trl(path, split)]
    return Dataset.from_dict({k: [r[k] for r in rows] for k in features}, features=features)


def _for_hf(row: dict[str, Any]) -> dict[str, Any]:
    # Struct features hold every key; absent message keys become None, as in the Parquet rows.
    keys = ("role", "content", "reasoning_content", "tool_calls", "tool_call_id", "is_error")
    row["messages"] = [{k: m.get(k) for k in keys} for m in row["messages"]]
    return row
