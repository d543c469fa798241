"""A dataset directory's bookkeeping: the manifest, the run state, and per-batch completion marks.

::

    DIR/manifest.json            written last: schema version, config and its hash, seed, rule
                                 versions, row counts, every file's sha256 -- the mark of a
                                 complete dataset
    DIR/.hsa/run.json            the config hash of the run that is filling DIR
    DIR/.hsa/done/NNNNN.json     batch NNNNN is written: its shards, their sha256 and statistics

A rerun with the same config skips every batch whose mark and shards agree, and so ends with the
same bytes as an uninterrupted run. A directory holding another dataset, another run, or files
hsa did not write is refused rather than mixed with.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from hsa.datasets.shards import sha256_file, write_atomic
from hsa.errors import DatasetError

MANIFEST = "manifest.json"
STATE = ".hsa"
KIND = "hsa.augmented"


def canonical_json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, sort_keys=True, separators=(",", ":"))


def config_hash(config: Mapping[str, Any]) -> str:
    """The sha256 of a config's canonical JSON: what identifies a dataset's content."""
    return hashlib.sha256(canonical_json(config).encode("utf-8")).hexdigest()


def write_json(path: Path, value: Any) -> None:
    """Pretty, key-sorted JSON written atomically (equal values give equal bytes)."""
    text = json.dumps(value, ensure_ascii=False, sort_keys=True, indent=2) + "\n"
    write_atomic(path, text.encode("utf-8"))


def read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text("utf-8"))
    except (OSError, ValueError) as exc:
        raise DatasetError(f"cannot read: {exc}", file=str(path)) from None


def claim(out: Path, digest: str, *, kind: str = KIND) -> bool:
    """Make ``out`` this run's directory; True when it already holds the finished dataset.

    Refuses a directory holding another dataset or run (a different config hash) or files
    that are not an hsa dataset.
    """
    manifest = out / MANIFEST
    run = out / STATE / "run.json"
    if manifest.is_file():
        found = read_json(manifest)
        if not isinstance(found, dict) or found.get("kind") != kind:
            raise DatasetError(
                "holds another kind of dataset; choose an empty --out", file=str(out)
            )
        if found.get("config_hash") != digest:
            raise DatasetError(
                f"holds another dataset (config hash {str(found.get('config_hash'))[:12]}, "
                f"this run's is {digest[:12]}); choose another --out or delete it",
                file=str(out),
            )
        return True
    if run.is_file():
        found = read_json(run)
        if not isinstance(found, dict) or found.get("config_hash") != digest:
            raise DatasetError(
                "holds an unfinished run of another config; choose another --out or delete it",
                file=str(out),
            )
        return False
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise DatasetError(
            "exists and is not an hsa dataset directory; choose an empty or new --out",
            file=str(out),
        )
    write_json(run, {"config_hash": digest, "kind": kind})
    return False


def mark_path(out: Path, batch: int) -> Path:
    return out / STATE / "done" / f"{batch:05d}.json"


def done(out: Path, batch: int) -> dict[str, Any] | None:
    """The completion mark of ``batch`` if it and every shard it lists are intact."""
    path = mark_path(out, batch)
    if not path.is_file():
        return None
    try:
        mark = json.loads(path.read_text("utf-8"))
    except (OSError, ValueError):
        return None
    for entry in mark.get("shards", []):
        shard = out / entry["path"]
        if not shard.is_file() or sha256_file(shard) != entry["sha256"]:
            return None
    return mark


def mark(out: Path, batch: int, content: Mapping[str, Any]) -> None:
    write_json(mark_path(out, batch), dict(content))


def stale_shards(out: Path, keep: set[str]) -> list[Path]:
    """Shard files under ``data/`` that no completed batch lists (left by a killed run)."""
    data = out / "data"
    if not data.is_dir():
        return []
    return sorted(p for p in data.rglob("*") if p.is_file() and str(p.relative_to(out)) not in keep)
