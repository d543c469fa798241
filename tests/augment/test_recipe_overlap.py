"""``overlaps``: where a held-out recipe draws what a training recipe draws."""

from __future__ import annotations

import dataclasses
import random
import re
from pathlib import Path

import pytest
from conftest import make_harness

from hsa.augment import all_rules, get_rule
from hsa.augment.recipe import Recipe, default_recipe, overlaps
from hsa.augment.rule import MEANS, WHEN
from hsa.eval.suites import heldout_recipe
from hsa.harness import Protocol
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


def test_a_value_the_rule_writes_as_another_overlaps_that_other():
    """skill_ids.namespace writes '/' as ':' (its schema's ``MEANS``), which training draws."""
    slash = recipe({"rule": "skill_ids.namespace", "params": {"prefix": "acme", "separator": "/"}})
    for training in ({"prefix": "acme", "separator": ":"}, {"separator": "any"}, {}):
        theirs = recipe({"rule": "skill_ids.namespace", "params": training})
        assert overlaps(slash, theirs) != [] and overlaps(theirs, slash) != []
    dot = recipe({"rule": "skill_ids.namespace", "params": {"prefix": "acme", "separator": "."}})
    assert overlaps(slash, dot) == []
    assert overlaps(slash, livestream_recipe()) != []


@pytest.mark.parametrize(
    ("rule", "held_out", "training", "overlap"),
    [
        # a parameter name takes no dash: kebab is always snake
        ("tools.rename_params", "kebab", "snake", True),
        ("tools.rename_params", ["kebab"], ["snake", "camel"], True),
        ("tools.rename_params", "kebab", "camel", False),
        # a tool name takes one only where the call format can write it: kebab or snake
        ("tools.rename", "kebab", "snake", True),
        ("tools.rename", "kebab", "kebab", True),
        ("tools.rename", "pascal", "snake", False),
    ],
)
def test_kebab_overlaps_snake_where_the_rule_writes_it_so(rule, held_out, training, overlap):
    mine = recipe({"rule": rule, "params": {"style": held_out}})
    theirs = recipe({"rule": rule, "params": {"style": training}})
    assert bool(overlaps(mine, theirs)) is overlap
    assert bool(overlaps(theirs, mine)) is overlap


def test_a_dash_between_namespace_and_tool_may_be_written_as_an_underscore():
    dash = recipe({"rule": "tools.namespace", "params": {"prefix": "shop", "separator": "-"}})
    under = recipe({"rule": "tools.namespace", "params": {"prefix": "shop", "separator": "_"}})
    double = recipe({"rule": "tools.namespace", "params": {"prefix": "shop", "separator": "__"}})
    assert overlaps(dash, under) != [] and overlaps(under, dash) != []
    assert overlaps(dash, double) == [] and overlaps(under, double) == []


@pytest.mark.parametrize(
    ("held_out", "training", "overlap"),
    [
        (["trace_id"], None, True),  # training's default names hold trace_id
        (["audit_id", "trace_id"], ["trace_id", "caller_ref"], True),
        (["audit_id", "locale_hint"], None, False),
        (["audit_id"], ["locale_hint"], False),
    ],
)
def test_candidate_names_overlap_where_they_share_one(held_out, training, overlap):
    """tools.add_optional draws one of its ``names`` per tool (``CANDIDATES``)."""
    mine = recipe({"rule": "tools.add_optional", "params": {"names": held_out}})
    given = {} if training is None else {"names": training}
    theirs = recipe({"rule": "tools.add_optional", "params": given})
    assert bool(overlaps(mine, theirs)) is overlap
    assert bool(overlaps(theirs, mine)) is overlap


@pytest.mark.parametrize(
    ("held_out", "training", "overlap"),
    [
        # hooks moves with the prompt into the user message, and only then
        ({"placement": "system", "hooks": False}, {}, True),
        ({"placement": "system", "hooks": False}, {"placement": "system"}, True),
        ({"placement": "user", "hooks": False}, {}, False),
        ({"placement": "user", "hooks": False}, {"placement": "any"}, False),
        ({"placement": "any", "hooks": False}, {}, True),  # both may move it to system
        ({"placement": "user", "hooks": False}, {"placement": "system", "hooks": False}, False),
    ],
)
def test_a_parameter_another_leaves_ignored_meets_any_value(held_out, training, overlap):
    mine = recipe({"rule": "prompt.placement", "params": held_out})
    theirs = recipe({"rule": "prompt.placement", "params": training})
    assert bool(overlaps(mine, theirs)) is overlap
    assert bool(overlaps(theirs, mine)) is overlap


#: harnesses whose call formats can write a dash in a tool name (api) and cannot (Python)
DASH = make_harness()
NO_DASH = make_harness(Protocol("text", "python", False, "json"))


def rewritten(name: str, harness, params: dict) -> object:
    return get_rule(name).apply(harness, random.Random(3), params).harness


@pytest.mark.parametrize(
    ("name", "param", "value"),
    [
        (r.name, key, value)
        for r in all_rules()
        if not r.plugin
        for key, schema in (r.params.get("properties") or {}).items()
        for value in (schema.get(MEANS) or {})
    ],
)
def test_a_value_means_what_its_schema_says(name, param, value):
    """Each value a built-in rule's schema reads as others (``MEANS``) gives the rewrite of
    the other value it lists: under Python's call syntax, which writes no dash, and under
    api too where it does not list itself (where it does, the call format decides)."""
    meanings = get_rule(name).params["properties"][param][MEANS][value]
    other = next(m for m in meanings if m != value)
    assert rewritten(name, NO_DASH, {param: value}) == rewritten(name, NO_DASH, {param: other})
    same = rewritten(name, DASH, {param: value}) == rewritten(name, DASH, {param: other})
    assert same is (value not in meanings)


@pytest.mark.parametrize(
    ("name", "param"),
    [
        (r.name, key)
        for r in all_rules()
        if not r.plugin
        for key, schema in (r.params.get("properties") or {}).items()
        if schema.get(WHEN)
    ],
)
def test_a_parameter_is_ignored_where_its_schema_says(name, param):
    """A built-in rule's parameter gives the same rewrite whatever its value, where the
    parameters its ``WHEN`` names take values it does not list, and not where they do."""
    when = get_rule(name).params["properties"][param][WHEN]
    assert when == {"placement": ["user"]}  # the one there is: prompt.placement's hooks
    user = DASH.replace(prompt=dataclasses.replace(DASH.prompt, placement="user"))
    for harness, placement, same in ((user, "system", True), (DASH, "user", False)):
        got = [rewritten(name, harness, {"placement": placement, param: f}) for f in (True, False)]
        assert (got[0] == got[1]) is same
