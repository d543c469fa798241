"""Teacher rows and their shards: ``DIR/data/{split}/part-{NNNNN}.parquet`` plus a manifest.

A row is a canonical trajectory (the columns of ``hsa.harness.TRAJECTORY_SCHEMA``) plus the
lineage and surface columns of a dataset row (``hsa.datasets.ROW_SCHEMA``: variant, rules,
protocol, the OpenAI ``messages`` the model saw and the ``tools`` it was offered, split,
teacher, ``verified``), and the verification in full: ``reason`` (``ok`` when verified), the
environment's ``score`` and ``verification`` (JSON: reason, every check, score). A teacher row
is its own source trajectory (``source_id`` is its id). Shards are written whole under a
temporary name and renamed, so a shard that exists is complete; a rerun checks the ids of the
shards it finds and skips them.
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
from hsa.harness.messages import MESSAGES
from hsa.teachers.rollout import Rollout, rollout_metadata

SCHEMA_VERSION = 1
MANIFEST = "manifest.json"

TEACHER_SCHEMA = pa.schema(
    [
        *TRAJECTORY_SCHEMA,
        pa.field("source_id", pa.string(), nullable=False),
        pa.field("variant_id", pa.string(), nullable=False),
        pa.field("canonical", pa.bool_(), nullable=False),
        pa.field("rules", pa.list_(pa.string()), nullable=False),
        pa.field("rule_params", pa.string(), nullable=False),  # JSON: [{name, version, params}]
        pa.field("protocol", pa.string(), nullable=False),
        pa.field("messages", MESSAGES, nullable=False),
        pa.field("tools", pa.string(), nullable=False),  # JSON: OpenAI tools list
        pa.field("split", pa.string(), nullable=False),
        pa.field("teacher", pa.string(), nullable=False),
        pa.field("verified", pa.bool_(), nullable=False),
        pa.field("reason", pa.string(), nullable=False),
        pa.field("score", pa.float64()),
        pa.field("verification", pa.string(), nullable=False),  # JSON: reason, checks, score
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
    variant = spec.variant
    verification = result.verification
    return {
        **trajectory.to_row(),
        "source_id": spec.id,
        "variant_id": variant.variant_id,
        "canonical": variant.is_canonical,
        "rules": [name for name, _, _ in variant.rules],
        "rule_params": _json(variant.lineage()["rules"]),
        "protocol": variant.harness.protocol.label,
        "messages": list(result.conversation.messages),
        "tools": _json(result.conversation.tools),
        "split": spec.task.split,
        "teacher": teacher,
        "verified": verification.verified,
        "reason": verification.reason,
        "score": verification.score,
        "verification": _json(verification.to_dict()),
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


def shard_files(root: Path, manifest: Mapping[str, Any], split: str | None = None) -> list[Path]:
    """The shards a finished job's ``manifest`` lists, split by split (only ``split``'s when
    given; ``TeacherError`` naming the splits there are when it has none)."""
    splits = manifest.get("splits") or {}
    if split is not None and split not in splits:
        raise TeacherError(
            f"no split {split!r}; the teacher output has {', '.join(sorted(splits)) or 'none'}",
            file=str(root),
        )
    chosen = sorted(splits) if split is None else [split]
    return [root / entry["path"] for name in chosen for entry in splits[name].get("shards", [])]


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
