"""A dataset directory straight into Hugging Face ``datasets`` and TRL, with no glue: splits by
name, tools and arguments as JSON objects, the Qwen2.5 tool-calling template, a few SFT steps
of a tiny model built here."""

from __future__ import annotations

import dataclasses
import json
import math
import re
import shutil
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from hsa.datasets import iter_rows, open_source
from hsa.pipelines import AugmentConfig, augment
from tests.datasets.conftest import recipe
from tests.tinymodels import qwen_model, qwen_tokenizer, texts_of

#: an argument object written as a JSON string: what a double-encoding template shows
DOUBLE_ENCODED = re.compile(r'"arguments":\s*"')


@pytest.fixture(scope="module")
def dataset(tmp_path_factory: pytest.TempPathFactory, livestream_table) -> Path:
    root = tmp_path_factory.mktemp("trl")
    pq.write_table(livestream_table.slice(0, 16), root / "in.parquet")
    out = root / "out"
    augment(open_source(root / "in.parquet"), out, AugmentConfig(recipe=recipe(), batch_size=32))
    return out


@pytest.fixture(scope="module")
def hf(dataset: Path, tmp_path_factory: pytest.TempPathFactory):
    import datasets

    return datasets.load_dataset(str(dataset), cache_dir=str(tmp_path_factory.mktemp("hf")))


@pytest.fixture(scope="module")
def tokenizer(hf):
    return qwen_tokenizer(texts_of(hf["train"]))


def test_load_dataset_gives_named_splits_tools_and_argument_objects(dataset: Path, hf) -> None:
    manifest = json.loads((dataset / "manifest.json").read_text())
    splits = {k: v for k, v in manifest["rows"].items() if k != "total"}
    # variants.parquet sits in the root and would add rows (or fail) if it were read as data
    assert {name: len(part) for name, part in hf.items()} == splits
    raw = {r["id"]: r for r in iter_rows(dataset)}
    calls = 0
    for row in (r for part in hf.values() for r in part):
        original = raw[row["id"]]
        if row["protocol"] == "api":
            assert row["tools"] == json.loads(original["tools"])
            assert all(isinstance(t, dict) and t["type"] == "function" for t in row["tools"])
        else:  # tools listed in the prompt: none sent, so null (Llama 3's template reads an
            # empty list as a tool-calling request)
            assert row["tools"] is None and original["tools"] is None
        for message, source in zip(row["messages"], original["messages"], strict=True):
            for call, text in zip(
                message["tool_calls"] or [], source["tool_calls"] or [], strict=True
            ):
                arguments = call["function"]["arguments"]
                expected = json.loads(text["function"]["arguments"])
                # exactly the call's own keys, in order: no keys merged in from other calls
                assert list(arguments) == list(expected) and arguments == expected
                calls += 1
    assert calls > 0


def test_qwen_template_renders_argument_objects_for_every_protocol(hf, tokenizer) -> None:
    rows = [r for part in hf.values() for r in part]
    protocols = {r["protocol"] for r in rows}
    assert "api" in protocols and len(protocols) > 1
    for row in rows:
        text = tokenizer.apply_chat_template(
            row["messages"], tools=row["tools"] or None, tokenize=False
        )
        assert not DOUBLE_ENCODED.search(text), row["id"]
        for tool in row["tools"] or []:
            assert json.dumps(tool, ensure_ascii=False) in text
        for message in row["messages"]:
            for call in message["tool_calls"] or []:
                arguments = json.dumps(call["function"]["arguments"], ensure_ascii=False)
                assert f'"arguments": {arguments}}}\n</tool_call>' in text


def test_sft_trainer_trains_on_rows_of_every_protocol(hf, tokenizer, tmp_path: Path) -> None:
    from trl import SFTConfig, SFTTrainer

    train = hf["train"]
    first: dict[str, int] = {}
    for i, protocol in enumerate(train["protocol"]):
        first.setdefault(protocol, i)
    rows = train.select(sorted(first.values()))
    args = SFTConfig(
        output_dir=str(tmp_path / "sft"),
        use_cpu=True,
        bf16=False,
        report_to="none",
        max_steps=2,
        per_device_train_batch_size=1,
        max_length=None,
        save_strategy="no",
        logging_steps=1,
        dataset_num_proc=None,
    )
    trainer = SFTTrainer(
        model=qwen_model(tokenizer), processing_class=tokenizer, train_dataset=rows, args=args
    )
    # what the model is trained on: the rows as TRL tokenized them through the template
    texts = [tokenizer.decode(ids) for ids in trainer.train_dataset["input_ids"]]
    assert len(texts) == len(first)
    for text, row in zip(texts, rows, strict=True):
        assert not DOUBLE_ENCODED.search(text), row["protocol"]
        for message in row["messages"]:
            for call in message["tool_calls"] or []:
                assert json.dumps(call["function"]["arguments"], ensure_ascii=False) in text
    assert any("<tool_call>\n{" in t for t in texts)
    trainer.train()
    assert trainer.state.global_step == 2
    losses = [e["loss"] for e in trainer.state.log_history if "loss" in e]
    assert losses and all(math.isfinite(x) for x in losses)


def readme_section() -> str:
    """README.md's "Train with TRL" section."""
    text = (Path(__file__).parents[2] / "README.md").read_text("utf-8")
    return text.split("## Train with TRL", 1)[1].split("\n## ", 1)[0]


def readme_snippet() -> str:
    """The Python block of README.md's "Train with TRL" section, as a user copies it."""
    return readme_section().split("```python\n", 1)[1].split("```", 1)[0]


def test_readme_snippet_trains(dataset: Path, hf, tmp_path: Path, monkeypatch) -> None:
    from tests.tinymodels import save_tiny

    snippet = readme_snippet()
    assert 6 <= len(snippet.strip().splitlines()) <= 10
    model = save_tiny(tmp_path / "tiny", texts_of(hf["train"]))
    # only paths and run size change: the lines a user copies are the ones run here
    swaps = {
        "max_length=8192": "max_length=1024",
        '"out/livestream"': repr(str(dataset)),
        '"Qwen/Qwen2.5-0.5B-Instruct"': repr(str(model)),
        'output_dir="out/sft"': f"output_dir={str(tmp_path / 'sft')!r}, max_steps=2, "
        "use_cpu=True, bf16=False, report_to='none', per_device_train_batch_size=1, "
        "save_strategy='no'",
    }
    for old, new in swaps.items():
        assert snippet.count(old) == 1, old
        snippet = snippet.replace(old, new)
    monkeypatch.setenv("HF_DATASETS_CACHE", str(tmp_path / "cache"))
    scope: dict = {}
    exec(compile(snippet, "README.md", "exec"), scope)
    assert scope["trainer"].state.global_step == 2
    # TRL's assistant_only_loss is off: the loss is on every token, the system prompt and the
    # tool results too, which the README says beside the snippet (hsa train sft masks them)
    prepared = scope["trainer"].train_dataset.select(range(4))
    assert all(row["labels"] == row["input_ids"] for row in prepared)
    section = readme_section()
    assert "this trains on every token" in section and "`assistant_only_loss=True`" in section


def test_a_rebuild_in_the_same_folder_loads_its_own_rows_not_a_cached_build(
    tmp_path: Path, livestream_table
) -> None:
    import datasets

    pq.write_table(livestream_table.slice(0, 8), tmp_path / "in.parquet")
    out, cache = tmp_path / "out", str(tmp_path / "hf")
    for seed in (1, 2):  # the same card patterns, other rows
        shutil.rmtree(out, ignore_errors=True)
        config = AugmentConfig(recipe=dataclasses.replace(recipe(), seed=seed), batch_size=32)
        augment(open_source(tmp_path / "in.parquet"), out, config)
        loaded = datasets.load_dataset(str(out), cache_dir=cache)
        on_disk = sorted(r["variant_id"] for r in iter_rows(out))
        assert sorted(v for part in loaded.values() for v in part["variant_id"]) == on_disk
