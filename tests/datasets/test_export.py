"""Reading a dataset: Polars, TRL conversational rows, Hugging Face, and a chat template with
tools rendering the rows through a tokenizer built here, offline."""

from __future__ import annotations

import errno
import importlib
import json
import os
from pathlib import Path

import polars as pl
import pytest

from hsa.datasets import iter_rows, iter_trl, open_source, scan_dataset, to_hf
from hsa.errors import DatasetError
from hsa.pipelines import AugmentConfig, augment
from tests.datasets.conftest import recipe

# A Qwen/Hermes-style chat template: tools in the system turn, calls as <tool_call> JSON.
TEMPLATE = """
{%- if tools %}<|im_start|>system
{% if messages[0].role == 'system' %}{{ messages[0].content }}
{% endif %}# Tools
<tools>
{%- for tool in tools %}
{{ tool | tojson }}
{%- endfor %}
</tools><|im_end|>
{% elif messages[0].role == 'system' %}<|im_start|>system
{{ messages[0].content }}<|im_end|>
{% endif %}
{%- for message in messages %}
{%- if message.role == 'system' and loop.first %}
{%- elif message.role == 'assistant' %}<|im_start|>assistant
{% if message.content %}{{ message.content }}{% endif %}
{%- for call in message.tool_calls or [] %}
<tool_call>
{"name": "{{ call.function.name }}", "arguments": {{ call.function.arguments | tojson }}}
</tool_call>
{%- endfor %}<|im_end|>
{% elif message.role == 'tool' %}<|im_start|>tool
{{ message.content }}<|im_end|>
{% else %}<|im_start|>{{ message.role }}
{{ message.content }}<|im_end|>
{% endif %}
{%- endfor %}
"""


@pytest.fixture(scope="module")
def dataset(tmp_path_factory: pytest.TempPathFactory, livestream_table) -> Path:
    import pyarrow.parquet as pq

    root = tmp_path_factory.mktemp("export")
    pq.write_table(livestream_table, root / "in.parquet")
    out = root / "out"
    augment(open_source(root / "in.parquet"), out, AugmentConfig(recipe=recipe(), batch_size=32))
    return out


def tokenizer(texts: list[str]):
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    specials = ["[UNK]", "<|im_start|>", "<|im_end|>"]
    raw = Tokenizer(models.WordLevel(unk_token="[UNK]"))
    raw.pre_tokenizer = pre_tokenizers.Whitespace()
    raw.train_from_iterator(texts, trainers.WordLevelTrainer(special_tokens=specials))
    out = PreTrainedTokenizerFast(tokenizer_object=raw, unk_token="[UNK]", eos_token="<|im_end|>")
    out.chat_template = TEMPLATE
    return out


def test_load_is_a_lazy_frame(dataset: Path) -> None:
    frame = scan_dataset(dataset)
    assert isinstance(frame, pl.LazyFrame)
    table = frame.select("id", "split", "messages", "tools").collect()
    manifest = json.loads((dataset / "manifest.json").read_text())
    assert table.height == manifest["rows"]["total"]
    train = scan_dataset(dataset, split="train").select(pl.len()).collect().item()
    assert train == manifest["rows"]["train"]
    with pytest.raises(DatasetError, match="no split 'nope'"):
        scan_dataset(dataset, split="nope")
    with pytest.raises(DatasetError, match=r"no manifest\.json"):
        scan_dataset(dataset / "data")


def test_a_frame_scanned_by_a_relative_path_reads_after_a_change_of_directory(
    dataset: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # (a notebook's %cd between scan_dataset and collect: the shards were looked up there)
    monkeypatch.chdir(dataset.parent)
    frame = scan_dataset(dataset.name)
    monkeypatch.chdir(dataset.parent.parent)
    assert frame.collect().height == scan_dataset(dataset).collect().height


def test_trl_rows_render_through_a_chat_template_with_tools(dataset: Path) -> None:
    rows = list(iter_trl(dataset))
    texts = [m["content"] or "" for r in rows for m in r["messages"]]
    tok = tokenizer(texts)
    api_calls = 0
    for trl, row in zip(rows, iter_rows(dataset), strict=True):
        text = tok.apply_chat_template(trl["messages"], tools=trl["tools"] or None, tokenize=False)
        assert tok(text)["input_ids"]
        assert (trl["tools"] is None) == (trl["protocol"] != "api")
        for tool in trl["tools"] or []:
            assert json.dumps(tool, ensure_ascii=False) in text
        for message, original in zip(trl["messages"], row["messages"], strict=True):
            for call, raw in zip(
                message.get("tool_calls") or [], original["tool_calls"] or [], strict=True
            ):
                arguments = call["function"]["arguments"]
                assert isinstance(arguments, dict)
                # dict form and JSON text agree, key order and value types included
                assert json.dumps(arguments, ensure_ascii=False) == raw["function"]["arguments"]
                assert json.dumps(arguments, ensure_ascii=False) in text
                api_calls += 1
            if message["role"] == "tool":
                assert message["content"] in text
    assert api_calls > 0


def test_to_hf_gives_a_dataset_of_trl_rows(dataset: Path) -> None:
    assert str(to_hf(dataset, split="test").split) == "test"
    ds = to_hf(dataset, split="train")
    manifest = json.loads((dataset / "manifest.json").read_text())
    assert len(ds) == manifest["rows"]["train"]
    row = next(r for r in ds if any(m["tool_calls"] for m in r["messages"]))
    call = next(m for m in row["messages"] if m["tool_calls"])["tool_calls"][0]
    assert isinstance(call["function"]["arguments"], dict)
    assert isinstance(row["tools"], list) == (row["protocol"] == "api")
    tok = tokenizer([m["content"] or "" for m in row["messages"]])
    assert tok.apply_chat_template(row["messages"], tools=row["tools"] or None, tokenize=False)


def test_the_cards_ways_around_datasets_limits_hold(dataset: Path, tmp_path: Path) -> None:
    """What the card and README tell a trainer who loads shard files, or saves a subset."""
    import datasets

    from hsa.datasets import hf_features

    files = {"train": str(dataset / "data" / "train" / "*.parquet")}
    by_file = datasets.load_dataset("parquet", data_files=files, split="train")
    typed = datasets.load_dataset(
        "parquet", data_files=files, split="train", features=hf_features()
    )

    def first_arguments(rows):
        row = next(r for r in rows if any(m["tool_calls"] for m in r["messages"]))
        return next(m for m in row["messages"] if m["tool_calls"])["tool_calls"][0]["function"][
            "arguments"
        ]

    assert isinstance(first_arguments(by_file), str)  # what the card warns of
    assert first_arguments(typed) == first_arguments(to_hf(dataset, "train"))
    assert isinstance(first_arguments(typed), dict)
    subset = typed.shuffle(seed=0).select(range(5))
    subset.flatten_indices().save_to_disk(str(tmp_path / "subset"))
    assert datasets.load_from_disk(str(tmp_path / "subset")).to_list() == subset.to_list()


def test_polars_and_duckdb_query_the_shards(dataset: Path) -> None:
    import collections

    import duckdb

    rows = list(iter_rows(dataset))
    protocols = collections.Counter(r["protocol"] for r in rows)
    names = collections.Counter(
        c["function"]["name"] for r in rows for m in r["messages"] for c in m["tool_calls"] or []
    )
    assert names
    glob = str(dataset / "data" / "*" / "*.parquet")

    raw = pl.scan_parquet(glob)
    by_protocol = raw.group_by("protocol").len().collect()
    assert dict(by_protocol.iter_rows()) == protocols
    calls = (
        raw.select(pl.col("messages").explode().struct.field("tool_calls").explode())
        .select(pl.col("tool_calls").struct.field("function"))
        .unnest("function")
        .drop_nulls("name")
    )
    assert dict(calls.group_by("name").len().collect().iter_rows()) == names
    # JSON text is plain text to Polars: no cast before string or JSON operations
    assert calls.collect_schema()["arguments"] == pl.String
    assert scan_dataset(dataset).collect_schema()["tools"] == pl.String
    kinds = raw.select(pl.col("tools").str.json_path_match("$[0].type")).collect()
    assert set(kinds["tools"].drop_nulls()) == {"function"}  # text protocols send no tools
    texts = calls.collect()["arguments"].to_list()
    assert all(isinstance(json.loads(t), dict) for t in texts) and len(texts) == sum(names.values())

    sql = duckdb.connect()
    found = sql.execute(f"SELECT protocol, count(*) FROM read_parquet('{glob}') GROUP BY 1")
    assert dict(found.fetchall()) == protocols
    found = sql.execute(
        "SELECT c.function.name, count(*), min(json_type(c.function.arguments)) FROM ("
        f"  SELECT unnest(m.tool_calls) AS c FROM ("
        f"    SELECT unnest(messages) AS m FROM read_parquet('{glob}'))) GROUP BY 1"
    ).fetchall()
    assert {n: k for n, k, _ in found} == names and {t for *_, t in found} == {"OBJECT"}
    tools = sql.execute(
        f"SELECT max(json_array_length(tools)), min(typeof(tools)) FROM read_parquet('{glob}')"
    ).fetchone()
    assert tools[1] == "VARCHAR" and tools[0] > 0


def test_reading_teach_output_as_a_dataset_says_what_it_is(tmp_path: Path) -> None:
    from hsa.pipelines.teach import teach
    from hsa.teachers.config import TeachConfig

    teach(TeachConfig(tasks=2), tmp_path / "teacher")
    for read in (scan_dataset, lambda p: list(iter_rows(p))):
        with pytest.raises(DatasetError, match="this is hsa teach output"):
            read(tmp_path / "teacher")


def test_to_hf_names_a_shard_that_changed_since_it_was_written(
    dataset: Path, tmp_path: Path
) -> None:
    # datasets' own error named no file; hsa train read through it and showed a traceback
    import shutil

    copy = tmp_path / "ds"
    shutil.copytree(dataset, copy)
    shard = sorted((copy / "data" / "train").glob("*.parquet"))[0]
    shard.write_bytes(shard.read_bytes()[: shard.stat().st_size // 2])
    with pytest.raises(DatasetError, match=r"1 file\(s\) of this dataset changed") as caught:
        to_hf(copy, "train", cache_dir=tmp_path / "cache")
    assert str(shard.relative_to(copy)) in caught.value.message


@pytest.mark.parametrize(
    ("edit", "where", "said"),
    [
        (lambda m: m.update(shards=None), "$.shards", "expected a list of shards, found null"),
        (lambda m: m["shards"][0].update(path=None), "$.shards[0].path", "expected text"),
        (lambda m: m["shards"].insert(0, 7), "$.shards[0]", 'expected {"path": ...}'),
    ],
)
def test_reading_a_manifest_with_a_damaged_shard_list_names_the_key(
    dataset: Path, tmp_path: Path, edit, where: str, said: str
) -> None:
    # hsa train read it unchecked: a TypeError traceback, where hsa inspect named the key
    import shutil

    copy = tmp_path / "ds"
    shutil.copytree(dataset, copy)
    manifest = json.loads((copy / "manifest.json").read_text())
    edit(manifest)
    (copy / "manifest.json").write_text(json.dumps(manifest))
    for read in (scan_dataset, lambda p: to_hf(p, "train", cache_dir=tmp_path / "cache")):
        with pytest.raises(DatasetError, match="the manifest was edited or damaged") as caught:
            read(copy)
        assert (caught.value.where, caught.value.file) == (where, str(copy / "manifest.json"))
        assert said in caught.value.message


def test_to_hf_says_a_shard_with_a_wrong_column_in_one_line(dataset: Path, tmp_path: Path) -> None:
    # datasets logged 36 lines (the file, both Arrow schemas, the features) before hsa's error
    import logging
    import shutil

    import datasets
    import pyarrow.parquet as pq

    copy = tmp_path / "ds"
    shutil.copytree(dataset, copy)
    shard = sorted((copy / "data" / "train").glob("*.parquet"))[0]
    table = pq.read_table(shard)
    renamed = ["msgs" if name == "messages" else name for name in table.column_names]
    pq.write_table(table.rename_columns(renamed), shard)
    records: list[logging.LogRecord] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            records.append(record)

    handler = Keep()
    root = datasets.logging.get_logger()
    root.addHandler(handler)
    before = datasets.logging.get_verbosity()
    try:
        with pytest.raises(DatasetError, match=r"1 file\(s\) of this dataset changed"):
            to_hf(copy, "train", cache_dir=tmp_path / "cache")
    finally:
        root.removeHandler(handler)
    assert [r.getMessage() for r in records if r.levelno >= logging.WARNING] == []
    assert datasets.logging.get_verbosity() == before  # quiet for that call only


def test_to_hf_loads_a_split_whose_name_datasets_refuses(
    tmp_path: Path, livestream_table, monkeypatch
) -> None:
    # a dataset written when hsa took such names: datasets' ValueError escaped to_hf
    import pyarrow as pa
    import pyarrow.parquet as pq

    job = importlib.import_module("hsa.pipelines.augment")  # (the package's `augment` is the job)
    monkeypatch.setattr(job, "split_name_problem", lambda name: None)  # as hsa was then
    table = livestream_table.slice(0, 20)
    table = table.set_column(
        table.schema.get_field_index("split"), "split", pa.nulls(20, pa.string())
    )  # no split of its own: the config's are drawn
    pq.write_table(table, tmp_path / "in.parquet")
    settings = AugmentConfig(recipe=recipe(), splits={"held-out": 1.0})
    augment(open_source(tmp_path / "in.parquet"), tmp_path / "old", settings)
    rows = to_hf(tmp_path / "old", "held-out", cache_dir=tmp_path / "cache")
    assert len(rows) == len(list(iter_rows(tmp_path / "old", "held-out"))) > 0


def _failing_cache_writes(monkeypatch, code: int) -> None:
    """``datasets`` failing to write its Arrow cache with ``code``, as on a full disk."""
    from datasets.arrow_writer import ArrowWriter

    def fail(self, *args, **kwargs):
        raise OSError(code, os.strerror(code))

    monkeypatch.setattr(ArrowWriter, "write_table", fail)


@pytest.mark.parametrize("code", [errno.ENOSPC, errno.EFBIG, errno.EDQUOT, errno.EROFS])
def test_to_hf_blames_the_cache_it_cannot_write_not_the_input(
    dataset: Path, tmp_path: Path, monkeypatch, code: int
) -> None:
    # hsa train sft on a full disk said "out/ref: cannot read the dataset's shards"
    _failing_cache_writes(monkeypatch, code)
    with pytest.raises(DatasetError) as caught:
        to_hf(dataset, "train", cache_dir=tmp_path / "cache")
    assert caught.value.file == str(tmp_path / "cache")
    assert caught.value.message == f"cannot write the rows' cache: {os.strerror(code)}"


def test_a_permission_error_blames_the_cache_only_where_it_cannot_be_written(
    dataset: Path, tmp_path: Path, monkeypatch
) -> None:
    _failing_cache_writes(monkeypatch, errno.EACCES)
    with pytest.raises(DatasetError, match="cannot read the dataset's shards") as caught:
        to_hf(dataset, "train", cache_dir=tmp_path / "cache")
    assert caught.value.file == str(dataset)  # the cache can be written: a shard it could not read
    monkeypatch.setattr(os, "access", lambda path, mode: False)  # (root may write anywhere)
    with pytest.raises(DatasetError, match="cannot write the rows' cache: Permission") as caught:
        to_hf(dataset, "train", cache_dir=tmp_path / "cache")
    assert caught.value.file == str(tmp_path / "cache")
