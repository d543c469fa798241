"""The augment job: layout, rows equal to render, lineage, splits by task, determinism, resume,
and bad input reported with its file, row or rule."""

from __future__ import annotations

import dataclasses
import gc
import json
import os
import re
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import numpy as np
import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from hsa import collect
from hsa._version import __version__
from hsa.augment import (
    NO_CONTEXT,
    Context,
    Recipe,
    RecipeRule,
    canonical_variant,
    default_recipe,
    invert,
    load_recipe,
    map_events,
    pick,
    plan,
)
from hsa.datasets import iter_rows, open_source, scan_dataset, to_hf
from hsa.datasets import manifest as mf
from hsa.datasets.schema import chat_messages
from hsa.datasets.shards import sha256_file
from hsa.datasets.source import INPUT_SCHEMA, Source
from hsa.envs import get_env
from hsa.errors import DatasetError, HsaError, RuleError, clear_stop
from hsa.harness import Trajectory, render
from hsa.harness.render import shown_order
from hsa.pipelines import AugmentConfig, augment, read_variants
from hsa.pipelines.leaks import check_one_split_per_task, check_task_versions
from tests.datasets.conftest import recipe


def config(**changes) -> AugmentConfig:
    return AugmentConfig(recipe=recipe(), **{"batch_size": 16, **changes})


def digests(root: Path) -> dict[str, str]:
    return {
        str(p.relative_to(root)): sha256_file(p)
        for p in sorted(root.rglob("*"))
        if p.is_file() and ".hsa" not in p.parts
    }


def test_layout_manifest_and_rows(tmp_path: Path, shards: Path, livestream_table) -> None:
    out = tmp_path / "out"
    report = augment(open_source(shards), out, config())
    assert (out / "manifest.json").is_file() and (out / "README.md").is_file()
    assert (out / "variants.parquet").is_file() and (out / "plots" / "composition.png").is_file()
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["kind"] == "hsa.augmented" and manifest["schema_version"] == 2
    assert manifest["seed"] == 3 and manifest["config_hash"]
    assert manifest["config"]["recipe"]["rules"][0]["rule"] == "skill_ids.rename"
    assert {r["name"] for r in manifest["rules"]} <= {
        r["rule"] for r in recipe().to_dict()["rules"]
    }
    for shard in manifest["shards"]:
        assert sha256_file(out / shard["path"]) == shard["sha256"]
        assert Path(shard["path"]).parts[0] == "data"
        assert Path(shard["path"]).name.startswith("part-")
    # 48 trajectories, 16 per batch: 3 batches; each trajectory: canonical + 2 variants
    assert report.rows == manifest["rows"]["total"] == 48 * 3
    assert report.trajectories == 48
    assert sum(v for k, v in manifest["rows"].items() if k != "total") == report.rows

    by_id = {row["id"]: Trajectory.from_row(row) for row in livestream_table.to_pylist()}
    variants = read_variants(out)
    harness = get_env("livestream").harness()
    splits: dict[str, str] = {}
    seen_protocols = set()
    for row in iter_rows(out):
        source = by_id[row["source_id"]]
        variant = variants[row["variant_id"]]
        expected = render(map_events(source.events, variant.mapping), variant.harness)
        assert chat_messages(row["messages"]) == expected.messages
        # (null where the request sends no tools: the prompt lists them)
        assert row["tools"] == (
            json.dumps(expected.tools, separators=(",", ":")) if expected.tools else None
        )
        assert row["id"] == f"{row['source_id']}/{row['variant_id']}"
        assert row["protocol"] == variant.harness.protocol.label
        assert row["rules"] == [n for n, _, _ in variant.rules]
        assert row["canonical"] == (not variant.rules)
        assert row["teacher"] == "oracle/hsa-oracle" and row["verified"] is True
        assert row["harness_id"] == harness.id
        # the canonical events come back from every row (in the order the row shows them: a
        # hook's note among the results of parallel calls after the last of them)
        shown = shown_order(map_events(source.events, variant.mapping), variant.harness)
        assert invert(row, variant) == [source.events[i] for i in shown]
        # splits are by task: a task never straddles two
        assert splits.setdefault(row["task_id"], row["split"]) == row["split"]
        assert row["split"] == livestream_table.to_pylist()[0]["split"] or row["split"]
        seen_protocols.add(row["protocol"])
    assert len(seen_protocols) > 1, "the recipe should reach a text protocol"


def test_same_input_recipe_and_seed_give_the_same_bytes(tmp_path: Path, shards: Path) -> None:
    augment(open_source(shards), tmp_path / "a", config())
    augment(open_source(shards), tmp_path / "b", config())
    first, second = digests(tmp_path / "a"), digests(tmp_path / "b")
    assert first == second and any(k.endswith(".png") for k in first)
    # another seed gives other variants
    augment(open_source(shards), tmp_path / "c", config(seed=11))
    assert digests(tmp_path / "c") != first


def test_rerun_skips_complete_shards_and_repairs_the_rest(
    tmp_path: Path, shards: Path, charts_as_their_data
) -> None:
    reference = tmp_path / "ref"
    augment(open_source(shards), reference, config())
    out = tmp_path / "out"
    augment(open_source(shards), out, config())
    # a finished dataset: nothing to do
    again = augment(open_source(shards), out, config())
    assert again.complete_already
    # as if killed: no manifest, one shard gone, one shard truncated, a stray temporary file
    (out / "manifest.json").unlink()
    shard_files = sorted((out / "data").rglob("*.parquet"))
    shard_files[0].unlink()
    shard_files[1].write_bytes(shard_files[1].read_bytes()[:100])
    (shard_files[2].parent / ".part-00009.parquet.123.tmp").write_bytes(b"half")
    broken = {int(p.name[5:10]) for p in shard_files[:2]}
    report = augment(open_source(shards), out, config())
    assert report.skipped == 3 - len(broken)
    assert digests(out) == digests(reference)


@pytest.fixture
def charts_as_their_data(monkeypatch) -> None:
    """The dataset card's charts written as the text of what they plot, not drawn: for the
    tests of which rows and variants a run writes, which compare whole datasets as bytes many
    times over. The same data still gives the same bytes and other data other bytes, without
    matplotlib's second or so a chart; that a chart's PNG is the same bytes every time is
    test_same_input_recipe_and_seed_give_the_same_bytes's."""

    def as_text(panels) -> str:
        return repr([(title, sorted(hist.items()), bucket) for title, hist, bucket in panels])

    monkeypatch.setattr("hsa.datasets.card._plot", lambda panels: as_text(panels).encode())


def everything(root: Path) -> dict[str, str]:
    """``digests`` with the run state too (``.hsa/``: completion marks, run file)."""
    return {str(p.relative_to(root)): sha256_file(p) for p in root.rglob("*") if p.is_file()}


def assert_no_rows(out: Path, cache: Path) -> None:
    """``datasets.load_dataset(out)`` refuses ``out``, or offers no row."""
    import datasets

    try:
        loaded = datasets.load_dataset(str(out), cache_dir=str(cache))
    except (FileNotFoundError, ValueError) as exc:  # (DataFilesNotFoundError, EmptyDataset...)
        assert "data" in str(exc).lower(), exc
        return
    assert not sum(split.num_rows for split in loaded.values()), (out, loaded)


def test_an_unfinished_run_keeps_its_shards_out_of_data(tmp_path: Path, shards: Path) -> None:
    # datasets.load_dataset(DIR), Polars and DuckDB read whatever data/*/*.parquet holds, with
    # or without a manifest: a stopped run's shards stay in its state folder, and a rerun
    # finishes with what an uninterrupted run writes, run state and all
    reference, out = tmp_path / "ref", tmp_path / "out"
    augment(open_source(shards), reference, config(workers=1))

    def interrupt(done: int, total: int, written: int) -> None:
        if done == 2:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        augment(open_source(shards), out, config(workers=1), progress=interrupt)
    assert not (out / "manifest.json").exists()
    assert not list(out.glob("data/**/*.parquet")), "readers would take these for the dataset"
    staged = {p.relative_to(out / ".hsa" / "staging") for p in out.rglob("*.parquet")}
    marks = [json.loads(p.read_text()) for p in sorted((out / ".hsa" / "done").glob("*.json"))]
    assert len(marks) == 2 and staged
    # the marks list the shards by their places in the finished dataset, where they wait in
    # staging (a copy of data/, moved there whole)
    listed = {Path(s["path"]) for m in marks for s in m["shards"]}
    assert listed == staged
    with pytest.raises(DatasetError, match="the dataset is not complete"):
        to_hf(out)
    report = augment(open_source(shards), out, config(workers=1))
    assert report.skipped == 2 and not (out / ".hsa" / "staging").exists()
    assert everything(out) == everything(reference)


def test_a_run_stopped_at_any_move_of_its_finish_offers_all_rows_or_none(
    tmp_path: Path, shards: Path, monkeypatch, charts_as_their_data
) -> None:
    # stopped (killed) after each of the finish's renames in turn: readers of data/*/*.parquet
    # (Polars, DuckDB, datasets) find every row or none, never some of the shards; the rerun
    # takes every batch as done, wherever its shards are, moves the rest, and writes the same
    # bytes. (The shards moved into data/ one at a time: a kill left some of them there.)
    import os

    reference, ready = tmp_path / "ref", tmp_path / "ready"
    augment(open_source(shards), reference, config(workers=1))
    total = json.loads((reference / "manifest.json").read_text())["rows"]["total"]

    def stop(*args, **kwargs):
        raise KeyboardInterrupt

    with monkeypatch.context() as patched:  # every file written, none moved yet
        patched.setattr(mf, "publish", stop)
        with pytest.raises(KeyboardInterrupt):
            augment(open_source(shards), ready, config(workers=1))
    real, publish = os.replace, mf.publish
    moves: list[Path] = []

    def stopped_after(count: int):
        def replace(source, target) -> None:
            if len(moves) == count:
                raise KeyboardInterrupt
            moves.append(Path(target).relative_to(out))
            real(source, target)

        def publishing(*args, **kwargs) -> None:  # (the finish's renames, not its writes)
            with monkeypatch.context() as patched:
                patched.setattr(os, "replace", replace)
                publish(*args, **kwargs)

        return publishing

    count = 0
    while True:
        out = tmp_path / f"out-{count}"
        shutil.copytree(ready, out)
        moves.clear()
        with monkeypatch.context() as patched:
            patched.setattr(mf, "publish", stopped_after(count))
            try:
                augment(open_source(shards), out, config(workers=1))
            except KeyboardInterrupt:
                pass
            else:
                break  # every move made
        assert not (out / "manifest.json").exists()
        held = sum(pq.read_metadata(f).num_rows for f in out.glob("data/*/*.parquet"))
        assert held in (0, total), f"stopped after {moves}: readers find {held} of {total} rows"
        if not held:
            assert_no_rows(out, tmp_path / f"cache-{count}")
        report = augment(open_source(shards), out, config(workers=1))
        assert report.skipped == 3 and not (out / ".hsa" / "staging").exists()
        assert everything(out) == everything(reference)
        count += 1
    assert moves[0] == Path("README.md") and moves[-1] == Path("data") and count == len(moves)
    assert everything(out) == everything(reference)


def test_a_run_stopped_in_its_finish_offers_no_rows_and_a_rerun_ends_the_same(
    tmp_path: Path, shards: Path, monkeypatch
) -> None:
    # Ctrl-C while the finish writes the variants file or the card (its token counts are slow
    # with a tokenizer) left every row in data/ with no manifest: datasets.load_dataset(DIR)
    # took them for the dataset
    from hsa.datasets.card import TokenLengths
    from tests.tinymodels import qwen_tokenizer

    module = sys.modules["hsa.pipelines.augment"]
    qwen_tokenizer(["Q1 done 1"]).save_pretrained(tmp_path / "tok")  # (checked when a run starts)
    settings = config(workers=1, tokenizer=str(tmp_path / "tok"))
    read: list[Path] = []

    def counted(files, tokenizer: str) -> TokenLengths:  # (a tokenizer counting rows)
        read.extend(f for split in files.values() for f in split)
        rows = {s: {"7": sum(pq.read_metadata(f).num_rows for f in files[s])} for s in files}
        return TokenLengths(rows, tokenizer)

    def stop(*args, **kwargs):
        raise KeyboardInterrupt

    written = module.write_atomic

    def write_atomic(path: Path, data: bytes) -> None:  # (stops after the card, the last file)
        written(path, data)
        if path.name == "README.md":
            raise KeyboardInterrupt

    def stop_moving(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(module, "token_lengths", counted)
    reference, out = tmp_path / "ref", tmp_path / "out"
    augment(open_source(shards), reference, settings)
    stops = {"write_variants": stop, "token_lengths": stop, "render_card": stop}
    stops |= {"write_atomic": write_atomic, "publish": stop_moving}
    for stage, stopping in stops.items():  # each stop, rerun
        with monkeypatch.context() as patched:
            patched.setattr(mf if stage == "publish" else module, stage, stopping)
            with pytest.raises(KeyboardInterrupt):
                augment(open_source(shards), out, settings)
        assert not (out / "manifest.json").exists(), stage
        assert not list(out.glob("data/**/*.parquet")), f"{stage}: readers take these for rows"
        assert list((out / ".hsa" / "staging").rglob("*.parquet"))
        # nor any other file the finish writes (variants.parquet, the plots: load_dataset
        # served either as a split of its own); the card alone points it at data/, not there
        assert_no_rows(out, tmp_path / f"cache-{stage}")
    read.clear()
    report = augment(open_source(shards), out, settings)
    assert report.skipped == 3 and not (out / ".hsa" / "staging").exists()
    # the tokens were counted in the shards where they were staged, before they moved
    assert read and all(f.parent.parent == out / ".hsa" / "staging" / "data" for f in read)
    assert everything(out) == everything(reference)


def test_a_file_of_yours_under_data_outlives_a_repair_that_failed(
    tmp_path: Path, shards: Path, monkeypatch
) -> None:
    # a repair moves data/ to staging whole, a user's notes with it; it stopped on an error,
    # and another config's run in the folder removed the staging folder, the notes with it
    module = sys.modules["hsa.pipelines.augment"]
    out = tmp_path / "out"
    augment(open_source(shards), out, config(workers=1))
    (out / "data" / "NOTES.md").write_text("notes\n", "utf-8")
    sorted(out.glob("data/train/*.parquet"))[-1].unlink()

    def broken(*args, **kwargs):
        raise DatasetError("a card that cannot be written")

    with monkeypatch.context() as patched:
        patched.setattr(module, "render_card", broken)
        with pytest.raises(DatasetError, match="a card that cannot be written"):
            augment(open_source(shards), out, config(workers=1))
    assert "failed" in json.loads((out / ".hsa" / "run.json").read_text())
    assert not (out / "data").exists()  # (the notes wait in staging, with the shards)
    augment(open_source(shards), out, config(seed=1, workers=1))
    assert (out / "data" / "NOTES.md").read_text("utf-8") == "notes\n"
    assert (out / "manifest.json").is_file()


def test_a_ctrl_c_as_the_shards_move_into_data_waits_for_the_manifest(
    tmp_path: Path, shards: Path, monkeypatch
) -> None:
    import os
    import signal

    reference, out = tmp_path / "ref", tmp_path / "out"
    augment(open_source(shards), reference, config(workers=1))
    real = os.replace

    def replace(source, target) -> None:
        if Path(target) == out / "data":
            os.kill(os.getpid(), signal.SIGINT)  # as the shards move
        real(source, target)

    monkeypatch.setattr(os, "replace", replace)
    try:
        with pytest.raises(KeyboardInterrupt):
            augment(open_source(shards), out, config(workers=1))
    finally:
        clear_stop()  # (recorded for the process, as a Ctrl-C of the CLI's is)
    assert everything(out) == everything(reference)  # the manifest with its rows


def test_a_finished_dataset_with_a_damaged_shard_redoes_only_its_batch(
    tmp_path: Path, shards: Path, charts_as_their_data
) -> None:
    reference, out = tmp_path / "ref", tmp_path / "out"
    augment(open_source(shards), reference, config(workers=1))
    augment(open_source(shards), out, config(workers=1))
    manifest = json.loads((out / "manifest.json").read_text())
    damaged = out / manifest["shards"][-1]["path"]
    damaged.write_bytes(damaged.read_bytes()[:-1] + b"x")
    (out / "README.md").unlink()  # (and the card: the variants file was left alone at the top)

    def interrupt(done: int, total: int, written: int) -> None:
        raise KeyboardInterrupt

    # a repair stopped part way offers readers no rows either: they wait in staging
    with pytest.raises(KeyboardInterrupt):
        augment(open_source(shards), out, config(workers=1), progress=interrupt)
    assert not (out / "manifest.json").exists()
    assert not list(out.glob("data/**/*.parquet")), "readers would take these for the dataset"
    assert_no_rows(out, tmp_path / "cache")
    report = augment(open_source(shards), out, config(workers=1))
    assert not report.complete_already and report.skipped == 2
    assert not (out / ".hsa" / "staging").exists()
    assert everything(out) == everything(reference)
    assert augment(open_source(shards), out, config(workers=1)).complete_already


@pytest.mark.parametrize(
    "change",
    [
        lambda m: (m["rows"].update(train=999, total=5), m.update(trajectories=7)),
        lambda m: (m.update(rows=[1], variants=None, seed=[1]), m.pop("files")),
    ],
    ids=["counts", "types and no files"],
)
def test_a_finished_dataset_whose_manifest_was_edited_is_written_again(
    tmp_path: Path, shards: Path, change
) -> None:
    # its rerun said "complete already" with the edited numbers, and kept them
    out = tmp_path / "out"
    first = augment(open_source(shards), out, config(workers=1))
    written = everything(out)
    manifest = json.loads((out / "manifest.json").read_text())
    change(manifest)
    (out / "manifest.json").write_text(json.dumps(manifest))
    report = augment(open_source(shards), out, config(workers=1))
    assert not report.complete_already and report.skipped == 3  # every batch's shards kept
    assert (report.rows, report.splits, report.trajectories, report.variants) == (
        first.rows,
        first.splits,
        first.trajectories,
        first.variants,
    )
    assert everything(out) == written
    assert augment(open_source(shards), out, config(workers=1)).complete_already


def test_output_directory_holding_something_else_is_refused(tmp_path: Path, shards: Path) -> None:
    out = tmp_path / "out"
    augment(open_source(shards), out, config())
    with pytest.raises(DatasetError, match="holds another dataset"):
        augment(open_source(shards), out, config(seed=99))
    stranger = tmp_path / "stranger"
    stranger.mkdir()
    (stranger / "notes.txt").write_text("mine")
    with pytest.raises(DatasetError, match="not an hsa dataset directory"):
        augment(open_source(shards), stranger, config())
    # an unfinished run of another config is refused as well
    (out / "manifest.json").unlink()
    with pytest.raises(DatasetError, match="unfinished run of another config"):
        augment(open_source(shards), out, config(seed=5))


def test_the_manifest_records_the_hsa_that_wrote_it_outside_the_dataset_s_identity(
    tmp_path: Path, shards: Path, monkeypatch
) -> None:
    # (hsa build's manifest recorded its version, hsa augment's none; a dataset is identified
    # by the versions of what decides its rows: planner, render, rules)
    out = tmp_path / "out"
    augment(open_source(shards), out, config())
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["hsa"] == __version__ and "hsa" not in manifest["config"]
    monkeypatch.setattr("hsa._version.__version__", "99.0")
    assert augment(open_source(shards), out, config()).complete_already


def test_a_rerun_over_an_edited_input_is_refused_naming_its_content(
    tmp_path: Path, shards: Path
) -> None:
    # the input counts by its content: an edited row makes another dataset, and the refusal
    # said "other settings, or another version of hsa", not what the user had changed
    out = tmp_path / "out"
    augment(open_source(shards), out, config())
    shard = sorted(shards.glob("*.parquet"))[1]
    pq.write_table(pq.read_table(shard).slice(1), shard)
    with pytest.raises(DatasetError, match=r"holds another dataset .*: other input content, "):
        augment(open_source(shards), out, config())
    (out / "manifest.json").unlink()
    with pytest.raises(DatasetError, match=r"another config .*: other input content, "):
        augment(open_source(shards), out, config())


def test_a_rule_whose_version_changed_makes_another_dataset(
    tmp_path: Path, shards: Path, monkeypatch
) -> None:
    from hsa.augment import registry

    out = tmp_path / "out"
    augment(open_source(shards), out, config())
    name = config().resolved()[0].rules[0].rule
    bumped = dataclasses.replace(registry.get(name), version="99")
    monkeypatch.setitem(registry._RULES, name, bumped)
    with pytest.raises(DatasetError, match="holds another dataset"):
        augment(open_source(shards), out, config())
    # nor does it finish an unfinished run of the old version with rows of the new one
    (out / "manifest.json").unlink()
    with pytest.raises(DatasetError, match="unfinished run of another config"):
        augment(open_source(shards), out, config())


def test_unverified_rows_are_left_out(tmp_path: Path, livestream_table: pa.Table) -> None:
    rows = livestream_table.to_pylist()
    rows[0]["verified"] = False
    path = tmp_path / "in.parquet"
    pq.write_table(pa.Table.from_pylist(rows, schema=livestream_table.schema), path)
    report = augment(open_source(path), tmp_path / "out", config())
    assert report.unverified == 1 and report.trajectories == 47
    all_rows = augment(open_source(path), tmp_path / "all", config(include_unverified=True))
    assert all_rows.trajectories == 48
    # the rows kept of an unverified trajectory are counted, as the rows say
    kept = pl.read_parquet(tmp_path / "all" / "data" / "*" / "*.parquet")
    unverified = kept.filter(~pl.col("verified")).height
    assert unverified > 0 and all_rows.unverified_rows == unverified
    manifest = json.loads((tmp_path / "all" / "manifest.json").read_text())
    assert manifest["unverified_rows"] == unverified
    card = (tmp_path / "all" / "README.md").read_text()
    assert f"| rows of unverified trajectories (kept: `verified` false) | {unverified:,} |" in card
    # and the verified ones, so a card of rows never checked (null) says so
    verified = kept.filter(pl.col("verified")).height
    assert verified == kept.height - unverified - kept.filter(pl.col("verified").is_null()).height
    assert (
        f"(`verified` true; the rest, `verified` null, were never checked) | {verified:,} |" in card
    )


def test_splits_are_drawn_by_task_when_the_input_has_none(tmp_path: Path, livestream_table) -> None:
    rows = livestream_table.to_pylist()
    for i, row in enumerate(rows):
        row["split"] = None
        row["task_id"] = f"task-{i // 3}"  # three trajectories per task
    path = tmp_path / "in.parquet"
    pq.write_table(pa.Table.from_pylist(rows, schema=livestream_table.schema), path)
    augment(open_source(path), tmp_path / "out", config(splits={"train": 0.5, "test": 0.5}))
    splits: dict[str, set] = {}
    for row in iter_rows(tmp_path / "out"):
        splits.setdefault(row["task_id"], set()).add(row["split"])
    assert all(len(s) == 1 for s in splits.values())
    assert {s for v in splits.values() for s in v} == {"train", "test"}


def test_a_task_with_rows_in_two_splits_is_refused_naming_it(
    tmp_path: Path, livestream_table: pa.Table
) -> None:
    # (two teacher jobs of other splits side by side gave a dataset with a task in dev and in
    # train, nothing said)
    rows = livestream_table.to_pylist()
    folder = tmp_path / "in"
    folder.mkdir()
    first = _write(folder / "a.parquet", rows[:10])
    moved = [
        {**row, "id": f"{row['id']}-again", "split": "dev" if row["split"] != "dev" else "train"}
        for row in rows[3:5]
    ]
    second = _write(folder / "b.parquet", moved)
    with pytest.raises(DatasetError) as refused:
        augment(open_source(folder), tmp_path / "out", config())
    assert (refused.value.file, refused.value.where) == (str(second), "row 0")
    task, split, other = rows[3]["task_id"], moved[0]["split"], rows[3]["split"]
    assert f"task {task!r} has rows in split {split!r} here and in split {other!r}" in str(
        refused.value
    )
    assert f"({first}, row 3)" in str(refused.value)
    assert not (tmp_path / "out").exists()
    check_one_split_per_task(open_source(first), {"train": 1.0}, 0)
    # a row without a split is in the one its task id draws: beside rows of its task given
    # another, it is refused (it was not compared: the task was trained and tested on)
    _write(second, [{**moved[0], "split": None}])  # a row of rows[3]'s task
    check_one_split_per_task(open_source(folder), {other: 1.0}, 0)  # drawn into its split
    drawn = "dev" if other != "dev" else "train"
    with pytest.raises(DatasetError) as refused:
        augment(open_source(folder), tmp_path / "out", config(splits={drawn: 1.0}))
    assert (refused.value.file, refused.value.where) == (str(second), "row 0")
    assert (
        f"task {task!r} has rows in split {drawn!r} (no split given: the one its task id draws) "
        f"here and in split {other!r} ({first}, row 3)"
    ) in str(refused.value)
    # rows without a task id are not compared (each is its own task)
    _write(second, [{**row, "task_id": None, "split": None} for row in moved])
    check_one_split_per_task(open_source(folder), {drawn: 1.0}, 0)


def test_teacher_output_of_older_tasks_than_its_environment_s_is_refused(
    tmp_path: Path, env
) -> None:
    # (teacher output of livestream's splits before task version 2 kept its splits: tasks
    # held out today were trained on)
    from hsa.pipelines.teach import TeachConfig, teach

    taught = tmp_path / "taught"
    teach(TeachConfig(tasks=4, variants_per_task=0, include_canonical=True), taught, env=env)
    manifest = json.loads((taught / "manifest.json").read_text())
    assert manifest["task_version"] == 2
    check_task_versions(open_source(taught))  # today's
    for recorded in (None, 1, 3):  # none recorded: an hsa before the change, version 1
        older = {k: v for k, v in manifest.items() if k != "task_version"}
        if recorded is not None:
            older["task_version"] = recorded
        (taught / "manifest.json").write_text(json.dumps(older))
        for given in (taught, tmp_path):  # the teacher's folder, or one holding it
            with pytest.raises(DatasetError, match="teach again with this hsa") as refused:
                augment(open_source(given), tmp_path / "out", config())
            assert refused.value.file == str(taught)
            assert f"livestream task version {recorded or 1}" in str(refused.value)
    shard = next((taught / "data").rglob("*.parquet"))  # one of its shards, given alone
    with pytest.raises(DatasetError, match="teach again with this hsa"):
        check_task_versions(open_source(shard))
    assert not (tmp_path / "out").exists()


def _write(path: Path, table: pa.Table | list) -> Path:
    if isinstance(table, list):
        table = pa.Table.from_pylist(table, schema=INPUT_SCHEMA)
    pq.write_table(table, path)
    return path


def test_bad_input_names_the_file_and_row(tmp_path: Path, livestream_table: pa.Table) -> None:
    good = _write(tmp_path / "good.parquet", livestream_table)
    # a truncated shard
    truncated = tmp_path / "trunc"
    truncated.mkdir()
    (truncated / "part-00000.parquet").write_bytes(good.read_bytes()[:-200])
    with pytest.raises(DatasetError, match=r"part-00000\.parquet.*(truncated|not a readable)"):
        open_source(truncated)
    # a column of the wrong type
    wrong = livestream_table.set_column(
        livestream_table.schema.get_field_index("verified"),
        "verified",
        pa.array(["maybe"] * livestream_table.num_rows),
    )
    bad_type = _write(tmp_path / "type.parquet", wrong)
    with pytest.raises(DatasetError, match=r"type\.parquet.*'verified' is string, expected bool"):
        augment(open_source(bad_type), tmp_path / "o1", config())
    # a missing column
    missing = _write(tmp_path / "missing.parquet", livestream_table.drop_columns(["events"]))
    with pytest.raises(DatasetError, match=r"missing\.parquet.*events"):
        open_source(missing)
    # an event that does not match the schema: names the file, the row and the event
    rows = livestream_table.to_pylist()
    rows[5]["events"][1]["kind"] = "telepathy"
    odd = _write(
        tmp_path / "odd.parquet", pa.Table.from_pylist(rows, schema=livestream_table.schema)
    )
    with pytest.raises(DatasetError, match=r"odd\.parquet: row 5 \(id .*\)\.events\[1\]: unknown"):
        augment(open_source(odd), tmp_path / "o2", config())
    # arguments that are not JSON
    rows = livestream_table.to_pylist()
    call = next(i for i, e in enumerate(rows[7]["events"]) if e["kind"] == "tool_call")
    rows[7]["events"][call]["args"] = '{"query": "unterminated'
    broken = _write(
        tmp_path / "args.parquet", pa.Table.from_pylist(rows, schema=livestream_table.schema)
    )
    with pytest.raises(DatasetError, match=rf"args\.parquet: row 7 .*events\[{call}\].*not JSON"):
        augment(open_source(broken), tmp_path / "o3", config())
    # a harness nobody knows
    rows = livestream_table.to_pylist()
    rows[2]["harness_id"] = "nowhere"
    unknown = _write(
        tmp_path / "h.parquet", pa.Table.from_pylist(rows, schema=livestream_table.schema)
    )
    with pytest.raises(DatasetError, match=r"h\.parquet: row 2 .*no harness 'nowhere'") as err:
        augment(open_source(unknown), tmp_path / "o4", config())
    assert err.value.message.endswith(
        "(a harness directory or JSON file, or the folder `hsa harness import` writes of its "
        "corpus; harnesses= in Python)"
    )
    # nothing half-written is marked complete
    for name in ("o1", "o2", "o3", "o4"):
        assert not (tmp_path / name / "manifest.json").exists()


def test_bad_recipe_names_the_rule(tmp_path: Path) -> None:
    unknown = tmp_path / "unknown.yaml"
    unknown.write_text("rules:\n  - {rule: tools.teleport}\n")
    with pytest.raises(RuleError, match=r"unknown\.yaml: \$\.rules\[0\].*tools\.teleport"):
        load_recipe(unknown)
    params = tmp_path / "params.yaml"
    params.write_text("rules:\n  - {rule: tools.rename_params, params: {fraction: 7}}\n")
    with pytest.raises(RuleError, match=r"params\.yaml: \$\.rules\[0\].*fraction"):
        load_recipe(params)


def test_given_variants_replace_planning(
    tmp_path: Path, shards: Path, charts_as_their_data
) -> None:
    first = tmp_path / "first"
    augment(open_source(shards), first, config())
    variants = list(read_variants(first).values())
    second = tmp_path / "second"
    report = augment(open_source(shards), second, config(), variants=variants)
    assert report.rows == 48 * 3
    assert {r["variant_id"] for r in iter_rows(second)} <= {v.variant_id for v in variants}
    # read_variants gives them by id, as the docstring's example passes them
    third = tmp_path / "third"
    augment(open_source(shards), third, config(), variants=read_variants(first))
    assert digests(third / "data") == digests(second / "data")


def test_arguments_that_are_not_what_they_name_are_refused(tmp_path: Path, shards: Path) -> None:
    with pytest.raises(DatasetError, match=r"source must be a Source, got '.*'; hsa.open_source"):
        augment(str(shards), tmp_path / "out", config())  # type: ignore[arg-type]
    with pytest.raises(DatasetError, match=r"config must be an AugmentConfig, got dict"):
        augment(open_source(shards), tmp_path / "out", {"seed": 1})  # type: ignore[arg-type]
    with pytest.raises(DatasetError, match="harnesses must be a list of Harness objects"):
        augment(open_source(shards), tmp_path / "out", config(), harnesses=["h"])  # type: ignore[list-item]
    assert not (tmp_path / "out").exists()


def test_an_input_with_nothing_to_augment_is_refused(tmp_path: Path, livestream_table) -> None:
    path = _write(tmp_path / "empty.parquet", livestream_table.slice(0, 0))
    with pytest.raises(DatasetError, match=r"empty\.parquet: holds no trajectories"):
        augment(open_source(path), tmp_path / "out", config())
    assert not (tmp_path / "out").exists()
    rows = livestream_table.slice(0, 5).to_pylist()
    for row in rows:
        row["verified"] = False
    unverified = _write(tmp_path / "unverified.parquet", rows)
    with pytest.raises(DatasetError, match=r"unverified\.parquet: all 5 .*--include-unverified"):
        augment(open_source(unverified), tmp_path / "out", config())
    # nothing left behind blocks the corrected run
    report = augment(open_source(unverified), tmp_path / "out", config(include_unverified=True))
    assert report.trajectories == 5 and report.rows == 5 * 3
    assert len(to_hf(tmp_path / "out")) == 5 * 3
    assert scan_dataset(tmp_path / "out").collect().height == 5 * 3
    with pytest.raises(HsaError):
        open_source(tmp_path / "nope")


def test_rows_of_another_harness_are_refused(tmp_path: Path, shards: Path) -> None:
    other = get_env("livestream").harness().replace(id="storefront")
    with pytest.raises(DatasetError) as caught:
        augment(open_source(shards), tmp_path / "out", config(), harnesses=[other])
    message = str(caught.value)
    assert "part-00000.parquet: row 0 (id 'livestream-" in message
    assert "'livestream'" in message and "'storefront'" in message
    assert not (tmp_path / "out" / "manifest.json").exists()
    # rows recorded under the harness given are read under it
    same = augment(
        open_source(shards),
        tmp_path / "same",
        config(),
        harnesses=[get_env("livestream").harness()],
    )
    assert same.trajectories == 48


def test_a_harness_given_to_open_source_is_as_one_given_to_augment(
    tmp_path: Path, livestream_table: pa.Table
) -> None:
    # open_source(parquet, harness=h) dropped h: rows of a harness no environment bundles were
    # refused, and a livestream harness was left out of the dataset's identity
    acme = get_env("livestream").harness().replace(id="acme")
    rows = livestream_table.slice(0, 6)
    rows = rows.set_column(
        rows.schema.get_field_index("harness_id"), "harness_id", pa.array(["acme"] * 6)
    )
    path = _write(tmp_path / "acme.parquet", rows)
    assert open_source(path, harness=acme).harnesses == (acme,)
    with pytest.raises(DatasetError, match=r"no harness 'acme' .*--harness .*harnesses= in Python"):
        augment(open_source(path), tmp_path / "none", config())
    augment(open_source(path, harness=acme), tmp_path / "opened", config())
    augment(open_source(path), tmp_path / "given", config(), harnesses=[acme])
    augment(open_source(path, harness=acme), tmp_path / "both", config(), harnesses=[acme])
    found = {
        name: json.loads((tmp_path / name / "manifest.json").read_text())
        for name in ("opened", "given", "both")
    }
    assert found["opened"]["config"]["harnesses"] == [f"acme:{mf.config_hash(acme.to_dict())}"]
    assert found["opened"] == found["given"] == found["both"]
    assert digests(tmp_path / "opened" / "data") == digests(tmp_path / "given" / "data")


def test_more_variants_than_the_recipe_plans(
    tmp_path: Path, shards: Path, charts_as_their_data
) -> None:
    # the recipe plans 6 per harness; 9 asked: 9 planned, none silently dropped
    report = augment(open_source(shards), tmp_path / "out", config(variants_per_trajectory=9))
    manifest = json.loads((tmp_path / "out" / "manifest.json").read_text())
    assert manifest["config"]["recipe"]["variants_per_harness"] == 9
    assert manifest["variants_per_trajectory"] == {"asked": 9, "short": report.short}
    per_source: dict[str, set] = {}
    for row in iter_rows(tmp_path / "out"):
        if not row["canonical"]:
            per_source.setdefault(row["source_id"], set()).add(row["variant_id"])
    assert report.short == sum(len(v) < 9 for v in per_source.values()) == 0
    assert report.rows == 48 * 10
    # fewer variants to draw from than asked: rendered under those, and the shortfall reported
    variants = [v for v in read_variants(tmp_path / "out").values() if v.rules][:2]
    few = augment(open_source(shards), tmp_path / "few", config(), variants=variants)
    assert few.short == 0 and few.variants_per_trajectory == 2 and few.rows == 48 * 3
    fewer = augment(
        open_source(shards),
        tmp_path / "fewer",
        config(variants_per_trajectory=5),
        variants=variants,
    )
    assert fewer.short == 48 and fewer.variants_per_trajectory == 5
    assert fewer.rows == 48 * 3
    found = json.loads((tmp_path / "fewer" / "manifest.json").read_text())
    assert found["variants_per_trajectory"] == {"asked": 5, "short": 48}


def test_a_failed_run_that_wrote_nothing_does_not_block_the_next(
    tmp_path: Path, livestream_table: pa.Table
) -> None:
    rows = livestream_table.to_pylist()
    rows[2]["harness_id"] = "nowhere"
    bad = _write(tmp_path / "bad.parquet", rows)
    out = tmp_path / "out"
    with pytest.raises(DatasetError, match="no harness 'nowhere'"):
        augment(open_source(bad), out, config())
    assert not (out / ".hsa" / "run.json").exists()  # no run left to look unfinished
    good = _write(tmp_path / "good.parquet", livestream_table)
    report = augment(open_source(good), out, config())
    assert report.trajectories == 48 and not (out / ".hsa" / "lock").exists()


def test_a_shard_changed_during_a_run_fails_it_and_a_rerun_redoes_it_from_the_new_content(
    tmp_path: Path, shards: Path, monkeypatch, charts_as_their_data
) -> None:
    reference = tmp_path / "ref"
    augment(open_source(shards), reference, config(workers=1))
    second = sorted(shards.glob("*.parquet"))[1]
    original = second.read_bytes()
    table = pq.read_table(second)
    ids = pa.array([f"edited-{i}" for i in range(table.num_rows)])
    edited = table.set_column(table.schema.get_field_index("id"), "id", ids)
    read = Source.read

    def changing(self, start, stop):  # the shard is replaced once the first batch is read
        found = read(self, start, stop)
        if start == 0:
            pq.write_table(edited, second)
        return found

    for out in (tmp_path / "new", tmp_path / "restored"):
        second.write_bytes(original)
        with monkeypatch.context() as patched:
            patched.setattr(Source, "read", changing)
            with pytest.raises(DatasetError, match="changed while this run read it") as exc:
                augment(open_source(shards), out, config(workers=1))
        assert exc.value.file == str(second) and not (out / "manifest.json").exists()
        if out.name == "restored":  # the shard as it was: as a run never disturbed
            second.write_bytes(original)
        source = open_source(shards)
        report = augment(source, out, config(workers=1))
        # (restored: the batch read before the change, as hashed, is kept)
        assert not report.complete_already and report.skipped == (out.name == "restored")
        found = mf.read_json(out / "manifest.json")["config"]["input"]["fingerprint"]
        assert found == source.fingerprint
    assert digests(tmp_path / "restored") == digests(reference)
    new = pl.read_parquet(tmp_path / "new" / "data" / "*" / "*.parquet")["source_id"]
    assert new.str.starts_with("edited-").sum() > 0  # the rows are the new content's


def test_partial_data_of_another_config_says_what_to_do(tmp_path: Path, shards: Path) -> None:
    out = tmp_path / "out"
    augment(open_source(shards), out, config())
    (out / "manifest.json").unlink()
    (out / ".hsa" / "source").mkdir()
    (out / ".hsa" / "source" / ".part-00000.parquet.4242.tmp").write_bytes(b"half")
    (out / "data" / "train" / ".part-00007.parquet.4242.tmp").write_bytes(b"half")
    with pytest.raises(DatasetError, match=rf"3 completed batch.*rm -r {out}"):
        augment(open_source(shards), out, config(seed=5))
    # the temporaries of killed runs go on a rerun (here: of the config that wrote the data)
    augment(open_source(shards), out, config())
    assert not list(out.rglob("*.tmp"))


def test_staged_shards_without_a_mark_are_another_configs_partial_data(
    tmp_path: Path, shards: Path
) -> None:
    # a run killed between a batch's shards and its mark has staged shards and no mark: its
    # work, as shards under data/ were, which another config does not clear without a word
    out = tmp_path / "out"

    def interrupt(done: int, total: int, written: int) -> None:
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        augment(open_source(shards), out, config(workers=1), progress=interrupt)
    shutil.rmtree(out / ".hsa" / "done")
    assert list((out / ".hsa" / "staging").rglob("*.parquet"))
    with pytest.raises(DatasetError, match=r"another config \(shards under \.hsa/staging/\)"):
        augment(open_source(shards), out, config(seed=5, workers=1))
    report = augment(open_source(shards), out, config(workers=1))
    assert report.skipped == 0 and not (out / ".hsa" / "staging").exists()


@pytest.mark.parametrize("which", ["families", "default"])
def test_plan_and_pick_predict_each_trajectorys_variants(
    tmp_path: Path, shards: Path, livestream_table: pa.Table, which: str
) -> None:
    # The default recipe has trajectory-dependent rules (planned per context); the test
    # recipe has none (planned once per harness). Either way the public planner and picker
    # say exactly which variants the job rendered each trajectory under.
    chosen = recipe() if which == "families" else default_recipe()
    out = tmp_path / "out"
    augment(open_source(shards), out, AugmentConfig(recipe=chosen, variants_per_trajectory=3))
    planning = dataclasses.replace(chosen, variants_per_harness=max(chosen.variants_per_harness, 3))
    drawing = dataclasses.replace(planning, variants_per_trajectory=3)
    harness = get_env("livestream").harness()
    plans: dict[str, list] = {}  # by context: planning is deterministic, so plan each once
    written: dict[str, list[str]] = {}
    for row in iter_rows(out):
        written.setdefault(row["source_id"], []).append(row["variant_id"])
    assert len(written) == 48
    for source in livestream_table.to_pylist():
        events = Trajectory.from_row(source).events
        context = Context.of(events) if planning.needs else NO_CONTEXT
        key = json.dumps(context.key(), sort_keys=True)
        if key not in plans:
            plans[key] = [canonical_variant(harness), *plan(harness, planning, context=context)]
        variants = plans[key]
        predicted = [v.variant_id for v in pick(variants, source["id"], drawing)]
        assert sorted(written[source["id"]]) == sorted(predicted)
        assert len(predicted) == 4 and predicted[0] == canonical_variant(harness).variant_id


def test_assistant_text_that_reads_as_calls_is_never_written_under_that_protocol(
    tmp_path: Path, livestream_table: pa.Table
) -> None:
    # Text protocols have no escape: an answer quoting a call block would read back as a call
    # (under Hermes it would take the real call's result). The picker passes over such a
    # variant for the trajectory, as plan then pick predicts.
    from hsa.harness.parse import reads_as_calls
    from hsa.harness.protocols import CALL_FORMATS

    call = [("search_products", {"query": "mug"})]
    quoted = [
        f"Calls look like this: {fmt.format_calls(call, tag)}"
        for fmt in CALL_FORMATS.values()
        for tag in (False, True)
    ]
    rows = livestream_table.to_pylist()
    for i, row in enumerate(rows):
        for event in row["events"]:
            if event["kind"] == "assistant":
                event["text"] = quoted[i % len(quoted)]
                break
    table = pa.Table.from_pylist(rows, schema=livestream_table.schema)
    pq.write_table(table, tmp_path / "in.parquet")
    switch = RecipeRule("protocol.switch", 1.0, {"target": "text"})
    chosen = Recipe(rules=(switch,), variants_per_harness=12, min_rules=1)
    out = tmp_path / "out"
    config = AugmentConfig(recipe=chosen, variants_per_trajectory=4)
    augment(open_source(tmp_path / "in.parquet"), out, config)
    variants = read_variants(out)
    events = {r["id"]: Trajectory.from_row(r).events for r in rows}
    written: dict[str, list[str]] = {}
    for row in iter_rows(out):
        written.setdefault(row["source_id"], []).append(row["variant_id"])
        texts = [e.text for e in events[row["source_id"]] if e.kind == "assistant"]
        protocol = variants[row["variant_id"]].harness.protocol
        assert not any(reads_as_calls(t, protocol) for t in texts), (row["id"], protocol)
    harness = get_env("livestream").harness()
    planning = dataclasses.replace(chosen, variants_per_harness=max(chosen.variants_per_harness, 4))
    drawing = dataclasses.replace(planning, variants_per_trajectory=4)
    passed_over = 0
    for row in rows:
        context = Context.of(events[row["id"]])
        planned = [canonical_variant(harness), *plan(harness, drawing, context=context)]
        predicted = pick(planned, row["id"], drawing, events=events[row["id"]])
        assert sorted(written[row["id"]]) == sorted(v.variant_id for v in predicted)
        passed_over += predicted != pick(planned, row["id"], drawing)
    assert passed_over  # some trajectories would have been written under such a protocol


def test_arguments_nested_too_deep_for_python_literals_skip_those_formats_alone(
    tmp_path: Path, livestream_table: pa.Table
) -> None:
    # Python literals nest at most MAX_DEPTH levels (Python's parser refuses deeper): the
    # python and XML call formats cannot write such an argument, which stopped the whole job.
    # The picker passes over those variants for the trajectory alone, as plan then pick
    # predicts, and counts it short when it gets fewer.
    from hsa.harness.protocols.literals import MAX_DEPTH

    depths = {0: 150, 1: MAX_DEPTH + 1, 2: MAX_DEPTH}
    rows = livestream_table.to_pylist()[:8]
    for i, depth in depths.items():
        nested: object = 1
        for _ in range(depth):
            nested = [nested]
        call = next(e for e in rows[i]["events"] if e["kind"] == "tool_call")
        call["args"] = json.dumps({**json.loads(call["args"]), "x": nested})
    table = pa.Table.from_pylist(rows, schema=livestream_table.schema)
    pq.write_table(table, tmp_path / "in.parquet")
    switch = RecipeRule("protocol.switch", 1.0, {"target": "text"})
    chosen = Recipe(rules=(switch,), variants_per_harness=12, min_rules=1)
    out = tmp_path / "out"
    config = AugmentConfig(recipe=chosen, variants_per_trajectory=6, workers=1)
    report = augment(open_source(tmp_path / "in.parquet"), out, config)
    variants = read_variants(out)
    written: dict[str, list[str]] = {}
    for row in iter_rows(out):
        written.setdefault(row["source_id"], []).append(row["variant_id"])
    assert len(written) == len(rows)  # every trajectory, the deep ones too
    literal = {"python", "xml_verbose", "xml_concise"}
    harness = get_env("livestream").harness()
    planning = dataclasses.replace(chosen, variants_per_harness=12)
    drawing = dataclasses.replace(planning, variants_per_trajectory=6)
    short = 0
    for i, row in enumerate(rows):
        events = Trajectory.from_row(row).events
        planned = [canonical_variant(harness), *plan(harness, drawing, context=Context.of(events))]
        predicted = pick(planned, row["id"], drawing, events=events)
        assert sorted(written[row["id"]]) == sorted(v.variant_id for v in predicted)
        formats = {variants[v].harness.protocol.call_format for v in written[row["id"]]}
        assert bool(formats & literal) == (i not in (0, 1)), (i, formats)
        short += len(predicted) < 7
    assert 0 < short <= report.short


def test_any_number_of_workers_gives_the_same_bytes(
    tmp_path: Path, shards: Path, monkeypatch, charts_as_their_data
) -> None:
    from hsa.augment import registry
    from hsa.augment.rule import Rewrite

    # a rule written the simple way, in a test function, planned alongside built-in ones
    registry._load_builtins()
    monkeypatch.setattr(registry, "_RULES", dict(registry._RULES))

    @registry.rule("tools.upper_first", version="1")
    def upper_first(harness, rng, params, context):
        """Upper-case the first tool's description."""
        first, *rest = harness.tools
        changed = dataclasses.replace(first, description=first.description.upper())
        return Rewrite(harness.replace(tools=(changed, *rest)))

    chosen = dataclasses.replace(
        default_recipe(),
        rules=(*default_recipe().rules, RecipeRule("tools.upper_first", 0.5)),
    )
    reports = {}
    for workers in (1, 2):
        reports[workers] = augment(
            open_source(shards),
            tmp_path / f"w{workers}",
            AugmentConfig(recipe=chosen, variants_per_trajectory=3, workers=workers),
        )
    assert digests(tmp_path / "w1") == digests(tmp_path / "w2")
    assert reports[1].planner == reports[2].planner and reports[1].planner["groups"] > 8
    assert "tools.upper_first" in {
        r["name"] for r in json.loads((tmp_path / "w2" / "manifest.json").read_text())["rules"]
    }
    assert set(reports[2].timings) == {"read", "plan", "render", "write", "finish"}


def _conversations(path: Path, count: int, shops: int | None = None) -> Path:
    """OpenAI chat JSONL where every conversation has tools of its own (``shops``: the
    conversations of ``n % shops`` share theirs)."""
    with path.open("w", encoding="utf-8") as handle:
        for row_number in range(count):
            n = row_number % shops if shops else row_number
            tools = [
                {
                    "type": "function",
                    "function": {
                        "name": f"lookup_item_{n}_{t}",
                        "description": f"Look up item {t} of shop {n}.",
                        "parameters": {
                            "type": "object",
                            "properties": {"item_code": {"type": "string"}},
                            "required": ["item_code"],
                        },
                    },
                }
                for t in range(3)
            ]
            call = {
                "id": "c1",
                "type": "function",
                "function": {"name": f"lookup_item_{n}_0", "arguments": '{"item_code": "A7"}'},
            }
            messages = [
                {"role": "user", "content": f"Where is item A7 of shop {n}?"},
                {"role": "assistant", "content": None, "tool_calls": [call]},
                {"role": "tool", "tool_call_id": "c1", "content": '{"aisle": 4}'},
                {"role": "assistant", "content": "Aisle 4."},
            ]
            row = {"id": f"conv-{row_number}", "messages": messages, "tools": tools}
            handle.write(json.dumps(row) + "\n")
    return path


def _by_position(tmp_path: Path, **undeclared):
    """The demo harness under a text protocol, its prompt template taking its fifth section
    (the output format: under api it renders empty, as the tool docs do, and is left out of
    ``sections``), and a chat file of four conversations recorded under it (their calls with
    the ``undeclared`` arguments besides the order id)."""
    from hsa.harness import Protocol, load_harness
    from hsa.harness.prompt import system_prompt

    demo = load_harness(Path(__file__).parents[2] / "examples" / "rule-package" / "demo-harness")
    prompt = dataclasses.replace(demo.prompt, template="{{ sections[0] }}\n\n{{ sections[4] }}")
    harness = demo.replace(protocol=Protocol("text"), prompt=prompt)
    chats = tmp_path / "chats.jsonl"
    with chats.open("w") as handle:
        for i in range(4):
            arguments = json.dumps({"order_id": f"#W{i}", **undeclared})
            call = {"name": "get_order", "arguments": arguments}
            messages = [
                {"role": "system", "content": system_prompt(harness)},
                {"role": "user", "content": f"Where is order #W{i}?"},
                {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [{"id": "c1", "type": "function", "function": call}],
                },
                {"role": "tool", "tool_call_id": "c1", "content": '{"status": "shipped"}'},
                {"role": "assistant", "content": "It has shipped."},
            ]
            handle.write(json.dumps({"id": f"r{i}", "messages": messages}) + "\n")
    return harness, chats


def test_draws_under_which_the_prompt_does_not_render_are_dropped_and_counted(
    tmp_path: Path,
) -> None:
    harness, chats = _by_position(tmp_path)
    to_api = RecipeRule("protocol.switch", 0.5, {"target": "api"})
    drawn = Recipe((RecipeRule("tools.rename", 0.5), to_api), variants_per_harness=4)
    config = AugmentConfig(recipe=drawn, variants_per_trajectory=2, workers=1)
    report = augment(open_source(chats, harness=harness), tmp_path / "out", config)
    assert report.rows == 4 * 3 and report.planner["draws_dropped_unrendered"] == 1
    assert report.notes == (
        "1 draw of rules was dropped, and drawn again, as the harness's prompt did "
        "not render under them: rule 'protocol.switch': made the prompt of harness "
        "'acme-demo' fail to render: $.prompt.template: template uses an undefined value at "
        "line 3: list object has no element 4",
    )
    assert all(v.harness.protocol.name == "text" for v in read_variants(tmp_path / "out").values())

    always = Recipe((dataclasses.replace(to_api, probability=1.0),), variants_per_harness=4)
    with pytest.raises(DatasetError) as caught:
        augment(open_source(chats, harness=harness), tmp_path / "o2", AugmentConfig(recipe=always))
    assert str(caught.value) == (
        f"{chats}: line 1 (id 'r0'): planning the variants of its harness: rule "
        "'protocol.switch': made the prompt of harness 'acme-demo' fail to render: "
        "$.prompt.template: template uses an undefined value at line 3: list object has no "
        "element 4; every draw of rules that changed it did (16 dropped), so the recipe gives "
        "it no variant: leave the rule out of the recipe, or write the template so that it "
        "renders under it"
    )


def test_undeclared_arguments_that_change_no_variant_change_no_count(tmp_path: Path) -> None:
    # rows whose calls hold an argument no rule here would name a parameter: planned with it,
    # their variants are the plain ones, and the job counted the plain group planned again
    to_api = RecipeRule("protocol.switch", 0.5, {"target": "api"})
    drawn = Recipe((RecipeRule("tools.rename", 0.5), to_api), variants_per_harness=4)
    config = AugmentConfig(recipe=drawn, variants_per_trajectory=2, workers=1)
    reports = []
    for name, extra in (("plain", {}), ("argued", {"zz_undeclared": 1})):
        (tmp_path / name).mkdir()
        harness, chats = _by_position(tmp_path / name, **extra)
        reports.append(augment(open_source(chats, harness=harness), tmp_path / name / "o", config))
    plain, argued = reports
    assert argued.rows == plain.rows == 12
    assert argued.planner == plain.planner


@pytest.mark.parametrize("many", [False, True])
def test_each_rows_sight_is_what_its_events_load_and_fire(livestream_table, many) -> None:
    # by bit masks over the batch's distinct skill and hook ids, or row by row past 63
    from hsa.augment.planner import Sight
    from hsa.pipelines.rows import sights_of

    table = livestream_table
    if many:  # two more distinct hooks to each of the 48 rows: 96 past the 63 bits
        rows = table.to_pylist()
        for i, row in enumerate(rows):
            for extra in (f"extra-{i}-a", f"extra-{i}-b"):
                row["events"].append({"kind": "hook", "hook_id": extra, "hook_event": "stop"})
        table = pa.Table.from_pylist(rows, schema=table.schema)
    sights, at = sights_of(table)
    for i, row in enumerate(table.to_pylist()):
        assert sights[at[i]] == Sight.of(Trajectory.from_row(row).events), row["id"]
    assert len(set(sights)) == len(sights)


def test_only_the_variants_picks_visit_are_planned(tmp_path: Path) -> None:
    source = open_source(_conversations(tmp_path / "chats.jsonl", 12))
    planning = dataclasses.replace(default_recipe(), variants_per_harness=8)
    config = AugmentConfig(recipe=planning, variants_per_trajectory=2, workers=1)
    report = augment(source, tmp_path / "out", config)
    # one conversation per harness: each plans the two variants its pick takes (and the
    # few it passes over), not all eight
    groups = report.planner["groups"]
    assert groups == 12 and report.rows == 12 * 3
    assert 2 * groups <= report.planner["variants_planned"] < 4 * groups


def test_a_run_that_lets_its_variants_go_writes_the_same_bytes(
    tmp_path: Path, monkeypatch, charts_as_their_data
) -> None:
    # Every conversation its own harness: a run holds at most HELD_VARIANTS planned variants,
    # writes the ones it used to a part and lets them go; the variants file merges the parts.
    job = sys.modules["hsa.pipelines.augment"]  # the module (the package exports the function)
    source = _conversations(tmp_path / "chats.jsonl", 40, shops=13)  # met again in later batches
    settings = AugmentConfig(variants_per_trajectory=2, batch_size=8, workers=1)
    held = augment(open_source(source), tmp_path / "held", settings)
    monkeypatch.setattr(job, "HELD_VARIANTS", 5)
    let_go = augment(open_source(source), tmp_path / "let-go", settings)
    assert digests(tmp_path / "let-go") == digests(tmp_path / "held")
    assert let_go.variants == held.variants and held.planner["groups"] == 13
    assert let_go.planner["groups"] > 13  # harnesses let go and met again: planned again
    assert not (tmp_path / "let-go" / ".hsa" / "variants").exists()
    # parts merged two at a time as they pile up (and those merged again): the same bytes
    monkeypatch.setattr(job, "MERGED_PARTS", 2)
    merges: list[int] = []  # the parts each variants file written merges
    write = job.write_variants

    def counted(path, variants, parts=(), **options):
        merges.append(len(parts))
        return write(path, variants, parts, **options)

    monkeypatch.setattr(job, "write_variants", counted)
    augment(open_source(source), tmp_path / "merged", settings)
    assert digests(tmp_path / "merged") == digests(tmp_path / "held")
    assert merges.count(2) >= 2 and merges[-1] < 4  # merged as they piled up
    # killed after three batches: the rerun plans their variants again for the variants file
    out = tmp_path / "resumed"
    augment(open_source(source), out, settings)
    (out / "manifest.json").unlink()
    for shard in sorted((out / "data").rglob("*.parquet"))[3:]:
        shard.unlink()
    for mark in sorted((out / ".hsa" / "done").glob("*.json"))[3:]:
        mark.unlink()
    augment(open_source(source), out, settings)
    assert digests(out) == digests(tmp_path / "held")


def test_batches_planned_ahead_in_workers_give_the_same_bytes(
    tmp_path: Path, monkeypatch, charts_as_their_data
) -> None:
    # With worker processes, each batch's next is read and sent to the workers to plan while
    # it renders; what it plans is kept when the run lets its variants go (HELD_VARIANTS).
    job = sys.modules["hsa.pipelines.augment"]  # the module (the package exports the function)
    source = _conversations(tmp_path / "chats.jsonl", 60, shops=17)
    one = AugmentConfig(variants_per_trajectory=2, batch_size=12, workers=1)
    two = dataclasses.replace(one, workers=2)
    monkeypatch.setattr(job, "HELD_VARIANTS", 5)
    sent: list[int] = []  # the variants each batch read ahead sends to the workers
    ahead = job._Planner.ahead

    def counted(self, pairs):
        sent.append(len(pairs))
        return ahead(self, pairs)

    monkeypatch.setattr(job._Planner, "ahead", counted)
    single = augment(open_source(source), tmp_path / "w1", one)
    assert sent == []  # one process: nothing is planned ahead
    double = augment(open_source(source), tmp_path / "w2", two)
    assert len(sent) == 4 and min(sent) >= 8  # batches 1 to 4, each while the one before renders
    assert digests(tmp_path / "w2") == digests(tmp_path / "w1")
    assert double.rows == single.rows == 60 * 3
    # killed after two batches, resumed with workers: the batches done are not read ahead
    out = tmp_path / "resumed"
    augment(open_source(source), out, two)
    (out / "manifest.json").unlink()
    for mark in sorted((out / ".hsa" / "done").glob("*.json"))[2:]:
        for shard in json.loads(mark.read_text())["shards"]:
            (out / shard["path"]).unlink()
        mark.unlink()
    sent.clear()
    augment(open_source(source), out, two)
    assert digests(out) == digests(tmp_path / "w1")
    assert len(sent) == 2  # batches 3 and 4, read while 2 and 3 render


def test_a_rule_that_fails_in_a_batch_planned_ahead_fails_that_batch(
    tmp_path: Path, monkeypatch
) -> None:
    # Planned ahead in a worker, a rule's failure is raised when its batch is picked, with the
    # same message as in one process; the batches before it are written and kept for a rerun.
    from hsa.augment import registry
    from hsa.augment.rule import Rewrite

    registry._load_builtins()
    monkeypatch.setattr(registry, "_RULES", dict(registry._RULES))

    @registry.rule("tools.fail_on_shop_30", version="1")
    def fail_on_shop_30(harness, rng, params, context):
        """Refuse the harness of shop 30."""
        if any(t.name.startswith("lookup_item_30_") for t in harness.tools):
            raise ValueError("shop 30 is closed")
        return Rewrite(harness)

    chosen = dataclasses.replace(
        default_recipe(),
        rules=(RecipeRule("tools.fail_on_shop_30", 1.0), RecipeRule("tools.shuffle", 1.0)),
        min_rules=1,
        max_rules=None,
    )
    source = _conversations(tmp_path / "chats.jsonl", 60)  # shop 30 is in batch 2 of 5
    errors = {}
    for workers in (1, 2):
        config = AugmentConfig(recipe=chosen, batch_size=12, variants_per_trajectory=2)
        out = tmp_path / f"w{workers}"
        with pytest.raises(DatasetError) as failed:
            augment(open_source(source), out, dataclasses.replace(config, workers=workers))
        errors[workers] = str(failed.value)
        assert len(list((out / ".hsa" / "done").glob("*.json"))) == 2  # batches 0 and 1
    assert errors[1] == errors[2]
    # named by the input's row whose harness it was planning, and the rule
    assert errors[2].startswith(f"{source}: line 31 (id 'conv-30'): planning the variants of its ")
    assert "rule 'tools.fail_on_shop_30': raised ValueError: shop 30 is closed" in errors[2]


def test_full_collections_run_once_a_batch(tmp_path: Path, monkeypatch) -> None:
    # The collector's automatic full passes are off for the batch loop (each walked every
    # planned schema held); the run makes one after each batch, and the thresholds come back
    # after the run, a failed one too.
    job = sys.modules["hsa.pipelines.augment"]
    source = _conversations(tmp_path / "chats.jsonl", 40)
    settings = AugmentConfig(variants_per_trajectory=2, batch_size=8, workers=1)
    before = gc.get_threshold()
    during: list[tuple[int, int, int]] = []
    full: list[int] = []
    release = job._Planner.release

    def watched(self, folder, keep=()):
        during.append(gc.get_threshold())
        return release(self, folder, keep)

    def count(phase: str, info: dict) -> None:
        if phase == "stop" and info["generation"] == 2:
            full.append(1)

    monkeypatch.setattr(job._Planner, "release", watched)
    gc.callbacks.append(count)
    try:
        augment(open_source(source), tmp_path / "out", settings)
    finally:
        gc.callbacks.remove(count)
    assert len(during) == 5 and all(t == (*before[:2], collect._NEVER) for t in during)
    assert len(full) >= 5  # one after each of the five batches
    assert gc.get_threshold() == before
    monkeypatch.setattr(job, "_batches", lambda *a: 1 / 0)
    with pytest.raises(ZeroDivisionError):
        augment(open_source(source), tmp_path / "failed", settings)
    assert gc.get_threshold() == before


@pytest.mark.parametrize(
    ("name", "why"),
    [
        ("held-out", "holds '-': only letters"),
        ("all", "reads it as every split"),
        ("ALL", "reads it as every split"),  # datasets takes `all` in any case
        ("", "1-64 characters"),
        ("train\n", r"holds '\\n'"),
        ("x" * 65, "1-64 characters"),
    ],
)
def test_a_split_name_datasets_cannot_load_is_refused(name: str, why: str) -> None:
    # `load_dataset(DIR)` and `to_hf` failed on the dataset such a name wrote
    with pytest.raises(HsaError, match=why):
        AugmentConfig(splits={"train": 0.5, name: 0.5})


def test_split_names_yaml_reads_as_other_types_load_as_splits(
    tmp_path: Path, livestream_table: pa.Table
) -> None:
    import datasets

    # the card's front matter is YAML: unquoted, `0` was an int and `null` None to `datasets`
    rows = livestream_table.to_pylist()
    for row in rows:
        row["split"] = None
    path = _write(tmp_path / "in.parquet", rows)
    config = AugmentConfig(variants_per_trajectory=1, splits={"0": 0.5, "null": 0.5})
    report = augment(open_source(path), tmp_path / "out", config)
    loaded = datasets.load_dataset(str(tmp_path / "out"), cache_dir=str(tmp_path / "cache"))
    assert {name: len(split) for name, split in loaded.items()} == report.splits
    assert set(report.splits) == {"0", "null"}


def test_split_fractions_must_add_up_to_one() -> None:
    with pytest.raises(HsaError, match=r"add up to 1 \(these add up to 1\.4\)"):
        AugmentConfig(splits={"train": 0.9, "dev": 0.5})


def test_a_leftover_that_cannot_be_removed_is_one_error(tmp_path: Path, monkeypatch) -> None:
    from hsa.datasets import manifest as mf

    stale = tmp_path / "data" / "train" / ".part-00000.parquet.99.tmp"
    stale.parent.mkdir(parents=True)
    stale.write_bytes(b"")

    def refuse(self, missing_ok=False):
        raise PermissionError(1, "Operation not permitted")

    monkeypatch.setattr(Path, "unlink", refuse)
    with pytest.raises(DatasetError, match="cannot remove what a killed run left") as caught:
        mf.remove_temporaries(tmp_path)
    assert caught.value.file == str(stale)


def test_an_output_inside_the_input_folder_is_refused(shards: Path) -> None:
    with pytest.raises(DatasetError, match="is inside the input"):
        augment(open_source(shards), shards / "out", config())
    assert not (shards / "out").exists()


def test_the_recipes_include_canonical_decides_unless_a_setting_does(
    tmp_path: Path, shards: Path, charts_as_their_data
) -> None:
    # one config pattern: a flag or config, then the recipe, then the command's default (yes)
    def canonical_rows(name: str, include: bool | None, keep: bool | None) -> int:
        chosen = dataclasses.replace(recipe(), include_canonical=include)
        setup = AugmentConfig(recipe=chosen, keep_canonical=keep, variants_per_trajectory=1)
        augment(open_source(shards), tmp_path / name, setup)
        return sum(row["canonical"] for row in iter_rows(tmp_path / name))

    assert canonical_rows("unset", None, None) == 48
    assert canonical_rows("recipe-no", False, None) == 0
    assert canonical_rows("recipe-yes", True, None) == 48
    assert canonical_rows("flag-yes", False, True) == 48
    assert canonical_rows("flag-no", True, False) == 0
    with pytest.raises(DatasetError, match="no row to write"):
        AugmentConfig(
            recipe=dataclasses.replace(recipe(), include_canonical=False),
            variants_per_trajectory=0,
        )


def test_a_recipe_path_or_a_negative_seed_in_code_is_refused_as_the_cli_refuses_it() -> None:
    with pytest.raises(DatasetError, match=r"got the path 'r.yaml': hsa.augment.load_recipe"):
        AugmentConfig(recipe="r.yaml")  # type: ignore[arg-type]
    with pytest.raises(DatasetError, match="must not be negative") as caught:
        AugmentConfig(seed=-1)
    assert caught.value.where == "seed"


def test_the_cards_token_estimates_are_those_of_the_rows_as_written(
    tmp_path: Path, shards: Path
) -> None:
    # a text protocol's row holds no tools (null): none of their characters are counted
    from hsa.augment import Recipe, RecipeRule
    from hsa.datasets.card import estimate_tokens, merge_stats

    text = Recipe(
        rules=(RecipeRule("protocol.switch", 1.0, {"target": "text"}),),
        variants_per_harness=2,
    )
    out = tmp_path / "out"
    augment(open_source(shards), out, AugmentConfig(recipe=text))
    table = pl.read_parquet(out / "data" / "**" / "*.parquet").to_arrow()
    chars = np.array([len(t or "") for t in table.column("tools").to_pylist()], dtype=np.int64)
    assert (chars == 0).sum() > 0 and (chars > 0).sum() > 0  # text rows and canonical api rows
    tokens = estimate_tokens(table.column("messages"), chars)
    want: dict[str, int] = {}
    for n in tokens.tolist():
        want[str(n)] = want.get(str(n), 0) + 1
    marks = [json.loads(p.read_text()) for p in sorted((out / ".hsa" / "done").glob("*.json"))]
    counted = merge_stats([{"all": h} for m in marks for h in m["stats"]["tokens"].values()])
    assert counted["all"] == want


def test_a_recipe_that_leaves_include_canonical_unset_keeps_the_identity_it_had() -> None:
    # every recipe recorded include_canonical (false) before it could be unset: datasets made
    # then must still resume; what the run does is keep_canonical, recorded beside it
    from hsa.augment import default_recipe

    unset = AugmentConfig(recipe=default_recipe()).to_dict()
    assert default_recipe().include_canonical is None
    assert unset["recipe"]["include_canonical"] is False and unset["keep_canonical"] is True
    said = dataclasses.replace(default_recipe(), include_canonical=False)
    recorded = AugmentConfig(recipe=said).to_dict()
    assert recorded["recipe"] == unset["recipe"] and recorded["keep_canonical"] is False


def test_no_variant_row_shows_what_another_row_of_its_trajectory_shows(tmp_path: Path) -> None:
    # OpenAI chats without a system message: their harness's prompt renders empty, so a
    # rewrite of its sections alone (or of the body of a skill never loaded) would write the
    # canonical row again under a variant's name; the picker passes over such rewrites
    source = open_source(_conversations(tmp_path / "chats.jsonl", 60))
    config = AugmentConfig(variants_per_trajectory=4, workers=1)
    report = augment(source, tmp_path / "out", config)
    shown: dict[str, list[str]] = {}
    for row in iter_rows(tmp_path / "out"):
        seen = json.dumps([row["messages"], row["tools"]], sort_keys=True)
        shown.setdefault(row["source_id"], []).append(seen)
    assert len(shown) == 60 and report.short == 0
    assert all(len(set(texts)) == len(texts) == 5 for texts in shown.values())

    # a recipe of prompt rules alone changes nothing such a row shows: no variant rows
    prompt_only = Recipe(
        rules=tuple(
            RecipeRule(name, 1.0) for name in ("prompt.section_order", "prompt.heading_style")
        ),
        variants_per_harness=4,
        min_rules=1,
    )
    config = AugmentConfig(recipe=prompt_only, variants_per_trajectory=2, workers=1)
    report = augment(source, tmp_path / "prompt", config)
    assert report.rows == 60 and report.short == 60


def _skills_only(**changes) -> AugmentConfig:
    """Variants of one skill-content rule and no canonical rows: a trajectory that loads no
    skill is under no variant, so it gives no row."""
    only = Recipe.from_dict(
        {
            "variants_per_harness": 4,
            "rules": [{"rule": "skill_content.list_style", "probability": 1.0}],
        }
    )
    settings = {"keep_canonical": False, "batch_size": 8, "variants_per_trajectory": 1}
    return AugmentConfig(recipe=only, **{**settings, **changes})


def test_a_batch_or_split_without_rows_writes_no_shard(
    tmp_path: Path, livestream_table: pa.Table, charts_as_their_data
) -> None:
    import datasets

    # the test split's trajectories load no skill: under a skill-content rule alone, no row
    rows = livestream_table.to_pylist()
    for row in rows:
        if row["split"] == "test" and any(e["kind"] == "skill_load" for e in row["events"]):
            row["split"] = "train"
    table = pa.Table.from_pylist(rows, schema=livestream_table.schema)
    path = _write(tmp_path / "in.parquet", table)
    out, reference = tmp_path / "out", tmp_path / "ref"
    report = augment(open_source(path), reference, _skills_only())
    manifest = json.loads((reference / "manifest.json").read_text())
    # batch 0 gives no row at all, the test split none in any batch: no shard of 0 rows
    # (`datasets` cannot read one: "BatchSize must be greater than 0"), no split of none
    assert report.short and 0 < report.rows < 48
    assert all(shard["rows"] > 0 for shard in manifest["shards"])
    assert not list((reference / "data").rglob("part-00000.parquet"))
    assert set(manifest["rows"]) == {"total", "train", "dev"} and 0 not in report.splits.values()
    assert 'split: "test"' not in (reference / "README.md").read_text()
    loaded = datasets.load_dataset(str(reference), cache_dir=str(tmp_path / "cache"))
    assert {name: len(split) for name, split in loaded.items()} == report.splits
    assert len(to_hf(reference)) == report.rows
    # a batch that wrote no shard is done all the same: a rerun skips it, and repairs the rest
    augment(open_source(path), out, _skills_only())
    (out / "manifest.json").unlink()
    next((out / "data" / "train").glob("*.parquet")).unlink()
    again = augment(open_source(path), out, _skills_only())
    assert again.skipped == 6 - 1 and digests(out) == digests(reference)


def _with_a_bad_row(path: Path, table: pa.Table) -> Path:
    """``table`` written to ``path`` with row 40's first call's arguments not JSON."""
    rows = table.to_pylist()
    call = next(i for i, e in enumerate(rows[40]["events"]) if e["kind"] == "tool_call")
    rows[40]["events"][call]["args"] = "[1, 2"
    return _write(path, rows)


def test_a_run_stopped_by_a_bad_row_is_retried_and_gives_way_to_the_fixed_input(
    tmp_path: Path, livestream_table: pa.Table, charts_as_their_data
) -> None:
    # fixing the input and rerunning was refused as "the unfinished run of another config",
    # whose rerun could only fail again
    path = _with_a_bad_row(tmp_path / "in.parquet", livestream_table)
    out, clean = tmp_path / "out", tmp_path / "clean"
    for _ in range(2):  # the same input again: retried, and stopped at the same row
        with pytest.raises(DatasetError, match=r"row 40 .*not JSON"):
            augment(open_source(path), out, config(workers=1))
        assert list((out / ".hsa" / "done").glob("*.json"))  # the batches before it written
    _write(path, livestream_table)  # fixed
    augment(open_source(path), out, config(workers=1))
    augment(open_source(path), clean, config(workers=1))
    assert digests(out) == digests(clean)

    # an interrupted run is kept for its own config to finish: another config is refused
    def interrupt(done: int, total: int, written: int) -> None:
        if done == 2:
            raise KeyboardInterrupt

    stopped = tmp_path / "stopped"
    with pytest.raises(KeyboardInterrupt):
        augment(open_source(path), stopped, config(workers=1), progress=interrupt)
    with pytest.raises(DatasetError, match="unfinished run of another config"):
        augment(open_source(path), stopped, config(seed=5, workers=1))


def test_a_file_hsa_did_not_write_outlives_the_failed_run_it_sat_beside(
    tmp_path: Path, livestream_table: pa.Table
) -> None:
    # another config starting over removed data/ whole
    path = _with_a_bad_row(tmp_path / "in.parquet", livestream_table)
    out = tmp_path / "out"
    with pytest.raises(DatasetError, match=r"row 40 .*not JSON"):
        augment(open_source(path), out, config(workers=1))
    mine = out / "data" / "train" / "mine.parquet"
    mine.parent.mkdir(parents=True)  # (the failed run's shards are staged in .hsa/)
    _write(mine, livestream_table.slice(0, 1))
    _write(path, livestream_table)
    with pytest.raises(DatasetError, match=r"not this dataset's .*mine\.parquet"):
        augment(open_source(path), out, config(workers=1))
    assert mine.is_file()


def test_a_run_that_gives_no_row_is_refused_and_leaves_no_dataset(
    tmp_path: Path, livestream_table: pa.Table
) -> None:
    # the first 8 trajectories load no skill: under no variant, and no canonical rows asked
    path = _write(tmp_path / "in.parquet", livestream_table.slice(0, 8))
    out = tmp_path / "out"
    with pytest.raises(
        DatasetError,
        match=r"out: no row to write, so no dataset was written: none of the 8 trajectories "
        r"is under any of the 1 variant\(s\) asked .*keep_canonical: false",
    ):
        augment(open_source(path), out, _skills_only())
    assert not (out / "manifest.json").exists() and not (out / "data").exists()
    assert not list((out / ".hsa").rglob("*.json"))  # no batch done, no run left unfinished
    # a rerun says the same; the corrected config may use the folder
    with pytest.raises(DatasetError, match="no row to write"):
        augment(open_source(path), out, _skills_only())
    report = augment(open_source(path), out, _skills_only(keep_canonical=True))
    assert report.rows == 8 and len(to_hf(out)) == 8


def test_a_stray_shard_is_refused_before_a_repair_and_before_a_finish(
    tmp_path: Path, shards: Path, charts_as_their_data
) -> None:
    reference, out = tmp_path / "ref", tmp_path / "out"
    augment(open_source(shards), reference, config())
    augment(open_source(shards), out, config())
    own = sorted((out / "data" / "train").glob("*.parquet"))
    stray = out / "data" / "train" / "part-09999.parquet"
    stray.write_bytes(own[0].read_bytes())
    why = (
        rf"{out}: 1 file\(s\) under data/ are not this dataset's \(its manifest does not list "
        r"data/train/part-09999.parquet\)"
    )
    # a damaged dataset: refused as an intact one is, before anything is repaired (a repair
    # would finish over the stray, which every reader of data/*/*.parquet counts as rows)
    own[1].unlink()
    with pytest.raises(DatasetError, match=why):
        augment(open_source(shards), out, config())
    assert (out / "manifest.json").is_file() and not own[1].exists() and stray.exists()
    # an unfinished one: refused when it would finish, the manifest not written
    (out / "manifest.json").unlink()
    with pytest.raises(DatasetError, match=why):
        augment(open_source(shards), out, config())
    assert not (out / "manifest.json").exists() and stray.exists()
    stray.unlink()
    report = augment(open_source(shards), out, config())
    assert report.skipped == 3 and digests(out) == digests(reference)


def test_rows_with_undeclared_arguments_keep_them_and_a_rerun_plans_them_the_same(
    tmp_path: Path, charts_as_their_data
) -> None:
    schema = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}
    tools = [{"type": "function", "function": {"name": "lookup", "parameters": schema}}]
    lines = []
    for i in range(6):
        args = {
            "city": f"c{i}",
            **({"args": i} if i % 2 else {}),
            **({"note": "x"} if i == 4 else {}),
        }
        call = {"id": "c1", "type": "function"}
        call["function"] = {"name": "lookup", "arguments": json.dumps(args)}
        messages = [
            {"role": "user", "content": f"Look up {i}."},
            {"role": "assistant", "content": None, "tool_calls": [call]},
            {"role": "tool", "tool_call_id": "c1", "content": "ok"},
            {"role": "assistant", "content": "Done."},
        ]
        lines.append(json.dumps({"id": f"t{i}", "messages": messages, "tools": tools}))
    source = tmp_path / "chat.jsonl"
    source.write_text("\n".join(lines) + "\n")
    wrap = RecipeRule("tools.wrap_args", 1.0, {"wrapper": "args"})
    settings = AugmentConfig(
        recipe=Recipe(rules=(wrap,), variants_per_harness=2, min_rules=1),
        variants_per_trajectory=1,
        batch_size=2,
        workers=1,
    )
    reference = tmp_path / "ref"
    augment(open_source(source), reference, settings)
    wrapped = 0
    for row in iter_rows(reference):
        calls = [c for m in row["messages"] for c in m.get("tool_calls") or ()]
        call = json.loads(calls[0]["function"]["arguments"])
        number = int(row["source_id"][1:])
        wrapped += bool(row["rules"])
        if number % 2:  # its own `args`, never the wrapper
            assert call["args"] == number
    assert wrapped == 6
    marks = [json.loads(p.read_text()) for p in sorted((reference / ".hsa/done").iterdir())]
    argued = [c for m in marks for c in m["contexts"] if len(c) == 5]
    assert argued and all(c[3] == [["lookup", [["args"]]]] for c in argued)
    # a rerun replans the batches done before from their marks: the same bytes
    out = tmp_path / "out"
    augment(open_source(source), out, settings)
    (out / "manifest.json").unlink()
    next((out / "data").rglob("*.parquet")).unlink()
    augment(open_source(source), out, settings)
    assert everything(out) == everything(reference)


def test_a_harness_too_deep_to_pickle_to_a_worker_is_planned_in_the_job(tmp_path: Path) -> None:
    # a tool schema nested 250 levels (the importer reads up to about 500): pickling it to a
    # worker process raised RecursionError, reported as "an input is nested too deeply"
    schema: dict = {"type": "string"}
    value: object = "v"
    for _ in range(250):
        schema, value = {"type": "object", "properties": {"a": schema}}, {"a": value}
    tool = {"name": "f", "description": "d", "parameters": {"type": "object"}}
    tool["parameters"]["properties"] = {"x": schema}
    call = {"id": "c1", "type": "function"}
    call["function"] = {"name": "f", "arguments": json.dumps({"x": value})}
    messages = [
        {"role": "user", "content": "do"},
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "c1", "content": "ok"},
        {"role": "assistant", "content": "done"},
    ]  # fmt: skip
    rows = [{"id": f"r{i}", "messages": messages, "tools": [{"type": "function", "function": tool}]}
            for i in range(3)]  # fmt: skip
    source = tmp_path / "deep.jsonl"
    source.write_text("".join(json.dumps(r) + "\n" for r in rows))
    one = AugmentConfig(variants_per_trajectory=8, workers=1)
    single = augment(open_source(source), tmp_path / "w1", one)
    double = augment(open_source(source), tmp_path / "w2", dataclasses.replace(one, workers=2))
    assert digests(tmp_path / "w2") == digests(tmp_path / "w1")
    assert double.rows == single.rows > 3


#: an augment run in batches of 5 with two planning workers, one of which dies (SIGKILL, as the
#: out-of-memory killer sends) at its first chunk once the first batch is marked done (the
#: fourth batch's, at the latest, sent as the third renders, after the first batch's shards are
#: written), while the other plans a chunk whose answer is larger than a pipe holds (and, with
#: a fifth argument, after it wrote the start of an answer it cuts short): the run's error, on
#: one line
_DYING = """
import os, signal, struct, sys, time
from pathlib import Path
from hsa.datasets import open_source
from hsa.errors import HsaError
from hsa.pipelines import AugmentConfig, augment

job = sys.modules["hsa.pipelines.augment"]
plan_chunk, out, died, busy = job._plan_chunk, Path(sys.argv[2]), sys.argv[3], Path(sys.argv[4])

def dying(chunk):  # in a forked worker
    if not (out / ".hsa" / "done" / "00000.json").exists():
        return plan_chunk(chunk)
    try:
        os.close(os.open(died, os.O_CREAT | os.O_EXCL))  # the first worker here
    except FileExistsError:  # the other: still planning as the pool finds the first dead
        busy.touch()
        time.sleep(1.0)
        return [["x" * 1_000_000] * len(slots) for _, slots in chunk]
    deadline = time.monotonic() + 10
    while not busy.exists() and time.monotonic() < deadline:
        time.sleep(0.01)
    if len(sys.argv) > 5:
        frame = sys._getframe()
        while frame.f_code.co_name != "_process_worker":  # the pool's, which answers
            frame = frame.f_back
        answers = frame.f_locals["result_queue"]._writer
        os.write(answers.fileno(), struct.pack("!i", 1000) + bytes(10))
    os.kill(os.getpid(), signal.SIGKILL)

job._plan_chunk = dying
config = AugmentConfig(variants_per_trajectory=2, batch_size=5, workers=2)
try:
    augment(open_source(sys.argv[1]), out, config)
except HsaError as exc:
    sys.exit(f"error: {exc}")
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="forked workers plan the patch")
@pytest.mark.parametrize("cut", [False, True], ids=["killed", "killed-answering"])
def test_a_planning_worker_killed_stops_the_run_which_a_rerun_resumes(
    tmp_path: Path, charts_as_their_data, cut: bool
) -> None:
    # A pool a worker died in waited forever for the other (it ignores the SIGTERM the pool
    # sends), and so did the interpreter's exit, past Ctrl-C and SIGTERM too. An answer cut
    # short held the pool's reader, which then never found the worker dead.
    source = _conversations(tmp_path / "chats.jsonl", 20)  # groups to plan in every batch
    out = tmp_path / "out"
    run = subprocess.Popen(
        [sys.executable, "-c", _DYING, source, out, tmp_path / "d", tmp_path / "b", *["cut"] * cut],
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        _, said = run.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        os.killpg(run.pid, signal.SIGKILL)
        run.communicate()
        pytest.fail("the run did not end after its planning worker died")
    assert run.returncode == 1
    assert re.fullmatch(
        r"error: planning worker process \d+ died \(killed by SIGKILL; out of memory\?\); the "
        r"batches written so far are kept: run the same command again to resume\n",
        said,
    ), said
    one = AugmentConfig(variants_per_trajectory=2, batch_size=5, workers=1)
    resumed = augment(open_source(source), out, one)  # (resumed to the same bytes: see above)
    assert resumed.skipped >= 1 and resumed.rows == 20 * 3  # the batches written were kept
