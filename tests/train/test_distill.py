"""On-policy distillation: prompts cut from variant rows, a tiny teacher, TRL's divergence."""

from __future__ import annotations

import json
import math

import pytest

from hsa.datasets.export import to_hf
from hsa.errors import TrainError
from hsa.train.distill import cut_prompts, train_distill
from tests.tinymodels import qwen_model


def test_rows_are_cut_before_each_assistant_turn_and_api_rows_are_counted_out():
    messages = [
        {"role": "system", "content": "docs"},
        {"role": "user", "content": "q"},
        {"role": "assistant", "content": "<tool_call>x</tool_call>"},
        {"role": "user", "content": "result"},
        {"role": "assistant", "content": "answer"},
    ]
    rows = [
        {"protocol": "text/hermes/json-docs", "canonical": False, "messages": messages},
        {"protocol": "api", "canonical": True, "messages": messages},
    ]
    prompts, counts = cut_prompts(rows)
    assert [len(p["prompt"]) for p in prompts] == [2, 4]
    assert prompts[1]["prompt"][-1] == {"role": "user", "content": "result"}
    assert counts == {"rows": 1, "api_rows_left_out": 1, "variant_prompts": 2, "prompts": 2}
    assert len(cut_prompts(rows, 1)[0]) == 1


def test_a_few_distillation_steps_on_variant_prompts(text_dataset, model, tmp_path):
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(model)
    teacher = tmp_path / "teacher"
    qwen_model(tokenizer, layers=3).save_pretrained(teacher)
    tokenizer.save_pretrained(teacher)
    config = {
        "hsa": {"data": str(text_dataset), "model": str(model), "teacher": str(teacher),
                "max_prompts": 4},
        "per_device_train_batch_size": 2,
        "max_completion_length": 8,
        "max_steps": 2,
        "logging_steps": 1,
        "save_strategy": "steps",
        "save_steps": 1,
    }  # fmt: skip
    out = tmp_path / "out"
    report = train_distill(config, out)
    assert report.steps == 2 and report.counts["variant_prompts"] > 0
    assert report.losses and all(math.isfinite(loss) and loss >= 0 for _, loss in report.losses)
    resolved = json.loads((out / "hsa-train.json").read_text("utf-8"))
    assert resolved["command"] == "distill" and resolved["data"]["manifest_hash"]
    assert resolved["run"]["steps"] == 2 and resolved["run"]["wall_s"] >= 0  # as SFT records
    card = (out / "README.md").read_text("utf-8")
    assert "Distilled on-policy" in card
    # the api rows left out are the split's, not those read before max_prompts was reached
    rows = to_hf(text_dataset, "train", cache_dir=tmp_path / "hf")
    api = sum(row["protocol"] == "api" for row in rows)
    assert api > cut_prompts(rows, 4)[1]["api_rows_left_out"]
    assert report.counts["api_rows_left_out"] == api
    assert f"{api} of the split's {len(rows)} rows are under the api protocol" in card
    # stopped after its last checkpoint, before its model and record: --resume said "nothing
    # to resume" and a rerun "holds the checkpoints of an unfinished run"; it finishes it
    weights = (out / "checkpoint-2" / "model.safetensors").read_bytes()
    for name in ("model.safetensors", "hsa-train.json", "README.md"):
        (out / name).unlink()
    again = train_distill(config, out, resume=True)
    assert again.steps == 2 and again.losses == report.losses
    assert report.resumed_from is None and again.resumed_from == str(out / "checkpoint-2")
    assert (out / "model.safetensors").read_bytes() == weights
    assert json.loads((out / "hsa-train.json").read_text("utf-8"))["run"]["steps"] == 2


def test_a_teacher_is_required(text_dataset, model, tmp_path):
    config = {"hsa": {"data": str(text_dataset), "model": str(model)}}
    with pytest.raises(TrainError, match=r"hsa\.teacher"):
        train_distill(config, tmp_path / "out")


def test_a_teacher_with_another_vocabulary_is_refused(text_dataset, model, tmp_path):
    from tests.tinymodels import save_tiny

    teacher = save_tiny(tmp_path / "teacher", ["a teacher trained on other text, " * 20])
    config = {"hsa": {"data": str(text_dataset), "model": str(model), "teacher": str(teacher)}}
    with pytest.raises(TrainError, match=r"the teacher's vocabulary is not the student's \(\d+"):
        train_distill(config, tmp_path / "out")
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("role", ["model", "teacher"])
def test_a_student_or_teacher_without_its_tokenizer_is_refused_naming_it(
    text_dataset, model, tmp_path, role
):
    from tests.train.test_sft import without_tokenizer

    # transformers stands in an empty tokenizer: the vocabularies were compared (or, both
    # empty, matched) and TRL failed on prompts of no token, naming neither folder
    bare = without_tokenizer(model, tmp_path / "bare")
    hsa = {"data": str(text_dataset), "model": str(model), "teacher": str(model), role: str(bare)}
    with pytest.raises(TrainError) as refused:
        train_distill({"hsa": hsa, "max_steps": 1}, tmp_path / "out")
    assert refused.value.file == str(bare)
    assert refused.value.message.startswith(f"no tokenizer here (hsa.{role}, --{role})")
    assert not (tmp_path / "out").exists()


def test_fewer_prompts_than_a_batch_are_refused_before_training(text_dataset, model, tmp_path):
    config = {
        "hsa": {"data": str(text_dataset), "model": str(model), "teacher": str(model),
                "max_prompts": 4},
        "per_device_train_batch_size": 8,
        "max_completion_length": 4,
        "max_steps": 2,
        "save_strategy": "no",
    }  # fmt: skip
    with pytest.raises(TrainError, match=r"4 prompts fill no batch of 8 \(") as refused:
        train_distill(config, tmp_path / "out")
    assert "raise hsa.max_prompts (now 4) or lower per_device_train_batch_size" in str(
        refused.value
    )
    assert refused.value.where == "$.per_device_train_batch_size"
    assert not (tmp_path / "out").exists()  # nothing written, no untrained "distilled" model
