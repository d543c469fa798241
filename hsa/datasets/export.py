"""Reading a dataset directory: a Polars LazyFrame, TRL conversational rows, a Hugging Face
``datasets.Dataset``.

A dataset directory is also what ``datasets.load_dataset(DIR)`` reads with no glue: the card's
front matter names the splits' files (so ``variants.parquet`` is not read as rows) and declares
the JSON text columns as ``json`` features, which decode into tool dicts and argument dicts (see
``hsa.datasets.schema``).
"""

from __future__ import annotations

import errno
import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hsa.datasets import manifest as mf
from hsa.datasets.schema import JSON_FIELDS, ROW_SCHEMA, trl_messages
from hsa.datasets.shards import read_table, split_name_problem
from hsa.errors import DatasetError, first_few, first_line, refuse_path
from hsa.harness.importers.write import MARKER, TRAJECTORIES

if TYPE_CHECKING:
    import datasets
    import polars as pl


def shards(path: str | Path, split: str | None = None) -> list[Path]:
    """The shard files of a complete dataset directory (of one split, when given)."""
    root = Path(path)
    manifest = root / mf.MANIFEST
    if not manifest.is_file():
        raise no_manifest(root)
    found_manifest = mf.read_json(manifest)
    kind = found_manifest.get("kind") if isinstance(found_manifest, dict) else None
    if kind == mf.TEACHER_KIND:
        raise DatasetError(
            "this is hsa teach output (rollouts with their verdicts), not a dataset of rows: "
            f"read its trajectories with hsa.open_source, or make a dataset of it: hsa augment "
            f"--input {root} --out DIR",
            file=str(root),
        )
    if kind != mf.KIND:
        raise DatasetError(f"not an hsa dataset (manifest kind {kind!r})", file=str(root))
    entries = mf.shard_entries(root, found_manifest)
    found = [root / e["path"] for e in entries]
    missing = [e["path"] for e in entries if not (root / e["path"]).is_file()]
    if missing:
        raise DatasetError(
            f"{len(missing)} shard(s) the manifest lists are missing ({first_few(missing)}): "
            "rerun the job that wrote the dataset to restore them",
            file=str(root),
        )
    if split is not None:
        found = [p for p in found if p.parent.name == split]
        if not found:
            splits = sorted({(root / e["path"]).parent.name for e in entries})
            raise DatasetError(
                f"no split {split!r}; the dataset has {', '.join(splits) or 'none'}",
                file=str(root),
            )
    return found


def no_manifest(root: Path) -> DatasetError:
    """Why the folder ``root``, which has no manifest, is no dataset to read: not there, a
    dataset whose job has not finished (it has the job's state), an ``hsa harness import``
    folder, or another folder."""
    if not root.exists():
        return DatasetError("no such dataset directory", file=str(root))
    if (root / mf.STATE / "run.json").is_file():
        return DatasetError(
            "the dataset is not complete (no manifest.json): rerun the job to finish it",
            file=str(root),
        )
    hint = ""
    if (root / MARKER).is_file() and (root / TRAJECTORIES).is_file():
        hint = "; it is an `hsa harness import` folder: `hsa augment --input` it to make a dataset"
    elif (root / MARKER).is_file():
        hint = (
            "; it is an `hsa harness import` folder of tasks and harnesses, with no "
            "conversations to augment: `hsa build` with an `env:` source solves the tasks "
            "and augments them, and `hsa eval run` evaluates a model on them"
        )
    return DatasetError(f"not a dataset directory: no manifest.json{hint}", file=str(root))


def load(path: str | Path, split: str | None = None) -> pl.LazyFrame:
    """The rows of a dataset directory as a Polars ``LazyFrame`` (columns of ``ROW_SCHEMA``)."""
    import polars as pl  # here, not at the top: every command imports this module

    refuse_path(path, DatasetError)
    files = shards(path, split)
    if not files:
        return pl.DataFrame(ROW_SCHEMA.empty_table()).lazy()
    # absolute: the frame reads them when collected, maybe after a change of directory
    return pl.scan_parquet([str(f.absolute()) for f in files])


def iter_rows(path: str | Path, split: str | None = None) -> Iterator[dict[str, Any]]:
    """Rows as Python dicts, shard by shard (OpenAI form: arguments as JSON text)."""
    for file in shards(path, split):
        yield from read_table(file).to_pylist()


def trl_row(row: dict[str, Any]) -> dict[str, Any]:
    """A dataset row in TRL's conversational form: ``messages`` with tool-call arguments as
    dicts and ``tools`` as a list of tool definitions (None where no tools are sent, as
    ``datasets.load_dataset`` gives it); lineage columns kept as they are."""
    out = dict(row)
    out["messages"] = trl_messages(row["messages"])
    out["tools"] = json.loads(row["tools"]) if row.get("tools") else None
    return out


def iter_trl(path: str | Path, split: str | None = None) -> Iterator[dict[str, Any]]:
    """TRL conversational rows (``trl_row``), shard by shard."""
    for row in iter_rows(path, split):
        yield trl_row(row)


def hf_features() -> datasets.Features:
    """The ``datasets.Features`` of a dataset's rows, as its card declares them to
    ``datasets.load_dataset(DIR)``: ``JSON_FIELDS`` (``tools``, tool-call ``arguments``) are
    ``Json()``, decoded into a list of tool dicts and dicts of each call's own keys."""
    from datasets import Features, Json, List

    def swap(feature, path: tuple[str, ...]):
        if path in JSON_FIELDS:
            return Json()
        if isinstance(feature, List):
            return List(swap(feature.feature, path))
        if isinstance(feature, dict):
            return {k: swap(v, (*path, k)) for k, v in feature.items()}
        return feature

    inferred = Features.from_arrow_schema(ROW_SCHEMA)
    return Features({name: swap(f, (name,)) for name, f in inferred.items()})


def to_hf(
    path: str | Path, split: str | None = None, *, cache_dir: str | Path | None = None
) -> datasets.Dataset:
    """The dataset (one split, or all rows) as a Hugging Face ``datasets.Dataset``.

    The same rows as ``datasets.load_dataset(DIR, split=...)``, built from the Parquet shards by
    ``datasets`` itself: rows go to its Arrow cache (``cache_dir``, default the ``datasets``
    cache) in record batches and are memory-mapped, never all held in Python. Needs the
    ``datasets`` package (``pip install 'hsa[train]'``).
    """
    try:
        import datasets
    except ImportError:
        raise DatasetError(
            "to_hf needs the 'datasets' package: pip install 'hsa[train]'", file=str(path)
        ) from None
    features = hf_features()
    files = shards(path, split)
    if not files:
        return datasets.Dataset.from_dict({k: [] for k in features}, features=features)
    # the Dataset's split label: the split asked for, unless `datasets` refuses its name (a
    # dataset written before hsa refused such names), which only labels the rows
    name = split if split is not None and split_name_problem(split) is None else "train"
    # a shard it cannot read is logged at length (the file, both Arrow schemas, the features)
    # before the error hsa says in one line below: quiet for this call only
    verbosity = datasets.logging.get_verbosity()
    datasets.logging.set_verbosity(datasets.logging.CRITICAL)
    try:
        return datasets.load_dataset(
            "parquet",
            data_files={name: [str(f) for f in files]},
            split=name,
            features=features,
            cache_dir=None if cache_dir is None else str(cache_dir),
        )
    except datasets.exceptions.DatasetGenerationError as exc:
        cache = Path(datasets.config.HF_DATASETS_CACHE if cache_dir is None else cache_dir)
        full = cache_error(exc, cache)
        if full is not None:  # the rows' cache, not the input: a full disk, a quota
            raise full from None
        # a shard it could not read: one that changed since it was written, named; checked
        # only now, since reading every shard's bytes again costs what loading them does
        root = Path(path)
        mf.check_intact(root, mf.read_json(root / mf.MANIFEST))
        cause = exc.__cause__ or exc
        first = first_line(cause)
        raise DatasetError(f"cannot read the dataset's shards: {first}", file=str(path)) from None
    finally:
        datasets.logging.set_verbosity(verbosity)


#: what an ``OSError`` says of a file that cannot be written (read, it would not say so)
_WRITE_ERRORS = frozenset({errno.ENOSPC, errno.EFBIG, errno.EDQUOT, errno.EROFS})


def cache_error(exc: BaseException, cache: Path) -> DatasetError | None:
    """The error to raise for ``exc`` when it is ``datasets`` failing to write its Arrow cache
    of the rows (loaded, filtered or tokenized) in ``cache``, naming it; None otherwise."""
    found = _write_error(exc, cache)
    if found is None:
        return None
    said = found.strerror or first_line(found)
    return DatasetError(f"cannot write the rows' cache: {said}", file=str(cache))


def _write_error(exc: BaseException, cache: Path) -> OSError | None:
    """The ``OSError`` behind ``exc`` (it, its causes and contexts) that says a file in
    ``cache`` could not be written, or None: a full disk, a file size limit, a quota, a
    read-only file system, or no permission where the cache folder cannot be written (a
    permission error elsewhere is one of reading a shard)."""
    seen: set[int] = set()
    found: BaseException | None = exc
    while found is not None and id(found) not in seen:
        seen.add(id(found))
        if isinstance(found, OSError):
            if found.errno in _WRITE_ERRORS:
                return found
            if found.errno == errno.EACCES and not _writable(cache):
                return found
        found = found.__cause__ or found.__context__
    return None


def _writable(folder: Path) -> bool:
    """Whether ``folder`` (or, when it is not there yet, the nearest parent that is) can be
    written in."""
    for path in (folder, *folder.parents):
        if path.exists():
            return os.access(path, os.W_OK | os.X_OK)
    return True
