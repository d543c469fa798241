"""A training config: TRL's fields by TRL's names, hsa's under ``hsa:``; the shipped recipes."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from hsa.config import settings_of
from hsa.errors import TrainError
from hsa.train.config import SftSettings, sft_settings, split_config, trl_args

EXAMPLES = sorted((Path(__file__).parents[2] / "examples" / "train").glob("*.yaml"))


def test_top_level_keys_are_trl_fields_and_hsa_is_hsa():
    from trl import SFTConfig

    section, trl = split_config({"hsa": {"data": "d"}, "learning_rate": 0.1}, SFTConfig)
    assert section == {"data": "d"} and trl == {"learning_rate": 0.1}
    with pytest.raises(TrainError, match=r"did you mean 'max_length'\?"):
        split_config({"max_lenght": 10}, SFTConfig, file="x.yaml")
    with pytest.raises(TrainError, match=r"\$\.hsa"):
        split_config({"hsa": [1]}, SFTConfig)


@pytest.mark.parametrize(
    "key, value, expected",
    [("max_steps", "ten", "an integer"), ("learning_rate", "fast", "a finite number")],
)
def test_a_trl_value_of_the_wrong_type_is_named_before_any_model_loads(key, value, expected):
    from trl import SFTConfig

    with pytest.raises(TrainError, match=f"expected {expected}, got '{value}'") as found:
        split_config({key: value}, SFTConfig, file="x.yaml")
    assert found.value.where == f"$.{key}" and found.value.file == "x.yaml"
    # values TRL reads itself (an enum or its name, a null) still pass
    split_config({"lr_scheduler_type": "cosine", "max_length": None}, SFTConfig)


@pytest.mark.parametrize(
    "key, value",
    [
        ("per_device_train_batch_size", 0),
        ("gradient_accumulation_steps", 0),
        ("learning_rate", float("nan")),
        ("learning_rate", -1),
    ],
)
def test_a_trl_value_torch_or_trl_would_fail_on_later_is_named_now(tmp_path, key, value):
    from trl import SFTConfig

    with pytest.raises(TrainError, match=f"{key} must be a number of at least") as found:
        trl_args(SFTConfig, {key: value}, tmp_path, file="x.yaml")
    assert found.value.where == f"$.{key}"


@pytest.mark.parametrize("trainer", ["SFTConfig", "GRPOConfig", "DistillationConfig"])
def test_max_steps_is_at_least_1_or_trls_default_minus_1_in_every_trainer(tmp_path, trainer):
    # -5 trained num_train_epochs silently (TRL reads max_steps <= 0 as unset); --max-steps
    # refuses it
    import trl

    trl_config = getattr(trl, trainer)
    for value in (-5, -2, 0):
        with pytest.raises(TrainError, match=rf"max_steps must be .*, got {value}$") as found:
            trl_args(trl_config, {"max_steps": value}, tmp_path, file="x.yaml")
        assert found.value.where == "$.max_steps" and found.value.file == "x.yaml"
    assert trl_args(trl_config, {"max_steps": -1}, tmp_path).max_steps == -1
    assert trl_args(trl_config, {"max_steps": 3}, tmp_path).max_steps == 3


def test_every_hsa_setting_has_help_and_is_checked():
    assert all(f.metadata.get("help") for f in settings_of(SftSettings))
    with pytest.raises(TrainError, match="canonical_share"):
        sft_settings({"canonical_share": 1.5})
    with pytest.raises(TrainError, match=r"did you mean 'model'\?"):
        sft_settings({"modle": "m"})


def test_without_a_gpu_the_cpu_defaults_are_filled_in_unless_given(tmp_path, monkeypatch):
    from trl import SFTConfig

    monkeypatch.setattr("hsa.train.config._cuda", lambda: False)
    args = trl_args(SFTConfig, {}, tmp_path)
    assert args.use_cpu and not args.bf16 and args.report_to in ("none", [], ["none"])
    with pytest.raises(TrainError, match="SFTConfig"):
        trl_args(SFTConfig, {"lr_scheduler_type": "sometimes"}, tmp_path)


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.name)
def test_the_shipped_training_recipes_are_valid(path, tmp_path, monkeypatch):
    from trl import DistillationConfig, GRPOConfig, SFTConfig

    from hsa.config import from_mapping
    from hsa.train.distill import DistillSettings
    from hsa.train.rl import RlSettings

    data = yaml.safe_load(path.read_text("utf-8"))
    trl_config, settings = {
        "sft.yaml": (SFTConfig, SftSettings),
        "rl.yaml": (GRPOConfig, RlSettings),
        "distill.yaml": (DistillationConfig, DistillSettings),
    }[path.name.replace("-cpu", "")]
    section, trl = split_config(data, trl_config, file=str(path))
    assert from_mapping(settings, section, error=TrainError, file=str(path)).model
    monkeypatch.setattr("hsa.train.config._cuda", lambda: False)
    trl_args(trl_config, {**trl, "bf16": False}, tmp_path, file=str(path))


def test_trl_args_use_transformers_names_for_checkpointing_and_keep_what_is_asked():
    import warnings

    from trl import GRPOConfig, SFTConfig

    from hsa.train.config import trl_args

    with warnings.catch_warnings():
        warnings.simplefilter("error", FutureWarning)  # no deprecated name reaches transformers
        default = trl_args(SFTConfig, {}, "unused-out")
        off = trl_args(SFTConfig, {"gradient_checkpointing": False}, "unused-out")
        kwargs = {"use_reentrant": False}
        grpo = trl_args(GRPOConfig, {"gradient_checkpointing_kwargs": kwargs}, "unused-out")
    assert default.activation_checkpointing is True  # TRL's default, kept
    assert off.activation_checkpointing is False and off.gradient_checkpointing is False
    assert grpo.activation_checkpointing_kwargs == kwargs


def test_an_epoch_count_that_trains_no_step_is_named_now(tmp_path):
    from trl import DistillationConfig, GRPOConfig, SFTConfig

    for trl_config in (SFTConfig, GRPOConfig, DistillationConfig):
        with pytest.raises(TrainError, match=r"num_train_epochs 0\.0 without max_steps") as found:
            trl_args(trl_config, {"num_train_epochs": 0.0}, tmp_path, file="x.yaml")
        assert found.value.where == "$.num_train_epochs" and found.value.file == "x.yaml"
        trl_args(trl_config, {"num_train_epochs": 0.0, "max_steps": 1}, tmp_path)  # steps asked


def test_a_setting_trl_refuses_is_named_by_the_key_its_message_names(tmp_path):
    from trl import GRPOConfig

    keys = {"per_device_train_batch_size": 2, "num_generations": 3, "max_steps": 1}
    with pytest.raises(TrainError, match="divisible by num_generations") as found:
        trl_args(GRPOConfig, keys, tmp_path, file="rl.yaml")
    assert (found.value.file, found.value.where) == ("rl.yaml", "$.num_generations")


def test_a_config_without_a_model_names_the_key(tmp_path):
    from trl import SFTConfig

    from hsa.train.config import prepare

    (tmp_path / "sft.yaml").write_text(yaml.safe_dump({"hsa": {"data": "d"}, "max_steps": 1}))
    with pytest.raises(TrainError, match="no model to train") as found:
        prepare(tmp_path / "sft.yaml", SFTConfig, SftSettings, tmp_path / "out")
    assert (found.value.file, found.value.where) == (str(tmp_path / "sft.yaml"), "$.hsa.model")


def test_a_resume_keeps_grpos_batch_settings(tmp_path):
    from trl import GRPOConfig

    from hsa.train.sft import run_identity

    # (a resume with other generations per prompt mixed two runs' batches in one model)
    keys = {"per_device_train_batch_size": 4, "num_generations": 4, "max_steps": 1}
    args = trl_args(GRPOConfig, {**keys, "max_completion_length": 32}, tmp_path)
    identity = run_identity("rl", SftSettings(model="m"), args)
    trainer = identity["trainer"]
    assert identity["command"] == "rl"
    assert trainer["num_generations"] == 4 and trainer["max_completion_length"] == 32
    assert {"generation_batch_size", "steps_per_generation", "num_iterations"} <= set(trainer)


def test_a_resume_keeps_the_settings_that_order_and_cut_the_rows(tmp_path):
    from trl import DistillationConfig, SFTConfig

    from hsa.train.sft import run_identity

    # (a resume that shuffled, sampled or packed the rows otherwise mixed two orders in one run)
    ordered = {
        "shuffle_dataset",
        "train_sampling_strategy",
        "dataloader_drop_last",
        "ignore_data_skip",
    }
    args = trl_args(SFTConfig, {"max_steps": 1}, tmp_path)
    identity = run_identity("sft", SftSettings(model="m"), args)
    assert identity["command"] == "sft"
    assert ordered | {"packing_strategy", "truncation_mode"} <= set(identity["trainer"])
    args = trl_args(DistillationConfig, {"max_steps": 1}, tmp_path)
    assert ordered <= set(run_identity("distill", SftSettings(model="m"), args)["trainer"])
