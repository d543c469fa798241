"""Teacher rows and their shards: ``DIR/data/{split}/part-{NNNNN}.parquet`` plus a manifest.

A row is a canonical trajectory (the columns of ``hsa.harness.TRAJECTORY_SCHEMA``) plus its
lineage and verification: split, variant and rules, teacher, ``verified`` and ``reason``, the
environment's score, and the surface conversation as OpenAI ``messages`` and ``tools`` (JSON
text). Shards are written whole under a temporary name and renamed, so a shard that exists is
complete; a rerun checks the ids of the shards it finds and skips them.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from hsa.errors import TeacherError
from hsa.harness.events import TRAJECTORY_SCHEMA, Trajectory
from hsa.teachers.rollout import Rollout, rollout_metadata

SCHEMA_VERSION = 1
MANIFEST = "manifest.json"

TEACHER_SCHEMA = pa.schema(
    [
        *TRAJECTORY_SCHEMA,
        pa.field("split", pa.string(), nullable=False),
        pa.field("variant_id", pa.string(), nullable=False),
        pa.field("rules", pa.string()),  # JSON list of {name, version, params}
        pa.field("teacher", pa.string(), nullable=False),
        pa.field("verified", pa.bool_(), nullable=False),
        pa.field("reason", pa.string(), nullable=False),
        pa.field("score", pa.float64()),
        pa.field("messages", pa.string(), nullable=False),  # JSON: OpenAI chat messages
        pa.field("tools", pa.string(), nullable=False),  # JSON: OpenAI tools list
    ]
)


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def shard_path(root: Path, split: str, index: int) -> Path:
    return root / "data" / split / f"part-{index:05d}.parquet"


def row(result: Rollout, *, teacher: str, harness_id: str) -> dict[str, Any]:
    """The dataset row of one rollout."""
    spec = result.spec
    trajectory = Trajectory(
        id=spec.id,
        events=result.events,
        task_id=spec.task.id,
        harness_id=harness_id,
        source=f"teacher:{teacher}",
        metadata=rollout_metadata(result),
    )
    lineage = spec.variant.lineage()
    return {
        **trajectory.to_row(),
        "split": spec.task.split,
        "variant_id": spec.variant.variant_id,
        "rules": _json(lineage["rules"]),
        "teacher": teacher,
        "verified": result.verification.verified,
        "reason": result.verification.reason,
        "score": result.verification.score,
        "messages": _json(result.conversation.messages),
        "tools": _json(result.conversation.tools),
    }


def write_shard(path: Path, rows: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Write ``rows`` to ``path`` atomically; returns the shard's manifest entry."""
    table = pa.Table.from_pylist(list(rows), schema=TEACHER_SCHEMA)
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        pq.write_table(table, temporary, compression="zstd")
        os.replace(temporary, path)
    except OSError as exc:
        temporary.unlink(missing_ok=True)
        raise TeacherError(f"cannot write shard: {exc.strerror or exc}", file=str(path)) from None
    return shard_entry(path, rows=table.num_rows)


def shard_entry(path: Path, *, rows: int | None = None) -> dict[str, Any]:
    """The manifest entry of a written shard: path (relative to ``data/``'s parent), rows,
    verified rows and checksum."""
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    table = pq.read_table(path, columns=["verified"])
    return {
        "path": str(Path(*path.parts[-3:])),
        "rows": table.num_rows if rows is None else rows,
        "verified": int(sum(table.column("verified").to_pylist())),
        "sha256": digest,
    }


def shard_ids(path: Path) -> list[str]:
    """The row ids of an existing shard (``TeacherError`` if it cannot be read)."""
    try:
        return pq.read_table(path, columns=["id"]).column("id").to_pylist()
    except (OSError, pa.ArrowException) as exc:
        raise TeacherError(
            f"unreadable shard ({exc}); delete it and rerun to write it again", file=str(path)
        ) from None


def write_manifest(root: Path, manifest: Mapping[str, Any]) -> Path:
    """Write ``manifest.json`` atomically (sorted keys, so equal jobs give equal bytes)."""
    path = root / MANIFEST
    temporary = path.with_name(f".{MANIFEST}.{os.getpid()}.tmp")
    temporary.write_text(json.dumps(manifest, indent=2, sort_keys=True) + "\n", "utf-8")
    os.replace(temporary, path)
    return path
