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


@pytest.mark.parametrize(
    "changes, where, words",
    [
        ({"trian": {}}, "$.trian", "unknown key"),
        ({"train": {}}, "$.train.max_steps", "step-capped"),
        ({"arms": {"fixed": {"rules": []}}}, "$.arms", "fixed and augmented"),
        ({"tiers": {"canonical": {"rules": []}}}, "$.tiers.canonical", "own seed"),
        ({"tiers": {}}, "$.tiers", "no tiers"),
        ({"seeds": "0"}, "$.seeds", "integers"),
        ({"model": {"hidden": 0}}, "hidden", "hidden"),
        (
            {"tiers": {"x": {"seed": 1, "rules": [{"rule": "tools.nope"}]}}},
            "$.tiers.x.rules[0]",
            "tools.nope",
        ),
    ],
)
def test_bad_configs_are_refused_naming_the_key(changes, where, words):
    with pytest.raises(ExperimentError) as found:
        parse_config(tiny(**changes), file="exp.yaml")
    assert found.value.file == "exp.yaml"
    assert where in (found.value.where or "")
    assert words in str(found.value)


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


@pytest.mark.parametrize("name", ["experiment.yaml", "experiment-random.yaml"])
def test_the_shipped_held_out_tiers_draw_nothing_their_training_draws(name):
    from hsa.experiment.run import check_tiers

    config = load_config(EXAMPLE.with_name(name))
    assert any(t.held_out for t in config.tiers)
    check_tiers(config)  # raises when a held-out tier overlaps the augmented arm's recipe
