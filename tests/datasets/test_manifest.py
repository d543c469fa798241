"""A finished dataset's manifest checked against its shards (``check_finished``), for both
kinds, and what a rerun's claim of a folder does with one that disagrees (it repairs it)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from hsa.datasets import manifest as mf
from hsa.datasets.shards import sha256_file, write_shard
from hsa.errors import DatasetError

#: rows per split of the small datasets below
ROWS = {"dev": 2, "train": 3}


def table(rows: int) -> pa.Table:
    return pa.table({"id": [f"r{i}" for i in range(rows)]})


def read(out: Path) -> dict[str, Any]:
    return json.loads((out / mf.MANIFEST).read_text("utf-8"))


def edit(out: Path, change: Callable[[dict[str, Any]], Any]) -> None:
    manifest = read(out)
    change(manifest)
    (out / mf.MANIFEST).write_text(json.dumps(manifest), "utf-8")


@pytest.fixture
def augmented(tmp_path: Path) -> Path:
    """A finished augmented dataset, as the augment job lays it out: two splits' shards, a
    variants file of 4 variants, a card."""
    out = tmp_path / "augmented"
    shards = []
    for split, rows in ROWS.items():
        path = f"data/{split}/part-00000.parquet"
        shards.append({"path": path, **write_shard(out / path, table(rows))})
    write_shard(out / "variants.parquet", table(4))
    (out / "README.md").write_text("# a card\n", "utf-8")
    files = {name: sha256_file(out / name) for name in ("README.md", "variants.parquet")}
    mf.write_json(
        out / mf.MANIFEST,
        {
            "kind": mf.KIND,
            "schema_version": 2,
            "config": {"seed": 0},
            "config_hash": mf.config_hash({"seed": 0}),
            "seed": 0,
            "rules": [{"name": "tools.rename", "version": "4"}],
            "variants": 4,
            "rows": {"total": sum(ROWS.values()), **ROWS},
            "trajectories": 2,
            "unverified_skipped": 0,
            "unverified_rows": 0,
            "variants_per_trajectory": {"asked": 2, "short": 0},
            "engine": {"rows": 5, "rows_exact": 0},
            "notes": ["a note"],
            "shards": shards,
            "files": files,
        },
    )
    return out


@pytest.fixture
def taught(tmp_path: Path) -> Path:
    """Finished ``hsa teach`` output: two splits of one shard each, one row rejected."""
    out = tmp_path / "taught"
    splits = {}
    for split, rows in ROWS.items():
        path = f"data/{split}/part-00000.parquet"
        entry = {"path": path, "verified": rows - 1, **write_shard(out / path, table(rows))}
        splits[split] = {"rows": rows, "verified": rows - 1, "shards": [entry]}
    mf.write_json(
        out / mf.MANIFEST,
        {
            "kind": mf.TEACHER_KIND,
            "schema_version": 2,
            "config": {},
            "config_hash": "ff35d772",
            "seed": 0,
            "teacher": "oracle/hsa-oracle",
            "rule_versions": {"tools.rename": "4"},
            "rows": sum(ROWS.values()),
            "verified": sum(ROWS.values()) - 2,
            "splits": splits,
            "left_out": ["a note"],
        },
    )
    return out


def test_manifests_as_written_are_taken(augmented: Path, taught: Path) -> None:
    mf.check_finished(augmented, read(augmented))
    mf.check_finished(taught, read(taught), mf.TEACHER_KIND)


def _drop(key: str) -> Callable[[dict[str, Any]], Any]:
    return lambda m: m.pop(key)


def _rows(m: dict[str, Any]) -> None:  # QA's repro: every number changed
    m["rows"].update(train=999, total=5)
    m["trajectories"] = 7


AUGMENTED_EDITS = {
    "rows of a split": (lambda m: m["rows"].update(train=999), "$.rows.train"),
    "rows in all": (lambda m: m["rows"].update(total=4), "$.rows.total"),
    "every count": (_rows, "$.rows.train"),
    "a split without shards": (lambda m: m["rows"].update(test=1), "$.rows.test"),
    "a split left out": (lambda m: m["rows"].pop("dev"), "$.rows.dev"),
    "rows a list": (lambda m: m.update(rows=[1, 2]), "$.rows"),
    "rows in all missing": (lambda m: m["rows"].pop("total"), "$.rows.total"),
    "rows of a split as text": (lambda m: m["rows"].update(dev="2"), "$.rows.dev"),
    "a shard's rows": (lambda m: m["shards"][1].update(rows=4), "$.shards[1].rows"),
    "shards not a list": (lambda m: m.update(shards=5), "$.shards"),
    "a shard without its path": (lambda m: m["shards"][0].pop("path"), "$.shards[0].path"),
    "trajectories as text": (lambda m: m.update(trajectories="abc"), "$.trajectories"),
    "trajectories below 0": (lambda m: m.update(trajectories=-1), "$.trajectories"),
    "trajectories true": (lambda m: m.update(trajectories=True), "$.trajectories"),
    "variants null": (lambda m: m.update(variants=None), "$.variants"),
    "variants miscounted": (lambda m: m.update(variants=5), "$.variants"),
    "seed a list": (lambda m: m.update(seed=[1]), "$.seed"),
    "no files": (_drop("files"), "$.files"),
    "files without the card": (lambda m: m["files"].pop("README.md"), "$.files"),
    "files a list": (lambda m: m.update(files=["README.md"]), "$.files"),
    "no trajectories": (_drop("trajectories"), "$.trajectories"),
    "a rule without its version": (lambda m: m["rules"][0].pop("version"), "$.rules[0].version"),
    "engine counts as text": (lambda m: m["engine"].update(rows="5"), "$.engine.rows"),
    "short null": (
        lambda m: m["variants_per_trajectory"].update(short=None),
        "$.variants_per_trajectory.short",
    ),
    "a note a number": (lambda m: m["notes"].append(3), "$.notes[1]"),
    "kind a teacher's": (lambda m: m.update(kind=mf.TEACHER_KIND), "$.kind"),
}


@pytest.mark.parametrize("name", AUGMENTED_EDITS)
def test_an_edited_augmented_manifest_is_refused_naming_the_key(augmented: Path, name: str):
    change, where = AUGMENTED_EDITS[name]
    edit(augmented, change)
    with pytest.raises(DatasetError) as raised:
        mf.check_finished(augmented, read(augmented))
    assert raised.value.file == str(augmented / mf.MANIFEST)
    assert raised.value.where == where
    assert "rerun the job that wrote" in raised.value.message


def _marks(out: Path) -> None:
    """The batches' completion marks, as the augment job writes them: one batch a split."""
    for batch, entry in enumerate(read(out)["shards"]):
        mark = {"batch": batch, "shards": [entry], "stats": {"trajectories": 1}}
        mf.write_json(mf.mark_path(out, batch), {**mark, "unverified": batch, "short": 1})
    edit(
        out,
        lambda m: m.update(unverified_skipped=1) or m["variants_per_trajectory"].update(short=2),
    )


@pytest.mark.parametrize(
    ("change", "where"),
    [
        (lambda m: m.update(trajectories=7), "$.trajectories"),
        (lambda m: m.update(unverified_skipped=0), "$.unverified_skipped"),
        (lambda m: m["variants_per_trajectory"].update(short=0), "$.variants_per_trajectory.short"),
    ],
)
def test_counts_no_footer_holds_are_the_completion_marks_sums(augmented: Path, change, where):
    # trajectories edited alone was printed as it was, since only rows were held to footers
    _marks(augmented)
    mf.check_finished(augmented, read(augmented))  # as written
    edit(augmented, change)
    with pytest.raises(DatasetError, match="completion marks") as raised:
        mf.check_finished(augmented, read(augmented))
    assert raised.value.where == where
    mf.mark_path(augmented, 1).unlink()  # marks not all there: nothing to hold them to
    mf.check_finished(augmented, read(augmented))


def test_a_kind_edited_into_the_other_is_said_so(augmented: Path, taught: Path) -> None:
    """``hsa inspect`` reads a manifest as its ``kind`` says: the other kind's keys are
    named, not the first key that kind lacks."""
    edit(augmented, lambda m: m.update(kind=mf.TEACHER_KIND))
    with pytest.raises(DatasetError, match="lists its shards in 'shards'") as raised:
        mf.check_finished(augmented, read(augmented), mf.TEACHER_KIND)
    assert raised.value.where == "$.kind"
    edit(taught, lambda m: m.update(kind=mf.KIND))
    with pytest.raises(DatasetError, match="lists its shards in 'splits'"):
        mf.check_finished(taught, read(taught))


def test_the_counts_are_the_shards_own(augmented: Path) -> None:
    edit(augmented, lambda m: m["rows"].update(train=999))
    with pytest.raises(DatasetError) as raised:
        mf.check_finished(augmented, read(augmented))
    assert "says 999 rows, but the shards of split 'train' hold 3" in raised.value.message


def test_a_changed_shard_is_named_before_counts_are_read(augmented: Path) -> None:
    shard = augmented / "data/train/part-00000.parquet"
    shard.write_bytes(shard.read_bytes()[:-5])  # its footer cut: counts cannot be read
    with pytest.raises(DatasetError, match=r"changed since it was written \(data/train/"):
        mf.check_finished(augmented, read(augmented))


TEACHER_EDITS = {
    "rows": (lambda m: m.update(rows=99), "$.rows"),
    "verified": (lambda m: m.update(verified=5), "$.verified"),
    "rows a dataset's": (lambda m: m.update(rows={"total": 5}), "$.rows"),
    "verified null": (lambda m: m.update(verified=None), "$.verified"),
    "rows of a split": (lambda m: m["splits"]["dev"].update(rows=3), "$.splits.dev.rows"),
    "verified of a split": (
        lambda m: m["splits"]["dev"].update(verified=0),
        "$.splits.dev.verified",
    ),
    "a shard's rows": (
        lambda m: m["splits"]["train"]["shards"][0].update(rows=4),
        "$.splits.train.shards[0].rows",
    ),
    "more verified than rows": (
        lambda m: m["splits"]["train"]["shards"][0].update(verified=4),
        "$.splits.train.shards[0].verified",
    ),
    "a split a number": (lambda m: m["splits"].update(dev=7), "$.splits.dev"),
    "no splits": (_drop("splits"), "$.splits"),
    "seed a list": (lambda m: m.update(seed=[1]), "$.seed"),
    "teacher a number": (lambda m: m.update(teacher=1), "$.teacher"),
    "rule versions a list": (lambda m: m.update(rule_versions=["a"]), "$.rule_versions"),
    "kind a dataset's": (lambda m: m.update(kind=mf.KIND), "$.kind"),
}


@pytest.mark.parametrize("name", TEACHER_EDITS)
def test_an_edited_teacher_manifest_is_refused_naming_the_key(taught: Path, name: str):
    change, where = TEACHER_EDITS[name]
    edit(taught, change)
    with pytest.raises(DatasetError) as raised:
        mf.check_finished(taught, read(taught), mf.TEACHER_KIND)
    assert raised.value.file == str(taught / mf.MANIFEST)
    assert raised.value.where == where


def test_a_missing_teacher_shard_is_named(taught: Path) -> None:
    (taught / "data/dev/part-00000.parquet").unlink()
    with pytest.raises(DatasetError) as raised:
        mf.check_finished(taught, read(taught), mf.TEACHER_KIND)
    assert raised.value.file == str(taught / "data/dev/part-00000.parquet")


def test_a_claim_takes_a_dataset_as_written_for_finished(augmented: Path) -> None:
    assert mf.claim(augmented, read(augmented)["config_hash"])


@pytest.mark.parametrize("name", ["every count", "rows a list", "no files", "shards not a list"])
def test_a_claim_of_an_edited_manifest_makes_the_run_write_it_again(augmented: Path, name: str):
    """As for a changed shard: the dataset is unfinished again, its files wait in staging
    (no reader takes them for the dataset meanwhile), and the run writes its manifest again
    from the completion marks (the augment job's tests compare the bytes)."""
    digest = read(augmented)["config_hash"]
    change, _ = AUGMENTED_EDITS[name]
    edit(augmented, change)
    assert not mf.claim(augmented, digest)
    assert not (augmented / mf.MANIFEST).exists()
    assert json.loads((augmented / ".hsa/run.json").read_text())["config_hash"] == digest
    if name != "shards not a list":  # (which lists none to move: in place, the marks find them)
        assert not list(augmented.glob("data/*/*.parquet"))
        assert (augmented / ".hsa/staging/data/train/part-00000.parquet").is_file()
    # the card goes too, listed or not: it names data/ to `datasets`
    assert not (augmented / "README.md").exists()
    assert (augmented / ".hsa/staging/top-level/README.md").is_file()


# -- moving a finished run's files where readers look, and back for a repair


def rows_in_data(out: Path, shards: str = "data/*/*.parquet") -> int:
    """The rows readers of ``data/*/*.parquet`` find (Polars, DuckDB, the card's configs)."""
    import pyarrow.parquet as pq

    return sum(pq.read_metadata(f).num_rows for f in out.glob(shards))


def staged_run(out: Path) -> list[str]:
    """A run's finish written, nothing moved yet: two shards a split, a card, a variants
    file, a plot in staging. Its files (as a manifest lists them)."""
    for split, rows in ROWS.items():
        for part in range(2):
            staged = mf.staged(out, f"data/{split}/part-{part:05d}.parquet")
            assert staged is not None
            write_shard(staged, table(rows))
    files = ["README.md", "plots/chart.png", "variants.parquet"]
    for name in files:
        staged = mf.staged_file(out, name)
        assert staged is not None
        staged.parent.mkdir(parents=True, exist_ok=True)
        staged.write_bytes(name.encode())
    return files


def stopping_after(count: int, monkeypatch) -> list[str]:
    """Make ``os.replace`` stop the process (as a kill would, or a Ctrl-C) once it has made
    ``count`` renames; the targets of those it made."""
    import os

    real, made = os.replace, []

    def replace(source, target) -> None:
        if len(made) == count:
            raise KeyboardInterrupt
        made.append(Path(target).name)
        real(source, target)

    monkeypatch.setattr(os, "replace", replace)
    return made


def test_a_publish_stopped_at_any_rename_offers_readers_every_row_or_none(
    tmp_path: Path, monkeypatch
) -> None:
    # The shards moved into data/ one at a time: a kill part way left readers some of them,
    # and no manifest to say so. Now data/ moves whole, after the card, and a rerun of the
    # publish (a rerun of the run) finishes the moves.
    total = 2 * sum(ROWS.values())
    count = 0
    while True:
        out = tmp_path / f"out-{count}"
        files = staged_run(out)
        with monkeypatch.context() as patched:
            made = stopping_after(count, patched)
            try:
                mf.publish(out, files)
            except KeyboardInterrupt:
                pass
            else:
                break
        assert rows_in_data(out) in (0, total), f"stopped after {made}"
        assert rows_in_data(out) == 0 or made[-1] == "data"  # (the last move)
        mf.publish(out, files)
        assert rows_in_data(out) == total and not (out / mf.STATE / mf.STAGING).exists()
        assert all((out / name).read_bytes() == name.encode() for name in files)
        count += 1
    assert made == ["README.md", "chart.png", "variants.parquet", "data"] and count == 4


#: a card as the augment job writes it, as far as ``datasets`` reads it: its configs name the
#: shards under data/ (``datasets`` reads what they name, and nothing else at the top)
CARD = "".join(
    [
        "---\nconfigs:\n  - config_name: default\n    data_files:\n",
        *(f"      - split: {s}\n        path: data/{s}/*.parquet\n" for s in sorted(ROWS)),
        "---\n# an edited card\n",
    ]
)


def rows_loaded(out: Path, cache: Path) -> int:
    """The rows ``datasets.load_dataset(out)`` offers: 0 where it refuses the folder."""
    import datasets

    try:
        loaded = datasets.load_dataset(str(out), cache_dir=str(cache))
    except (FileNotFoundError, ValueError) as exc:  # (DataFilesNotFoundError, EmptyDataset...)
        assert "data" in str(exc).lower(), exc
        return 0
    return sum(split.num_rows for split in loaded.values())


def test_a_repair_stopped_at_any_rename_offers_readers_every_row_or_none(
    tmp_path: Path, augmented: Path, monkeypatch
) -> None:
    # The shards of a finished dataset being repaired went back to staging one at a time, its
    # manifest kept: a kill part way left a manifest saying 5 rows beside some of them. And
    # the card went to staging before the manifest went: stopped between the two, datasets
    # read the manifest, alone at the top, as a dataset of one row.
    import shutil

    digest, total = read(augmented)["config_hash"], sum(ROWS.values())
    (augmented / "README.md").write_text(CARD, "utf-8")  # (edited: to be redone)
    count = 0
    while True:
        out = tmp_path / f"out-{count}"
        shutil.copytree(augmented, out)
        with monkeypatch.context() as patched:
            made = stopping_after(count, patched)
            try:
                mf.claim(out, digest)
            except KeyboardInterrupt:
                pass
            else:
                break
        assert rows_in_data(out) in (0, total), f"stopped after {made}"
        assert rows_loaded(out, tmp_path / f"cache-{count}") in (0, total), made
        # the manifest goes after the rows, the card after the manifest
        assert (out / mf.MANIFEST).is_file() or not rows_in_data(out)
        assert (out / "README.md").is_file(), made
        assert not mf.claim(out, digest)  # the rerun: the rest goes to staging
        assert rows_in_data(out) == 0 and not (out / mf.MANIFEST).exists()
        assert not (out / "variants.parquet").exists()
        # (stopped once the manifest had gone, the card stays: the run's finish replaces it)
        assert (out / "README.md").exists() == (made[-1:] == ["run.json"])
        assert rows_in_data(out, f"{mf.STATE}/{mf.STAGING}/**/part-*.parquet") == total
        count += 1
    assert made == ["data", "variants.parquet", "run.json", "README.md"] and count == 4
    assert rows_loaded(out, tmp_path / "cache") == 0


def test_a_file_hsa_did_not_write_in_data_outlives_a_failed_repair(
    tmp_path: Path, augmented: Path
) -> None:
    # A repair moves data/ to staging whole, a user's notes with it; the repair stopped on an
    # error, and another config's run, in its place, removed the staging folder: the notes too
    digest = read(augmented)["config_hash"]
    (augmented / "data" / "NOTES.md").write_text("notes\n", "utf-8")
    (augmented / "data" / "train" / "notes.txt").write_text("more\n", "utf-8")
    (augmented / "data" / "train" / "part-00000.parquet").unlink()
    assert not mf.claim(augmented, digest)  # the repair: data/ goes to staging whole
    assert not (augmented / "data").exists()
    mf.fail(augmented, "a rule broke")
    # the staged shard, the marks of the run, its state: gone; the notes: back in data/
    assert not mf.claim(augmented, mf.config_hash({"seed": 1}))
    assert (augmented / "data" / "NOTES.md").read_text("utf-8") == "notes\n"
    assert (augmented / "data" / "train" / "notes.txt").read_text("utf-8") == "more\n"
    assert not list(augmented.glob("data/*/part-*.parquet"))
    assert not (augmented / mf.STATE / mf.STAGING).exists()


@pytest.mark.parametrize("how", ["clear_state", "discard_staging", "publish"])
def test_a_file_hsa_did_not_write_in_staging_goes_back_to_data(tmp_path: Path, how: str):
    # what removes the staging folder keeps what a repair moved there that hsa did not write,
    # from data/ as from the folder data/ waits in aside (a run stopped while they join)
    out = tmp_path / "out"
    files = staged_run(out)
    staging = out / mf.STATE / mf.STAGING
    (staging / "data" / "NOTES.md").write_text("notes\n", "utf-8")
    (staging / mf.ASIDE / "dev").mkdir(parents=True)
    (staging / mf.ASIDE / "dev" / "notes.txt").write_text("more\n", "utf-8")
    (staging / mf.ASIDE / "dev" / "part-00001.parquet").write_bytes(b"a shard redone since")
    if how == "publish":
        mf.publish(out, files)
        assert rows_in_data(out) == 2 * sum(ROWS.values())
    else:
        getattr(mf, how)(out)
        assert not list(out.glob("data/*/*.parquet"))
    assert (out / "data" / "NOTES.md").read_text("utf-8") == "notes\n"
    assert (out / "data" / "dev" / "notes.txt").read_text("utf-8") == "more\n"
    assert not staging.exists()


def test_a_file_hsa_did_not_write_is_refused_rather_than_lost_to_another(tmp_path: Path):
    out = tmp_path / "out"
    staged_run(out)
    (out / mf.STATE / mf.STAGING / "data" / "NOTES.md").write_text("notes\n", "utf-8")
    (out / "data").mkdir()
    (out / "data" / "NOTES.md").write_text("other notes\n", "utf-8")
    with pytest.raises(DatasetError, match=r"NOTES\.md.*not written by hsa.*keep one"):
        mf.discard_staging(out)
    assert (out / mf.STATE / mf.STAGING / "data" / "NOTES.md").is_file()


def test_a_data_folder_in_place_joins_the_staged_one_before_it_moves(tmp_path: Path) -> None:
    # a run stopped once its data/ had moved, a shard of which was then damaged: the rerun
    # redid that shard in staging; data/ leaves readers' sight whole, and comes back complete
    out = tmp_path / "out"
    files = staged_run(out)
    mf.publish(out, [])  # (stopped just after data/ moved)
    (out / "data/dev/part-00001.parquet").write_bytes(b"damaged")
    redone = mf.staged(out, "data/dev/part-00001.parquet")
    assert redone is not None
    write_shard(redone, table(ROWS["dev"]))
    mf.publish(out, files)
    assert rows_in_data(out) == 2 * sum(ROWS.values())
    assert (
        sorted(p.name for p in out.glob("data/*/*"))
        == ["part-00000.parquet"] * 2 + ["part-00001.parquet"] * 2
    )
    assert not (out / mf.STATE / mf.STAGING).exists()


def test_a_builds_staged_teacher_shards_are_its_partial_data(tmp_path: Path) -> None:
    # a build killed during its teacher stage: the teacher's shards are staged under its own
    # state folder, and still keep another config out (its rows would be lost to it)
    out = tmp_path / "out"
    source = out / mf.STATE / "source"
    mf.write_json(source / mf.TEACHER_JOB, {"config": {}, "output_hash": "ff"})
    assert mf.partial_data(out) == []
    staged = mf.staged(source, "data/train/part-00000.parquet")
    assert staged is not None
    write_shard(staged, table(2))
    assert mf.partial_data(out) == [f"teacher output under {mf.STATE}/source/"]
