"""Write an import to disk, atomically: harness folders, tasks.jsonl, trajectories.parquet."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow.parquet as pq

from hsa.errors import ImportFormatError
from hsa.harness.events import dumps_json, trajectories_to_table
from hsa.harness.files import replacing_directory
from hsa.harness.importers.base import ImportResult
from hsa.harness.io import write_dir

MARKER = "import.json"
TASKS = "tasks.jsonl"
TRAJECTORIES = "trajectories.parquet"
RESERVED = {MARKER, TASKS, TRAJECTORIES}


def write_import(result: ImportResult, out_dir: str | Path) -> list[Path]:
    """Write ``result`` under ``out_dir`` and return the paths written (top level only).

    One harness: ``out_dir`` is that harness's directory. Several: ``out_dir/<harness-id>/``
    each. Tasks go to ``out_dir/tasks.jsonl``, trajectories to ``out_dir/trajectories.parquet``
    and a summary to ``out_dir/import.json``, which marks the folder as an import: an existing
    ``out_dir`` is replaced only if it is empty or holds an earlier import (``is_import``: the
    record hsa writes, not any file of that name). Everything is written into a staging
    folder beside ``out_dir`` and renamed into place.
    """
    out = Path(out_dir)
    _check_target(out)
    ids = [h.id for h in result.harnesses]
    if len(set(ids)) != len(ids):
        raise ImportFormatError("two harnesses share an id", file=result.source)
    several = len(result.harnesses) > 1
    clash = sorted(RESERVED & set(ids)) if several else []
    if clash:
        raise ImportFormatError(
            f"harness id {clash[0]!r} is a file name the import needs", file=result.source
        )
    with replacing_directory(out, error=ImportFormatError) as staging:
        written = _write(result, staging, several)
    return [out / p.relative_to(staging) for p in written]


def is_import(folder: Path) -> bool:
    """Whether ``folder`` is what ``hsa harness import`` writes: its ``import.json`` is the
    marker it writes (a file of that name in a skill's folder is the skill's)."""
    try:
        marker = json.loads((folder / MARKER).read_text("utf-8"))
    except (OSError, ValueError):
        return False
    return isinstance(marker, dict) and {"format", "layout", "counts"} <= marker.keys()


def _check_target(out: Path) -> None:
    if not out.exists():
        return
    if not out.is_dir():
        raise ImportFormatError(
            "refusing to overwrite: it exists and is not a folder", file=str(out)
        )
    if any(out.iterdir()) and not is_import(out):  # hsa's own record, not any import.json
        raise ImportFormatError(
            "refusing to overwrite: the folder is not empty and is not an earlier "
            "`hsa harness import`; choose another --out or remove it",
            file=str(out),
        )


def _write(result: ImportResult, root: Path, several: bool) -> list[Path]:
    written: list[Path] = []
    for harness in result.harnesses:
        target = root / harness.id if several else root
        if several:
            target.mkdir()
            written.append(target)
        write_dir(harness, target)
    if not several and result.harnesses:
        written.append(root)
    if result.tasks:
        path = root / TASKS
        with path.open("w", encoding="utf-8") as fh:
            for row in result.tasks:
                fh.write(dumps_json(row) + "\n")
        written.append(path)
    if result.trajectories:
        path = root / TRAJECTORIES
        pq.write_table(trajectories_to_table(result.trajectories), path)
        written.append(path)
    marker = {
        "format": result.format,
        "source": result.source,
        "layout": "one harness directory per harness id" if several else "harness directory",
        "counts": result.counts(),
        "notes": list(result.notes),
        # the files of the source that could not be imported, and why (the command failed)
        "failures": [str(e) for e in result.failures],
    }
    (root / MARKER).write_text(json.dumps(marker, indent=2) + "\n", "utf-8")
    written.append(root / MARKER)
    return written
