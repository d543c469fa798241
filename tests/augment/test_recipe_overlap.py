"""``overlaps``: where a held-out recipe draws what a training recipe draws."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from hsa.augment.recipe import Recipe, default_recipe, overlaps
from hsa.eval.suites import heldout_recipe
from hsa.pipelines.build import load_config

ROOT = Path(__file__).resolve().parents[2]
MESSAGE = re.compile(r"^rules\[(\d+)\] (\S+) (\{.*\}) overlaps training rules\[(\d+)\] (\{.*\})$")


def recipe(*rules: dict) -> Recipe:
    return Recipe.from_dict({"rules": list(rules)})


def livestream_recipe() -> Recipe:
    return load_config(ROOT / "examples" / "livestream.yaml").augment.recipe


def test_builtin_heldout_recipe_is_held_out_from_the_livestream_training_recipe():
    assert overlaps(heldout_recipe(), livestream_recipe()) == []


def test_builtin_heldout_recipe_is_held_out_from_the_default_recipe():
    assert overlaps(heldout_recipe(), default_recipe()) == []


@pytest.mark.parametrize("which", ["heldout", "livestream", "default"])
def test_a_recipe_overlaps_itself_on_every_rule(which):
    chosen = {"heldout": heldout_recipe, "livestream": livestream_recipe, "default": default_recipe}
    mine = chosen[which]()
    parsed = [MESSAGE.match(m).groups() for m in overlaps(mine, mine)]
    # each rule overlaps at least its own line, with the same parameters on both sides
    itself = {(int(i), name) for i, name, params, j, other in parsed if i == j and params == other}
    assert itself == {(i, rule.rule) for i, rule in enumerate(mine.rules)}


@pytest.mark.parametrize(
    ("held_out", "training", "overlap"),
    [
        ("kebab", "any", True),
        ("any", "kebab", True),
        ("any", "any", True),
        ("kebab", "kebab", True),
        ("kebab", "camel", False),
    ],
)
def test_any_stands_for_every_value_of_its_enum(held_out, training, overlap):
    mine = recipe({"rule": "tools.rename", "params": {"style": held_out}})
    theirs = recipe({"rule": "tools.rename", "params": {"style": training}})
    assert bool(overlaps(mine, theirs)) is overlap


def test_a_differing_number_is_held_out():
    half = recipe({"rule": "tools.rename_params", "params": {"fraction": 0.5}})
    default = recipe({"rule": "tools.rename_params"})
    assert overlaps(half, default) == []
    assert overlaps(default, half) == []
    assert len(overlaps(half, half)) == 1


def test_different_rules_never_overlap():
    mine = recipe({"rule": "tools.shuffle"}, {"rule": "prompt.section_order"})
    theirs = recipe({"rule": "skill_content.shuffle"}, {"rule": "hooks.wrapper"})
    assert overlaps(mine, theirs) == []


def test_the_message_names_both_rules_and_their_parameters():
    mine = recipe({"rule": "tools.shuffle"}, {"rule": "tools.rename", "params": {"style": "kebab"}})
    theirs = recipe(
        {"rule": "tools.distractors"},
        {"rule": "tools.rename", "params": {"style": "camel"}},
        {"rule": "tools.rename", "probability": 0.3},
    )
    assert overlaps(mine, theirs) == [
        'rules[1] tools.rename {"fraction":1.0,"skill_tool":true,"style":"kebab"} '
        'overlaps training rules[2] {"fraction":1.0,"skill_tool":true,"style":"any"}'
    ]


def test_a_null_parameter_drawn_from_a_bank_covers_the_bank():
    """A null prefix draws one from the rule's bank (``DRAWS``), which holds 'plugin'."""
    mine = recipe({"rule": "skill_ids.namespace", "params": {"prefix": "plugin", "separator": ":"}})
    theirs = recipe({"rule": "skill_ids.namespace"})
    assert overlaps(mine, theirs) != []
    outside = recipe({"rule": "skill_ids.namespace", "params": {"prefix": "vendor"}})
    assert overlaps(outside, theirs) == []


def test_a_null_parameter_without_a_bank_meets_every_value():
    mine = recipe({"rule": "skill_content.drop_unused", "params": {"fraction": 0.5}})
    theirs = recipe({"rule": "skill_content.drop_unused"})
    assert overlaps(mine, theirs) != []


@pytest.mark.parametrize(
    ("held_out", "training", "overlap"),
    [
        (["random"], ["camel", "synonym"], False),
        (["random"], "any", True),
        ("any", ["camel", "synonym"], True),
        (["kebab", "camel"], ["camel"], True),
        ("random", ["camel", "pascal", "kebab", "synonym"], False),
    ],
)
def test_a_style_list_stands_for_the_styles_it_names(held_out, training, overlap):
    mine = recipe({"rule": "tools.rename", "params": {"style": held_out}})
    theirs = recipe({"rule": "tools.rename", "params": {"style": training}})
    assert bool(overlaps(mine, theirs)) is overlap
