"""The rows a training run sees: filtered, mixed by share, deterministic."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from hsa.errors import DatasetError, TrainError
from hsa.train.config import SftSettings
from hsa.train.data import load_rows, mix


@given(
    st.lists(st.booleans(), min_size=1, max_size=60),
    st.floats(min_value=0.05, max_value=0.95),
    st.integers(0, 5),
)
def test_mix_keeps_the_share_without_repeating_a_row(canonical, share, seed):
    ids = [f"r{i}" for i in range(len(canonical))]
    kept = mix(ids, canonical, share, seed)
    assert kept == sorted(set(kept))  # each row at most once, in order
    plain = sum(canonical[i] for i in kept)
    varied = len(kept) - plain
    if plain and varied:
        # the largest mix with that share the rows allow: within one row of it
        assert abs(plain - share * len(kept)) <= 1
    assert kept == mix(ids, canonical, share, seed)


@given(
    st.lists(st.booleans(), min_size=1, max_size=60),
    st.floats(min_value=0.05, max_value=0.95),
    st.integers(1, 30),
    st.integers(0, 5),
)
def test_mix_keeps_the_share_within_max_rows(canonical, share, limit, seed):
    # a trajectory's canonical row and its variants sit together: the first rows of the mix
    # are not the share
    ids = [f"r{i}" for i in range(len(canonical))]
    kept = mix(ids, canonical, share, seed, limit)
    whole = mix(ids, canonical, share, seed)
    assert kept == sorted(set(kept)) and len(kept) == min(limit, len(whole))
    plain = sum(canonical[i] for i in kept)
    if len(kept) < len(whole) and plain and len(kept) - plain:
        assert plain == round(share * limit)
    assert kept == mix(ids, canonical, share, seed, limit)


def test_mix_edges():
    ids, canonical = ["a", "b", "c"], [True, False, False]
    assert mix(ids, canonical, None, 0) == [0, 1, 2]
    assert mix(ids, canonical, 1.0, 0) == [0]
    assert mix(ids, canonical, 0.0, 0) == [1, 2]
    assert mix(ids, canonical, None, 0, 2) == [0, 1]  # no share: the first rows
    assert len(mix(ids, canonical, 0.0, 0, 1)) == 1


def test_max_rows_keeps_the_canonical_share(dataset):
    for share, limit in ((0.5, 10), (0.9, 20), (0.2, 10)):
        settings = SftSettings(data=str(dataset), canonical_share=share, max_rows=limit)
        counts = load_rows(settings, seed=0, evaluate=False).counts
        assert counts["train"] == limit
        assert counts["canonical"] == round(share * limit), (share, limit, counts)


def test_load_rows_gives_conversations_and_counts(dataset):
    rows = load_rows(SftSettings(data=str(dataset), canonical_share=0.5), seed=0)
    assert rows.train.column_names == ["messages", "tools"]
    assert rows.counts["canonical"] == rows.counts["variants"] > 0
    assert rows.manifest_hash and rows.recipe and rows.recipe["rules"]
    first = rows.train[0]
    assert first["messages"][0]["role"] in ("system", "user")


def test_a_folder_that_is_not_a_dataset_is_refused(tmp_path):
    with pytest.raises(DatasetError, match=r"not a dataset directory: no manifest\.json"):
        load_rows(SftSettings(data=str(tmp_path)), seed=0)
    # a build stopped before its manifest: not complete, as hsa inspect says (it read "not an
    # hsa dataset; build one with hsa build")
    (tmp_path / ".hsa").mkdir()
    (tmp_path / ".hsa" / "run.json").write_text("{}")
    with pytest.raises(DatasetError, match=r"not complete \(no manifest\.json\): rerun the job"):
        load_rows(SftSettings(data=str(tmp_path)), seed=0)
    with pytest.raises(TrainError, match=r"does not exist \(expected a dataset folder") as missing:
        load_rows(SftSettings(data=str(tmp_path / "typo")), seed=0)
    assert missing.value.file == str(tmp_path / "typo")
    (tmp_path / "rows.parquet").write_bytes(b"")
    with pytest.raises(TrainError, match=r"is a file \(expected a dataset folder"):
        load_rows(SftSettings(data=str(tmp_path / "rows.parquet")), seed=0)


def test_a_share_the_rows_cannot_give_is_refused(dataset, monkeypatch):
    import hsa.train.data as data

    monkeypatch.setattr(data, "mix", lambda *args: [])
    with pytest.raises(TrainError, match=r"canonical_share 0\.5 leaves no row"):
        load_rows(SftSettings(data=str(dataset), canonical_share=0.5), seed=0)


@pytest.mark.parametrize("view", ["conversation", "firstcall"])
@pytest.mark.parametrize("verified_only", [True, False])
def test_rows_are_counted_by_verification_and_only_those_marked_unverified_left_out(
    dataset, monkeypatch, tmp_path, view, verified_only
):
    # verified null is a row no teacher checked (a recorded corpus, augmented as it is): it
    # has nothing to fail, so verified_only keeps it, as hsa augment does, and counts it
    import hsa.train.data as data
    from hsa.datasets.export import to_hf

    rows = to_hf(dataset, "train", cache_dir=tmp_path / "hf")
    flags = [(True, False, None)[i % 3] for i in range(len(rows))]
    mixed = rows.remove_columns("verified").add_column("verified", flags)
    monkeypatch.setattr(data, "to_hf", lambda *args, **kwargs: mixed)
    settings = SftSettings(data=str(dataset), verified_only=verified_only, view=view)
    counts = load_rows(settings, seed=0, evaluate=False).counts
    marked = flags.count(False)
    assert counts["verified"] == flags.count(True)
    assert counts["never_checked"] == flags.count(None)
    assert counts["unverified"] == (0 if verified_only else marked)
    assert counts["unverified_left_out"] == (marked if verified_only else 0)
    assert counts["train"] == len(rows) - counts["unverified_left_out"]
