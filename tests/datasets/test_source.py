"""Trajectory readers: the teacher's ``verification`` carried as lineage, one meaning throughout;
a JSONL file read a chunk at a time into scratch on disk; the hsa job folders inside a folder
checked as each is when given alone."""

from __future__ import annotations

import gc
import json
import os
import shutil
import tempfile
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given
from hypothesis import strategies as st

from hsa.datasets import manifest as mf
from hsa.datasets.source import INPUT_SCHEMA, HarnessStore, conform, open_source, teacher_corpus
from hsa.errors import DatasetError, ImportFormatError
from hsa.harness.events import trajectories_to_table
from hsa.harness.importers import import_source, openai_jsonl, write_import
from hsa.pipelines import AugmentConfig, augment
from hsa.pipelines.teach import teach
from hsa.teachers.config import TeachConfig
from tests.datasets.conftest import recipe


def test_verification_is_carried_as_it_is(livestream_table):
    given = [json.dumps({"verified": True, "reason": "ok", "checks": {"score": True}})] * 2
    table = livestream_table.slice(0, 2).drop_columns(["verification"])
    table = table.append_column("verification", pa.array(given))
    assert conform(table, file="x").column("verification").to_pylist() == given


def test_a_reason_without_verification_becomes_its_json_object(tmp_path, livestream_table):
    table = livestream_table.slice(0, 4).drop_columns(["verification", "reason"])
    reasons = ["ok", None, 'score: "total" wrong', "ok"]
    table = table.append_column("reason", pa.array(reasons, pa.string()))
    pq.write_table(table, tmp_path / "a.parquet", row_group_size=1)  # one chunk per row
    rows, _ = open_source(tmp_path / "a.parquet").read(0, 4)
    found = rows.column("verification").to_pylist()
    assert found[1] is None
    assert [json.loads(v) for v in found if v] == [{"reason": r} for r in reasons if r]
    assert rows.schema == INPUT_SCHEMA


def test_no_lineage_gives_null_verification(livestream_table):
    lineage = ["split", "teacher", "verified", "reason", "verification"]
    table = conform(livestream_table.slice(0, 3).drop_columns(lineage), file="x")
    assert table.column("verification").null_count == 3


def _chats(path, rows, *, shops=None, ids=None):
    """``rows`` conversations; row i brings the tools of shop ``i % shops`` (its own without
    ``shops``), and its id is ``ids[i]`` where given."""
    with path.open("w", encoding="utf-8") as handle:
        for i in range(rows):
            shop = i if shops is None else i % shops
            tool = {
                "type": "function",
                "function": {
                    "name": f"find_{shop}",
                    "description": f"Find things in shop {shop}.",
                    "parameters": {"type": "object", "properties": {"q": {"type": "string"}}},
                },
            }
            call = {"id": "c", "type": "function", "function": {"name": f"find_{shop}"}}
            call["function"]["arguments"] = json.dumps({"q": f"item {i}"})
            messages = [
                {"role": "user", "content": f"find item {i}"},
                {"role": "assistant", "content": None, "tool_calls": [call]},
                {"role": "tool", "tool_call_id": "c", "content": "found"},
                {"role": "assistant", "content": "Here it is."},
            ]
            row = {"messages": messages, "tools": [tool]}
            if ids is not None:
                row["id"] = ids[i]
            handle.write(json.dumps(row) + "\n")
    return path


def test_a_jsonl_source_reads_as_the_importer_does_from_scratch_on_disk(tmp_path, monkeypatch):
    monkeypatch.setattr(openai_jsonl, "CHUNK", 3)  # several chunks
    path = _chats(tmp_path / "chats.jsonl", 10, shops=4)
    imported = import_source(path)
    source = open_source(path)
    expected = conform(trajectories_to_table(list(imported.trajectories)), file=str(path))
    rows, origins = source.read(0, 10)
    assert rows.equals(expected) and source.total == 10
    assert origins == [(str(path), 0, 10)]  # the file's rows, not the scratch file's
    assert source.read(4, 9)[0].equals(expected.slice(4, 5))
    assert source.harnesses == () and len(source.store) == 4
    for harness in imported.harnesses:
        assert source.store.by_id(harness.id) == harness
    assert source.store.by_id("chats-5") is None
    scratch = source.files[0].parent
    del source, rows
    gc.collect()
    assert not scratch.exists()  # the scratch folder goes with the source


def test_a_jsonl_file_of_one_harness_is_read_once_and_names_it_as_the_importer(
    tmp_path, monkeypatch
):
    monkeypatch.setattr(openai_jsonl, "CHUNK", 3)  # the lone harness is met in every chunk
    path = _chats(tmp_path / "chats.jsonl", 10, shops=1)
    imported = import_source(path)
    assert [h.id for h in imported.harnesses] == ["chats"]

    def no_first_pass(path):
        raise AssertionError("the file was read twice")

    monkeypatch.setattr(openai_jsonl, "_several_groups", no_first_pass)
    source = open_source(path)
    expected = conform(trajectories_to_table(list(imported.trajectories)), file=str(path))
    assert source.read(0, 10)[0].equals(expected)
    assert source.store.by_id("chats") == imported.harnesses[0]
    assert source.store.by_id("chats-1") is None and len(source.store) == 1
    assert source.store[next(iter(source.store))] == imported.harnesses[0]


def test_reading_a_jsonl_source_tells_its_progress_in_bytes(tmp_path, monkeypatch):
    monkeypatch.setattr(openai_jsonl, "CHUNK", 3)
    path = _chats(tmp_path / "chats.jsonl", 10, shops=4)
    with path.open("a") as handle:
        handle.write("\n\n")  # blank lines at the end: still read to the last byte
    lines = path.read_bytes().splitlines(keepends=True)
    size = path.stat().st_size
    told = []
    open_source(path, progress=lambda done, total: told.append((done, total)))
    # at the start, after each chunk of three rows (the bytes through its last row), at the end
    through = [sum(map(len, lines[:n])) for n in (3, 6, 9)]
    assert told == [(0, size), *((b, size) for b in through), (size, size)]


def test_a_repeated_row_id_in_another_chunk_names_both_lines(tmp_path, monkeypatch):
    monkeypatch.setattr(openai_jsonl, "CHUNK", 2)
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "tmp"))
    (tmp_path / "tmp").mkdir()
    path = _chats(tmp_path / "chats.jsonl", 6, ids=["a", "b", "c", "d", "b", "c"])
    with pytest.raises(DatasetError) as caught:
        open_source(path)
    assert caught.value.message == "row id 'b' is also used on line 2"
    assert caught.value.where == "line 5: $.id" and caught.value.file == str(path)
    assert not any((tmp_path / "tmp").iterdir())  # nothing of the failed read is left
    with pytest.raises(ImportFormatError, match="also used on line 2"):
        import_source(path)


def test_the_harness_store_keeps_few_harnesses_in_memory_and_finds_all(tmp_path, monkeypatch):
    monkeypatch.setattr(HarnessStore, "CACHED", 2)
    path = _chats(tmp_path / "chats.jsonl", 7)
    store = HarnessStore(tmp_path / "h.sqlite")
    chunks = list(openai_jsonl.read_openai_jsonl(path, groups=store))
    harnesses = [h for chunk in chunks for h in chunk.harnesses]
    assert [h.id for h in harnesses] == [f"chats-{i}" for i in range(1, 8)]
    assert len(store) == 7 and len(store._by_key) == 2
    for harness in reversed(harnesses):
        assert store.by_id(harness.id) == harness
    assert len(store._by_id) == 2
    assert [store[key] for key in store] == harnesses  # in the order they were met


@given(st.lists(st.sampled_from("abcdef"), max_size=12))
def test_first_repeat_is_the_earliest_second_use(ids):
    seen: dict[str, int] = {}
    expected = None
    for i, value in enumerate(ids):
        if value in seen:
            expected = (seen[value], i)
            break
        seen[value] = i
    assert openai_jsonl.first_repeat(pa.array(ids, pa.string())) == expected


@pytest.mark.parametrize("shops", [1, 4])
def test_an_import_folder_is_read_under_its_harness_folders(tmp_path, shops):
    path = _chats(tmp_path / "chats.jsonl", 6, shops=shops)
    imported = import_source(path)
    write_import(imported, tmp_path / "imported")
    expected = conform(trajectories_to_table(list(imported.trajectories)), file=str(path))
    for read in (tmp_path / "imported", tmp_path / "imported" / "trajectories.parquet"):
        source = open_source(read)
        assert source.read(0, 6)[0].equals(expected)
        for harness in imported.harnesses:
            assert source.store.by_id(harness.id) == harness
        assert source.store.by_id("nobody") is None
        assert source.store.by_id("../imported") is None
    before = open_source(tmp_path / "imported").fingerprint
    harness_id = imported.harnesses[-1].id
    folder = tmp_path / "imported" / (harness_id if shops > 1 else "")
    (folder / "tools.json").write_text((folder / "tools.json").read_text().replace("find", "seek"))
    assert open_source(tmp_path / "imported").fingerprint != before  # harnesses are input too


def test_an_import_is_one_input_however_its_source_was_named(tmp_path, monkeypatch):
    # (import.json records the source as typed, and went into the fingerprint whole: one
    # file imported as ./chats.jsonl and as /abs/chats.jsonl gave two datasets)
    path = _chats(tmp_path / "chats.jsonl", 6, shops=2)
    write_import(import_source(path), tmp_path / "absolute")
    monkeypatch.chdir(tmp_path)
    write_import(import_source("chats.jsonl"), tmp_path / "relative")
    markers = [
        json.loads((tmp_path / f / "import.json").read_text()) for f in ("absolute", "relative")
    ]
    assert markers[0]["source"] != markers[1]["source"]  # (the record keeps what was typed)
    fingerprint = open_source(tmp_path / "absolute").fingerprint
    assert open_source(tmp_path / "relative").fingerprint == fingerprint
    # its notes go on to the dataset: they are input
    markers[1]["notes"] = ["another note"]
    (tmp_path / "relative" / "import.json").write_text(json.dumps(markers[1]))
    source = open_source(tmp_path / "relative")
    assert source.notes == ("another note",) and source.fingerprint != fingerprint


def test_an_import_without_trajectories_says_so(external, tmp_path):
    bfcl = external / "bfcl" / "BFCL_v4_simple_python.json"
    write_import(import_source(bfcl), tmp_path / "imported")
    with pytest.raises(DatasetError, match=r"no trajectories\.parquet") as caught:
        open_source(tmp_path / "imported")
    assert caught.value.file == str(tmp_path / "imported")


def test_scratch_left_by_a_killed_run_is_removed(tmp_path, monkeypatch):
    from tests.datasets.test_lock import dead_pid

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "tmp"))
    (tmp_path / "tmp").mkdir()
    killed = tmp_path / "tmp" / f"hsa-source-{dead_pid()}-abc"
    running = tmp_path / "tmp" / f"hsa-source-{os.getppid()}-def"
    for folder in (killed, running):
        folder.mkdir()
        (folder / "trajectories.parquet").write_bytes(b"spill")
    source = open_source(_chats(tmp_path / "chats.jsonl", 3, shops=1))
    assert not killed.exists() and running.exists()
    assert source.files[0].parent.name.startswith(f"hsa-source-{os.getpid()}-")


def test_an_import_folder_says_what_its_import_said(tmp_path):
    path = _chats(tmp_path / "chats.jsonl", 3, shops=1)
    with path.open("a") as handle:  # a row with nothing to train on
        handle.write(json.dumps({"messages": [{"role": "user", "content": "hi"}]}) + "\n")
    imported = import_source(path)
    (note,) = imported.notes
    write_import(imported, tmp_path / "imported")
    assert open_source(tmp_path / "imported").notes == open_source(path).notes == (note,)


def test_a_trajectory_id_used_twice_is_refused_naming_both_rows(tmp_path, livestream_table):
    # rows are named by their trajectory's id: two would share every row name
    import pyarrow.parquet as pq

    folder = tmp_path / "in"
    folder.mkdir()
    pq.write_table(livestream_table.slice(0, 3), folder / "part-00000.parquet")
    pq.write_table(livestream_table.slice(2, 3), folder / "part-00001.parquet")
    with pytest.raises(DatasetError, match=r"is also the id of .*part-00000\.parquet, row 2") as e:
        open_source(folder)
    assert e.value.file == str(folder / "part-00001.parquet") and e.value.where == "row 0"


def test_a_source_opened_by_a_relative_path_reads_after_a_change_of_directory(
    tmp_path, livestream_table, monkeypatch
):
    # (a notebook's %cd between open_source and augment: the files were looked up there)
    folder = tmp_path / "in"
    folder.mkdir()
    pq.write_table(livestream_table.slice(0, 3), folder / "part-00000.parquet")
    pq.write_table(livestream_table.slice(3, 2), folder / "part-00001.parquet")
    monkeypatch.chdir(tmp_path)
    source = open_source("in")
    absolute = open_source(folder)
    monkeypatch.chdir(folder)  # where "in" is no more
    rows, origins = source.read(0, 5)
    assert rows.equals(absolute.read(0, 5)[0])
    assert source.unverified() == absolute.unverified()
    # named as given: what a message or the dataset says of the input is as before
    assert source.path == Path("in") and source.fingerprint == absolute.fingerprint
    assert origins == [("in/part-00000.parquet", 0, 3), ("in/part-00001.parquet", 0, 2)]
    report = augment(source, tmp_path / "out", AugmentConfig(recipe=recipe(), workers=1))
    assert report.trajectories == 5


def test_an_import_folder_opened_by_a_relative_path_loads_its_harnesses_after_a_change_of_directory(
    tmp_path, monkeypatch
):
    write_import(import_source(_chats(tmp_path / "chats.jsonl", 4, shops=2)), tmp_path / "imp")
    monkeypatch.chdir(tmp_path)
    source = open_source("imp")
    monkeypatch.chdir(tmp_path / "imp")
    assert source.read(0, 4)[0].num_rows == 4
    assert [source.store.by_id(f"chats-{i}").id for i in (1, 2)] == ["chats-1", "chats-2"]


def test_arguments_that_are_not_what_they_name_are_refused(tmp_path):
    path = tmp_path / "x.jsonl"
    path.write_text("")
    with pytest.raises(DatasetError, match=r"harness must be a Harness, got 'h.yaml'"):
        open_source(path, harness="h.yaml")  # type: ignore[arg-type]
    with pytest.raises(DatasetError, match="path must be a file or folder path, got int"):
        open_source(5)  # type: ignore[arg-type]


def test_a_jsonl_file_changed_while_read_is_refused_not_hashed_after(tmp_path, monkeypatch):
    # the file changes once its rows are read, before the run would hash it: the rows read and
    # the fingerprint would be of different content (a rerun took the new one as done)
    path = _chats(tmp_path / "chats.jsonl", 6, shops=2)
    read = openai_jsonl.read_openai_jsonl

    def then_changed(*args, **kwargs):
        yield from read(*args, **kwargs)
        _chats(tmp_path / "new.jsonl", 7, shops=2).replace(path)

    monkeypatch.setattr(openai_jsonl, "read_openai_jsonl", then_changed)
    scratch = set(os.listdir(tempfile.gettempdir()))
    with pytest.raises(DatasetError, match="changed while this run read it; run again") as exc:
        open_source(path)
    assert exc.value.file == str(path)
    assert set(os.listdir(tempfile.gettempdir())) <= scratch  # its scratch went
    monkeypatch.setattr(openai_jsonl, "read_openai_jsonl", read)
    assert open_source(path).total == 7  # read again: the new content, by its own hash


def test_a_parquet_shard_changed_after_it_was_hashed_is_refused_when_read(shards):
    source = open_source(shards)
    second = sorted(shards.glob("*.parquet"))[1]
    assert source.read(0, 30)[0].num_rows == 30  # both shards, as hashed
    table = pq.read_table(second)
    edited = table.set_column(0, "id", pa.array([f"edited-{i}" for i in range(table.num_rows)]))
    pq.write_table(edited, second)
    assert source.read(0, 24)[0].num_rows == 24  # the first shard's rows only: as hashed
    with pytest.raises(DatasetError, match="changed while this run read it") as exc:
        source.read(20, 30)
    assert exc.value.file == str(second)


@pytest.fixture(scope="module")
def taught(tmp_path_factory) -> Path:
    """A finished ``hsa teach`` folder: livestream oracle trajectories of six tasks."""
    out = tmp_path_factory.mktemp("taught") / "out"
    teach(TeachConfig(tasks=6, variants_per_task=2, shard_size=5), out)
    return out


def _unfinished(folder: Path) -> None:
    """Make the teach folder ``folder`` one whose run stopped before its end: its shards
    staged under ``.hsa/``, no manifest."""
    staging = folder / mf.STATE / mf.STAGING
    staging.mkdir(parents=True)
    (folder / mf.DATA).rename(staging / mf.DATA)
    (folder / mf.MANIFEST).unlink()


def _lost_shard(folder: Path) -> None:
    sorted((folder / mf.DATA).rglob("*.parquet"))[1].unlink()


def _stray(folder: Path) -> None:
    first = sorted((folder / mf.DATA).rglob("*.parquet"))[0]
    shutil.copyfile(first, first.with_name("extra.parquet"))


def _changed_shard(folder: Path) -> None:
    shard = sorted((folder / mf.DATA).rglob("*.parquet"))[1]
    shard.write_bytes(shard.read_bytes()[:100])


@pytest.mark.parametrize(
    ("damage", "refusal"),
    [
        (_unfinished, "an unfinished hsa teach run"),
        (_lost_shard, r"1 shard\(s\) the teacher's manifest lists are missing"),
        (_stray, r"1 Parquet file\(s\) here are not the teacher's"),
        (_changed_shard, "changed since the teacher wrote it"),
    ],
)
def test_a_teach_folder_inside_the_input_is_checked_as_one_given_alone(
    tmp_path, taught, shards, damage, refusal
):
    parent = tmp_path / "parent"
    shutil.copytree(shards, parent / "plain")
    shutil.copytree(taught, parent / "finished")
    damaged = parent / "runs" / "damaged"
    shutil.copytree(taught, damaged)
    damage(damaged)
    for input_path in (damaged, parent):
        with pytest.raises(DatasetError, match=refusal) as exc:
            open_source(input_path)
        assert Path(exc.value.file).is_relative_to(damaged)  # named, not its rows left out


def test_a_finished_teach_folder_inside_the_input_is_read_with_the_others(tmp_path, taught, shards):
    parent = tmp_path / "parent"
    shutil.copytree(shards, parent / "plain")
    shutil.copytree(taught, parent / "taught")
    alone, plain = open_source(taught), open_source(shards)
    source = open_source(parent)
    assert source.files == tuple(
        [*(parent / "plain" / f.name for f in plain.files)]
        + [parent / "taught" / f.relative_to(taught) for f in alone.files]
    )
    rows, _ = source.read(0, source.total)
    assert rows == pa.concat_tables([plain.read(0, plain.total)[0], alone.read(0, alone.total)[0]])


def test_an_augmented_dataset_inside_the_input_is_refused_unless_unfinished(tmp_path, shards):
    parent = tmp_path / "parent"
    shutil.copytree(shards, parent / "plain")
    out = parent / "augmented"
    augment(open_source(shards), out, AugmentConfig(recipe=recipe(), batch_size=16))
    for input_path in (out, parent):
        with pytest.raises(DatasetError, match="this is an augmented dataset") as exc:
            open_source(input_path)
        assert exc.value.file == str(out)
    # one whose run has not finished keeps its shards in .hsa/, out of sight: none is read
    manifest = mf.read_json(out / mf.MANIFEST)
    mf.unpublish(out, mf.shard_entries(out, manifest), manifest["files"])
    (out / mf.MANIFEST).unlink()
    assert list((out / mf.STATE).rglob("part-*.parquet"))
    assert open_source(parent).files == open_source(parent / "plain").files


def test_a_teacher_s_corpus_is_that_of_the_job_whose_folder_holds_the_shard(tmp_path):
    shard = tmp_path / "job" / "data" / "train" / "part-00000.parquet"
    shard.parent.mkdir(parents=True)
    assert teacher_corpus(shard) is None
    taught = {"kind": "hsa.teacher", "config": {"env": "bfcl", "env_options": {"path": "b.json"}}}
    (tmp_path / "job" / "manifest.json").write_text(json.dumps(taught))
    assert teacher_corpus(shard) == "b.json"
    (tmp_path / "job" / "data" / "manifest.json").write_text('{"kind": "hsa.augmented"}')
    assert teacher_corpus(shard) is None  # (the nearest manifest is the job's that wrote it)
