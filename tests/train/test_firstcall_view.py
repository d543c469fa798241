"""The firstcall view: each row cut after its first assistant message, as TRL's
prompt-completion rows."""

from __future__ import annotations

import json

import pytest

import hsa.train.data as data
from hsa.errors import TrainError
from hsa.train.config import VIEWS, SftSettings
from hsa.train.data import first_call, load_rows
from hsa.train.sft import train_sft

SYSTEM = {"role": "system", "content": "You are Aria."}
USER = {"role": "user", "content": "Is the lamp in stock?"}
CALL = {
    "role": "assistant",
    "content": "",
    "tool_calls": [{"type": "function", "function": {"name": "search", "arguments": {}}}],
}
RESULT = {"role": "tool", "content": "{}"}
ANSWER = {"role": "assistant", "content": "Yes."}


def test_first_call_cuts_before_the_first_assistant_message():
    prompt, completion = first_call([SYSTEM, USER, CALL, RESULT, ANSWER])
    assert prompt == [SYSTEM, USER] and completion == [CALL]
    assert first_call([USER, ANSWER]) == ([USER], [ANSWER])
    assert first_call([SYSTEM, USER]) is None
    assert first_call([]) is None


def test_an_unknown_view_is_refused_naming_it():
    assert SftSettings().view == "conversation" and set(VIEWS) == {"conversation", "firstcall"}
    with pytest.raises(TrainError, match="view") as caught:
        SftSettings(view="nope")
    assert "nope" in str(caught.value)


@pytest.fixture(scope="module")
def conversations(dataset):
    """The dataset's whole rows, as the conversation view gives them."""
    return load_rows(SftSettings(data=str(dataset), eval_split="dev"), seed=0)


@pytest.fixture(scope="module")
def viewed(dataset):
    return load_rows(SftSettings(data=str(dataset), eval_split="dev", view="firstcall"), seed=0)


def _assert_cut(viewed_rows, whole_rows):
    assert viewed_rows.column_names == ["prompt", "completion", "tools"]
    assert len(viewed_rows) == len(whole_rows) > 0
    for cut, whole in zip(viewed_rows, whole_rows, strict=True):
        (completion,) = cut["completion"]
        assert completion["role"] == "assistant"
        assert cut["prompt"] and all(m["role"] != "assistant" for m in cut["prompt"])
        messages = whole["messages"]
        assert cut["prompt"] + cut["completion"] == messages[: len(cut["prompt"]) + 1]
        assert cut["tools"] == whole["tools"]


def test_the_firstcall_view_gives_prompt_and_completion(viewed, conversations):
    _assert_cut(viewed.train, conversations.train)
    assert "no_assistant" not in viewed.counts  # every built row answers
    assert viewed.counts["train"] == conversations.counts["train"]


def test_the_eval_split_is_viewed_too(viewed, conversations):
    assert viewed.eval is not None and viewed.counts["eval"] == len(viewed.eval)
    _assert_cut(viewed.eval, conversations.eval)


def test_rows_without_an_assistant_message_are_dropped_and_counted(dataset, monkeypatch, tmp_path):
    seen = []

    def every_other(messages):
        seen.append(messages)
        return None if len(seen) % 2 else first_call(messages)

    monkeypatch.setattr(data, "first_call", every_other)
    settings = SftSettings(data=str(dataset), eval_split=None, view="firstcall")
    rows = load_rows(settings, seed=0, cache=tmp_path / "hf")
    assert rows.eval is None
    dropped = rows.counts["no_assistant"]
    assert dropped == (rows.counts["train"] + 1) // 2
    assert len(rows.train) == rows.counts["train"] - dropped


def _settings(dataset, model, **trl):
    return {
        "hsa": {
            "data": str(dataset),
            "model": str(model),
            "eval_split": None,
            "view": "firstcall",
            "max_rows": 6,
        },
        "max_length": None,
        "per_device_train_batch_size": 2,
        "logging_steps": 1,
        "save_strategy": "no",
        **trl,
    }


def test_the_loss_covers_the_first_assistant_message_alone(dataset, model, monkeypatch, tmp_path):
    from trl import SFTTrainer

    caught = {}

    def stop(self, *args, **kwargs):
        caught["trainer"] = self
        raise KeyboardInterrupt

    monkeypatch.setattr(SFTTrainer, "train", stop)
    with pytest.raises(KeyboardInterrupt):
        train_sft(_settings(dataset, model, max_steps=1), tmp_path / "out")
    trainer = caught["trainer"]
    tokenizer = trainer.processing_class
    for example in trainer.train_dataset:
        ids, labels = example["input_ids"], example["labels"]
        learned = tokenizer.decode([t for t, lab in zip(ids, labels, strict=True) if lab != -100])
        (completion,) = example["completion"]
        for call in completion.get("tool_calls") or []:
            assert call["function"]["name"] in learned
            assert json.dumps(call["function"]["arguments"], ensure_ascii=False) in learned
        assert (completion.get("content") or "").strip() in learned
        for message in example["prompt"]:
            content = (message.get("content") or "").strip()
            if len(content) > 40:
                assert content not in learned, message["role"]
        assert "<|im_end|>" in learned  # the model learns to stop


def test_a_tiny_model_trains_on_prompt_completion_rows(dataset, model, tmp_path):
    report = train_sft(_settings(dataset, model, max_steps=3), tmp_path / "out")
    assert report.steps == 3 and len(report.losses) == 3
    assert all(loss > 0 for _, loss in report.losses)
    assert report.counts["train"] == 6
    assert (tmp_path / "out" / "model.safetensors").is_file()
