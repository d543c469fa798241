"""Canonical trajectories to augment: Parquet shards, a Parquet file, an OpenAI chat JSONL file
(read once into a scratch Parquet file, the harnesses its rows bring into a ``HarnessStore``),
or an ``hsa harness import`` folder (its ``trajectories.parquet``, read under its harness
folders: ``ImportedHarnesses``).

A ``Source`` reads its rows in any slice ``[start, stop)`` as an Arrow table with the columns of
``TRAJECTORY_SCHEMA`` plus the teacher lineage a teacher shard carries (``split``, ``teacher``,
``verified``, ``reason``, ``verification``; null where absent). ``verification`` is the
teacher's verification as JSON object text (``TEACHER_SCHEMA``), carried to the dataset row as
it is; an input with a ``reason`` but no ``verification`` gets ``{"reason": ...}``, so the
column has that one meaning whatever the input. Files are taken in sorted path order, so the
same input always gives the same rows in the same order. A column of the wrong type, a null
id or an unreadable file is a ``DatasetError`` naming the file and the row.

The fingerprint is of the bytes the rows come from: a file is hashed before it is read, and
checked again once read (a JSONL file when its scratch is written, a Parquet file whenever
``read`` reads rows of it; ``file_hash`` reads it again only when its size or times changed);
a file changed in between is a ``DatasetError`` (``changed_while_read``).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import sqlite3
import tempfile
from collections import Counter, OrderedDict
from collections.abc import Callable, Iterator, MutableMapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Protocol

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from hsa.config import content_hash, file_hash, files_hash, folder_files, named_files
from hsa.datasets import manifest as mf
from hsa.datasets.lock import process_alive
from hsa.datasets.shards import open_parquet
from hsa.errors import DatasetError, HsaError, first_few, refuse_kind, refuse_path
from hsa.harness.events import TRAJECTORY_SCHEMA, Trajectory, trajectories_to_table
from hsa.harness.importers.openai_jsonl import first_repeat
from hsa.harness.importers.write import MARKER, TRAJECTORIES, is_import
from hsa.harness.io import MANIFEST, load
from hsa.harness.model import Harness

#: teacher lineage columns an input may carry
LINEAGE = pa.schema(
    [
        pa.field("split", pa.string()),
        pa.field("teacher", pa.string()),
        pa.field("verified", pa.bool_()),
        pa.field("reason", pa.string()),
        pa.field("verification", pa.string()),  # JSON object text
    ]
)
INPUT_SCHEMA = pa.schema([*TRAJECTORY_SCHEMA, *LINEAGE])


@dataclass(frozen=True, slots=True)
class Source:
    """Input rows (see the module docstring); ``harnesses``: the harness ``open_source`` was
    given, which a JSONL file is read under, and a Parquet input's rows as under one given
    to ``augment``."""

    path: Path
    files: tuple[Path, ...]
    counts: tuple[int, ...]
    fingerprint: str
    harnesses: tuple[Harness, ...] = ()
    #: the harnesses a JSONL file's rows brought, on disk (``harnesses`` when given one), or
    #: an import folder's
    store: HarnessLookup | None = None
    #: the scratch folder a JSONL file was read into (``files``); removed with the source
    scratch: tempfile.TemporaryDirectory | None = None
    #: what a user should know about how the input was read (tool names made legal)
    notes: tuple[str, ...] = ()
    #: the SHA-256 of each of ``files`` the fingerprint was taken of (none for a JSONL file's
    #: scratch, which this run wrote): ``read`` checks the rows it read came from them
    hashes: tuple[str, ...] = ()
    #: the working directory a relative ``path`` was given in (``reached``); None for an
    #: absolute one
    base: Path | None = None

    def at(self, path: Path) -> Path:
        """``path`` (this source's or one of its files, named as given) where it is read."""
        return reached(path, self.base)

    @property
    def total(self) -> int:
        return sum(self.counts)

    def unverified(self) -> int:
        """How many rows a teacher marked unverified (``verified`` false; null counts as
        verified). Reads that one column only."""
        count = 0
        for path in self.files:
            handle = open_parquet(self.at(path))
            if "verified" not in handle.schema_arrow.names:
                continue
            try:
                column = handle.read(columns=["verified"]).column("verified")
            except (OSError, pa.ArrowException) as exc:
                raise DatasetError(
                    f"cannot read Parquet data ({exc}); the file may be truncated or corrupt",
                    file=str(path),
                ) from None
            try:
                count += _false(column.cast(pa.bool_()))
            except (pa.ArrowException, ValueError):
                raise DatasetError(
                    f"column 'verified' is {column.type}, expected bool", file=str(path)
                ) from None
        return count

    def read(self, start: int, stop: int) -> tuple[pa.Table, list[tuple[str, int, int]]]:
        """Rows ``[start, stop)``, and where they come from: ``(file, first row in that file,
        rows)`` per input file touched, in order (for error messages; a JSONL file's rows are
        its rows, not its scratch file's). A file whose content is no longer the one the
        fingerprint was taken of is a ``DatasetError`` (``changed_while_read``): its rows would
        not be the input's the run is identified by."""
        if self.scratch is not None:
            return _read_rows(self.files[0], start, stop), [(str(self.path), start, stop - start)]
        parts: list[pa.Table] = []
        origins: list[tuple[str, int, int]] = []
        offset = 0
        for i, (path, count) in enumerate(zip(self.files, self.counts, strict=True)):
            lo, hi = max(start, offset), min(stop, offset + count)
            if lo < hi:
                parts.append(_read_rows(self.at(path), lo - offset, hi - offset))
                origins.append((str(path), lo - offset, hi - lo))
                if self.hashes:  # checked after the read: the rows came from what was hashed
                    check_unchanged(self.at(path), self.hashes[i])
            offset += count
        if not parts:
            return INPUT_SCHEMA.empty_table(), []
        return pa.concat_tables(parts), origins


def reached(path: Path, base: Path | None) -> Path:
    """``path``, given in the working directory ``base`` (None: given absolute), as this
    process reaches it now: as given while the process is still there, so that what names it
    (an error message) names it as it was given; else from ``base`` (a notebook's ``%cd``
    since it was given)."""
    if base is None or path.is_absolute():
        return path
    try:
        moved = Path.cwd() != base
    except OSError:  # (the working directory was removed)
        moved = True
    return base / path if moved else path


def given_in(path: Path) -> Path | None:
    """The working directory a relative ``path`` is given in (``reached``); None for an
    absolute one."""
    return None if path.is_absolute() else Path.cwd()


def check_unchanged(path: Path, sha: str) -> None:
    """Refuse the file ``path`` when its content is no longer the one that hashed to ``sha``
    (``file_hash``: a file whose size and times stay the same is not read again)."""
    try:
        unchanged = file_hash(path) == sha
    except OSError:
        unchanged = False
    if not unchanged:
        raise changed_while_read(path)


def changed_while_read(path: Path | str) -> DatasetError:
    """The error for an input file that changed while a run read it: the rows read and the
    hash the run (and a rerun's "already complete") goes by would be of different content."""
    return DatasetError("changed while this run read it; run again", file=str(path))


def _false(column: pa.ChunkedArray) -> int:
    return int(pc.sum(pc.invert(pc.fill_null(column, True))).as_py() or 0)


def locate(origins: Sequence[tuple[str, int, int]], row: int) -> tuple[str, int]:
    """The file and file row of row ``row`` of a table ``read`` returned with ``origins``."""
    for file, first, size in origins:
        if row < size:
            return file, first + row
        row -= size
    return (origins[-1][0] if origins else ""), row


def _read_rows(path: Path, start: int, stop: int) -> pa.Table:
    handle = open_parquet(path)
    groups: list[int] = []
    first_selected = 0
    first = 0
    for i in range(handle.num_row_groups):
        n = handle.metadata.row_group(i).num_rows
        if first < stop and first + n > start:
            if not groups:
                first_selected = first
            groups.append(i)
        first += n
    try:
        table = handle.read_row_groups(groups, columns=_columns(handle, path))
    except (OSError, pa.ArrowException) as exc:
        raise DatasetError(
            f"cannot read Parquet data ({exc}); the file may be truncated or corrupt",
            file=str(path),
        ) from None
    return conform(
        table.slice(start - first_selected, stop - start), file=str(path), first_row=start
    )


def _columns(handle, path: Path) -> list[str]:
    names = handle.schema_arrow.names
    missing = [f.name for f in TRAJECTORY_SCHEMA if f.name not in names]
    if missing:
        raise DatasetError(
            f"not a canonical-trajectory shard: no column(s) {', '.join(missing)}; "
            "expected the columns of hsa.harness.TRAJECTORY_SCHEMA",
            file=str(path),
        )
    return [n for n in INPUT_SCHEMA.names if n in names]


def conform(table: pa.Table, *, file: str, first_row: int = 0) -> pa.Table:
    """``table`` with exactly the columns of ``INPUT_SCHEMA`` (cast; absent lineage as nulls,
    but a ``verification`` made from ``reason`` where there is one)."""
    columns = []
    for field in INPUT_SCHEMA:
        if field.name not in table.column_names:
            if field.name in TRAJECTORY_SCHEMA.names:
                raise DatasetError(f"no column {field.name!r}", file=file)
            columns.append(pa.nulls(table.num_rows, field.type))
            continue
        column = table.column(field.name)
        try:
            columns.append(column.cast(field.type) if column.type != field.type else column)
        except (pa.ArrowException, ValueError):
            raise DatasetError(
                f"column {field.name!r} is {column.type}, expected {field.type}",
                file=file,
            ) from None
        if not field.nullable and column.null_count:
            row = int(np.flatnonzero(column.is_null().to_numpy(zero_copy_only=False))[0])
            raise DatasetError(
                f"{field.name!r} is null; every row needs one",
                file=file,
                where=f"row {first_row + row}",
            )
    reason = columns[INPUT_SCHEMA.get_field_index("reason")]
    at = INPUT_SCHEMA.get_field_index("verification")
    if columns[at].null_count and reason.null_count < table.num_rows:
        columns[at] = pc.coalesce(_combined(columns[at]), _verification_from(reason))
    return pa.Table.from_arrays(columns, schema=INPUT_SCHEMA)


def _verification_from(reason: pa.ChunkedArray | pa.Array) -> pa.Array:
    """``{"reason": REASON}`` JSON text per row (null where ``reason`` is), built once per
    distinct reason: inputs hold a handful of reasons over many rows."""
    encoded = pc.dictionary_encode(_combined(reason))
    texts = [json.dumps({"reason": r}, ensure_ascii=False) for r in encoded.dictionary.to_pylist()]
    return pc.take(pa.array(texts, pa.string()), encoded.indices)


def _combined(column: pa.ChunkedArray | pa.Array) -> pa.Array:
    return column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column


def open_source(
    path: str | Path,
    *,
    harness: Harness | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> Source:
    """The trajectories at ``path``: a directory of Parquet shards, a Parquet file, or an
    OpenAI chat JSONL file (read under ``harness``, or with harnesses derived from its rows).
    A JSONL file is read into scratch first, telling ``progress(bytes read, file size)`` as
    it goes. The folder of an hsa job, the one given or one inside it, is checked alike
    (``_job_shards``): an unfinished teach run's, one whose shards are not those its manifest
    lists, or an augmented dataset's is a ``DatasetError`` naming it, not rows left out.

    A JSONL row that names the harness it was recorded under (``harness_id``) is read under
    ``harness`` only when that is its harness: another id is a ``DatasetError`` naming the
    line, the row and both ids, not a row silently re-labelled. Parquet rows are read under
    ``harness`` as under a harness given to ``augment`` (its ``harnesses``, the CLI's
    ``--harness``): the dataset records it alike."""
    refuse_path(path, DatasetError)
    reads = "hsa.load_harness(path) reads one"
    refuse_kind(harness, Harness, "harness", reads, DatasetError, none=True)
    path = Path(path)
    source = replace(_open(path, harness, progress), base=given_in(path))
    return source if harness is None else replace(source, harnesses=(harness,))


def _open(
    path: Path, harness: Harness | None, progress: Callable[[int, int], None] | None
) -> Source:
    """``open_source``'s source of ``path``; ``harness`` reads a JSONL file only."""
    if not path.exists():
        raise DatasetError("no such file or directory", file=str(path))
    if is_import(path):
        return _import_source(path)
    if path.name == TRAJECTORIES and is_import(path.parent):
        return _import_source(path.parent)
    if path.is_dir():
        files = _shards(path)
        digests: dict[Path, str | None] = {}
        for folder in _job_folders(path):
            digests |= _job_shards(folder, [f for f in files if f.is_relative_to(folder)])
        if not files:
            raise DatasetError("no Parquet shards found", file=str(path))
        source = _parquet_source(path, files, digests)
        return replace(source, notes=_teacher_notes(_manifest(path / mf.MANIFEST)))
    if path.suffix.lower() == ".parquet":
        return _parquet_source(path, [path])
    if is_chat_file(path):
        return _jsonl_source(path, harness, progress)
    raise DatasetError(
        "expected a directory of Parquet shards, a .parquet file or an OpenAI chat .jsonl file",
        file=str(path),
    )


def _shards(folder: Path) -> list[Path]:
    """The Parquet files ``open_source`` reads of the folder ``folder``, at any depth, in path
    order: not hidden ones, nor those in hidden folders, nor an augmented dataset's
    ``variants.parquet``."""
    return [p for p in _visible(folder, "*.parquet") if p.name != "variants.parquet"]


def _job_folders(folder: Path) -> list[Path]:
    """The folders of hsa jobs whose shards ``open_source`` would read of the folder
    ``folder`` (itself or one inside it: those holding a manifest or a teach job's
    ``teach.json``), in path order, so the one above comes first."""
    marks = [*_visible(folder, mf.MANIFEST), *_visible(folder, mf.TEACHER_JOB)]
    return sorted({mark.parent for mark in marks})


def _visible(folder: Path, pattern: str) -> list[Path]:
    """The files under ``folder`` at any depth whose names match ``pattern``, in path order:
    not hidden ones, nor those in hidden folders (an hsa job's ``.hsa``, where an unfinished
    one stages its shards)."""
    return sorted(
        p
        for p in folder.rglob(pattern)
        if not any(part.startswith(".") for part in p.relative_to(folder).parts)
    )


def _job_shards(folder: Path, files: list[Path]) -> dict[Path, str | None]:
    """The SHA-256 each of ``files`` (the Parquet files read of the job folder ``folder``)
    must have, by path, as ``_teacher_shards`` gives them (none where the folder is no
    teacher's); a ``DatasetError`` when the folder's shards are not all trajectories to read:
    an augmented dataset's, or an hsa teach run's that is unfinished or whose manifest
    cannot be read. The same checks for the folder given as the input and for one inside it,
    named either way."""
    manifest = _manifest(folder / mf.MANIFEST)  # read once: its kind and shards
    kind = manifest.get("kind")
    if kind == mf.KIND:
        raise DatasetError(
            "this is an augmented dataset, not canonical trajectories; augment its source",
            file=str(folder),
        )
    if kind == mf.TEACHER_KIND:
        return _teacher_shards(folder, files, manifest)
    if (folder / mf.TEACHER_JOB).is_file() and not (folder / mf.MANIFEST).exists():
        raise DatasetError(
            "an unfinished hsa teach run (it has no manifest.json: it stopped before every "
            "shard was written), whose trajectories would be read as if they were all; "
            "rerun the same hsa teach command to finish it",
            file=str(folder),
        )
    if (folder / mf.TEACHER_JOB).is_file():
        raise DatasetError(
            "not readable as an hsa teach manifest (no 'kind' of hsa.teacher), so which "
            "shards the teacher wrote cannot be told; rerun the hsa teach command that "
            "wrote the folder",
            file=str(folder / mf.MANIFEST),
        )
    return {}


def is_chat_file(path: Path) -> bool:
    """Whether ``open_source`` reads ``path`` as an OpenAI chat JSONL file (by its suffix, in
    any case: ``.jsonl``, ``.json``)."""
    return path.suffix.lower() in (".jsonl", ".json")


def teacher_corpus(shard: str | Path) -> str | None:
    """The corpus (``env_options.path``, as its job recorded it) of the hsa teach job whose
    folder holds the file ``shard``; None when none holds it, or its job read no corpus."""
    for folder in Path(shard).parents:
        manifest = _manifest(folder / mf.MANIFEST)
        if manifest:  # the nearest manifest is the job's that wrote the shard
            config = manifest.get("config")
            options = config.get("env_options") if isinstance(config, dict) else None
            path = options.get("path") if isinstance(options, dict) else None
            teacher = manifest.get("kind") == mf.TEACHER_KIND
            return path if teacher and isinstance(path, str) else None
    return None


def teacher_jobs(source: Source) -> list[tuple[Path, dict[str, Any]]]:
    """The hsa teach jobs whose shards ``source`` reads, as (folder, manifest), in path order:
    for a folder, those in it (itself or folders inside it); for a Parquet file, the job whose
    folder holds it (the nearest manifest, as ``teacher_corpus`` finds it); none for a chat
    JSONL file or an import folder."""
    if source.scratch is not None:
        return []
    path = source.at(source.path)
    if path.is_dir():
        found = ((folder, _manifest(folder / mf.MANIFEST)) for folder in _job_folders(path))
        return [(f, m) for f, m in found if m.get("kind") == mf.TEACHER_KIND]
    for folder in path.parents:
        manifest = _manifest(folder / mf.MANIFEST)
        if manifest:
            return [(folder, manifest)] if manifest.get("kind") == mf.TEACHER_KIND else []
    return []


def task_splits(source: Source) -> tuple[pa.Array, pa.Array, np.ndarray]:
    """Every row's ``task_id`` and ``split`` (null where a file has no such column), and the
    row each file starts at, read column by column (not the rows' other columns)."""
    tasks: list[pa.Array] = []
    splits: list[pa.Array] = []
    for path, count in zip(source.files, source.counts, strict=True):
        handle = open_parquet(source.at(path))
        there = [n for n in ("task_id", "split") if n in handle.schema_arrow.names]
        try:
            table = handle.read(columns=there)
        except (OSError, pa.ArrowException) as exc:
            raise DatasetError(
                f"cannot read Parquet data ({exc}); the file may be truncated or corrupt",
                file=str(path),
            ) from None
        for name, into in (("task_id", tasks), ("split", splits)):
            if name not in there:
                into.append(pa.nulls(count, pa.string()))
                continue
            try:
                into.append(_combined(table.column(name)).cast(pa.string()))
            except (pa.ArrowException, ValueError):
                raise DatasetError(
                    f"column {name!r} is {table.column(name).type}, expected string",
                    file=str(path),
                ) from None
    starts = np.cumsum([0, *source.counts])
    if not tasks:
        return pa.array([], pa.string()), pa.array([], pa.string()), starts
    return pa.concat_arrays(tasks), pa.concat_arrays(splits), starts


def _teacher_notes(manifest: dict[str, Any]) -> tuple[str, ...]:
    """What the teacher job whose ``manifest`` this is left out of its source, and why, and
    how many tasks it ran under fewer variants than asked (``hsa teach`` writes both there),
    as notes that go on to the dataset."""
    found = manifest.get("left_out")
    entries = found if isinstance(found, list) else []
    notes = [f"the teacher left out {entry}" for entry in entries if isinstance(entry, str)]
    asked = manifest.get("variants_per_task")
    asked = asked if isinstance(asked, dict) else {}
    short = asked.get("short")
    if isinstance(short, int) and short > 0:
        notes.append(
            f"the teacher ran {short} task(s) under fewer than {asked.get('asked')} harness "
            "variants each (too few of its recipe's variants change their harness and differ "
            "from each other)"
        )
    return tuple(notes)


def _manifest(path: Path) -> dict[str, Any]:
    """A folder's manifest as a JSON object (empty without a readable one)."""
    try:
        found = json.loads(path.read_text("utf-8"))
    except (OSError, ValueError):
        return {}
    return found if isinstance(found, dict) else {}


def _teacher_shards(
    root: Path, files: list[Path], manifest: dict[str, Any]
) -> dict[Path, str | None]:
    """The SHA-256 of each shard a finished teacher job's manifest lists, by path (None where
    it gives none); a ``DatasetError`` when one is missing, or when a Parquet file here is not
    one of them (its rows would be read as the teacher's)."""
    splits = manifest.get("splits") or {}
    listed = {
        root / str(entry.get("path")): entry.get("sha256")
        for split in (splits.values() if isinstance(splits, dict) else ())
        for entry in (split.get("shards") or [] if isinstance(split, dict) else [])
        if isinstance(entry, dict)
    }
    missing = sorted(str(p.relative_to(root)) for p in listed if not p.is_file())
    if missing:
        raise DatasetError(
            f"{len(missing)} shard(s) the teacher's manifest lists are missing "
            f"({first_few(missing)}): rerun the hsa teach command that wrote it to restore them",
            file=str(root),
        )
    strays = sorted(str(p.relative_to(root)) for p in files if p not in listed)
    if strays:
        raise DatasetError(
            f"{len(strays)} Parquet file(s) here are not the teacher's (its manifest does not "
            f"list {first_few(strays)}); move them out",
            file=str(root),
        )
    return listed


def _parquet_source(
    root: Path, files: list[Path], digests: dict[Path, str | None] | None = None
) -> Source:
    """The trajectories of ``files``; with ``digests``, each file must hash to its own where
    one is given (a teacher's shards as its manifest lists them)."""
    counts = []
    ids = []
    hashes = []
    digest = hashlib.sha256()
    for file in files:
        sha = file_hash(file)  # (read already for the job's identity, as a rule)
        hashes.append(sha)
        if digests is not None and digests.get(file) not in (None, sha):
            raise mf.changed_teacher_shard(file)
        handle = open_parquet(file)
        _columns(handle, file)
        counts.append(handle.metadata.num_rows)
        ids.append(handle.read(columns=["id"]).column("id"))
        name = file.name if file == root else str(file.relative_to(root))
        digest.update(f"{name}\0{sha}\n".encode())
    chunks = [chunk.cast(pa.string()) for column in ids for chunk in column.chunks]
    _refuse_repeats(files, counts, pa.chunked_array(chunks, pa.string()))
    return Source(root, tuple(files), tuple(counts), digest.hexdigest(), hashes=tuple(hashes))


def _refuse_repeats(files: list[Path], counts: list[int], ids: pa.ChunkedArray) -> None:
    """Refuse trajectory ids used twice: rows are named by their trajectory's id and variant,
    so a dataset would hold two rows of one name (and splits are drawn by it)."""
    found = first_repeat(ids.combine_chunks())
    if found is None:
        return
    starts = np.cumsum([0, *counts])

    def where(position: int) -> tuple[Path, int]:
        index = int(np.searchsorted(starts, position, side="right")) - 1
        return files[index], position - int(starts[index])

    (first_file, first_row), (file, row) = where(found[0]), where(found[1])
    also = f"row {first_row}" if first_file == file else f"{first_file}, row {first_row}"
    raise DatasetError(
        f"trajectory id {ids[found[1]].as_py()!r} is also the id of {also}: ids must be "
        "distinct (rows are named by them)",
        file=str(file),
        where=f"row {row}",
    )


def _import_source(folder: Path) -> Source:
    """An ``hsa harness import`` folder: its trajectories, read under its harnesses."""
    trajectories = folder / TRAJECTORIES
    if not trajectories.is_file():
        tasks = folder / "tasks.jsonl"
        if tasks.is_file() and tasks.stat().st_size:
            raise DatasetError(
                f"this import has no {TRAJECTORIES}: its source records tasks and harnesses but "
                "no conversations (BFCL and tau2 give tasks), so there are no trajectories to "
                "augment; `hsa build` with an `env: bfcl` source solves BFCL's tasks and "
                "augments them",
                file=str(folder),
            )
        raise DatasetError(
            "this import holds harnesses only (no conversations, no tasks): give it as the "
            "--harness of the conversations recorded under it (hsa augment --input CHAT.jsonl "
            f"--harness {folder})",
            file=str(folder),
        )
    source = with_imported_harnesses(_parquet_source(folder, [trajectories]), folder)
    return replace(source, notes=_import_notes(folder))


def _import_notes(folder: Path) -> tuple[str, ...]:
    """What the import folder's ``import.json`` says about how it read its source (names made
    legal, ...): notes that go on to the dataset."""
    try:
        notes = json.loads((folder / MARKER).read_text("utf-8")).get("notes") or []
    except (OSError, ValueError, AttributeError):
        notes = []
    return tuple(str(n) for n in notes)


def with_imported_harnesses(source: Source, folder: Path) -> Source:
    """``source`` read under the harnesses of the ``hsa harness import`` folder ``folder``
    (each row names its harness). The harnesses are input too: the folder's other files go
    into the fingerprint as ``harness_hash`` takes them, so a rerun over a re-imported folder
    is another input, and one file imported as ``./a.jsonl`` and as ``/home/me/a.jsonl`` one."""
    if source.scratch is not None:
        raise DatasetError(
            "a chat JSONL file brings its own harnesses (or is read under one --harness); an "
            "import folder's harnesses are for trajectories a teacher recorded",
            file=str(folder),
        )
    files = named_files(folder, [f for f in folder_files(folder) if f not in source.files])
    harnesses = files_hash(files, stand_ins=_import_record(folder))
    digest = hashlib.sha256(f"{source.fingerprint}\0{harnesses}".encode())
    return replace(source, fingerprint=digest.hexdigest(), store=ImportedHarnesses(folder))


def input_hash(path: Path) -> str:
    """The content of the trajectories at ``path`` as a hash, by the files ``open_source``
    reads of them, whatever the path they are named by: an ``hsa harness import`` folder (or
    its ``trajectories.parquet``, read with it) as ``harness_hash`` takes it; another folder,
    its Parquet shards (at any depth: those in the folders of teach jobs inside it too) and
    its ``manifest.json``, by their paths relative to it; a chat JSONL file, its content
    with its name, as its fingerprint takes them (``chat_fingerprint``); another file, its
    content. ``OSError`` as ``content_hash``."""
    if path.name == TRAJECTORIES and is_import(path.parent):
        path = path.parent
    if path.is_file() and is_chat_file(path):
        return chat_fingerprint(path, file_hash(path))
    if not path.is_dir() or is_import(path):
        return harness_hash(path)
    files = _shards(path)
    if (path / mf.MANIFEST).is_file():  # (a teach job's: its notes go on to the dataset)
        files.append(path / mf.MANIFEST)
    return files_hash(named_files(path, files))


def harness_hash(path: Path) -> str:
    """The content of the harness file or folder ``path`` as a hash (``content_hash``), that
    of an ``hsa harness import`` folder with its ``import.json`` by what of it is input
    (``_import_record``). ``OSError`` as ``content_hash``."""
    return content_hash(path, stand_ins=_import_record(path))


def _import_record(folder: Path) -> dict[str, bytes]:
    """What of the import folder ``folder``'s ``import.json``, a record of the import, is
    input: its notes, which go on to the dataset; not the source's path as it was typed (one
    file imported as ``./a.jsonl`` and as ``/home/me/a.jsonl`` is one input), nor the counts
    the files themselves hold. Nothing for a path that is no import folder."""
    if not is_import(folder):
        return {}
    return {MARKER: mf.canonical_json(list(_import_notes(folder))).encode("utf-8")}


def _jsonl_source(
    path: Path, harness: Harness | None, progress: Callable[[int, int], None] | None
) -> Source:
    """A JSONL file read a chunk of rows at a time into a scratch Parquet file, and the
    harnesses its rows bring into a ``HarnessStore`` beside it: memory holds a chunk, not the
    file, however many rows and harnesses it has."""
    from hsa.harness.importers.openai_jsonl import (
        is_silent,
        read_openai_jsonl,
        reading_notes,
        renamed_tools,
        repeated_id,
    )

    _remove_stale_scratch()
    scratch = tempfile.TemporaryDirectory(prefix=f"{SCRATCH}{os.getpid()}-")
    folder = Path(scratch.name)
    store = None if harness is not None else HarnessStore(folder / "harnesses.sqlite")
    spill = folder / "trajectories.parquet"
    rows = 0
    renamed: dict[str, str] = {}
    silent: list[int] = []  # the lines of rows without an assistant turn
    left_out: list[tuple[int, str]] = []  # rows left out: their lines, and why
    unkept: Counter[str] = Counter()  # message fields not kept, and in how many messages
    off_schema: list[int] = []  # lines of rows kept with a call its schema refuses
    size = path.stat().st_size
    if progress is not None:
        progress(0, size)
    try:
        # hashed before it is read and checked after: the rows are of the content hashed
        sha = file_hash(path)
    except OSError as exc:  # (as the reader says it)
        scratch.cleanup()
        why = "file not found" if isinstance(exc, FileNotFoundError) else f"cannot read: {exc}"
        raise DatasetError(why, file=str(path)) from None
    try:
        # Groups are numbered as they come (no first pass over the file to learn whether there
        # are several); a lone group gets its plain name afterwards (``_lone_group``).
        chunks = read_openai_jsonl(path, harness=harness, groups=store, numbered=True)
        with pq.ParquetWriter(spill, INPUT_SCHEMA, compression="zstd") as writer:
            for chunk in chunks:
                renamed.update(renamed_tools(chunk.harnesses))
                silent += [t.metadata["line"] for t in chunk.trajectories if is_silent(t)]
                left_out += chunk.left_out
                unkept.update(dict(chunk.unkept))
                off_schema += chunk.off_schema
                if harness is not None:
                    for trajectory in chunk.trajectories:
                        _check_recorded(trajectory, harness, path)
                if store is not None:
                    store.commit()
                table = trajectories_to_table(chunk.trajectories)
                writer.write_table(conform(table, file=str(path)))
                rows += table.num_rows
                if progress is not None:
                    progress(chunk.read, size)
        if store is not None and len(store) == 1:
            _lone_group(store, spill)
        ids = pq.read_table(spill, columns=["id"]).column("id").combine_chunks()
        repeat = first_repeat(ids)
        if repeat is not None:
            lines = pq.read_table(spill, columns=["metadata"]).column("metadata").take(repeat)
            first, second = (json.loads(text)["line"] for text in lines.to_pylist())
            raise repeated_id(path, ids[repeat[1]].as_py(), first, second)
        check_unchanged(path, sha)
    except HsaError as exc:
        if store is not None:
            store.close()
        scratch.cleanup()
        raise DatasetError(exc.message, file=exc.file or str(path), where=exc.where) from None
    fingerprint = chat_fingerprint(path, sha, harness)
    given = (harness,) if harness is not None else ()
    notes = reading_notes(renamed, silent, left_out, unkept, off_schema)
    return Source(path, (spill,), (rows,), fingerprint, given, store, scratch, notes)


def chat_fingerprint(path: Path, sha: str, harness: Harness | None = None) -> str:
    """The fingerprint of the chat JSONL file ``path`` whose SHA-256 is ``sha``, read under
    ``harness`` (given) or with the harnesses its rows bring: its name counts with its content,
    as those harnesses are named after it (``support-1``) and their variants drawn under
    their ids, so a copy under another name gives other rows."""
    digest = hashlib.sha256(f"{path.name}\0{sha}\n".encode())
    if harness is not None:
        digest.update(harness.to_json().encode("utf-8"))
    return digest.hexdigest()


#: the name a JSONL source's scratch folder starts with, before its process id
SCRATCH = "hsa-source-"


def _remove_stale_scratch() -> None:
    """Remove the scratch folders of JSONL sources whose process is gone (a run killed with
    SIGKILL cannot remove its own)."""
    for folder in Path(tempfile.gettempdir()).glob(f"{SCRATCH}*-*"):
        pid = folder.name[len(SCRATCH) :].split("-", 1)[0]
        if pid.isdigit() and not process_alive(int(pid)):
            shutil.rmtree(folder, ignore_errors=True)


def _lone_group(store: HarnessStore, spill: Path) -> None:
    """Give the one harness of a file whose rows all share it its plain name (``chats``, not
    ``chats-1``, as ``read_openai_jsonl`` names it after its first pass), in the store and in
    the scratch file's ``harness_id`` column, rewritten a row group at a time."""
    numbered = store[next(iter(store))].id
    plain = numbered.removesuffix("-1")
    store.relabel(numbered, plain)
    renamed = spill.with_name("renamed.parquet")
    source = pq.ParquetFile(spill)
    column = INPUT_SCHEMA.get_field_index("harness_id")
    with pq.ParquetWriter(renamed, INPUT_SCHEMA, compression="zstd") as writer:
        for group in range(source.num_row_groups):
            table = source.read_row_group(group)
            plain_ids = pa.repeat(pa.scalar(plain, pa.string()), table.num_rows)
            writer.write_table(table.set_column(column, "harness_id", plain_ids))
    source.close()
    renamed.replace(spill)


def _check_recorded(trajectory: Trajectory, harness: Harness, path: Path) -> None:
    recorded = (trajectory.metadata.get("row") or {}).get("harness_id")
    if recorded is not None and recorded != harness.id:
        line = trajectory.metadata.get("line")
        raise DatasetError(
            f"recorded under harness {recorded!r}, not under the given harness "
            f"{harness.id!r}; pass the harness it was recorded under with --harness "
            "(source.harness in a build config)",
            file=str(path),
            where=f"line {line} (id {trajectory.id!r})",
        )


class HarnessLookup(Protocol):
    """Harnesses by id, for the rows that name theirs (``harness_id``)."""

    def by_id(self, harness_id: str) -> Harness | None: ...


class ImportedHarnesses:
    """The harnesses of an ``hsa harness import`` folder, by id: the folder itself when it
    holds one harness, else its sub-folder named after the id. Each is loaded (and validated)
    on first use; the most recently used are kept."""

    CACHED = 1024

    def __init__(self, folder: Path):
        self.folder = folder
        self.base = given_in(folder)  # (loaded from there after a change of directory)
        self._by_id: OrderedDict[str, Harness | None] = OrderedDict()

    def by_id(self, harness_id: str) -> Harness | None:
        if harness_id not in self._by_id:
            _keep(self._by_id, harness_id, self._load(harness_id), self.CACHED)
        return self._by_id[harness_id]

    def _load(self, harness_id: str) -> Harness | None:
        folder = reached(self.folder, self.base)
        if not (folder / harness_id).is_dir() or Path(harness_id).name != harness_id:
            alone = load(folder) if (folder / MANIFEST).is_file() else None
            return alone if alone is not None and alone.id == harness_id else None
        return load(folder / harness_id)


class HarnessStore(MutableMapping[bytes, Harness]):
    """Harnesses by the key of the rows that brought them (``read_openai_jsonl``'s groups),
    and by id (``by_id``), in an SQLite file; the most recently used are kept in memory.

    A corpus whose every conversation brings its own tools has as many harnesses as rows:
    a million of them, held as objects, would outgrow the machine."""

    #: harnesses kept in memory, by key and by id each
    CACHED = 1024

    def __init__(self, path: Path):
        self.path = path
        self._db = sqlite3.connect(path, check_same_thread=False)
        self._db.execute("PRAGMA journal_mode=OFF")
        self._db.execute("PRAGMA synchronous=OFF")
        self._db.execute("CREATE TABLE harnesses (key BLOB PRIMARY KEY, id TEXT UNIQUE, doc TEXT)")
        self._count = 0
        self._by_key: OrderedDict[bytes, Harness] = OrderedDict()
        self._by_id: OrderedDict[str, Harness] = OrderedDict()

    def __getitem__(self, key: bytes) -> Harness:
        found = self._by_key.get(key)
        if found is None:
            row = self._db.execute("SELECT doc FROM harnesses WHERE key = ?", (key,)).fetchone()
            if row is None:
                raise KeyError(key)
            found = Harness.from_dict(json.loads(row[0]))
        _keep(self._by_key, key, found, self.CACHED)
        return found

    def __setitem__(self, key: bytes, harness: Harness) -> None:
        doc = harness.to_json(keep=False)  # a key met again is an IntegrityError
        self._db.execute("INSERT INTO harnesses VALUES (?, ?, ?)", (key, harness.id, doc))
        self._count += 1
        _keep(self._by_key, key, harness, self.CACHED)

    def __delitem__(self, key: bytes) -> None:
        raise TypeError("a harness store adds harnesses; it does not remove them")

    def __iter__(self) -> Iterator[bytes]:
        for (key,) in self._db.execute("SELECT key FROM harnesses ORDER BY rowid"):
            yield key

    def __len__(self) -> int:
        return self._count

    def __contains__(self, key: object) -> bool:
        if key in self._by_key:
            return True
        query = "SELECT 1 FROM harnesses WHERE key = ?"
        return self._db.execute(query, (key,)).fetchone() is not None

    def commit(self) -> None:
        self._db.commit()

    def close(self) -> None:
        self._db.close()

    def relabel(self, old_id: str, new_id: str) -> None:
        """Give the harness called ``old_id`` the id ``new_id``."""
        row = self._db.execute("SELECT doc FROM harnesses WHERE id = ?", (old_id,)).fetchone()
        harness = Harness.from_dict(json.loads(row[0])).replace(id=new_id)
        update = "UPDATE harnesses SET id = ?, doc = ? WHERE id = ?"
        self._db.execute(update, (new_id, harness.to_json(keep=False), old_id))
        self._db.commit()
        self._by_key.clear()
        self._by_id.clear()

    def by_id(self, harness_id: str) -> Harness | None:
        found = self._by_id.get(harness_id)
        if found is None:
            query = "SELECT doc FROM harnesses WHERE id = ?"
            row = self._db.execute(query, (harness_id,)).fetchone()
            if row is None:
                return None
            found = Harness.from_dict(json.loads(row[0]))
        _keep(self._by_id, harness_id, found, self.CACHED)
        return found


def _keep(cache: OrderedDict, key: Any, value: Any, size: int) -> None:
    cache[key] = value
    cache.move_to_end(key)
    if len(cache) > size:
        cache.popitem(last=False)
