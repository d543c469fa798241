"""A dataset directory's bookkeeping: the manifest, the run state, and per-batch completion marks.

::

    DIR/manifest.json            written last: schema version, config and its hash, seed, rule
                                 versions, row counts, every file's sha256 -- the mark of a
                                 complete dataset, its keys and counts checked against the
                                 shards before they are read (``check_finished``)
    DIR/.hsa/run.json            the config hash of the run that is filling DIR
    DIR/.hsa/done/NNNNN.json     batch NNNNN is written: its shards, their sha256 and statistics
                                 (the augment job's batches; the teach job's shards, one each)
    DIR/.hsa/staging/data/       the shards of an augment or teach job while its run is
                                 unfinished ({split}/NAME), moved to DIR/data/ at its finish,
                                 in one rename (``publish``)
    DIR/.hsa/staging/top-level/  the card, variants file and plots of its finish, moved to DIR/
                                 before the shards
    DIR/.hsa/lock                the run writing into DIR now (``hsa.datasets.lock``)

A completion mark lists its shards by their place in the finished dataset
(``data/{split}/part-NNNNN.parquet``), staged or not: the augment and teach jobs keep them out
of ``data/`` until their last batch is written, and then move them there all at once, since
every reader but hsa's own (``datasets``' ``load_dataset(DIR)``, ``data/*/*.parquet`` in Polars
or DuckDB) takes what is there for the dataset, manifest or not; the augment job keeps the
other files of its finish out of ``DIR`` too, until they move together (``load_dataset(DIR)``
serves a lone ``variants.parquet``, or the plots, as rows). A rerun with the same config skips
every batch whose mark and shards agree, wherever they are, and so ends with the same bytes as
an uninterrupted run. A directory holding another dataset, another config's partial data, or
files hsa did not write is refused rather than mixed with; a run that stopped on an error
(``fail``) does not block the next: another config starts over in its place.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import shlex
import shutil
from collections.abc import Collection, Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

from hsa.datasets.shards import sha256_file, write_atomic
from hsa.errors import AnotherDataset, DatasetError, HsaError, first_few, stop_requested, stops_held
from hsa.harness import files

MANIFEST = "manifest.json"
STATE = ".hsa"
#: the folder of ``STATE`` where an unfinished augment or teach run keeps its shards
#: (``staged``)
STAGING = "staging"
#: the folder of ``STAGING`` where it writes the files of the top of the dataset (card,
#: variants file, plots: ``staged_file``) until they move there
TOP = "top-level"
#: the folder a dataset's shards are read from, and the folder of ``STAGING`` that an
#: unfinished augment or teach run fills in its place (``staged``), moved there whole
#: (``publish``)
DATA = "data"
#: the folder of ``STAGING`` where a ``data/`` folder waits while its files join the staged
#: one (``_take_back``)
ASIDE = "data-aside"
#: the ``kind`` of a manifest: an augmented dataset (``hsa augment``/``hsa build``) ...
KIND = "hsa.augmented"
#: ... or a teacher's trajectories (``hsa teach``)
TEACHER_KIND = "hsa.teacher"
#: the file a teacher job records its settings in, from its start (its manifest comes last)
TEACHER_JOB = "teach.json"


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

    Call it holding ``out``'s lock (``hsa.datasets.lock``). Refuses a directory holding another
    dataset, another config's partial data, or files that are not an hsa dataset. The state of
    another config's run that wrote nothing (no completed batch, no teacher output: it failed
    early), and the rows of one that stopped on an error (``fail``), are cleared instead, so a
    corrected config can run. Temporary files of killed runs
    are removed. A finished dataset one of whose files is missing or changed (``damaged``), or
    whose manifest is not as hsa wrote it (``check_finished``: a key of the wrong type, a count
    the shards disagree with), is unfinished again: False, and the run redoes what is not
    intact and writes the manifest again; files under ``data/`` it does not list are refused
    first, damaged or not (``refuse_strays``).
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
            raise AnotherDataset(
                f"holds another dataset (config hash {str(found.get('config_hash'))[:12]}, "
                f"this run's is {digest[:12]}: other input content, other settings, or another "
                "version of hsa or of a rule the recipe names)",
                file=str(out),
            )
        # before a repair too: the run would finish over the stray, which readers then count
        # (a list of shards that is not one lists none: the run's finish refuses the strays)
        if isinstance(found.get("shards"), list):
            refuse_strays(out, found)
        try:
            check_finished(out, found, kind)
        except DatasetError:
            pass  # a file it lists is missing or changed, or the manifest itself is
        else:
            return True
        # The dataset is unfinished again, and this run redoes the batches whose shards are
        # not intact (``done``), then the rest, and writes the manifest again from their
        # completion marks. Its shards and its other files go back to staging first, so that
        # no reader takes the rows left (or a lone variants file) for the dataset meanwhile
        # (``publish`` puts them back; a stop part way leaves the manifest, and the next run
        # moves the rest, or, once the manifest is gone, the card, which its finish replaces).
        listed = found.get("files")
        with stops_held():
            unpublish(
                out,
                _entries(found.get("shards")),
                listed if isinstance(listed, dict) else TOP_FILES,
            )
            # (the run's claim first: stopped between the two, the folder is still its own)
            write_json(run, {"config_hash": digest, "kind": kind})
            (out / MANIFEST).unlink()
            # the card last, listed or not: until it goes, `datasets` reads the files its
            # configs name (data/, gone: an error), not the manifest, alone at the top, as a
            # row; a run stopped before it moved replaces it at its finish (``publish``)
            _move([(out / CARD, out / STATE / STAGING / TOP / CARD)], "back to staging")
    remove_temporaries(out)
    if run.is_file():
        found = read_json(run)
        if isinstance(found, dict) and found.get("config_hash") == digest:
            if "failed" in found:  # retried: no longer a run that stopped on an error
                write_json(run, {"config_hash": digest, "kind": kind})
            return False
        if isinstance(found, dict) and "failed" in found:
            # another config's run that stopped on an error (a bad input row, a broken rule):
            # its rows are not kept to be finished, since the fix is another config; the
            # teacher's output stays (a build reuses it when its source and teacher are the same)
            _discard_rows(out)
            clear_run(out)
        else:
            held = partial_data(out)
            if held:
                raise DatasetError(
                    f"holds the unfinished run of another config ({', '.join(held)}): other "
                    "input content, other settings, or this config under another version of "
                    "hsa or of a rule the recipe names; rerun that config, on that input with "
                    "that version, to finish it, choose another --out, or start over with: "
                    f"rm -r {shlex.quote(str(out))}",
                    file=str(out),
                )
            clear_state(out)
    elif out.exists() and (
        not out.is_dir() or any(p.name != STATE and not _empty_tree(p) for p in out.iterdir())
    ):
        raise DatasetError(
            "exists and is not an hsa dataset directory; choose an empty or new --out",
            file=str(out),
        )
    write_json(run, {"config_hash": digest, "kind": kind})
    return False


def _entries(shards: Any) -> list[dict[str, Any]]:
    """The entries of a manifest's list of shards that name a file (all, as hsa writes it)."""
    if not isinstance(shards, list):
        return []
    return [e for e in shards if isinstance(e, dict) and isinstance(e.get("path"), str)]


def _empty_tree(path: Path) -> bool:
    """Whether ``path`` is a folder of empty folders only (``data/dev/``, left by a run that
    could not write its first file: a full disk)."""
    return path.is_dir() and not path.is_symlink() and all(p.is_dir() for p in path.rglob("*"))


def job_folder_problem(
    out: Path,
    job_file: str,
    digest: str,
    *,
    kind: str,
    others: Mapping[str, str],
    owned: Collection[str] | None = None,
    started: str | None = None,
    reusable: Collection[str] = (),
) -> tuple[str, Path] | None:
    """Why ``out`` cannot take a job of ``kind`` (a teacher job, an evaluation) whose settings
    hash to ``digest``, and the file that says so: it holds such a job with other settings
    (``job_file`` records its ``output_hash``, or ``started`` does, written when the job
    first writes, for a job that writes ``job_file`` last) or, holding none, another kind of
    output (``others``: the file that marks it -> what it is) or, with ``owned`` (the names a
    job of ``kind`` writes at the top of its folder), anything else, or files by those names
    that no such job wrote (a user's own ``report.md``; ``reusable`` names, such as a request
    cache a run only adds to, are taken as they are). None when it can."""
    path = out / job_file
    if not path.exists() and started is not None and (out / started).exists():
        path = out / started
    if not path.exists():
        for name, what in others.items():
            if (out / name).exists():
                return f"this directory holds {what} ({name}), not {kind}; use a new --out", out
        strays = [] if owned is None else _strays(out, owned)
        if strays:
            return (
                f"this directory holds what hsa did not write there ({first_few(strays)}), "
                f"not {kind}; use a new or empty --out",
                out,
            )
        mine = [] if owned is None else [n for n in owned if n not in reusable]
        made = _owned(out, mine) if mine and out.is_dir() else []
        if made:
            return (
                f"this directory holds {first_few(made)}, named as {kind}'s files are but not "
                "written by one; use a new or empty --out",
                out,
            )
        return None
    try:
        previous = json.loads(path.read_text("utf-8")).get("output_hash")
    except (OSError, ValueError, AttributeError):
        previous = None
    if previous is None:
        return (
            f"this directory holds {path.name}, which is not what {kind} records there; use a "
            "new or empty --out",
            path,
        )
    if previous != digest:
        return (
            f"this directory holds {kind} with other input content or other settings (or made "
            "by another version of hsa or of the rules it draws); use a new --out",
            path,
        )
    return None


def _strays(out: Path, owned: Collection[str]) -> list[str]:
    """The names at the top of ``out`` that are not ``owned`` (nor their SQLite journals, nor
    a killed run's ``.NAME.PID.tmp``), sorted; none when ``out`` is not a folder."""
    if not out.is_dir():
        return []
    found = []
    for entry in sorted(out.iterdir()):
        name = entry.name
        if name == STATE or _is_owned(name, owned):
            continue
        temporary = re.fullmatch(r"\.(.+)\.\d+\.tmp", name)
        if temporary is not None and temporary.group(1) in owned:
            continue
        found.append(name)
    return found


def _owned(out: Path, owned: Collection[str]) -> list[str]:
    """The names at the top of ``out`` a job writes (``owned``), killed runs' temporaries
    aside, sorted."""
    return sorted(entry.name for entry in out.iterdir() if _is_owned(entry.name, owned))


def _is_owned(name: str, owned: Collection[str]) -> bool:
    """Whether ``name`` is one of ``owned`` or a file beside it (``cache.sqlite-journal``)."""
    return any(name == own or name.startswith(f"{own}-") for own in owned)


def remove_temporaries(out: Path) -> None:
    """Remove the ``.NAME.PID.tmp`` files killed runs left (only safe under ``out``'s lock)."""
    if out.is_dir():
        for stale in out.rglob(".*.tmp"):
            if stale.is_file():
                try:
                    stale.unlink(missing_ok=True)
                except OSError as exc:
                    raise DatasetError(
                        f"cannot remove what a killed run left: {exc.strerror}", file=str(stale)
                    ) from None


def partial_data(out: Path) -> list[str]:
    """What a run has written into ``out`` that took work to make: completed batches, shards,
    teacher output (shards, completion marks, cached teacher answers)."""
    held = dataset_data(out)
    source = out / STATE / "source"
    if source.is_dir():
        kept = [
            p
            for p in source.rglob("*")
            if p.is_file()
            and not p.name.startswith(".")
            and STATE not in p.relative_to(source).parts
            and p.name not in _EMPTY_TEACHER_FILES
        ]
        # (the teacher's shards are staged under its own state folder until it finishes)
        if kept or _staged_shards(source) or _cached_answers(source / "cache.sqlite"):
            held.append(f"teacher output under {STATE}/source/")
    return held


def dataset_data(out: Path) -> list[str]:
    """The part of ``partial_data`` that belongs to the dataset (a config's own rows)."""
    held = []
    done_dir = out / STATE / "done"
    marks = len(list(done_dir.glob("*.json"))) if done_dir.is_dir() else 0
    if marks:
        held.append(f"{marks} completed batch(es)")
    data = out / "data"
    if data.is_dir() and any(p.is_file() for p in data.rglob("*")):
        held.append("shards under data/")
    if _staged_shards(out):
        held.append(f"shards under {STATE}/{STAGING}/")
    return held


def _staged_shards(out: Path) -> bool:
    """Whether the staging folder of ``out`` holds a shard hsa wrote (not a file of a user's
    that a repair moved there with ``data/``)."""
    staging = out / STATE / STAGING
    return any(
        p.is_file() and _ours(p.relative_to(staging / folder))
        for folder in (DATA, ASIDE)
        for p in (staging / folder).rglob("*")
    )


#: what a teacher job writes before its first answer: settings, and an empty request cache
_EMPTY_TEACHER_FILES = {
    "teach.json",
    "cache.sqlite",
    "cache.sqlite-journal",
    "cache.sqlite-wal",
    "cache.sqlite-shm",
}


def _cached_answers(path: Path) -> bool:
    if not path.is_file():
        return False
    import sqlite3

    try:
        with contextlib.closing(sqlite3.connect(f"file:{path}?mode=ro", uri=True)) as db:
            return db.execute("SELECT 1 FROM responses LIMIT 1").fetchone() is not None
    except sqlite3.Error:
        return True  # unreadable: keep it rather than guess it is empty


def _discard_rows(out: Path) -> None:
    """Remove the rows a run wrote into ``out``: its staged shards, the shards its completion
    marks list and any other shard by hsa's name (``part-NNNNN.parquet``, a batch cut short),
    then the marks. A file hsa did not write stays where it is (``refuse_strays`` names it at
    the finish); one a repair moved into staging with ``data/`` goes back there."""
    discard_staging(out)
    ours = re.compile(r"part-[0-9]{5,}\.parquet")
    shards = {p for p in (out / "data").glob("*/*.parquet") if ours.fullmatch(p.name)}
    for path in sorted((out / STATE / "done").glob("*.json")):
        try:
            listed = json.loads(path.read_text("utf-8"))["shards"]
            shards.update(out / entry["path"] for entry in listed)
        except (OSError, ValueError, KeyError, TypeError):
            continue  # a mark that is not one of ours lists nothing
    data = (out / "data").resolve()
    for shard in sorted(shards):
        try:
            inside = shard.resolve().is_relative_to(data) and shard.is_file()
        except (OSError, ValueError):  # a mark edited by hand: a NUL, a loop of links
            continue
        if inside:
            shard.unlink(missing_ok=True)
    shutil.rmtree(out / STATE / "done", ignore_errors=True)


def fail(out: Path, reason: str) -> None:
    """Record that the run filling ``out`` stopped on an error (``reason``), not interrupted:
    the state of a run that wrote nothing goes, as does the claim of one that wrote only
    teacher output; one that wrote rows is marked, so that the same config retries it and
    another config (the fix) starts over instead of being refused (``claim``)."""
    if not partial_data(out):
        clear_state(out)
    elif not dataset_data(out):
        clear_run(out)
    else:
        run = out / STATE / "run.json"
        found = read_json(run) if run.is_file() else None
        if isinstance(found, dict):
            write_json(run, {**found, "failed": reason})


@contextlib.contextmanager
def failing(out: Path) -> Iterator[None]:
    """Around a run that has claimed ``out``: ``fail`` when it stops on an error (an
    ``HsaError``; an interrupted run stays as it is, to be finished)."""
    try:
        yield
    except HsaError as exc:
        if stop_requested() is None:  # not an error a stop caused: the run was interrupted
            fail(out, str(exc) or type(exc).__name__)
        raise


def clear_run(out: Path) -> None:
    """Forget which config is filling ``out`` (its data stays), so another config may."""
    (out / STATE / "run.json").unlink(missing_ok=True)


def clear_state(out: Path) -> None:
    """Remove the run state of a run that wrote no data (see ``partial_data``), lock kept."""
    state = out / STATE
    discard_staging(out)  # (files hsa did not write back to data/)
    for name in ("run.json", "done", "source"):
        path = state / name
        if path.is_dir():
            shutil.rmtree(path)
        else:
            path.unlink(missing_ok=True)


def damaged(out: Path, manifest: Mapping[str, Any]) -> list[str]:
    """The files a finished dataset's manifest lists (shards, variants file, card, plots)
    that are missing or differ from what was written (their SHA-256)."""
    listed = [(e.get("path"), e.get("sha256")) for e in manifest.get("shards") or []]
    listed += list((manifest.get("files") or {}).items())
    found = []
    for name, digest in listed:
        path = out / str(name)
        try:
            intact = path.is_file() and sha256_file(path) == digest
        except OSError:
            intact = False
        if not intact:
            found.append(str(name))
    return found


def check_intact(out: Path, manifest: Mapping[str, Any]) -> None:
    """Refuse a finished dataset whose files changed since it was written (``damaged``),
    naming them: its readers would otherwise fail on them without saying which; or that
    holds files under ``data/`` it did not write (``refuse_strays``)."""
    broken = damaged(out, manifest)
    if broken:
        missing = [name for name in broken if not (out / name).is_file()]
        changed = [name for name in broken if name not in missing]
        said = []
        if missing:
            said.append(
                f"{len(missing)} file(s) of this dataset are missing ({first_few(missing)})"
            )
        if changed:
            said.append(
                f"{len(changed)} file(s) of this dataset changed since it was written "
                f"({first_few(changed)})"
            )
        raise DatasetError(
            f"{'; '.join(said)}: rerun the job that wrote it to repair them", file=str(out)
        )
    refuse_strays(out, manifest)


def refuse_strays(out: Path, manifest: Mapping[str, Any]) -> None:
    """Refuse a finished dataset with files under ``data/`` its manifest does not list (a
    shard copied in, another run's): readers glob ``data/*/*.parquet`` (the card's
    ``data_files``, Polars, DuckDB) and would read them as rows. They are not removed: hsa
    did not write them."""
    listed = {str(e.get("path")) for e in manifest.get("shards") or [] if isinstance(e, dict)}
    data = out / "data"
    # (what data/*/*.parquet reaches, hidden files too: Polars and DuckDB read them; a
    # .DS_Store or a Thumbs.db is no reader's row)
    found = sorted(
        p.relative_to(out).as_posix()
        for p in (data.glob("*/*.parquet") if data.is_dir() else ())
        if p.is_file() and p.relative_to(out).as_posix() not in listed
    )
    if found:
        raise DatasetError(
            f"{len(found)} file(s) under data/ are not this dataset's (its manifest does not "
            f"list {first_few(found)}): readers of data/*/*.parquet would take them for rows; "
            "move them out",
            file=str(out),
        )


#: the files beside the shards that an augmented dataset's manifest lists in ``files``, with
#: their SHA-256, as every such dataset has them (its card's plots are listed there too)
CARD = "README.md"
VARIANTS = "variants.parquet"
TOP_FILES = (CARD, VARIANTS)


def check_finished(out: Path, manifest: Any, kind: str = KIND) -> None:
    """Refuse the manifest of the finished dataset at ``out`` (of ``kind``; ``TEACHER_KIND``:
    ``hsa teach`` output) when it is not as hsa wrote it: a ``DatasetError`` naming
    ``manifest.json`` and the key that has the wrong type, is missing (an augmented dataset's
    ``files`` among them) or gives a count the shards disagree with.

    Its readers (``hsa inspect``, a rerun's "already complete" summary) take its numbers as
    they are, so they are checked against what the shards hold: each shard's rows against its
    Parquet footer (footers only: no row is read), the rows of each split and in all against
    their sums, a teacher's verified rows against its shards' entries, and an augmented
    dataset's ``variants`` against its variants file's footer. An augmented dataset's files
    are checked first (``check_intact``), so that the footers read are the ones written. A
    rerun of the job that wrote the dataset writes its manifest again (``claim``; ``hsa
    teach`` writes its manifest at the end of every run)."""
    check = _Check(out / MANIFEST, kind)
    if not isinstance(manifest, dict):
        raise check.refuse("$", f"expected a JSON object, found {_shown(manifest)}")
    if manifest.get("kind") != kind:
        raise check.refuse("$.kind", f"expected {kind!r}, found {_shown(manifest.get('kind'))}")
    other = TEACHER_KIND if kind == KIND else KIND
    if _KEY[other] in manifest and _KEY[kind] not in manifest:  # a kind edited into the other
        raise check.refuse(
            "$.kind",
            f"says {kind!r}, but the manifest lists its shards in {_KEY[other]!r}, as one of "
            f"kind {other!r} does",
            fix="rerun the job that wrote it to write it again",
        )
    if kind == TEACHER_KIND:
        _check_teacher(out, manifest, check)
    else:
        _check_augmented(out, manifest, check)


#: the key that lists the shards in a manifest of each kind
_KEY = {KIND: "shards", TEACHER_KIND: "splits"}


def shard_entries(out: Path, manifest: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The shard entries of the finished dataset's ``manifest`` at ``out``, each checked as
    ``check_finished`` checks them (``path`` and ``sha256`` text, ``rows`` a count; a
    ``DatasetError`` at the JSON path of the first that is not), but no file read: for
    readers of its rows, which need the shards' paths and not the whole check."""
    return _Check(out / MANIFEST, KIND).shards(manifest, "$", ("rows",))


class _Check:
    """Reads the keys of a manifest (``manifest.json``) for ``check_finished``: each of the
    type it should have, or a ``DatasetError`` at its JSON path."""

    def __init__(self, path: Path, kind: str):
        self.path = path
        self.fix = (
            "rerun the hsa teach command that wrote it to write it again"
            if kind == TEACHER_KIND
            else "rerun the job that wrote the dataset to write it again"
        )

    def refuse(self, where: str, what: str, *, fix: str | None = None) -> DatasetError:
        return DatasetError(
            f"{what}; the manifest was edited or damaged: {fix or self.fix}",
            file=str(self.path),
            where=where,
        )

    def value(self, found: Mapping[str, Any], key: str, at: str, kind: type, what: str) -> Any:
        """``found[key]`` (at the JSON path ``at``) when it is a ``kind`` (``what``)."""
        if key not in found:
            raise self.refuse(_path(at, key), f"missing: expected {what}")
        value = found[key]
        if not isinstance(value, kind) or isinstance(value, bool):
            raise self.refuse(_path(at, key), f"expected {what}, found {_shown(value)}")
        return value

    def count(self, found: Mapping[str, Any], key: str, at: str = "$") -> int:
        value = self.value(found, key, at, int, "a count (a whole number)")
        if value < 0:
            raise self.refuse(_path(at, key), f"expected a count (0 or more), found {value}")
        return int(value)

    def counts(self, found: Mapping[str, Any], at: str, keys: tuple[str, ...] = ()) -> None:
        """``keys`` of ``found``, and any other it has, counts."""
        for key in [*keys, *(k for k in found if k not in keys)]:
            self.count(found, key, at)

    def optional(self, found: Mapping[str, Any], key: str, kind: type, what: str) -> Any:
        """``found[key]`` of the top of the manifest when it is there (a manifest of an
        earlier version of hsa may not have it), else None."""
        return self.value(found, key, "$", kind, what) if key in found else None

    def texts(self, found: Any, at: str) -> None:
        for i, item in enumerate(found or ()):
            if not isinstance(item, str):
                raise self.refuse(f"{at}[{i}]", f"expected text, found {_shown(item)}")

    def shards(self, found: Mapping[str, Any], at: str, keys: tuple[str, ...]) -> list[dict]:
        """The list of shard entries at ``found["shards"]``: ``path`` and ``sha256`` text,
        ``keys`` counts."""
        listed = self.value(found, "shards", at, list, "a list of shards")
        for i, entry in enumerate(listed):
            where = f"{_path(at, 'shards')}[{i}]"
            if not isinstance(entry, dict):
                raise self.refuse(where, f'expected {{"path": ...}}, found {_shown(entry)}')
            for key in ("path", "sha256"):
                self.value(entry, key, where, str, "text")
            for key in keys:
                self.count(entry, key, where)
        return listed


def _path(at: str, key: str) -> str:
    """The JSON path of ``key`` in the object at ``at``."""
    return (
        f"{at}.{key}"
        if re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", key)
        else f"{at}[{json.dumps(key)}]"
    )


def _shown(value: Any) -> str:
    """``value`` as its JSON, cut short, with what it is."""
    kinds = {dict: "an object", list: "a list", str: "text", bool: "true/false", type(None): "null"}
    what = kinds.get(type(value), "a number")
    text = json.dumps(value, ensure_ascii=False, default=str)
    return what if value is None else f"{what} ({text if len(text) <= 40 else text[:37] + '...'})"


def _footer_rows(path: Path) -> int:
    """The rows of the Parquet file at ``path``, as its footer says (no row is read)."""
    from hsa.datasets.shards import open_parquet

    with open_parquet(path) as found:
        return int(found.metadata.num_rows)


def _check_augmented(out: Path, manifest: dict[str, Any], check: _Check) -> None:
    check.value(manifest, "config_hash", "$", str, "text")
    check.value(manifest, "seed", "$", int, "a whole number")
    check.count(manifest, "trajectories")
    check.count(manifest, "variants")
    for key in ("schema_version", "unverified_skipped", "unverified_rows"):
        if key in manifest:
            check.count(manifest, key)
    check.optional(manifest, "config", dict, "an object")
    for i, rule in enumerate(check.optional(manifest, "rules", list, "a list") or ()):
        if not isinstance(rule, dict):
            raise check.refuse(f"$.rules[{i}]", f"expected an object, found {_shown(rule)}")
        for key in ("name", "version"):
            check.value(rule, key, f"$.rules[{i}]", str, "text")
    asked = check.optional(manifest, "variants_per_trajectory", dict, "an object")
    if asked is not None:
        check.counts(asked, "$.variants_per_trajectory", ("asked", "short"))
    check.counts(check.optional(manifest, "engine", dict, "an object") or {}, "$.engine")
    check.texts(check.optional(manifest, "notes", list, "a list"), "$.notes")
    rows = check.value(manifest, "rows", "$", dict, "an object of rows per split and in all")
    check.counts(rows, "$.rows", ("total",))
    files = check.value(manifest, "files", "$", dict, "an object of files and their SHA-256")
    for name in TOP_FILES:
        if name not in files:
            raise check.refuse("$.files", f"does not list {name}, which every dataset has")
    for name in files:
        check.value(files, name, "$.files", str, "a SHA-256")
    shards = check.shards(manifest, "$", ("rows",))
    check_intact(out, manifest)
    held: dict[str, int] = {}
    for i, entry in enumerate(shards):
        rows_in = _footer_rows(out / entry["path"])
        if entry["rows"] != rows_in:
            raise check.refuse(
                f"$.shards[{i}].rows",
                f"says {entry['rows']:,} rows, but {entry['path']} holds {rows_in:,} (its "
                "Parquet footer)",
            )
        split = Path(entry["path"]).parent.name
        held[split] = held.get(split, 0) + rows_in
    for split in sorted({*held, *rows} - {"total"}):
        if rows.get(split, 0) != held.get(split, 0):
            raise check.refuse(
                _path("$.rows", split),
                f"{_says(rows, split)}, but the shards of split {split!r} hold "
                f"{held.get(split, 0):,} (their Parquet footers)",
            )
    if rows["total"] != sum(held.values()):
        raise check.refuse(
            "$.rows.total",
            f"says {rows['total']:,} rows, but the shards hold {sum(held.values()):,} (their "
            "Parquet footers)",
        )
    _check_against_marks(out, manifest, shards, check)
    variants = _footer_rows(out / VARIANTS)
    if manifest["variants"] != variants:
        raise check.refuse(
            "$.variants",
            f"says {manifest['variants']:,} variants, but {VARIANTS} holds {variants:,} (its "
            "Parquet footer)",
        )


def _check_against_marks(
    out: Path, manifest: dict[str, Any], shards: list[dict[str, Any]], check: _Check
) -> None:
    """The counts no footer holds (trajectories read, unverified ones skipped, trajectories
    under fewer variants than asked) against the sums of the batches' completion marks,
    which the run summed into the manifest: where the marks are all there (they list the
    manifest's shards, and read as hsa writes them), else there is nothing to hold them to."""
    marks = []
    for path in sorted((out / STATE / "done").glob("*.json")):
        try:
            mark = json.loads(path.read_text("utf-8"))
            listed = [entry["path"] for entry in mark["shards"]]
            counts = (mark["stats"]["trajectories"], mark["unverified"], mark["short"])
        except (OSError, ValueError, KeyError, TypeError):
            return  # a mark that is not one of ours: the rerun redoes its batch
        if not all(type(n) is int for n in counts):
            return
        marks.append((listed, counts))
    if sorted(p for listed, _ in marks for p in listed) != sorted(e["path"] for e in shards):
        return  # marks missing or of other shards (a rerun finds that itself)
    said = {
        "$.trajectories": (manifest["trajectories"], "trajectories read"),
        "$.unverified_skipped": (manifest.get("unverified_skipped"), "unverified ones skipped"),
        "$.variants_per_trajectory.short": (
            (manifest.get("variants_per_trajectory") or {}).get("short"),
            "trajectories under fewer variants than asked",
        ),
    }
    for (where, (found, what)), summed in zip(
        said.items(), (sum(c[i] for _, c in marks) for i in range(3)), strict=True
    ):
        if found is not None and found != summed:
            raise check.refuse(
                where,
                f"says {found:,} {what}, but the batches' completion marks "
                f"({STATE}/done/) count {summed:,}",
            )


def _says(rows: Mapping[str, Any], split: str) -> str:
    return f"says {rows[split]:,} rows" if split in rows else "missing"


#: what a teacher manifest's counts count
_ROWS = {"rows": "rows", "verified": "verified rows"}


def changed_teacher_shard(shard: Path) -> DatasetError:
    """The error for a teacher's shard whose SHA-256 is not the one its manifest lists."""
    return DatasetError(
        "changed since the teacher wrote it (its SHA-256 is not the one the manifest lists): "
        "rerun the hsa teach command that wrote it to restore it",
        file=str(shard),
    )


def _check_teacher(out: Path, manifest: dict[str, Any], check: _Check) -> None:
    check.value(manifest, "config_hash", "$", str, "text")
    check.value(manifest, "seed", "$", int, "a whole number")
    check.value(manifest, "teacher", "$", str, "text")
    rows = check.count(manifest, "rows")
    verified = check.count(manifest, "verified")
    if "schema_version" in manifest:
        check.count(manifest, "schema_version")
    check.optional(manifest, "config", dict, "an object")
    versions = check.optional(manifest, "rule_versions", dict, "an object") or {}
    for name in versions:
        check.value(versions, name, "$.rule_versions", str, "text")
    asked = check.optional(manifest, "variants_per_task", dict, "an object")
    if asked is not None:
        check.counts(asked, "$.variants_per_task", ("asked", "short"))
    check.texts(check.optional(manifest, "left_out", list, "a list"), "$.left_out")
    splits = check.value(manifest, "splits", "$", dict, "an object of splits")
    totals = {"rows": 0, "verified": 0}
    for name, split in splits.items():
        at = _path("$.splits", name)
        if not isinstance(split, dict):
            raise check.refuse(at, f"expected an object, found {_shown(split)}")
        sums = {key: check.count(split, key, at) for key in totals}
        held = {key: 0 for key in totals}
        for i, entry in enumerate(check.shards(split, at, ("rows", "verified"))):
            where = f"{at}.shards[{i}]"
            shard = out / entry["path"]
            if shard.is_file() and sha256_file(shard) != entry["sha256"]:
                raise changed_teacher_shard(shard)
            rows_in = _footer_rows(shard)
            if entry["rows"] != rows_in:
                raise check.refuse(
                    f"{where}.rows",
                    f"says {entry['rows']:,} rows, but {entry['path']} holds {rows_in:,} (its "
                    "Parquet footer)",
                )
            if entry["verified"] > rows_in:
                raise check.refuse(
                    f"{where}.verified",
                    f"says {entry['verified']:,} verified rows of {rows_in:,}",
                )
            held["rows"] += rows_in
            held["verified"] += entry["verified"]
        for key in totals:
            if sums[key] != held[key]:
                raise check.refuse(
                    f"{at}.{key}",
                    f"says {sums[key]:,} {_ROWS[key]}, but its shards hold {held[key]:,}",
                )
            totals[key] += held[key]
    for key, found in (("rows", rows), ("verified", verified)):
        if found != totals[key]:
            raise check.refuse(
                f"$.{key}",
                f"says {found:,} {_ROWS[key]}, but the splits' shards hold {totals[key]:,}",
            )


def mark_path(out: Path, batch: int) -> Path:
    return out / STATE / "done" / f"{batch:05d}.json"


def staged(out: Path, path: str) -> Path | None:
    """Where an unfinished run keeps the shard that the finished dataset holds at ``path``
    (``data/{split}/NAME``, as completion marks and the manifest list it):
    ``out/.hsa/staging/data/{split}/NAME``, in a copy of the ``data/`` folder that ``publish``
    moves whole; None for a path of another form."""
    parts = Path(path).parts
    if len(parts) != 3 or parts[0] != DATA:
        return None
    return out / STATE / STAGING / path


def staged_file(out: Path, name: str) -> Path | None:
    """Where an unfinished run keeps the file that the finished dataset holds at ``name``, one
    of the files of its top (``README.md``, ``variants.parquet``, ``plots/NAME``, as a
    manifest's ``files`` lists them): ``out/.hsa/staging/top-level/NAME``; None for a name
    that leaves the folder (``..``, an absolute path)."""
    parts = Path(name).parts
    if not parts or Path(name).is_absolute() or any(p in ("", ".", "..") for p in parts):
        return None
    return out / STATE / STAGING / TOP / name


def placed(out: Path, path: str) -> Path:
    """The file of the shard listed as ``path``: the staged one while there is one (``staged``;
    ``publish`` moves it), else ``out / path``."""
    found = staged(out, path)
    return found if found is not None and found.exists() else out / path


def publish(out: Path, files: Iterable[str] = ()) -> None:
    """Move the staged ``files`` (``staged_file``) to the top of ``out``, the card first, then
    the staged ``data/`` folder, which holds the staged shards at the places their completion
    marks list (``staged``), into place in one rename, so readers find all of its rows or
    none; make the moves durable, and remove the staging folder: what a run does once every
    batch, its variants file and its card are written, just before its manifest. From the
    card on, ``datasets`` reads the files its configs name (``data/``),
    not a lone variants file or plot. A file in place already (moved by a run stopped during
    the moves) stays, so a rerun finishes them; a ``data/`` in place already stays too, or,
    when the rerun redid a shard of it, joins the staged one first (out of readers' sight)."""
    tree = out / STATE / STAGING / DATA
    if tree.is_dir():
        _take_back(out)
    moves = []
    for name in sorted(files, key=lambda n: (n != "README.md", n)):
        source = staged_file(out, name)
        if source is not None:
            moves.append((source, out / name))
    moves.append((tree, out / DATA))
    _move(moves, "into place")
    discard_staging(out)


def unpublish(out: Path, shards: Collection[Any], files: Iterable[str] = ()) -> None:
    """Move a finished dataset's ``data/`` folder back to staging in one rename, then its
    other ``files`` but the card (``publish`` in reverse), durably: a dataset being repaired
    offers its readers all of its rows until that rename and none from then on, nor its
    variants file for rows. The card stays: ``claim`` moves it once the manifest is gone
    (with the card there, ``datasets`` reads ``data/`` alone, not the manifest). ``data/``
    holds the ``shards`` its manifest lists and no other (``refuse_strays``), and may hold
    files hsa did not write (a user's notes), which move with it and come back with it (or
    alone, ``discard_staging``); where the manifest lists none (its list edited: no stray
    was refused), ``data/`` stays, and the run's finish names any stray there."""
    if shards:
        _take_back(out)
    moves = []
    for name in sorted(map(str, files)):
        target = staged_file(out, name)
        if target is not None and name != CARD:
            moves.append((out / name, target))
    _move(moves, "back to staging for the repair")


def _take_back(out: Path) -> None:
    """Move the folder ``out/data/`` to its staged copy (``staged``) in one rename; where that
    copy is there already (a run stopped once its ``data/`` had moved, whose rerun redid a
    shard), ``data/`` goes aside into staging in one rename, and its files the copy lacks join
    it there: either way it leaves readers' sight whole."""
    data, tree = out / DATA, out / STATE / STAGING / DATA
    aside = out / STATE / STAGING / ASIDE
    _join(aside, tree)  # (what a run stopped here left, its shards redone meanwhile)
    if not data.is_dir():
        return
    if not tree.exists():
        _move([(data, tree)], "back to staging")
        return
    _move([(data, aside)], "back to staging")
    _join(aside, tree)


def _join(folder: Path, tree: Path, *, ours: bool = True) -> None:
    """Move the files of ``folder`` that ``tree`` lacks into it, at their relative paths
    (only those hsa did not write when not ``ours``), and remove ``folder``: the rest are
    hsa's shards that ``tree`` holds as redone. A file hsa did not write (``_ours``) that
    ``tree`` holds too, with other bytes, is refused rather than lost."""
    if not folder.is_dir():
        return
    moves = []
    for path in sorted(p for p in folder.rglob("*") if p.is_file()):
        relative = path.relative_to(folder)
        target = tree / relative
        if _ours(relative):
            if ours and not target.exists():
                moves.append((path, target))
        elif not target.exists():
            moves.append((path, target))
        elif not _same_bytes(path, target):
            raise DatasetError(
                f"was not written by hsa, and {target} differs from it: keep one of the two "
                "and remove the other, then rerun",
                file=str(path),
            )
    _move(moves, f"to {tree}")
    shutil.rmtree(folder, ignore_errors=True)


#: the name of a shard hsa writes into a ``data/`` folder as ``{split}/NAME`` (or of a
#: killed run's temporary of one)
_SHARD = re.compile(r"\.?part-[0-9]{5,}\.parquet(\.[0-9]+\.tmp)?")


def _ours(path: Path) -> bool:
    """Whether ``path``, relative to a ``data/`` folder, is a shard hsa writes there."""
    return len(path.parts) == 2 and _SHARD.fullmatch(path.name) is not None


def _same_bytes(one: Path, other: Path) -> bool:
    try:
        return other.is_file() and sha256_file(one) == sha256_file(other)
    except OSError:
        return False


def discard_staging(out: Path) -> None:
    """Remove the staging folder of the run filling ``out`` (``STAGING``: its shards, the
    files of its finish), but not the files hsa did not write that a repair moved there with
    ``data/`` (``unpublish``): those go back to ``out/data/``, at their places there."""
    staging = out / STATE / STAGING
    for folder in (ASIDE, DATA):
        _join(staging / folder, out / DATA, ours=False)
    shutil.rmtree(staging, ignore_errors=True)


def _move(moves: Iterable[tuple[Path, Path]], where: str) -> None:
    """Rename each ``(source, target)`` whose source is there, a file or a folder (in one
    file system: each is at one place or the other, whole), then make the renames durable."""
    folders = set()
    for source, target in moves:
        if not (source.is_file() or source.is_dir()):
            continue
        what = "folder" if source.is_dir() else "file"
        try:
            target.parent.mkdir(parents=True, exist_ok=True)
            os.replace(source, target)
        except OSError as exc:
            raise DatasetError(
                f"cannot move the {what} {where} ({target}): {exc.strerror or exc}",
                file=str(source),
            ) from None
        folders |= {source.parent, target.parent}
    for folder in sorted(folders):
        files.sync_directory(folder)


def done(out: Path, batch: int) -> dict[str, Any] | None:
    """The completion mark of ``batch`` if it and every shard it lists are intact (staged or
    in place: ``placed``)."""
    path = mark_path(out, batch)
    if not path.is_file():
        return None
    try:
        mark = json.loads(path.read_text("utf-8"))
        for entry in mark["shards"]:
            shard = placed(out, entry["path"])
            if not shard.is_file() or sha256_file(shard) != entry["sha256"]:
                return None
    except (OSError, ValueError, KeyError, TypeError):
        return None  # a mark that is not one of ours marks nothing done
    return mark


def mark(out: Path, batch: int, content: Mapping[str, Any]) -> None:
    write_json(mark_path(out, batch), dict(content))


def listed_shards(root: Path, manifest: Mapping[str, Any], split: str | None = None) -> list[Path]:
    """The shards a teacher manifest lists, split by split (only ``split``'s when given;
    ``DatasetError`` naming the splits there are when it has none)."""
    splits = manifest.get("splits") or {}
    if split is not None and split not in splits:
        raise DatasetError(
            f"no split {split!r}; the teacher output has {', '.join(sorted(splits)) or 'none'}",
            file=str(root),
        )
    chosen = sorted(splits) if split is None else [split]
    return [root / entry["path"] for name in chosen for entry in splits[name].get("shards", [])]
