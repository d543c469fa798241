"""HSA-SFT on a tiny model: the loss mask, learning, arguments as objects, resume, errors."""

from __future__ import annotations

import errno
import json
import random
import re
from pathlib import Path

import numpy as np
import pytest
import torch

from hsa.errors import DatasetError, TrainError
from hsa.train.card import HF_CACHE
from hsa.train.sft import RESOLVED, train_sft
from tests.tinymodels import NO_TOOLS_TEMPLATE, qwen_template

DOUBLE_ENCODED = re.compile(r'"arguments":\s*"')


def config(dataset, model, max_rows=24, **trl):
    """A run's settings; ``max_rows`` of the dataset's 99 training rows (tokenizing them all
    cost each run 2 s), None for every row."""
    return {
        "hsa": {
            "data": str(dataset),
            "model": str(model),
            "eval_split": None,
            "max_rows": max_rows,
        },
        "max_length": None,
        "per_device_train_batch_size": 1,
        "logging_steps": 1,
        "save_strategy": "no",
        **trl,
    }


def trainer_of(dataset, model, tmp_path, **trl):
    """The SFTTrainer hsa builds, caught just before it trains."""
    return stopped(config(dataset, model, **trl), tmp_path / "out")


def stopped(settings, out):
    """The SFTTrainer ``train_sft(settings, out)`` builds, caught just before it trains."""
    from trl import SFTTrainer

    caught = {}

    def stop(self, *args, **kwargs):
        caught["trainer"] = self
        raise KeyboardInterrupt

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(SFTTrainer, "train", stop)
        with pytest.raises(KeyboardInterrupt):
            train_sft(settings, out)
    return caught["trainer"]


def test_the_loss_covers_exactly_the_assistant_turns(dataset, model, tmp_path):
    trainer = trainer_of(dataset, model, tmp_path, max_steps=1)
    tokenizer = trainer.processing_class
    checked = 0
    for example in trainer.train_dataset.select(range(6)):
        ids, labels = example["input_ids"], example["labels"]
        learned = tokenizer.decode([t for t, lab in zip(ids, labels, strict=True) if lab != -100])
        for message in example["messages"]:
            content = (message.get("content") or "").strip()
            if message["role"] == "assistant":
                assert content in learned  # every assistant turn is learned
                for call in message.get("tool_calls") or []:
                    arguments = json.dumps(call["function"]["arguments"], ensure_ascii=False)
                    assert arguments in learned  # as an object, never a JSON string
                checked += 1
            elif len(content) > 40:
                assert content not in learned, message["role"]  # nothing else is
        assert "<|im_end|>" in learned  # the model learns to stop
        assert not DOUBLE_ENCODED.search(tokenizer.decode(ids))
    assert checked


def test_overfitting_a_handful_of_rows_drives_the_loss_down(dataset, model, tmp_path):
    settings = config(
        dataset, model, max_steps=20, learning_rate=1e-2, lr_scheduler_type="constant"
    )
    settings["hsa"]["max_rows"] = 2
    report = train_sft(settings, tmp_path / "out")
    losses = [loss for _, loss in report.losses]
    assert report.steps == 20 and len(losses) == 20
    assert sum(losses[-5:]) / 5 < 0.5 * sum(losses[:5]) / 5, losses


def test_a_run_leaves_the_callers_rng_where_it_was(dataset, model, tmp_path):
    # a sweep drawing each run's learning rate drew the same one after every run: the trainer
    # seeded the process's generators from its seed (42), and they stayed so
    random.seed(7)
    np.random.seed(7)
    torch.manual_seed(7)
    first = (random.random(), np.random.random(), torch.rand(1).item())
    random.seed(7)
    np.random.seed(7)
    torch.manual_seed(7)
    train_sft(config(dataset, model, max_steps=1), tmp_path / "out")
    assert (random.random(), np.random.random(), torch.rand(1).item()) == first
    assert torch.initial_seed() == 7


def test_a_run_writes_the_model_the_resolved_config_and_a_card(dataset, model, tmp_path):
    out = tmp_path / "out"
    settings = config(dataset, model, max_steps=2)
    settings["hsa"]["canonical_share"] = 0.5
    report = train_sft(settings, out)
    assert report.counts["canonical"] == report.counts["variants"]
    resolved = json.loads((out / RESOLVED).read_text("utf-8"))
    assert resolved["trl"]["max_steps"] == 2 and resolved["trl"]["assistant_only_loss"] is True
    assert resolved["data"]["manifest_hash"] and resolved["recipe"]["rules"]
    card = (out / "README.md").read_text("utf-8")
    assert resolved["data"]["manifest_hash"] in card and "![loss](loss.png)" in card
    assert (out / "loss.png").read_bytes()[:4] == b"\x89PNG"
    assert (out / "model.safetensors").is_file() and (out / "tokenizer_config.json").is_file()
    assert not (out / HF_CACHE).exists()  # the tokenized dataset was scratch


def test_resume_continues_from_the_last_checkpoint(dataset, model, tmp_path):
    out = tmp_path / "out"
    with pytest.raises(TrainError, match="no checkpoint here"):
        train_sft(config(dataset, model, max_steps=2), out, resume=True)
    train_sft(config(dataset, model, max_steps=2, save_strategy="steps", save_steps=1), out)
    again = train_sft(
        config(dataset, model, max_steps=3, save_strategy="steps", save_steps=1), out, resume=True
    )
    assert again.resumed_from.endswith("checkpoint-2") and again.steps == 3
    # resuming at max_steps would train a step past it: refused, and nothing changes
    before = (out / "model.safetensors").read_bytes()
    with pytest.raises(TrainError, match=r"\(checkpoint-3\) is at max_steps=3 already"):
        train_sft(config(dataset, model, max_steps=3, save_steps=1), out, resume=True)
    assert (out / "model.safetensors").read_bytes() == before
    # a run killed part way (checkpoints, no hsa-train.json) is not started over by mistake
    (out / "hsa-train.json").unlink()
    with pytest.raises(TrainError, match=r"checkpoints of an unfinished run \(checkpoint-3\)"):
        train_sft(config(dataset, model, max_steps=3, save_steps=1), out)
    # stopped after its last checkpoint, before writing its model: resuming finishes it from
    # that checkpoint, with no step more
    (out / "model.safetensors").unlink()
    done = train_sft(config(dataset, model, max_steps=3, save_steps=1), out, resume=True)
    assert done.steps == 3 and (out / "hsa-train.json").is_file()
    assert (out / "model.safetensors").read_bytes() == before
    # a resume with other data or batches would mix two runs in one model: refused
    other = config(dataset, model, max_steps=4, save_steps=1, per_device_train_batch_size=2)
    other["hsa"]["max_rows"] = 2
    with pytest.raises(TrainError, match="other settings") as refused:
        train_sft(other, out, resume=True)
    assert "hsa.max_rows: 24 then, 2 now" in refused.value.message
    assert "trainer.per_device_train_batch_size: 1 then, 2 now" in refused.value.message
    # trained again from the start, the folder keeps no checkpoint of the run before
    train_sft(config(dataset, model, max_steps=2, save_strategy="steps", save_steps=1), out)
    assert sorted(p.name for p in out.glob("checkpoint-*")) == ["checkpoint-1", "checkpoint-2"]


@pytest.mark.parametrize(
    "change, message",
    [
        (
            {"learning_rat": 1e-4},
            "SFTConfig has no field 'learning_rat'; did you mean 'learning_rate'?",
        ),
        ({"hsa": {"dta": "x"}}, "unknown setting 'dta'; did you mean 'data'?"),
        ({"hsa": {"data": "DATA", "model": "/no/such/model"}}, "/no/such/model"),
        ({"hsa": {"data": "DATA", "model": "MODEL", "canonical_share": 2}}, "canonical_share"),
        # a setting TRL refuses is about the config, not the chat template
        ({"packing": True}, "TRL refused the setup: When packing is enabled, `max_length` can't"),
    ],
)
def test_bad_config_is_refused_naming_the_key(dataset, model, tmp_path, change, message):
    settings = config(dataset, model, max_steps=1)
    for key, value in change.items():
        if key == "hsa":
            value = {
                k: {"DATA": str(dataset), "MODEL": str(model)}.get(v, v) for k, v in value.items()
            }
        settings[key] = value
    with pytest.raises(TrainError) as caught:
        train_sft(settings, tmp_path / "out")
    assert message in str(caught.value) and "chat_template_path" not in str(caught.value)


def test_truncation_that_leaves_nothing_to_learn_says_so(dataset, model, tmp_path):
    with pytest.raises(TrainError, match="max_length=64"):
        train_sft(config(dataset, model, max_steps=1, max_length=64), tmp_path / "out")
    # the tokenized copy of the data it made is gone, and the folder it made with it
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("name", ["{tmp}/missing", "out/missing", "a/b/c", "./missing"])
def test_a_model_path_that_is_not_there_is_said_at_once_not_after_the_hubs_retries(
    tmp_path, monkeypatch, name
):
    from hsa.train.sft import load_model

    monkeypatch.chdir(tmp_path)
    (tmp_path / "out").mkdir()
    path = name.format(tmp=tmp_path)
    monkeypatch.setattr("transformers.AutoTokenizer.from_pretrained", _no_hub)
    with pytest.raises(TrainError, match="no model here") as found:
        load_model(path)
    assert found.value.file == path


def _no_hub(*args, **kwargs):
    raise AssertionError("the hub was asked")


@pytest.fixture
def public_hub(monkeypatch):
    """The hub's settings as on a machine that sets none (HF_HUB_OFFLINE, HF_ENDPOINT)."""
    monkeypatch.setattr("huggingface_hub.constants.HF_HUB_OFFLINE", False)
    monkeypatch.setattr("huggingface_hub.constants.ENDPOINT", "https://huggingface.co")


def test_a_hub_name_still_goes_to_the_hub(tmp_path, monkeypatch, public_hub):
    from hsa.train.sft import load_model

    monkeypatch.chdir(tmp_path)

    def offline(*args, **kwargs):
        raise OSError("we are offline")

    monkeypatch.setattr("transformers.AutoTokenizer.from_pretrained", offline)
    monkeypatch.setattr("socket.getaddrinfo", lambda *args: [])  # the hub's host resolves
    for name in ("Qwen/Qwen2.5-0.5B-Instruct", "gpt2"):
        with pytest.raises(TrainError, match="cannot load the model: we are offline"):
            load_model(name)


def test_a_hub_name_with_no_hub_to_reach_is_said_at_once(tmp_path, monkeypatch, public_hub):
    from hsa.train.sft import load_model

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub-cache"))
    monkeypatch.setattr("huggingface_hub.constants.HF_HUB_CACHE", str(tmp_path / "hub-cache"))
    monkeypatch.setattr("transformers.AutoTokenizer.from_pretrained", _no_hub)

    def unresolved(*args):
        raise OSError(-2, "Name or service not known")

    monkeypatch.setattr("socket.getaddrinfo", unresolved)
    with pytest.raises(TrainError, match=r"huggingface\.co cannot be reached \(Name or service"):
        load_model("tinyy")
    monkeypatch.setattr("huggingface_hub.constants.HF_HUB_OFFLINE", True)
    with pytest.raises(TrainError, match="no such hub model in the local cache; HF_HUB_OFFLINE"):
        load_model("org/tinyy")


def test_a_folder_without_config_json_is_not_a_model(tmp_path):
    from hsa.train.sft import load_model

    with pytest.raises(TrainError, match=r"no config\.json here: not a model folder"):
        load_model(str(tmp_path))


def test_the_wall_time_recorded_is_the_whole_runs_across_a_resume(dataset, model, tmp_path):
    # hsa-train.json gave the whole run's steps and tokens but only the last part's wall_s
    import time

    out = tmp_path / "out"
    train_sft(config(dataset, model, max_steps=2, save_strategy="steps", save_steps=1), out)
    first = json.loads((out / "hsa-train.json").read_text("utf-8"))["run"]["wall_s"]
    state = out / "checkpoint-2" / "trainer_state.json"
    saved = json.loads(state.read_text("utf-8"))
    clock = saved["stateful_callbacks"]["RunClock"]["args"]
    assert 0 < clock["earlier"] <= first + 0.1  # the run's time when the checkpoint was written
    clock["earlier"] = 1000.0  # as if the first part had taken that long
    state.write_text(json.dumps(saved), "utf-8")
    began = time.monotonic()
    again = config(dataset, model, max_steps=3, save_strategy="steps", save_steps=1)
    train_sft(again, out, resume=True)
    part = time.monotonic() - began
    run = json.loads((out / "hsa-train.json").read_text("utf-8"))["run"]
    assert run["steps"] == 3 and 1000.0 < run["wall_s"] <= 1000.0 + part + 0.1
    later = json.loads((out / "checkpoint-3" / "trainer_state.json").read_text("utf-8"))
    assert later["stateful_callbacks"]["RunClock"]["args"]["earlier"] > 1000.0


def test_tokens_trained_add_up_across_a_resume():
    from hsa.train.sft import trained_tokens

    # TRL's running count starts again from zero in a resumed run
    log = [
        {"num_tokens": 10},
        {"loss": 1.0},
        {"num_tokens": 20},
        {"num_tokens": 5},
        {"num_tokens": 9},
    ]
    assert trained_tokens(log) == 29
    assert trained_tokens([{"loss": 1.0}]) is None


def test_tokens_are_exact_across_a_stop_between_logs(dataset, model, tmp_path, monkeypatch):
    from trl import SFTTrainer

    from hsa.train.sft import trained_tokens

    # the tokens were TRL's logged counts, summed: the steps between the last log and the
    # checkpoint resumed from were in none of them (a stop before the first log: all of them)
    whole = tmp_path / "whole"
    batches = {"per_device_train_batch_size": 2}  # rows of two lengths: a batch with padding
    settings = config(dataset, model, max_steps=2, save_strategy="steps", save_steps=2, **batches)
    settings["hsa"]["max_rows"] = 4
    train_sft(settings, whole)
    tokens = json.loads((whole / RESOLVED).read_text("utf-8"))["run"]["tokens"]
    state = json.loads((whole / "checkpoint-2" / "trainer_state.json").read_text("utf-8"))
    assert tokens == trained_tokens(state["log_history"]) > 0  # TRL's count, as before

    save = SFTTrainer._save_checkpoint

    def stop_after(self, *args, **kwargs):
        save(self, *args, **kwargs)
        raise KeyboardInterrupt

    out = tmp_path / "out"
    settings = config(
        dataset, model, max_steps=2, logging_steps=3, save_strategy="steps", save_steps=1, **batches
    )
    settings["hsa"]["max_rows"] = 4
    settings["save_total_limit"] = 1  # (the checkpoint resumed from is gone at the end)
    with monkeypatch.context() as patch:
        patch.setattr(SFTTrainer, "_save_checkpoint", stop_after)
        with pytest.raises(KeyboardInterrupt):
            train_sft(settings, out)
    assert train_sft(settings, out, resume=True).resumed_from.endswith("checkpoint-1")
    assert json.loads((out / RESOLVED).read_text("utf-8"))["run"]["tokens"] == tokens


def test_evaluation_rows_are_loaded_only_when_the_trainer_evaluates(dataset, model, tmp_path):
    def evaluated(**trl):
        settings = config(dataset, model, max_steps=1, **trl)
        settings["hsa"]["eval_split"] = "dev"
        return stopped(settings, tmp_path / "out").eval_dataset

    assert evaluated() is None  # eval_strategy "no" (TRL's default): nothing to tokenize
    assert len(evaluated(eval_strategy="steps", eval_steps=1)) > 0


def test_a_resume_compares_the_dataset_not_how_its_path_is_written(dataset, model, tmp_path):
    import shutil

    data = tmp_path / "ds"
    shutil.copytree(dataset, data)
    out = tmp_path / "out"
    train_sft(config(data, model, max_steps=1, save_strategy="steps", save_steps=1), out)
    again = train_sft(config(f"{data}/.", model, max_steps=2, save_steps=1), out, resume=True)
    assert again.steps == 2
    # the same path, rebuilt into another dataset: another run's data
    manifest = json.loads((data / "manifest.json").read_text())
    manifest["config_hash"] = "0" * 64
    (data / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(TrainError, match=r"hsa\.dataset: '[0-9a-f]{12}.* then, '0{64}' now"):
        train_sft(config(data, model, max_steps=3, save_steps=1), out, resume=True)


def test_a_run_never_writes_over_a_folder_of_other_files(dataset, model, tmp_path):
    from hsa.errors import TrainError
    from hsa.train.sft import resume_point

    (tmp_path / "README.md").write_text("my notes")
    with pytest.raises(TrainError, match="holds files that are not an hsa training run"):
        resume_point(tmp_path, False)
    with pytest.raises(TrainError, match="is a file"):
        resume_point(tmp_path / "README.md", False)
    assert resume_point(tmp_path / "new", False) is None  # a new folder is fine
    config = {"hsa": {"data": str(dataset), "model": str(model)}, "max_steps": 1}
    with pytest.raises(TrainError, match="is a file"):  # said as it is, nothing cleaned up
        train_sft(config, tmp_path / "README.md")


def test_a_second_run_into_the_same_folder_is_refused_naming_the_first(dataset, model, tmp_path):
    from hsa.datasets.lock import hold
    from hsa.errors import HsaError

    out = tmp_path / "out"
    settings = config(dataset, model, max_steps=1)
    with hold(out, command="train sft"):  # a live run (this process) writes into out
        with pytest.raises(HsaError, match=r"another run is writing here: .*train sft"):
            train_sft(settings, out)
        assert sorted(p.name for p in out.rglob("*")) == [".hsa", "lock"]  # nothing else made
    assert train_sft(settings, out).steps == 1  # free again: the run takes the folder
    assert not (out / ".hsa" / "lock").exists() and (out / "model.safetensors").is_file()


def test_rows_dropped_at_max_length_are_counted_out_by_kind(dataset, model, tmp_path):
    from hsa.datasets.export import to_hf

    # the fixture's rows reach their first assistant token between about 2,600 and 3,900
    # tokens: max_length 3,400 leaves the longest of them (variants) nothing to learn, and TRL
    # drops those, which changes the canonical share
    settings = config(dataset, model, None, max_steps=1, max_length=3400)
    trained = stopped(settings, tmp_path / "probe").train_dataset
    rows = to_hf(dataset, "train", cache_dir=tmp_path / "hf")

    def key(row):
        return json.dumps([row["messages"], row["tools"]], sort_keys=True)

    canonical_of = {key(row): row["canonical"] for row in rows}
    assert len(canonical_of) == len(rows)  # each row told apart by what TRL is given
    kept = [canonical_of[key(row)] for row in trained]
    assert 0 < len(kept) < len(rows) and sum(kept) / len(kept) != sum(rows["canonical"]) / len(rows)

    out = tmp_path / "out"
    report = train_sft(settings, out)
    counts = report.counts
    assert (counts["train"], counts["canonical"]) == (len(kept), sum(kept))
    assert counts["variants"] == len(kept) - sum(kept)
    assert counts["dropped"] == len(rows) - len(kept)
    assert counts["dropped_canonical"] == sum(r["canonical"] for r in rows) - sum(kept)
    assert counts["dropped_canonical"] + counts["dropped_variants"] == counts["dropped"]
    # the rows trained on by verification: the oracle's, every one verified
    assert (counts["verified"], counts["never_checked"]) == (len(kept), 0)
    resolved = json.loads((out / RESOLVED).read_text("utf-8"))
    assert resolved["data"]["rows"] == counts
    assert "max_length=3400" in resolved["data"]["dropped_because"]
    card = (out / "README.md").read_text("utf-8")
    assert f"{len(kept)} training rows, {sum(kept)} under the canonical harness" in card
    assert f"TRL dropped {counts['dropped']} more training rows" in card
    assert "max_length=3400" in card
    # the rows kept lost assistant tokens to the cut too: counted, and said why
    assert counts["truncated"] > 0 and "max_length=3400" in resolved["data"]["truncated_because"]
    assert f"{counts['truncated']} of the rows trained on were cut short" in card


def labelled_by_row(trainer):
    """How many labelled tokens each row of the trainer's (unpacked) dataset has, by row."""
    return {
        json.dumps([row["messages"], row["tools"]], sort_keys=True): sum(
            label != -100 for label in row["labels"]
        )
        for row in trainer.train_dataset
    }


def counted(settings, out):
    """The row counts ``train_sft(settings, out)`` makes, caught just before it trains."""
    import hsa.train.sft as sft

    found = {}

    def count(rows, trainer, args):
        kept = count_kept(rows, trainer, args)
        found.update(rows.counts)
        return kept

    with pytest.MonkeyPatch.context() as patch:
        count_kept = sft.count_kept
        patch.setattr(sft, "count_kept", count)
        stopped(settings, out)
    return found


def test_rows_cut_short_at_max_length_are_counted_packed_or_not(dataset, model, tmp_path):
    # of the first 6 rows, max_length 3,400 leaves one nothing to learn and cuts the assistant
    # turns of most others short (a tool call cut mid-way, the final answer gone)
    settings = config(dataset, model, max_steps=1)
    settings["hsa"]["max_rows"] = 6
    whole = labelled_by_row(stopped(settings, tmp_path / "whole"))
    settings["max_length"] = 3400
    cut = labelled_by_row(stopped(settings, tmp_path / "cut"))
    truncated = sum(n < whole[row] for row, n in cut.items())
    assert 0 < truncated < len(cut) < len(whole)
    counts = counted(settings, tmp_path / "out")
    assert (counts["train"], counts["dropped"]) == (len(cut), len(whole) - len(cut))
    assert counts["truncated"] == truncated
    # packing cuts each row at max_length as it packs (TRL keeps no row apart): the same rows
    # lose their assistant tokens, and are counted so, not as trained on whole
    assert counted({**settings, "packing": True}, tmp_path / "packed") == counts


def test_evaluation_rows_left_nothing_to_learn_are_counted_packed_or_not(dataset, model, tmp_path):
    # TRL packs the evaluation rows too, cutting each at max_length: those left with no
    # assistant token were counted as evaluated, as they were when packing was off
    settings = config(dataset, model, max_steps=1, max_length=3300, eval_strategy="steps")
    settings["hsa"].update(max_rows=6, eval_split="dev")
    counts = counted(settings, tmp_path / "out")
    assert counts["eval_dropped"] > 0 and counts["eval"] > 0
    packed = counted({**settings, "packing": True}, tmp_path / "packed")
    assert (packed["eval"], packed["eval_dropped"]) == (counts["eval"], counts["eval_dropped"])


def test_packing_that_leaves_nothing_to_learn_is_refused(dataset, model, tmp_path):
    # every row's first assistant token lies past 1,024 tokens: packing cuts each row there,
    # and every step would train on nothing (loss 0, grad_norm 0) and report success
    settings = config(dataset, model, max_steps=1, max_length=1024, packing=True)
    settings["hsa"]["max_rows"] = 4
    with pytest.raises(TrainError, match=r"max_length=1024 \(packing \(strategy bfd\)"):
        train_sft(settings, tmp_path / "out")
    assert not (tmp_path / "out").exists()


def test_labelled_tokens_are_counted_per_row():
    from datasets import Dataset

    from hsa.train.sft import has_labels, labelled_tokens

    rows = Dataset.from_dict({"labels": [[1, -100, 3], [-100], [], [5, 6]], "i": [0, 1, 2, 3]})
    rows = rows.filter(lambda i: i != 0, input_columns="i")  # (an indices mapping, as TRL's)
    labels = rows.with_format("arrow")["labels"]
    assert labelled_tokens(labels) == [0, 0, 2]
    assert has_labels(rows) and not has_labels(rows.select([0, 1]))


def test_a_batch_no_row_fills_is_refused_before_training(dataset, model, tmp_path):
    settings = config(
        dataset, model, max_steps=2, per_device_train_batch_size=4, dataloader_drop_last=True
    )
    settings["hsa"]["max_rows"] = 3
    with pytest.raises(TrainError, match="3 training rows fill no batch of 4") as refused:
        train_sft(settings, tmp_path / "out")
    assert refused.value.where == "$.dataloader_drop_last"
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("path", ["nope.jinja", "templates/nope.j2", "./no-tokenizer"])
def test_a_chat_template_path_that_is_not_there_is_one_line_before_training(
    dataset, model, tmp_path, monkeypatch, path
):
    import yaml

    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr("trl.trainer.sft_trainer.clone_chat_template", _no_hub)
    file = tmp_path / "ctp.yaml"
    file.write_text(yaml.safe_dump(config(dataset, model, max_steps=1, chat_template_path=path)))
    with pytest.raises(TrainError) as refused:
        train_sft(file, tmp_path / "out")
    assert refused.value.file == str(file) and refused.value.where == "$.chat_template_path"
    assert repr(path) in refused.value.message and str(tmp_path) in refused.value.message
    assert not (tmp_path / "out").exists()


def test_a_chat_template_hub_name_that_cannot_load_is_one_line(
    dataset, model, tmp_path, monkeypatch
):
    from transformers import AutoTokenizer

    def offline(*args, **kwargs):
        raise OSError("We couldn't connect to 'https://huggingface.co' to load the files")

    local = AutoTokenizer.from_pretrained

    def tokenizer_offline(name, *args, **kwargs):  # (the hub is never asked: no network)
        if str(name) == "someorg/template":
            offline()
        return local(name, *args, **kwargs)

    # hsa loads the template to check it renders calls, before TRL clones it
    monkeypatch.setattr(AutoTokenizer, "from_pretrained", tokenizer_offline)
    monkeypatch.setattr("trl.trainer.sft_trainer.clone_chat_template", offline)
    settings = config(dataset, model, max_steps=1, chat_template_path="someorg/template")
    settings["hsa"]["max_rows"] = 2
    with pytest.raises(TrainError, match="cannot load a chat template from 'someorg/template': We"):
        train_sft(settings, tmp_path / "out")


def test_a_model_whose_tokenizer_has_no_chat_template_is_one_line_before_training(
    dataset, model, tmp_path
):
    import shutil

    bare = tmp_path / "base-model"
    shutil.copytree(model, bare)
    (bare / "chat_template.jinja").unlink(missing_ok=True)
    tokenizer_config = json.loads((bare / "tokenizer_config.json").read_text())
    tokenizer_config.pop("chat_template", None)
    (bare / "tokenizer_config.json").write_text(json.dumps(tokenizer_config))
    with pytest.raises(TrainError) as refused:
        train_sft(config(dataset, bare, max_steps=1), tmp_path / "out")
    assert refused.value.file == str(bare)
    assert refused.value.message.startswith("the tokenizer has no chat template")
    assert refused.value.message.endswith(
        "or set chat_template_path (hsa train sft) to a Jinja template"
    )
    assert not (tmp_path / "out").exists()
    # a distillation teacher's tokenizer renders nothing: it may have none
    from hsa.train.sft import load_model

    assert load_model(str(bare), renders=False)[1].chat_template is None


def without_tokenizer(model, folder):
    """A copy of ``model``'s folder with its weights, configs and chat template but no
    tokenizer files."""
    import shutil

    folder.mkdir()
    for name in ("config.json", "generation_config.json", "model.safetensors"):
        shutil.copy(model / name, folder / name)
    (folder / "chat_template.jinja").write_text(qwen_template())
    return folder


@pytest.mark.parametrize("assistant_only_loss", [True, False])
def test_a_model_folder_without_its_tokenizer_is_one_line_naming_it(
    dataset, model, tmp_path, assistant_only_loss
):
    # transformers 5 makes an empty tokenizer for it (every text no token): TRL then blamed
    # the chat template's {% generation %} markers, or hsa max_length
    bare = without_tokenizer(model, tmp_path / "bare")
    settings = config(dataset, bare, max_steps=1, assistant_only_loss=assistant_only_loss)
    with pytest.raises(TrainError) as refused:
        train_sft(settings, tmp_path / "out")
    assert refused.value.file == str(bare)
    assert refused.value.message.startswith("no tokenizer here (hsa.model, --model)")
    assert not (tmp_path / "out").exists()


def test_a_model_type_whose_tokenizer_has_no_default_says_no_tokenizer_too(tmp_path):
    from hsa.train.sft import load_tokenizer

    # Llama's tokenizer class cannot be built empty here: transformers raises instead
    folder = tmp_path / "llama"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps({"model_type": "llama"}))
    with pytest.raises(TrainError) as refused:
        load_tokenizer(str(folder))
    assert refused.value.message.startswith("no tokenizer here (hsa.model, --model)")


def test_a_model_whose_weights_are_cut_short_is_one_line(dataset, model, tmp_path):
    import shutil

    cut = tmp_path / "cut"
    shutil.copytree(model, cut)
    weights = cut / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[:2000])  # a download stopped part way
    with pytest.raises(TrainError) as refused:
        train_sft(config(dataset, cut, max_steps=1), tmp_path / "out")
    assert refused.value.file == str(cut)
    assert refused.value.message.startswith("cannot load the model: ")


def test_a_checkpoint_cut_short_by_a_stop_is_passed_over(tmp_path):
    # a stop while TRL wrote checkpoint-2 left its weights without trainer_state.json: resume
    # crashed on it, and a fresh start was refused for the checkpoints of an unfinished run
    from hsa.train.sft import resume_point

    whole, cut = tmp_path / "checkpoint-1", tmp_path / "checkpoint-2"
    for folder in (whole, cut):
        folder.mkdir()
        (folder / "model.safetensors").write_bytes(b"weights")
    (whole / "trainer_state.json").write_text(json.dumps({"global_step": 1}))
    assert resume_point(tmp_path, True, 6) == str(whole)
    (cut / "trainer_state.json").write_text('{"global_st')  # cut short while written
    assert resume_point(tmp_path, True, 6) == str(whole)
    for name in ("trainer_state.json", "model.safetensors"):
        (whole / name).unlink()
    whole.rmdir()
    with pytest.raises(TrainError, match=r"\(checkpoint-2 cut short.*run without --resume"):
        resume_point(tmp_path, True, 6)
    assert resume_point(tmp_path, False, 6) is None  # started again: it is written over


def test_a_resume_is_refused_for_another_command_or_a_setting_on_one_side_only(tmp_path):
    # an sft --resume continued a distill run (steps 1-4 distilled, 5-6 SFT): the record named
    # no command, and a key missing from it was taken as unchanged
    from hsa.train.card import RUN_RECORD
    from hsa.train.sft import resume_point, start_afresh

    (tmp_path / "checkpoint-1").mkdir()
    (tmp_path / "checkpoint-1" / "trainer_state.json").write_text(json.dumps({"global_step": 1}))
    distill = {"command": "distill", "hsa": {"teacher": "t"}, "trainer": {"seed": 3}}
    start_afresh(tmp_path, distill)
    assert resume_point(tmp_path, True, 6, identity=distill) == str(tmp_path / "checkpoint-1")
    sft = {"command": "sft", "hsa": {"max_rows": None}, "trainer": {"seed": 3}}
    with pytest.raises(TrainError, match=r"a run of hsa train distill, not of hsa train sft"):
        resume_point(tmp_path, True, 6, identity=sft)
    one_side = {"command": "distill", "hsa": {}, "trainer": {"seed": 3, "shuffle_dataset": True}}
    with pytest.raises(TrainError, match="other settings") as refused:
        resume_point(tmp_path, True, 6, identity=one_side)
    assert "hsa.teacher: 't' then, not set now" in refused.value.message
    assert "trainer.shuffle_dataset: not recorded then, True now" in refused.value.message
    # an older hsa's record, which names no command: refused, saying so
    (tmp_path / RUN_RECORD).write_text(json.dumps({"hsa": {}, "trainer": {"seed": 3}}))
    with pytest.raises(TrainError, match=r"does not say which command trained it"):
        resume_point(tmp_path, True, 6, identity=distill)


def test_a_resume_goes_on_from_the_checkpoints_model_and_tokenizer(dataset, model, tmp_path):
    # hsa.model was loaded on a resume, and only the weights taken from the checkpoint: a
    # model of another vocabulary trained on silently under its own tokenizer, one of another
    # shape crashed with torch's size mismatch
    from tests.tinymodels import save_tiny

    out = tmp_path / "out"
    first = config(dataset, model, max_steps=1, save_strategy="steps", save_steps=1)
    first["hsa"]["max_rows"] = 4
    train_sft(first, out)
    tokenizer = (out / "checkpoint-1" / "tokenizer.json").read_bytes()
    other = save_tiny(tmp_path / "other", ["another vocabulary"] * 8, hidden=16, vocab_size=300)
    again = config(dataset, other, max_steps=2, save_strategy="steps", save_steps=1)
    again["hsa"]["max_rows"] = 4
    assert train_sft(again, out, resume=True).steps == 2
    assert (out / "tokenizer.json").read_bytes() == tokenizer
    assert json.loads((out / "config.json").read_text())["hidden_size"] == 32
    # the record and the card name the model the run started from, not the one never read
    assert json.loads((out / "hsa-train.json").read_text())["hsa"]["model"] == str(model)
    assert str(other) not in (out / "README.md").read_text()


def test_a_checkpoint_written_before_the_run_clock_resumes(dataset, model, tmp_path):
    from hsa.train.sft import trained_tokens

    # transformers reads each stateful callback's entry of the resumed checkpoint at every save
    out = tmp_path / "out"
    train_sft(config(dataset, model, max_steps=2, save_strategy="steps", save_steps=1), out)
    state = out / "checkpoint-2" / "trainer_state.json"
    saved = json.loads(state.read_text("utf-8"))
    del saved["stateful_callbacks"]["RunClock"]
    saved["num_input_tokens_seen"] = 0  # nor the token count
    state.write_text(json.dumps(saved), "utf-8")
    again = config(dataset, model, max_steps=3, save_strategy="steps", save_steps=1)
    train_sft(again, out, resume=True)
    later = json.loads((out / "checkpoint-3" / "trainer_state.json").read_text("utf-8"))
    assert later["stateful_callbacks"]["RunClock"]["args"]["earlier"] > 0
    # its tokens go on from TRL's logged counts up to the checkpoint, summed, not from 0
    tokens = json.loads((out / RESOLVED).read_text("utf-8"))["run"]["tokens"]
    logged = trained_tokens(saved["log_history"])
    assert tokens == later["num_input_tokens_seen"] > logged > 0
    # and a third part goes on from the second's checkpoint, the first part in it: it had
    # only the second part's count, which read as counted from the start
    last = config(dataset, model, max_steps=4, save_strategy="steps", save_steps=1)
    train_sft(last, out, resume=True)
    final = json.loads((out / "checkpoint-4" / "trainer_state.json").read_text("utf-8"))
    assert (
        json.loads((out / RESOLVED).read_text("utf-8"))["run"]["tokens"]
        == (final["num_input_tokens_seen"])
    )
    assert final["num_input_tokens_seen"] > tokens  # (it fell to the last two parts' count)


def test_a_run_finished_from_an_older_checkpoint_counts_its_logged_tokens(dataset, model, tmp_path):
    # a checkpoint at max_steps whose model was never written is finished without training:
    # its count, which an older hsa did not keep, was taken as it was (0 tokens)
    from hsa.train.sft import trained_tokens

    out = tmp_path / "out"
    run = config(dataset, model, max_steps=2, save_strategy="steps", save_steps=1)
    train_sft(run, out)
    state = out / "checkpoint-2" / "trainer_state.json"
    saved = json.loads(state.read_text("utf-8"))
    saved["num_input_tokens_seen"] = 0
    state.write_text(json.dumps(saved), "utf-8")
    for name in ("model.safetensors", RESOLVED):
        (out / name).unlink()
    train_sft(run, out, resume=True)
    tokens = json.loads((out / RESOLVED).read_text("utf-8"))["run"]["tokens"]
    assert tokens == trained_tokens(saved["log_history"]) > 0


def test_a_stop_while_a_run_is_written_waits_until_it_is_whole(
    dataset, model, tmp_path, monkeypatch
):
    import os
    import signal

    from hsa.errors import clear_stop
    from hsa.train import card

    # a stop after hsa-train.json (which marks a run finished) and before the card left a
    # folder that read as finished, with no card, and a --resume with nothing to resume
    write_card = card.write_card

    def stopped_while_writing(out, *args):
        os.kill(os.getpid(), signal.SIGINT)
        write_card(out, *args)

    monkeypatch.setattr(card, "write_card", stopped_while_writing)
    out = tmp_path / "out"
    try:
        with pytest.raises(KeyboardInterrupt):
            train_sft(config(dataset, model, max_steps=1), out)
    finally:
        clear_stop()
    assert (out / RESOLVED).is_file() and (out / "model.safetensors").is_file()
    assert "![loss](loss.png)" in (out / "README.md").read_text("utf-8")
    assert (out / "loss.png").is_file()


def test_a_run_started_over_a_finished_one_leaves_no_card_of_it(dataset, model, tmp_path):
    out = tmp_path / "out"
    settings = config(dataset, model, max_steps=1, save_strategy="steps", save_steps=1)
    train_sft(settings, out)
    with pytest.raises(TrainError, match=r"the run here is finished .* nothing to resume"):
        train_sft(settings, out, resume=True)
    # a config refused after the data was read (no row left at max_length) leaves it as it
    # was: its checkpoints, record and card were gone by then, the old model left beside the
    # refused run's record
    files = {p.relative_to(out): p.read_bytes() for p in out.rglob("*") if p.is_file()}
    with pytest.raises(TrainError, match="no training row has an assistant token left"):
        train_sft(config(dataset, model, max_steps=1, max_length=4), out)
    assert {p.relative_to(out): p.read_bytes() for p in out.rglob("*") if p.is_file()} == files
    # without checkpoints (save_strategy: no; an experiment's runs), it says so too
    plain = tmp_path / "plain"
    train_sft(config(dataset, model, max_steps=1), plain)
    with pytest.raises(TrainError, match=r"finished .* kept no checkpoint: nothing to resume"):
        train_sft(config(dataset, model, max_steps=1), plain, resume=True)
    # started again and stopped part way: the old run's card and plot are not left to read
    stopped(config(dataset, model, max_steps=2), out)
    assert not (out / "README.md").exists() and not (out / "loss.png").exists()
    assert not (out / RESOLVED).exists()


def test_a_chat_template_path_trl_cannot_train_on_is_named_not_the_model(dataset, model, tmp_path):
    import yaml

    plain = tmp_path / "plain.jinja"
    plain.write_text("{% for m in messages %}{{ m.role }}: {{ m.content }}\n{% endfor %}")
    settings = config(dataset, model, max_steps=1, chat_template_path=str(plain))
    (tmp_path / "sft.yaml").write_text(yaml.safe_dump(settings))
    with pytest.raises(TrainError, match="cannot be marked for assistant-only loss") as refused:
        train_sft(tmp_path / "sft.yaml", tmp_path / "out")
    # the model was blamed, and told to set the chat_template_path the config had set
    assert refused.value.file == str(tmp_path / "sft.yaml")
    assert refused.value.where == "$.chat_template_path" and str(plain) in refused.value.message


def without_tools(model, folder):
    """A copy of ``model``'s folder whose chat template ignores tools and tool calls."""
    import shutil

    shutil.copytree(model, folder)
    (folder / "chat_template.jinja").write_text(NO_TOOLS_TEMPLATE)
    tokenizer_config = json.loads((folder / "tokenizer_config.json").read_text())
    tokenizer_config.pop("chat_template", None)
    (folder / "tokenizer_config.json").write_text(json.dumps(tokenizer_config))
    return folder


def _no_model(*args, **kwargs):
    raise AssertionError("the model was loaded")


@pytest.mark.parametrize("view", ["firstcall", "conversation"])
def test_a_template_that_drops_the_rows_api_calls_is_refused_before_the_model_loads(
    dataset, model, tmp_path, monkeypatch, view
):
    # it trained on "<|im_end|>" alone as each row's call, and showed no tool schema
    bare = without_tools(model, tmp_path / "no-tools")
    monkeypatch.setattr("transformers.AutoModelForCausalLM.from_pretrained", _no_model)
    settings = config(dataset, bare, max_steps=1)
    settings["hsa"].update(view=view, max_rows=2)
    with pytest.raises(TrainError) as refused:
        train_sft(settings, tmp_path / "out")
    assert refused.value.file == str(bare)
    assert refused.value.message.startswith(
        "its chat template drops the called tool's name, the argument's name, the argument's "
        "value and the tool schema's name"
    )
    assert not (tmp_path / "out").exists()


def test_a_chat_template_path_that_drops_api_calls_is_named_not_the_model(
    dataset, model, tmp_path, monkeypatch
):
    import yaml

    template = tmp_path / "no-tools.jinja"
    template.write_text(NO_TOOLS_TEMPLATE)
    monkeypatch.setattr("transformers.AutoModelForCausalLM.from_pretrained", _no_model)
    file = tmp_path / "sft.yaml"
    file.write_text(yaml.safe_dump(config(dataset, model, chat_template_path=str(template))))
    with pytest.raises(TrainError) as refused:
        train_sft(file, tmp_path / "out")
    assert refused.value.file == str(file) and refused.value.where == "$.chat_template_path"
    assert refused.value.message.startswith(f"the chat template {template} drops")
    # and a model whose template drops them trains with a chat_template_path that renders them
    bare = without_tools(model, tmp_path / "no-tools")
    monkeypatch.undo()
    settings = config(dataset, bare, max_steps=1, chat_template_path=str(model))
    settings["hsa"]["max_rows"] = 2
    trainer = stopped(settings, tmp_path / "fixed")
    assert "<tool_call>" in trainer.processing_class.decode(trainer.train_dataset[0]["input_ids"])


def test_rows_with_their_calls_in_the_text_need_no_tool_template(text_dataset, model, tmp_path):
    bare = without_tools(model, tmp_path / "no-tools")
    settings = config(text_dataset, bare, max_steps=1)
    settings["hsa"].update(canonical_share=0.0, max_rows=2)  # the text-protocol variants alone
    trainer = stopped(settings, tmp_path / "out")
    assert len(trainer.train_dataset) == 2


def test_a_run_stopped_before_its_first_checkpoint_leaves_what_it_made_nowhere(
    dataset, model, tmp_path, monkeypatch
):
    from trl import SFTTrainer

    # a log it began (hsa train rl's rollouts) and the card TRL writes: left, the folder was
    # "not an hsa training run" to the rerun and to --resume alike
    def stop(self, *args, **kwargs):
        (out / "rollouts.jsonl").write_text("{}\n")
        (out / "README.md").write_text("# Model Card for out\n")
        raise KeyboardInterrupt

    out = tmp_path / "out"
    with monkeypatch.context() as patch:
        patch.setattr(SFTTrainer, "train", stop)
        with pytest.raises(KeyboardInterrupt):
            train_sft(config(dataset, model, max_steps=1), out)
    assert not out.exists() or not any(p.is_file() for p in out.iterdir())
    train_sft(config(dataset, model, max_steps=1), out)  # a rerun starts afresh
    finished = (out / RESOLVED).read_bytes()
    # a finished run's files are not this run's to remove
    with monkeypatch.context() as patch:
        patch.setattr(SFTTrainer, "train", stop)
        with pytest.raises(KeyboardInterrupt):
            train_sft(config(dataset, model, max_steps=2), out)
    assert (out / "model.safetensors").is_file() and not (out / "rollouts.jsonl").exists()
    assert not (out / RESOLVED).exists() or (out / RESOLVED).read_bytes() == finished
    # the card written again over the old run's (removed as it started over) is this run's
    assert not (out / "README.md").exists()
    train_sft(config(dataset, model, max_steps=1), out)  # and the folder is still a run's


def test_a_run_stopped_after_a_checkpoint_leaves_no_card_trl_wrote(
    dataset, model, tmp_path, monkeypatch
):
    from trl import SFTTrainer

    # TRL writes its card (of "a fine-tuned version of [None]") at each checkpoint: a card of
    # a model that is not in the folder
    save = SFTTrainer._save_checkpoint

    def stop_after(self, *args, **kwargs):
        save(self, *args, **kwargs)
        raise KeyboardInterrupt

    out = tmp_path / "out"
    settings = config(dataset, model, max_steps=2, save_strategy="steps", save_steps=1)
    with monkeypatch.context() as patch:
        patch.setattr(SFTTrainer, "_save_checkpoint", stop_after)
        with pytest.raises(KeyboardInterrupt):
            train_sft(settings, out)
    assert (out / "checkpoint-1").is_dir() and not (out / "README.md").exists()
    assert train_sft(settings, out, resume=True).resumed_from.endswith("checkpoint-1")
    assert "![loss](loss.png)" in (out / "README.md").read_text("utf-8")


def test_a_checkpoint_past_max_steps_is_not_taken_for_the_model(dataset, model, tmp_path):
    out = tmp_path / "out"
    settings = config(dataset, model, max_steps=2, save_strategy="steps", save_steps=1)
    train_sft(settings, out)
    for name in ("model.safetensors", "hsa-train.json"):
        (out / name).unlink()
    # a 2-step model written as a run of max_steps=1
    with pytest.raises(TrainError, match=r"\(checkpoint-2\) is past max_steps=1"):
        train_sft(config(dataset, model, max_steps=1, save_steps=1), out, resume=True)


@pytest.mark.parametrize("step", ["filter", "map"])  # the rows kept, the rows tokenized
def test_a_full_disk_while_the_rows_are_cached_names_the_cache_not_the_data(
    dataset, model, tmp_path, monkeypatch, step
):
    # a traceback (or, while loading, "cannot read the dataset's shards" of the input)
    import datasets

    def full(*args, **kwargs):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(datasets.Dataset, step, full)
    with pytest.raises(DatasetError) as caught:
        train_sft(config(dataset, model, max_steps=1), tmp_path / "out")
    assert caught.value.file == str(tmp_path / "out" / HF_CACHE)
    assert caught.value.message == "cannot write the rows' cache: No space left on device"
    assert not (tmp_path / "out").exists()


def test_reasoning_the_chat_template_does_not_render_is_counted_and_said(
    chat_dataset, model, tmp_path
):
    from importlib import resources

    from hsa.datasets.export import to_hf

    rows = to_hf(chat_dataset, "train", cache_dir=tmp_path / "hf").filter(
        lambda c: c, input_columns="canonical"
    )
    reasoned = sum(any(m["reasoning_content"] for m in r["messages"]) for r in rows)
    assert reasoned > 0
    settings = config(chat_dataset, model, max_steps=1)
    settings["hsa"]["canonical_share"] = 1.0
    # TRL's Qwen2.5 template (the tiny model's) and its training variant print no reasoning:
    # the rows trained on their answers alone, and the run said nothing
    out = tmp_path / "out"
    counts = train_sft(settings, out).counts
    assert counts["reasoning"] == counts["reasoning_not_trained"] == reasoned
    resolved = json.loads((out / RESOLVED).read_text("utf-8"))
    assert resolved["data"]["rows"]["reasoning_not_trained"] == reasoned
    because = resolved["data"]["reasoning_not_trained_because"]
    assert because.startswith(
        f"the training template TRL swaps in for the chat template of {model} renders no "
        "reasoning_content"
    )
    card = (out / "README.md").read_text("utf-8")
    assert f"{reasoned} of the rows trained on carry reasoning (`reasoning_content`)" in card
    # a template that renders it trains on it, and says nothing
    qwen3 = resources.files("trl").joinpath("chat_templates/qwen3_training.jinja")
    settings["chat_template_path"] = str(qwen3)
    trainer = stopped(settings, tmp_path / "qwen3")
    learned = [trainer.processing_class.decode(r["input_ids"]) for r in trainer.train_dataset]
    said = [m["reasoning_content"] for r in rows for m in r["messages"] if m["reasoning_content"]]
    assert all(any(text in shown for shown in learned) for text in said)
    counts = train_sft(settings, tmp_path / "qwen3-run").counts
    assert counts["reasoning"] == reasoned and "reasoning_not_trained" not in counts
    # Qwen3's own renders the reasoning after the last user message: support-0010's, its one
    # user message before it, is trained on (trained with every token: no template swapped in)
    settings["chat_template_path"] = str(qwen3.parent / "qwen3.jinja")
    settings["assistant_only_loss"] = False
    counts = train_sft(settings, tmp_path / "qwen3-own").counts
    assert counts["reasoning"] == reasoned and "reasoning_not_trained" not in counts


def starts_mid_row(tokenizer, ids):
    """Whether a sequence (a row TRL truncated, a piece of one packing split) lacks its row's
    start: every rendered row opens with the system turn (Qwen's template adds its default)."""
    return not tokenizer.decode(ids[:3]).startswith("<|im_start|>system")


def test_rows_cut_from_their_start_are_counted_truncated(dataset, model, tmp_path):
    # keep_end keeps every assistant token of these rows (their first lies past 2,600 tokens)
    # but cuts their system prompt and tools: trained on without them, and counted as whole
    settings = config(dataset, model, max_steps=1, max_length=3300, truncation_mode="keep_end")
    settings["hsa"]["max_rows"] = 4
    trainer = stopped(settings, tmp_path / "probe")
    tokenizer = trainer.processing_class
    cut = sum(starts_mid_row(tokenizer, row["input_ids"]) for row in trainer.train_dataset)
    assert 0 < cut <= len(trainer.train_dataset)
    out = tmp_path / "out"
    counts = train_sft(settings, out).counts
    assert counts["truncated"] == cut and counts["dropped"] == 0
    resolved = json.loads((out / RESOLVED).read_text("utf-8"))
    assert "truncation_mode keep_end" in resolved["data"]["truncated_because"]
    assert "system prompt, tools and first user turn" in resolved["data"]["truncated_because"]


@pytest.mark.parametrize("strategy", ["bfd_split", "wrapped"])
def test_rows_packing_splits_into_pieces_trained_apart_are_counted(
    dataset, model, tmp_path, strategy
):
    # bfd_split puts a row longer than max_length in pieces trained as sequences of their own
    # (wrapped cuts rows end to end): a later piece's assistant tokens were learned with no
    # system prompt, tools or user request in view, and the rows were counted as whole
    settings = config(dataset, model, max_steps=1, max_length=3300, packing=True)
    settings.update(packing_strategy=strategy, per_device_train_batch_size=2)
    settings["hsa"]["max_rows"] = 4
    out = tmp_path / "out"
    counts = train_sft(settings, out).counts
    assert (counts["train"], counts["dropped"], counts["truncated"]) == (4, 0, 0)
    assert counts["split"] > 0
    if strategy == "bfd_split":
        # rows of 2,600 to 5,000 tokens: at most two pieces each, so one later piece a row
        trainer = stopped(settings, tmp_path / "probe")
        tokenizer = trainer.processing_class
        apart = 0
        for pack in trainer.train_dataset:
            at = 0
            for length in pack["seq_lengths"]:
                ids, labels = pack["input_ids"][at : at + length], pack["labels"][at : at + length]
                at += length
                learned = any(label != -100 for label in labels)
                apart += learned and starts_mid_row(tokenizer, ids)
        assert counts["split"] == apart
    resolved = json.loads((out / RESOLVED).read_text("utf-8"))
    assert f"strategy {strategy}" in resolved["data"]["split_because"]
    card = (out / "README.md").read_text("utf-8")
    assert f"{counts['split']} of the rows trained on were split into pieces trained apart" in card


def test_reasoning_before_the_last_user_message_is_counted_where_the_template_drops_only_it(
    model, tmp_path
):
    # Qwen3's own template prints reasoning only after the last user message: a row whose
    # reasoning comes before a later user message loses it, and only such a row is counted
    from importlib import resources

    from hsa.datasets.source import open_source
    from hsa.pipelines.augment import AugmentConfig, augment

    support = Path(__file__).resolve().parents[2] / "examples" / "chat" / "support.jsonl"
    rows = [json.loads(line) for line in support.read_text("utf-8").splitlines()]
    reasoned = next(r for r in rows if r["id"] == "support-0010")
    later = {**reasoned, "id": "support-0010-more"}
    later["messages"] = [
        *reasoned["messages"],
        {"role": "user", "content": "Thanks. And the refund?"},
        {"role": "assistant", "content": "It goes back to your original payment method."},
    ]
    chat = tmp_path / "chat.jsonl"
    chat.write_text("".join(json.dumps(r) + "\n" for r in (reasoned, later)), "utf-8")
    data = tmp_path / "data"
    augment(open_source(chat), data, AugmentConfig(splits={"train": 1.0}, workers=1))
    settings = config(data, model, max_steps=1, assistant_only_loss=False)
    settings["hsa"]["canonical_share"] = 1.0
    qwen3 = resources.files("trl").joinpath("chat_templates/qwen3.jinja")
    settings["chat_template_path"] = str(qwen3)
    out = tmp_path / "out"
    counts = train_sft(settings, out).counts
    assert counts["reasoning"] == 2 and counts["reasoning_not_trained"] == 1
    because = json.loads((out / RESOLVED).read_text("utf-8"))["data"]
    assert "before the last user message" in because["reasoning_not_trained_because"]
