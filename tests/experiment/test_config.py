"""The experiment config: the arms, the tiers and their recipes, refusals that name the key."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from hsa.errors import ExperimentError
from hsa.experiment.config import load_config, parse_config

EXAMPLE = Path(__file__).parents[2] / "examples" / "experiment.yaml"

TINY = {
    "seeds": [0],
    "env": "livestream",
    "env_options": {"compact": True},
    "base": [{"rule": "tools.drop_unused", "params": {"keep": 2}}],
    "arms": {
        "fixed": {"rules": []},
        "augmented": {
            "variants_per_trajectory": 2,
            "rules": [{"rule": "tools.rename", "probability": 0.5}],
        },
    },
    "train": {"max_steps": 2},
    "tiers": {
        "canonical": {"seed": 1, "rules": []},
        "styles": {"seed": 2, "rules": "augmented"},
    },
}


def tiny(**changes):
    return {**TINY, **changes}


def test_the_shipped_example_parses_with_every_tier_and_the_base_rules_in_each_recipe():
    config = load_config(EXAMPLE)
    assert config.seeds == (0, 1)
    assert [t.name for t in config.tiers] == ["canonical", "styles", "parts", "random", "prompt"]
    base = [r.rule for r in config.arms["fixed"].base]
    assert base == ["tools.drop_unused", "skill_content.drop_unused", "tools.shuffle"]
    for tier in config.tiers:
        assert [r.rule for r in tier.recipe.base] == base
    assert config.arms["fixed"].rules == ()
    assert config.variants == {"fixed": 1, "augmented": 4}


def test_styles_draws_the_augmented_rules_with_its_own_seed():
    config = parse_config(tiny())
    styles = {t.name: t for t in config.tiers}["styles"]
    assert styles.recipe.rules == config.arms["augmented"].rules
    assert styles.recipe.seed == 2
    assert not styles.held_out


def test_command_line_seeds_and_steps_replace_the_configs():
    config = parse_config(tiny(), overrides={"seeds": [3, 4], "steps": 7})
    assert config.seeds == (3, 4)
    assert config.steps == 7
    assert config.hash() != parse_config(tiny()).hash()
    assert parse_config({**tiny(), "seeds": None}).seeds == (0,)  # null: unset, the default
    with pytest.raises(ExperimentError, match="no seed given") as caught:
        parse_config(tiny(), overrides={"seeds": []})  # --seeds ""
    assert caught.value.where == "--seeds"
    for given, says in (([-1], "from 0 to"), ([2**32], "from 0 to"), ([2, 2], "must differ")):
        with pytest.raises(ExperimentError, match=says) as caught:
            parse_config(tiny(), file="exp.yaml", overrides={"seeds": given})
        assert caught.value.where == "--seeds" and caught.value.file is None


@pytest.mark.parametrize(
    "changes, where, words",
    [
        ({"trian": {}}, "$.trian", "unknown key 'trian'; did you mean 'train'?"),
        ({"seeds": [-1]}, "$.seeds", "from 0 to 4294967295"),
        # past TRL's and torch's seeds: refused after the data was built, or a traceback
        ({"seeds": [2**32]}, "$.seeds", "from 0 to 4294967295"),
        ({"seeds": [2**70]}, "$.seeds", "from 0 to 4294967295"),
        ({"tiers": [{"seed": 1}]}, "$.tiers", "expected a mapping, got list"),
        ({"train": [1]}, "$.train", "expected a mapping, got list"),
        ({"arms": ["fixed"]}, "$.arms", "expected a mapping, got list"),
        ({"seeds": [0, 0]}, "$.seeds", "seeds must differ"),
        ({"seeds": []}, "$.seeds", "no seed given"),
        (
            {"tiers": {"styles": {"seed": 1, "rules": "fixed"}}},
            "$.tiers.styles.rules",
            "a list of rules, or 'augmented'",
        ),
        ({"train": {}}, "$.train.max_steps", "step-capped"),
        ({"arms": {"fixed": {"rules": []}}}, "$.arms", "fixed and augmented"),
        ({"tiers": {"canonical": {"rules": []}}}, "$.tiers.canonical", "own seed"),
        (
            {"tiers": {"canonical": {"sed": 1, "rules": []}}},
            "$.tiers.canonical",
            "each tier needs its own seed (is 'sed' meant to be 'seed'?)",
        ),
        ({"tiers": {}}, "$.tiers", "no tiers"),
        ({"seeds": "0"}, "$.seeds", "integers"),
        ({"env_options": "compact"}, "$.env_options", "must be a mapping"),
        ({"model": {"hidden": 0}}, "hidden", "hidden"),
        ({"model": {"hidden": 96, "heads": 5}}, "heads", "even width"),
        ({"model": {"hidden": 96, "heads": 32}}, "heads", "even width"),
        ({"model": {"heads": 4, "kv_heads": 3}}, "kv_heads", "divide heads"),
        (
            {"tiers": {"x": {"seed": 1, "rules": [{"rule": "tools.nope"}]}}},
            "$.tiers.x.rules[0]",
            "tools.nope",
        ),
        (
            {"arms": {"fixed": {"rules": []}, "augmented": {"variants_per_trajectory": "four"}}},
            "$.arms.augmented.variants_per_trajectory",
            "expected an integer, 1 or more",
        ),
        (
            {"arms": {"fixed": {"variants_per_trajectory": 0}, "augmented": {"rules": []}}},
            "$.arms.fixed.variants_per_trajectory",
            "expected an integer, 1 or more",
        ),
        (
            {"tiers": {"x": {"seed": 1, "rules": [], "held_out": "false"}}},
            "$.tiers.x.held_out",
            "expected true or false, got 'false'",
        ),
        (
            {"tiers": {"x": {"seed": 1, "rules": [], "held_ot": True}}},
            "$.tiers.x.held_ot",
            "unknown setting 'held_ot'; did you mean 'held_out'?",
        ),
        ({"base": {"rule": "tools.shuffle"}}, "$.base", "base must be a list of rules"),
        # a tier's name is a file and folder name of the run: one plain path component
        (
            {"tiers": {"../../../esc": {"seed": 1, "rules": []}}},
            "$.tiers.../../../esc",
            "a tier's name must be one plain file name",
        ),
        ({"tiers": {"a/b": {"seed": 1, "rules": []}}}, "$.tiers.a/b", "one plain file name"),
        ({"tiers": {"..": {"seed": 1, "rules": []}}}, "$.tiers...", "one plain file name"),
        ({"tiers": {"": {"seed": 1, "rules": []}}}, "$.tiers.", "one plain file name"),
        # keys YAML reads as numbers or booleans (`7:`, `yes:`)
        ({"tiers": {7: {"seed": 1, "rules": []}}}, "$.tiers.7", "a tier's name must be a string"),
        (
            {"tiers": {"canonical": {"seed": 1, "rules": []}, True: {"seed": 2, "rules": []}}},
            "$.tiers.True",
            "a tier's name must be a string",
        ),
        # the base rules are the file's $.base, not each arm's
        (
            {"base": [{"rule": "tools.drop_unused"}, {"rule": "nope.x"}]},
            "$.base[1]",
            "no rule named 'nope.x'",
        ),
        ({"parallel": True}, "$.parallel", "an integer, 1 or more (trainings at a time), got True"),
        ({"parallel": 0}, "$.parallel", "an integer, 1 or more (trainings at a time), got 0"),
    ],
)
def test_bad_configs_are_refused_naming_the_key(changes, where, words):
    with pytest.raises(ExperimentError) as found:
        parse_config(tiny(**changes), file="exp.yaml")
    assert found.value.file == "exp.yaml"
    assert where in (found.value.where or "")
    assert words in str(found.value)


@pytest.mark.parametrize(
    "changes, where",
    [
        ({1: 2, "x": 3}, "$.1"),
        ({"env_options": {"compact": True, 2: 3}}, "$.env_options.2"),
        ({"train": {"max_steps": 2, True: 1}}, "$.train.True"),
        ({"gpu": {"engine_args": {4: 1}}}, "$.gpu.engine_args.4"),
    ],
)
def test_a_key_yaml_reads_as_a_number_or_boolean_is_refused_naming_it(changes, where):
    # (the config's hash is its JSON text, which cannot sort mixed keys: a traceback)
    with pytest.raises(ExperimentError, match="a key must be a string, got") as found:
        parse_config({**TINY, **changes}, file="exp.yaml")
    assert found.value.where == where


def test_a_list_that_holds_itself_is_refused_naming_the_file_and_line_of_its_alias(tmp_path):
    # a YAML alias inside its own anchor: refused as the file is read (the key check, walking
    # the value, would loop), naming the alias's line
    path = tmp_path / "exp.yaml"
    text = yaml.safe_dump({k: v for k, v in TINY.items() if k != "seeds"})
    path.write_text(text + "seeds: &s [0, *s]\n")
    with pytest.raises(ExperimentError, match=r"the alias \*s is inside its own anchor") as found:
        load_config(path)
    where = f"line {text.count(chr(10)) + 1}"
    assert found.value.where == where and found.value.file == str(path)


def test_a_missing_or_broken_file_is_one_error(tmp_path):
    with pytest.raises(ExperimentError, match="cannot read"):
        load_config(tmp_path / "none.yaml")
    bad = tmp_path / "bad.yaml"
    bad.write_text("seeds: [0\n")
    with pytest.raises(ExperimentError, match="invalid YAML"):
        load_config(bad)
    good = tmp_path / "good.yaml"
    good.write_text(yaml.safe_dump(TINY))
    assert load_config(good).steps == 2


@pytest.mark.parametrize(
    "name", ["experiment.yaml", "experiment-random.yaml", "experiment-random-wide.yaml"]
)
def test_the_shipped_held_out_tiers_draw_nothing_their_training_draws(name):
    from hsa.experiment.run import check_tiers

    config = load_config(EXAMPLE.with_name(name))
    assert any(t.held_out for t in config.tiers)
    check_tiers(config)  # raises when a held-out tier overlaps the augmented arm's recipe


def test_a_held_out_tier_that_overlaps_names_its_rule_and_the_arms(tmp_path):
    from hsa.experiment.run import check_tiers

    data = yaml.safe_load(EXAMPLE.read_text())
    arm = data["arms"]["augmented"]["rules"][0]
    data["tiers"]["parts"]["rules"].append(arm)
    (tmp_path / "exp.yaml").write_text(yaml.safe_dump(data))
    with pytest.raises(ExperimentError) as caught:
        check_tiers(load_config(tmp_path / "exp.yaml"))
    assert caught.value.where == "$.tiers.parts.rules[2]"
    assert f"overlaps training at {tmp_path / 'exp.yaml'}: $.arms.augmented.rules[0]" in (
        caught.value.message
    )


GPU = {
    "model": "models/base",
    "train": {"max_steps": 5, "bf16": True},
    "eval": {"variants": 4, "max_tokens": 256, "batch_size": 128},
    "engine_args": {"max_model_len": 8192},
}


def test_the_gpu_scale_reads_the_gpu_section_and_trains_one_run_at_a_time():
    config = parse_config(tiny(gpu=GPU), overrides={"scale": "gpu"})
    assert config.scale == "gpu" and config.view == "conversation" and config.parallel == 1
    assert config.steps == 5 and config.train["bf16"] is True
    assert (config.eval.variants, config.eval.max_tokens, config.eval.batch_size) == (4, 256, 128)
    assert config.gpu.model == "models/base" and config.gpu.call_format == "hermes"
    cpu = parse_config(tiny(gpu=GPU))
    assert cpu.scale == "cpu" and cpu.view == "firstcall" and cpu.steps == 2
    assert cpu.hash() != config.hash()  # a GPU run's folder is never a CPU run's
    assert parse_config(tiny()).hash() == cpu.hash()  # the CPU scale does not read `gpu`
    override = parse_config(tiny(gpu=GPU), overrides={"scale": "gpu", "steps": 9})
    assert override.steps == 9


def test_the_gpu_scale_gives_training_the_base_model_and_evaluation_vllm(tmp_path):
    from hsa.experiment.run import eval_config, model_backend, train_config
    from hsa.teachers.backends.vllm import VLLMBackend

    config = parse_config(tiny(gpu=GPU), overrides={"scale": "gpu"})
    trained = train_config(config, tmp_path / "data", Path("models/base"), 1)
    assert trained["hsa"]["model"] == "models/base" and trained["hsa"]["view"] == "conversation"
    assert trained["max_steps"] == 5 and trained["seed"] == 1
    settings = eval_config(config, tmp_path / "run", tmp_path / "tier.yaml", 7)
    assert settings.policy == "vllm" and settings.suites == ("firstcall",)
    assert settings.call_format == "hermes" and settings.concurrency == 128
    backend = model_backend(config, tmp_path / "run")  # the engine is built on its first batch
    assert isinstance(backend, VLLMBackend) and backend.config.engine_args == {
        "max_model_len": 8192
    }
    cpu = parse_config(tiny())
    assert model_backend(cpu, tmp_path / "run") is None
    assert eval_config(cpu, tmp_path / "run", tmp_path / "t.yaml", 7).policy == "transformers"
    assert train_config(cpu, tmp_path, tmp_path, 0)["hsa"]["view"] == "firstcall"


def test_a_sample_of_tasks_is_the_same_for_every_tier(tmp_path):
    from hsa.experiment.run import eval_config

    def tier(config, seed):
        return eval_config(config, tmp_path / "run", tmp_path / "t.yaml", seed)

    sampled = parse_config(tiny(eval={"tasks": 4}))
    assert tier(sampled, 1).task_seed == tier(sampled, 2).task_seed is not None
    assert tier(parse_config(tiny()), 1).task_seed is None  # every task: nothing to sample


@pytest.mark.parametrize(
    "gpu, where, words",
    [
        (None, "$.gpu", "needs a gpu section"),
        ({"train": {"max_steps": 1}}, "$.gpu.model", "base model"),
        ({"model": "m", "train": {}}, "$.gpu.train.max_steps", "step-capped"),
        ({"model": "m", "view": "half", "train": {"max_steps": 1}}, "$.gpu.view", "half"),
        ({"model": "m", "train": {"max_steps": 1}, "eval": {"variants": 0}}, "variants", "1"),
        ({"model": "m", "modle": "x", "train": {"max_steps": 1}}, "$.gpu.modle", "unknown"),
    ],
)
def test_a_bad_gpu_section_is_refused_naming_the_key(gpu, where, words):
    data = tiny() if gpu is None else tiny(gpu=gpu)
    with pytest.raises(ExperimentError) as found:
        parse_config(data, file="exp.yaml", overrides={"scale": "gpu"})
    assert where in (found.value.where or "")
    assert words in str(found.value)


def test_the_shipped_example_has_a_gpu_scale_trl_accepts():
    from hsa.experiment.run import check_training

    config = load_config(EXAMPLE, scale="gpu")
    assert config.scale == "gpu" and config.view == "conversation"
    check_training(config)  # TRL's SFTConfig takes every key of gpu.train


@pytest.mark.parametrize(
    "changes, where, words",
    [
        ({"env": "livestrem"}, "$.env", "unknown environment 'livestrem'"),
        ({"env_options": {"compakt": True}}, "$.env_options", "takes no option(s) 'compakt'"),
        ({"env_options": {"n_tasks": 0}}, "$.env_options", "n_tasks must be a positive integer"),
    ],
)
def test_an_environment_that_cannot_be_built_is_refused_before_anything_is_written(
    tmp_path, changes, where, words
):
    from hsa.experiment.run import run

    with pytest.raises(ExperimentError) as found:
        run(parse_config(tiny(**changes), file="exp.yaml"), tmp_path / "out")
    assert (found.value.file, found.value.where) == ("exp.yaml", where)
    assert words in str(found.value)
    assert not (tmp_path / "out").exists()


def test_another_experiments_record_alone_does_not_block_a_folder(tmp_path, monkeypatch):
    import importlib

    running = importlib.import_module("hsa.experiment.run")  # the module, not its function
    out = tmp_path / "out"
    out.mkdir()
    (out / "experiment.json").write_text('{"config_hash": "another"}')

    def reached(*args):
        raise RuntimeError("past the folder's check")

    monkeypatch.setattr(running, "build_data", reached)
    with pytest.raises(RuntimeError, match="past the folder's check"):
        running.run(parse_config(tiny()), out)
    (out / "data").mkdir()  # with anything of the other experiment's beside it, it does
    (out / "experiment.json").write_text('{"config_hash": "another"}')
    with pytest.raises(ExperimentError, match="holds another experiment"):
        running.run(parse_config(tiny()), out)


def test_max_steps_true_is_refused_as_every_boolean_for_an_integer():
    with pytest.raises(ExperimentError, match="max_steps") as found:
        parse_config({**TINY, "train": {"max_steps": True}}, file="exp.yaml")
    assert found.value.where == "$.train.max_steps"
