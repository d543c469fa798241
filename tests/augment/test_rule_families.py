"""Family-specific promises of the built-in rules, beyond the checks every rule passes."""

from __future__ import annotations

import dataclasses

import pytest
from conftest import ORDER_SCHEMA, make_events, make_harness
from hypothesis import given, settings
from hypothesis import strategies as st

from hsa.augment import Context, apply_chain, apply_steps, get_rule
from hsa.augment.checks import check_rewrite
from hsa.augment.mapping import ToolMap
from hsa.augment.names import split_words
from hsa.augment.rules.hooks import valid_positions
from hsa.augment.rules.skill_ids import rename_skills
from hsa.errors import RuleError
from hsa.harness import AssistantMessage, Hook, Matcher, Protocol, Section, Tool, UserMessage
from hsa.harness.importers.skills import spec_name
from hsa.harness.protocols import CALL_FORMATS, DRAWN_DOC_FORMATS
from hsa.harness.validate import harness_problems


def _apply(name, harness, seed=0, params=None, events=None):
    context = Context.of(events or make_events())
    rewrite, _ = apply_chain(harness, [(get_rule(name), params or {})], seed=seed, context=context)
    return rewrite


def test_protocol_switch_reaches_api_and_every_text_format():
    api = make_harness()
    text = make_harness(Protocol("text", "hermes", True, "json"))
    seen = {_apply("protocol.switch", text, s).harness.protocol.name for s in range(30)}
    assert "api" in seen
    protocols = [
        _apply("protocol.switch", api, s, {"target": "text"}).harness.protocol for s in range(60)
    ]
    assert {p.call_format for p in protocols} == set(CALL_FORMATS)
    assert {p.doc_format for p in protocols} == DRAWN_DOC_FORMATS  # never `lines`
    assert {p.call_tag for p in protocols} == {True, False}


@pytest.mark.parametrize(
    ("name", "params"), [("protocol.call_format", {}), ("protocol.switch", {"target": "text"})]
)
def test_protocol_rules_draw_each_protocol_as_often(name, params):
    # hermes with and without call_tag (a tag it ignores: one protocol, one label) was two
    # candidates, so drawn twice as often as any other protocol
    import random
    from collections import Counter

    harness = make_harness(Protocol("text", "json", True, "json"))
    rule, context = get_rule(name), Context.of(make_events())
    drawn = Counter(
        # how calls are written (switch also draws doc formats: each call format has as many,
        # but for the harness's own, which is left out with its own doc format)
        rule.fn(harness, random.Random(seed), params, context).harness.protocol.label.split("/")[1]
        for seed in range(4000)
    )
    del drawn["json+tag"]
    assert len(drawn) == 8 and max(drawn.values()) < 1.25 * min(drawn.values()), drawn


def test_protocol_switch_adds_tool_docs_where_the_prompt_has_none():
    harness = make_harness()
    bare = harness.replace(
        prompt=dataclasses.replace(
            harness.prompt, sections=(Section("persona", "Persona", "Be helpful.", "persona"),)
        )
    )
    switched = _apply("protocol.switch", bare, 0, {"target": "text"}).harness
    assert {s.kind for s in switched.prompt.sections} == {"persona", "tools", "output_format"}


def test_protocol_never_draws_a_format_that_cannot_carry_the_names():
    harness = make_harness(Protocol("text", "hermes", True, "json"))
    kebab = harness.replace(
        tools=[dataclasses.replace(t, name=t.name.replace("_", "-")) for t in harness.tools]
    )
    formats = {
        _apply("protocol.switch", kebab, s, {"target": "text"}).harness.protocol.call_format
        for s in range(60)
    }
    assert "python" not in formats and formats


def test_tool_names_are_never_kebab_under_python_calls():
    harness = make_harness(Protocol("text", "python", True, "python"))
    for seed in range(10):
        names = [t.name for t in _apply("tools.rename", harness, seed).harness.tools]
        assert all("-" not in n for n in names)


def test_hook_positions_are_valid():
    harness = make_harness()
    for seed in range(10):
        for hook in _apply("hooks.position", harness, seed).harness.hooks:
            assert hook.inject in valid_positions(harness, hook)
            assert hook.inject == "system" or hook.wrapper
    catch_all = Hook(
        "after", "post_tool_use", "add_context", "done", Matcher(tool=".*"), "system", "after-note"
    )
    assert "tool_result" not in valid_positions(harness, catch_all)  # would fire on load_skill
    narrow = dataclasses.replace(catch_all, matcher=Matcher(tool="search"))
    assert valid_positions(harness, narrow) == ["system", "user", "tool_result"]
    session = dataclasses.replace(catch_all, event="session_start")
    assert valid_positions(harness, session) == ["system", "user"]


def test_neutral_hooks_never_change_what_tools_do():
    from hsa.envs import get_env
    from hsa.envs.livestream import solve

    env = get_env("livestream")
    harness = env.harness()
    extra = _apply("hooks.neutral_extra", harness, 0, {"count": 5}).harness
    added = extra.hooks[len(harness.hooks) :]
    assert len(added) == 5 and all(h.effect == "add_context" for h in added)
    tags = [h.wrapper for h in added]
    assert len(set(tags)) == len(tags) and not set(tags) & {h.wrapper for h in harness.hooks}
    for task in env.tasks()[:: len(env.tasks()) // 5][:5]:
        plain = solve(env, task).trajectory.events
        with_extra = solve(env, task, harness=extra).trajectory.events
        results = [e for e in plain if e.kind == "tool_result"]
        assert [e for e in with_extra if e.kind == "tool_result"] == results
        fired = {e.hook_id for e in with_extra if e.kind == "hook"}
        assert fired & {h.id for h in added}  # they do fire, and only add context


def test_distractors_never_collide_nor_wake_a_matcher():
    harness = make_harness()
    taken = harness.replace(tools=[*harness.tools, Tool("search_web", "Mine.")])
    for seed in range(10):
        out = _apply("tools.distractors", taken, seed, {"count": 16}).harness
        names = [t.name for t in out.tools]
        assert len(names) == len(set(names)) and names.count("search_web") == 1
    greedy = harness.replace(
        hooks=[*harness.hooks, Hook("all", "pre_tool_use", "add_context", "x", Matcher(tool=".*"))]
    )
    assert _apply("tools.distractors", greedy, 0).harness.tools == greedy.tools
    skills = _apply("skill_content.distractors", harness, 0, {"count": 8}).harness.skills
    assert len({s.id for s in skills}) == len(skills) == len(harness.skills) + 8


def test_distractors_only_where_the_trajectory_calls_tools_and_never_a_tool_it_has():
    harness = make_harness()
    refusal = (UserMessage("What time is it in New York?"), AssistantMessage("I cannot tell."))
    clock = Tool("getCurrentTime", "Mine.", {"type": "object", "properties": {}})
    timed = harness.replace(tools=[*harness.tools, clock])
    for seed in range(10):
        # calling no tool is the task: a bank tool might answer it
        assert _apply("tools.distractors", harness, seed, {"count": 16}, refusal).harness == harness
        out = _apply("tools.distractors", timed, seed, {"count": 16}).harness
        added = {t.name for t in out.tools} - {t.name for t in timed.tools}
        # of 16: neither the clock nor search_web, whose name holds the harness's search
        assert len(added) == 14 and not any("current_time" in n for n in added), added


def test_a_distractor_whose_name_holds_a_harness_tools_words_is_not_drawn():
    # BFCL multiple_67, "Translate Hello to French" with a tool named translate, got the bank's
    # translate_text: only a name the same in another case style was kept out
    harness = make_harness()
    empty = {"type": "object", "properties": {}}
    for own in ("translate", "Texts_Translate", "getStockQuotes", "recipe_unit_conversion"):
        mine = harness.replace(tools=[*harness.tools, Tool(own, "Mine.", empty)])
        for seed in range(6):
            out = _apply("tools.distractors", mine, seed, {"count": 16}).harness
            added = {t.name for t in out.tools} - {t.name for t in mine.tools}
            assert len(added) == 14, (own, added)  # of 16: nor search_web, beside search


def test_reworded_tool_descriptions_read_whatever_word_they_start_with():
    # "Use this tool to {lower}" read "Use this tool to this function serves as a calculator."
    for text in ("This function serves as a calculator.", "Retrieves the weather.", "Get it."):
        tools = [Tool("calc", text, {"type": "object", "properties": {}})]
        harness = make_harness().replace(tools=tools)
        for seed in range(16):
            (tool,) = _apply("tools.descriptions", harness, seed).harness.tools
            assert text in tool.description and " to " + text[:1].lower() not in tool.description


def test_skill_id_enum_on_the_skill_tool_follows_renames_and_drops():
    harness = make_harness()
    tool = harness.skill_tool
    ids = [s.id for s in harness.skills]
    params = {**tool.parameters, "properties": {"skill_id": {"type": "string", "enum": ids}}}
    harness = harness.replace(skill_tool=dataclasses.replace(tool, parameters=params))
    events = make_events()
    for name in (
        "skill_ids.rename",
        "skill_ids.namespace",
        "skill_content.drop_unused",
        "skill_content.distractors",
    ):
        rewrite = _apply(name, harness, 1)
        enum = rewrite.harness.skill_tool.parameters["properties"]["skill_id"]["enum"]
        assert enum == [s.id for s in rewrite.harness.skills], name
        assert check_rewrite(harness, rewrite, events).ok


def test_a_renamed_skill_keeps_the_names_of_its_bundled_files_in_its_content():
    harness = make_harness()
    first, *rest = harness.skills
    content = (
        "Run `ruby data_export.rb` or `node data_export.mjs`; settings at data_export.yaml:3; "
        "ship data_export.tar.gz. Then load `data_export`."
    )
    skill = dataclasses.replace(first, id="data_export", content=content)
    harness = harness.replace(skills=[skill, *rest])
    rewrite = _apply("skill_ids.rename", harness, 0, {"style": "camel"})
    assert rewrite.mapping.skills["data_export"] == "dataExport"
    assert rewrite.harness.skills[0].content == content.replace("`data_export`", "`dataExport`")


@pytest.mark.parametrize(
    ("name", "params"),
    [
        ("skill_ids.rename", {"style": "pascal"}),
        ("skill_ids.rename", {"style": "snake"}),
        ("skill_ids.rename", {"style": "random"}),
        ("skill_ids.namespace", {"prefix": "acme", "separator": ":"}),
        ("skill_ids.namespace", {"prefix": "core", "separator": "_"}),
    ],
)
def test_renamed_skills_keep_spec_names_and_their_skill_keyed_metadata(name, params):
    # AlgorithmicArt, core_algorithmic-art, acme:FrontendDesign were written as SKILL.md
    # names, which the Agent Skills specification (and hsa's importer) does not take
    harness = make_harness()
    harness = harness.replace(
        metadata={
            "source": "agent-skills",
            "bundled_files": {"returns": ["LICENSE.txt"], "shipping": ["rates.csv"]},
            "skill_id_map": {"returns": "Returns!"},
        }
    )
    rewrite = _apply(name, harness, 0, params)
    table = {s.id: rewrite.mapping.skills.get(s.id, s.id) for s in harness.skills}
    out = rewrite.harness
    assert all(spec_name(s.name) for s in out.skills), [s.name for s in out.skills]
    assert len({s.name for s in out.skills}) == len(out.skills)
    if name == "skill_ids.namespace":  # the namespace stays in the name
        assert all(s.name.startswith(params["prefix"] + "-") for s in out.skills)
    assert out.metadata["bundled_files"] == {
        table["returns"]: ["LICENSE.txt"],
        table["shipping"]: ["rates.csv"],
    }
    assert out.metadata["skill_id_map"] == {table["returns"]: "Returns!"}
    assert out.metadata["source"] == "agent-skills"


def test_bundled_files_of_a_folder_whose_name_was_made_legal_follow_its_new_id():
    # the importer keys bundled_files by folder name: `my skill/` is the skill `my_skill`
    harness = make_harness()
    first, *rest = harness.skills
    harness = harness.replace(
        skills=[dataclasses.replace(first, id="my_skill", name="my-skill"), *rest],
        metadata={
            "bundled_files": {"my skill": ["LICENSE.txt"], "shipping": ["rates.csv"]},
            "skill_id_map": {"my_skill": "my skill"},
        },
    )
    params = {"prefix": "org", "separator": ":"}
    once = _apply("skill_ids.namespace", harness, 0, params).harness
    assert once.metadata == {
        "bundled_files": {"org:my_skill": ["LICENSE.txt"], "org:shipping": ["rates.csv"]},
        "skill_id_map": {"org:my_skill": "my skill"},
    }
    twice = _apply("skill_ids.namespace", once, 0, {"prefix": "acme", "separator": "."})
    assert twice.harness.metadata["bundled_files"] == {
        "acme.org:my_skill": ["LICENSE.txt"],
        "acme.org:shipping": ["rates.csv"],
    }
    # a skill the rename leaves keeps its folder's key
    from hsa.augment.rules.skill_ids import rename_skills

    other = rename_skills(harness, {"shipping": "acme:shipping"}).harness.metadata
    assert other["bundled_files"] == {"my skill": ["LICENSE.txt"], "acme:shipping": ["rates.csv"]}


def test_renamed_skills_take_the_names_their_new_ids_leave_free():
    harness = make_harness()
    a, b, *rest = harness.skills

    def names(ids: list[str], table: dict[str, str]) -> list[tuple[str, str]]:
        pair = [dataclasses.replace(s, id=i, name=i) for s, i in zip((a, b), ids, strict=True)]
        out = rename_skills(harness.replace(skills=[*pair, *rest]), table).harness
        return [(s.id, s.name) for s in out.skills[:2]]

    # a swap: each skill is named after its own new id, not the other's
    assert names(["alpha", "beta"], {"alpha": "beta", "beta": "alpha"}) == [
        ("beta", "beta"),
        ("alpha", "alpha"),
    ]
    # two new ids with one spec-legal form: the second is suffixed, never its old id
    table = {"returns_policy": "acme:returns_policy", "returns-policy": "acme:returns-policy"}
    assert names(["returns_policy", "returns-policy"], table) == [
        ("acme:returns_policy", "acme-returns-policy"),
        ("acme:returns-policy", "acme-returns-policy-2"),
    ]


def test_tool_renames_keep_hook_matchers_firing_on_the_same_tools():
    import re

    harness = make_harness()
    before = [t.name for t in harness.tools if re.fullmatch("get_order.*", t.name)]
    for seed in range(5):
        rewrite = _apply("tools.rename", harness, seed, {"style": "random"})
        audit = rewrite.harness.hook("audit")
        after = [t.name for t in rewrite.harness.tools if re.fullmatch(audit.matcher.tool, t.name)]
        assert after == [rewrite.mapping.tool_name(n) for n in before]


def test_a_tool_rename_keeps_the_tools_it_leaves_alone_as_they_are():
    # the same objects, so what was derived from them (their JSON, their validation) is kept
    harness = make_harness()
    for seed in range(5):
        after = _apply("tools.rename", harness, seed, {"fraction": 0.2}).harness
        kept = [t for t in after.tools if t.to_json() in {b.to_json() for b in harness.tools}]
        assert kept and all(any(t is b for b in harness.tools) for t in kept)
        assert len(kept) < len(harness.tools)


_ITEM = st.fixed_dictionaries(
    {"item_id": st.text(max_size=5), "quantity": st.integers(1, 9)},
    optional={"condition": st.sampled_from(["new", "used"])},
)
_ARGS = st.fixed_dictionaries(
    {
        "order_id": st.text(max_size=8),
        "items": st.lists(_ITEM, max_size=3),
        "address": st.fixed_dictionaries(
            {"city": st.text(max_size=5)}, optional={"zip": st.text(max_size=5)}
        ),
    },
    optional={"reason": st.sampled_from(["damaged", "wrong_size", "no_longer_needed"])},
)


@settings(max_examples=60, deadline=None, derandomize=True)
@given(args=_ARGS, seed=st.integers(0, 50))
def test_argument_rewrites_invert_exactly(args, seed):
    harness = make_harness().replace(tools=[Tool("return_order_items", "", ORDER_SCHEMA)])
    chain = [
        (get_rule(n), {})
        for n in (
            "tools.rename_params",
            "tools.enum_values",
            "tools.flatten_args",
            "tools.wrap_args",
            "tools.add_optional",
        )
    ]
    rewrite, _ = apply_chain(harness, chain, seed=seed)
    tool = rewrite.mapping.tools["return_order_items"]
    surface = apply_steps(args, tool.steps)
    inverse = rewrite.mapping.inverse().tools[tool.name]
    assert apply_steps(surface, inverse.steps) == args
    from jsonschema import Draft202012Validator

    errors = list(
        Draft202012Validator(dict(rewrite.harness.tools[0].parameters)).iter_errors(surface)
    )
    assert not errors, errors[0].message


_EMAIL_OR_PHONE = {
    "type": "object",
    "properties": {
        "kind": {"type": "string", "enum": ["by_email", "by_phone"]},
        "email": {"type": "string"},
        "phone": {"type": "string"},
    },
    "required": ["kind"],
    "if": {"properties": {"kind": {"const": "by_email"}}},
    "then": {"required": ["email"]},
    "else": {"required": ["phone"]},
}
_ADDRESS = {"type": "object", "properties": {"city_name": {"type": "string"}}}
#: schemas whose parts name each other: each rule keeps every call valid, or leaves it alone
_ENTANGLED = {
    "if_then_else": (
        _EMAIL_OR_PHONE,
        [{"kind": "by_email", "email": "a@b.c"}, {"kind": "by_phone", "phone": "1"}],
    ),
    "dependent_schemas": (
        {
            "type": "object",
            "properties": {"sort_order": {"type": "string", "enum": ["price_asc", "price_desc"]}},
            "dependentSchemas": {
                "sort_order": {"properties": {"sort_order": {"enum": ["price_asc", "price_desc"]}}}
            },
        },
        [{"sort_order": "price_desc"}],
    ),
    "not_required": (
        {
            "type": "object",
            "properties": {"start_date": {"type": "string"}, "end_date": {"type": "string"}},
            "not": {"required": ["end_date"], "not": {"required": ["start_date"]}},
        },
        [{"start_date": "a"}, {"start_date": "a", "end_date": "b"}],
    ),
    "dependent_required_on_an_object": (
        {
            "type": "object",
            "properties": {
                "address": {**_ADDRESS, "required": ["city_name"]},
                "gift": {"type": "boolean"},
            },
            "required": ["address"],
            "dependentRequired": {"gift": ["address"]},
            "allOf": [{"required": ["address"]}],
        },
        [{"address": {"city_name": "c"}, "gift": True}],
    ),
    "ref_into_properties": (
        {
            "type": "object",
            "properties": {
                "home_address": {**_ADDRESS, "required": ["city_name"]},
                "work_address": {"$ref": "#/properties/home_address"},
            },
            "required": ["home_address"],
        },
        [{"home_address": {"city_name": "x"}, "work_address": {"city_name": "y"}}],
    ),
    "recursive_type": (
        {
            "type": "object",
            "properties": {
                "root": {"$ref": "#/$defs/Node"},
                "depth_limit": {"type": "integer"},
            },
            "required": ["root"],
            "$defs": {
                "Node": {
                    "type": "object",
                    "properties": {
                        "node_label": {"type": "string", "enum": ["leaf_node", "inner_node"]},
                        "child_nodes": {"type": "array", "items": {"$ref": "#/$defs/Node"}},
                    },
                    "required": ["node_label"],
                }
            },
        },
        [
            {
                "root": {
                    "node_label": "inner_node",
                    "child_nodes": [
                        {"node_label": "inner_node", "child_nodes": [{"node_label": "leaf_node"}]}
                    ],
                },
                "depth_limit": 2,
            }
        ],
    ),
    "flattened_names_by_pattern": (
        {
            "type": "object",
            "properties": {"addr": {**_ADDRESS, "required": ["city_name"]}},
            "required": ["addr"],
            "propertyNames": {"pattern": "^[a-z]+$"},
            "patternProperties": {"^addr.+": {"type": "integer"}},
        },
        [{"addr": {"city_name": "x"}}],
    ),
    "contains_beside_items": (
        {
            "type": "object",
            "properties": {
                "tag_list": {
                    "type": "array",
                    "items": {"enum": ["red_tag", "blue_tag"]},
                    "contains": {"const": "red_tag"},
                }
            },
        },
        [{"tag_list": ["blue_tag", "red_tag"]}],
    ),
    "items_after_prefix_items": (
        {
            "type": "object",
            "properties": {
                "tag_list": {
                    "type": "array",
                    "prefixItems": [{"const": "red_tag"}],
                    "items": {"enum": ["red_tag", "blue_tag"]},
                }
            },
        },
        [{"tag_list": ["red_tag", "blue_tag"]}],
    ),
    "draft_04_id": (
        {
            "$schema": "http://json-schema.org/draft-04/schema#",
            "id": "http://example.com/order.json",
            "type": "object",
            "definitions": {"A": {"type": "string"}},
            "properties": {"order_ref": {"$ref": "#/definitions/A"}},
        },
        [{"order_ref": "x"}],
    ),
    "names_by_pattern": (
        {
            "type": "object",
            "properties": {"user_id": {"type": "string"}, "page_size": {"type": "integer"}},
            "propertyNames": {"pattern": "^[a-z_]+$"},
        },
        [{"user_id": "u", "page_size": 3}],
    ),
    "draft_07_tuple": (
        {
            "$schema": "http://json-schema.org/draft-07/schema#",
            "type": "object",
            "properties": {
                "point": {
                    "type": "array",
                    "items": [{"type": "number"}, {"type": "number"}],
                    "additionalItems": False,
                },
                "unit": {"type": "string", "enum": ["metre", "foot"]},
            },
            "dependencies": {"point": ["unit"]},
        },
        [{"point": [1, 2], "unit": "foot"}],
    ),
}


@pytest.mark.parametrize("case", sorted(_ENTANGLED))
@pytest.mark.parametrize(
    "name",
    ["tools.rename_params", "tools.enum_values", "tools.flatten_args", "tools.wrap_args"],
)
def test_argument_rewrites_keep_calls_valid_where_schema_parts_name_each_other(name, case):
    from hsa.harness.arguments import schema_class

    schema, calls = _ENTANGLED[case]
    validator = schema_class(schema)
    assert all(validator(schema).is_valid(args) for args in calls)
    harness = make_harness().replace(tools=[Tool("act", "Act.", schema)])
    assert not harness_problems(harness)
    for seed in range(8):
        rewrite, _ = apply_chain(harness, [(get_rule(name), {})], seed=seed)
        rewritten = dict(rewrite.harness.tools[0].parameters)
        validator.check_schema(rewritten)
        tool = rewrite.mapping.tools.get("act")
        for args in calls:
            surface = apply_steps(args, tool.steps if tool else ())
            errors = list(validator(rewritten).iter_errors(surface))
            assert not errors, (seed, surface, errors[0].message)
            if tool:
                back = rewrite.mapping.inverse().tools[tool.name].steps
                assert apply_steps(surface, back) == args


def test_renames_reach_conditional_parts_and_pointers_into_properties():
    schema, _ = _ENTANGLED["if_then_else"]
    params = {"fraction": 1.0, "style": "pascal"}
    harness = make_harness().replace(tools=[Tool("act", "Act.", schema)])
    rewrite, _ = apply_chain(harness, [(get_rule("tools.rename_params"), params)], seed=0)
    renamed = rewrite.harness.tools[0].parameters
    assert renamed["if"] == {"properties": {"Kind": {"const": "by_email"}}}
    assert (renamed["then"], renamed["else"]) == ({"required": ["Email"]}, {"required": ["Phone"]})
    schema, _ = _ENTANGLED["ref_into_properties"]
    harness = make_harness().replace(tools=[Tool("act", "Act.", schema)])
    rewrite, _ = apply_chain(harness, [(get_rule("tools.rename_params"), params)], seed=0)
    renamed = rewrite.harness.tools[0].parameters
    assert renamed["properties"]["WorkAddress"] == {"$ref": "#/properties/HomeAddress"}


_HOLDING_DEFAULTS = {
    "type": "object",
    "properties": {
        "include": {
            "type": "array",
            "description": "Reasons to include, e.g. wrong_size.",
            "items": {"$ref": "#/$defs/Reason"},
            "default": ["wrong_size"],
            "examples": [["damaged", "wrong_size"]],
        },
        "reason": {"$ref": "#/$defs/Reason", "description": "Either `damaged` or wrong_size."},
        "ship": {
            "type": "object",
            "properties": {"speed": {"type": "string", "enum": ["same_day", "next_day"]}},
            "additionalProperties": False,
            "default": {"speed": "same_day"},
        },
        "maybe": {
            "anyOf": [
                {"type": "null"},
                {
                    "type": "object",
                    "properties": {"why": {"$ref": "#/$defs/Reason"}},
                    "default": {"why": "damaged"},
                },
            ],
        },
    },
    "$defs": {"Reason": {"type": "string", "enum": ["wrong_size", "damaged"]}},
}


def _invalid_defaults(schema):
    """Each ``default`` and example of ``schema``'s sub-schemas that its sub-schema refuses."""
    from jsonschema import Draft202012Validator

    from hsa.augment.param_schemas import reached

    found = []
    for r in reached(schema):
        check = Draft202012Validator({**r.node, "$defs": schema.get("$defs", {})})
        for value in [r.node.get("default", None), *r.node.get("examples", [])]:
            if value is not None and not check.is_valid(value):
                found.append((r.path, value))
    return found


def test_enum_respellings_reach_the_defaults_and_descriptions_that_hold_them():
    harness = make_harness().replace(tools=[Tool("act", "Act.", _HOLDING_DEFAULTS)])
    rewrite = _apply("tools.enum_values", harness, 0, {"style": "upper"})
    schema = rewrite.harness.tools[0].parameters
    assert _invalid_defaults(schema) == []
    props = schema["properties"]
    assert props["include"]["default"] == ["WRONG_SIZE"]
    assert props["include"]["examples"] == [["DAMAGED", "WRONG_SIZE"]]
    assert props["include"]["description"] == "Reasons to include, e.g. WRONG_SIZE."
    assert props["reason"]["description"] == "Either `DAMAGED` or WRONG_SIZE."
    assert props["ship"]["default"] == {"speed": "SAME_DAY"}
    assert props["maybe"]["anyOf"][1]["default"] == {"why": "DAMAGED"}


def test_parameter_renames_reach_the_defaults_that_hold_them():
    harness = make_harness().replace(tools=[Tool("act", "Act.", _HOLDING_DEFAULTS)])
    rewrite = _apply("tools.rename_params", harness, 0, {"style": "pascal"})
    schema = rewrite.harness.tools[0].parameters
    assert _invalid_defaults(schema) == []
    assert schema["properties"]["Ship"]["default"] == {"Speed": "same_day"}
    assert schema["properties"]["Maybe"]["anyOf"][1]["default"] == {"Why": "damaged"}


_SHIP_TO = {
    "type": "object",
    "properties": {
        "name": {"type": "string"},
        "address": {
            "type": "object",
            "properties": {
                "city": {"type": "string"},
                "geo": {
                    "type": "object",
                    "properties": {"lat": {"type": "number"}},
                    "default": {"lat": 48.9},
                },
            },
            "required": ["city"],
            "additionalProperties": False,
        },
    },
    "required": ["name", "address"],
    "additionalProperties": False,
    "default": {"name": "Ann", "address": {"city": "Paris"}},
    "examples": [{"name": "Bo", "address": {"city": "Rome", "geo": {"lat": 41.9}}}],
}


@pytest.mark.parametrize("join", ["_", "__", "camel"])
def test_flattening_reaches_the_defaults_that_hold_the_object(join):
    harness = make_harness().replace(tools=[Tool("ship", "Ship.", _SHIP_TO)])
    rewrite = _apply("tools.flatten_args", harness, 0, {"join": join})
    schema = rewrite.harness.tools[0].parameters
    assert _invalid_defaults(schema) == []
    city, geo = {
        "_": ("address_city", "address_geo"),
        "__": ("address__city", "address__geo"),
        "camel": ("addressCity", "addressGeo"),
    }[join]
    assert schema["default"] == {"name": "Ann", city: "Paris"}
    assert schema["examples"] == [{"name": "Bo", city: "Rome", geo: {"lat": 41.9}}]
    assert schema["properties"][geo]["default"] == {"lat": 48.9}
    inverse = rewrite.mapping.inverse().tools["ship"].steps
    assert apply_steps(schema["default"], inverse) == _SHIP_TO["default"]


def test_a_recursive_type_keeps_its_names_and_the_rest_is_renamed():
    schema, _ = _ENTANGLED["recursive_type"]
    params = {"fraction": 1.0, "style": "pascal"}
    harness = make_harness().replace(tools=[Tool("act", "Act.", schema)])
    rewrite, _ = apply_chain(harness, [(get_rule("tools.rename_params"), params)], seed=0)
    renamed = rewrite.harness.tools[0].parameters
    assert list(renamed["properties"]) == ["Root", "DepthLimit"]
    assert renamed["$defs"] == schema["$defs"]  # its paths never end: no step could follow


def test_a_skill_body_keeps_the_skill_tools_own_parameter_and_follows_the_tools():
    # Agent Skills load by `name`: a skill's `"name"` (a JSON key in an example, a front-matter
    # field) is not the loader's parameter; a tool's parameter a skill mentions is renamed
    harness = make_harness()
    loader = dataclasses.replace(
        harness.skill_tool,
        parameters={"type": "object", "properties": {"name": {"type": "string"}}},
    )
    body = 'Declare `{"type": "bash", "name": "bash"}` and pass `order_id` to `get_order`.'
    skill = dataclasses.replace(harness.skills[2], content=body)
    harness = harness.replace(skill_tool=loader, skills=[*harness.skills[:2], skill])
    params = {"fraction": 1.0, "style": "pascal"}
    rewrite, _ = apply_chain(harness, [(get_rule("tools.rename_params"), params)], seed=0)
    renamed = rewrite.harness
    assert list(renamed.skill_tool.parameters["properties"]) == ["Name"]
    assert renamed.skills[2].content == body.replace("`order_id`", "`OrderId`")
    assert ("name", "Name") in rewrite.mapping.text  # assistant text still follows it


def test_parameter_renames_follow_into_the_arguments_an_input_hook_sets_and_removes():
    hook = Hook(
        "trim-search",
        "pre_tool_use",
        "update_input",
        "Searches are capped.",
        Matcher(tool="search"),
        params={"set": {"limit": 5}, "remove": ["sort"]},
    )
    harness = make_harness().replace(hooks=[hook])
    params = {"fraction": 1.0, "style": "pascal"}
    rewrite, _ = apply_chain(harness, [(get_rule("tools.rename_params"), params)], seed=0)
    steps = rewrite.mapping.tools["search"].steps
    (limit,) = apply_steps({"limit": 1}, steps)
    (sort,) = apply_steps({"sort": "price"}, steps)
    assert (limit, sort) == ("Limit", "Sort")
    renamed = rewrite.harness.hook("trim-search")
    assert renamed.params == {"set": {"Limit": 5}, "remove": ["Sort"]}


def test_arguments_an_input_hook_sets_are_never_wrapped_nor_flattened_away():
    # the hook sets and removes arguments by their top-level names, which it cannot follow
    # into a wrapper or out of a flattened object
    def hook(tool: str | None, names: list[str]) -> Hook:
        return Hook(
            "h",
            "pre_tool_use",
            "update_input",
            "Capped.",
            Matcher(tool=tool),
            params={"remove": names},
        )

    harness = make_harness()
    wrap = (get_rule("tools.wrap_args"), {"fraction": 1.0})
    flatten = (get_rule("tools.flatten_args"), {})
    for seed in range(4):
        wrapped, _ = apply_chain(
            harness.replace(hooks=[hook("get_order.*", ["x"])]), [wrap], seed=seed
        )
        assert {t for t in wrapped.mapping.tools if t.startswith("get_order")} == set()
        assert "cancel_order" in wrapped.mapping.tools
        everywhere, _ = apply_chain(harness.replace(hooks=[hook(None, ["x"])]), [wrap], seed=seed)
        assert not everywhere.mapping.tools
        flat, _ = apply_chain(
            harness.replace(hooks=[hook(None, ["address"])]), [flatten], seed=seed
        )
        assert "return_order_items" not in flat.mapping.tools
    assert apply_chain(harness, [flatten], seed=0)[0].mapping.tools["return_order_items"]


def test_tool_renames_follow_into_allowed_tools_of_skills():
    harness = make_harness()
    first, *rest = harness.skills
    skill = dataclasses.replace(first, extra={"allowed-tools": "get_order search, Bash(git:*)"})
    listed = dataclasses.replace(rest[0], extra={"allowed-tools": ["get_order_status"]})
    harness = harness.replace(skills=[skill, listed, *rest[1:]])
    rewrite = _apply("tools.rename", harness, 0, {"style": "camel"})
    skills = rewrite.harness.skills
    assert skills[0].extra["allowed-tools"] == "getOrder search, Bash(git:*)".replace(
        "search", rewrite.mapping.tool_name("search")
    )
    assert skills[1].extra["allowed-tools"] == ["getOrderStatus"]


def test_tool_renames_follow_the_name_of_an_allowed_tools_entry_with_a_pattern():
    # the spec's own example: Bash(git:*) allows a command of the Bash tool
    harness = make_harness()
    first, *rest = harness.skills
    value = "get_order(x:*) get_order(git add:*), search get_order_status(y)"
    skill = dataclasses.replace(first, extra={"allowed-tools": value})
    listed = dataclasses.replace(rest[0], extra={"allowed-tools": ["get_order(x y:*)"]})
    harness = harness.replace(skills=[skill, listed, *rest[1:]])
    for name, params in (("tools.rename", {"style": "camel"}), ("tools.namespace", {})):
        rewrite = _apply(name, harness, 0, params)
        new = rewrite.mapping.tool_name
        skills = rewrite.harness.skills
        assert skills[0].extra["allowed-tools"] == (
            f"{new('get_order')}(x:*) {new('get_order')}(git add:*), {new('search')} "
            f"{new('get_order_status')}(y)"
        )
        assert skills[1].extra["allowed-tools"] == [f"{new('get_order')}(x y:*)"]


def test_untitled_sections_stay_untitled():
    harness = make_harness()
    bare = Section("system", "", "Verbatim system message.", "persona")
    harness = harness.replace(
        prompt=dataclasses.replace(harness.prompt, sections=(bare, *harness.prompt.sections))
    )
    for seed in range(5):
        titled = _apply("prompt.section_titles", harness, seed).harness.prompt.sections
        assert titled[0].title == "" and titled[1].title != "Persona"


def test_prompt_sections_that_point_at_each_other_by_place_keep_their_order():
    harness = make_harness()
    sections = list(harness.prompt.sections)
    assert any(
        _apply("prompt.section_order", harness, s).harness.prompt.sections != tuple(sections)
        for s in range(8)
    )
    sections[-1] = dataclasses.replace(
        sections[-1], body=sections[-1].body + " Apply the policy described above."
    )
    pointing = harness.replace(prompt=dataclasses.replace(harness.prompt, sections=tuple(sections)))
    for seed in range(8):
        assert _apply("prompt.section_order", pointing, seed).harness == pointing
    # a pointer within its own section (tau2 airline's policy: "the ones listed above", after
    # them) leaves the sections free to move
    sections[-1] = dataclasses.replace(
        sections[-1], body="Reasons:\n- a\n- b\n\nNo other reason than the ones listed above."
    )
    within = harness.replace(prompt=dataclasses.replace(harness.prompt, sections=tuple(sections)))
    assert any(
        _apply("prompt.section_order", within, s).harness.prompt.sections != tuple(sections)
        for s in range(8)
    )
    # "see ... below" with words between, ending a section, points at one after it ("earlier"
    # read as pointing back, which only an opening paragraph can do outside its section)
    for body in ("Be kind. See **Policy** below.", "Be kind.\n\nSee the earlier rules below."):
        sections[0] = dataclasses.replace(sections[0], body=body)
        below = harness.replace(
            prompt=dataclasses.replace(harness.prompt, sections=tuple(sections))
        )
        for seed in range(8):
            assert _apply("prompt.section_order", below, seed).harness == below
    # prose that says "see" and "below" pointing at no part leaves them free to move
    sections[0] = dataclasses.replace(
        sections[0], body="Check to see whether the stock falls below 5 before you order."
    )
    prose = harness.replace(prompt=dataclasses.replace(harness.prompt, sections=tuple(sections)))
    assert any(
        _apply("prompt.section_order", prose, s).harness.prompt.sections != tuple(sections)
        for s in range(8)
    )


def test_enum_values_keep_what_they_say():
    values = [
        "C++",
        "C#",
        "google.com",
        "Python",
        "cancel_order",
        "Country",
        "one-stop",
        "Rock n roll",
    ]
    schema = {"type": "object", "properties": {"v": {"type": "string", "enum": values}}}
    harness = make_harness().replace(tools=[Tool("pick", "Pick one.", schema)])
    for seed in range(4):
        upper = _apply("tools.enum_values", harness, seed, {"style": "upper"}).mapping.text
        assert dict(upper) == {
            "Python": "PYTHON",
            "cancel_order": "CANCEL_ORDER",
            "Country": "COUNTRY",
            "one-stop": "ONE_STOP",
            "Rock n roll": "ROCK_N_ROLL",
        }
        # under synonym, only the value written as a code: the others are names and phrases
        synonym = _apply("tools.enum_values", harness, seed, {"style": "synonym"}).mapping.text
        assert [old for old, _ in synonym] == ["cancel_order"]


def test_a_synonym_keeps_upper_enum_values_upper_and_one_with_none_as_it_is():
    values = ["CANCEL", "REFUND", "CANCEL_FLIGHT"]
    schema = {"type": "object", "properties": {"action": {"type": "string", "enum": values}}}
    harness = make_harness().replace(tools=[Tool("resolve", "Resolve.", schema)])
    for seed in range(4):
        text = dict(_apply("tools.enum_values", harness, seed, {"style": "synonym"}).mapping.text)
        assert "REFUND" not in text  # no synonym in the bank: not recased to "Refund"
        assert set(text) == {"CANCEL", "CANCEL_FLIGHT"}
        assert all(new.isupper() and new != old for old, new in text.items()), text


def test_synonym_renames_never_swap_two_things_the_harness_keeps_apart():
    schema = {
        "type": "object",
        "properties": {"item_id": {"type": "string"}, "product_id": {"type": "string"}},
    }
    tools = [Tool(f"get_{n}_details", f"Details of a {n}.", schema) for n in ("item", "product")]
    harness = make_harness().replace(tools=tools)
    for seed in range(12):
        for name, names, noun in (
            ("tools.rename", ("get_item_details", "get_product_details"), 1),
            ("tools.rename_params", ("item_id", "product_id"), 0),
        ):
            text = dict(_apply(name, harness, seed, {"style": "synonym"}).mapping.text)
            item, product = (split_words(text.get(n, n)) for n in names)
            assert "product" not in item and "item" not in product, (name, seed, item, product)
            assert item[noun] != product[noun], (name, seed, item, product)


def test_synonym_renames_pass_over_a_word_the_harness_has_in_another_form():
    # movies -> films beside a tool of the harness's own about a film: two things, one word
    film = {"type": "object", "properties": {"film_id": {"type": "string"}}}
    tools = [Tool("find_movies", "Find movies.", {}), Tool("rate_film", "Rate a film.", film)]
    harness = make_harness().replace(tools=tools)
    for seed in range(12):
        text = dict(_apply("tools.rename", harness, seed, {"style": "synonym"}).mapping.text)
        assert "films" not in split_words(text.get("find_movies", "find_movies")), (seed, text)


def _style_of(name: str) -> str:
    if name.startswith("t_") or name.startswith("skill-"):
        return "random"
    if "-" in name:
        return "kebab"
    if "_" in name:
        return "snake"  # a synonym keeps the canonical snake case
    return "pascal" if name[:1].isupper() else "camel"


def test_a_list_of_styles_draws_only_the_styles_it_names():
    harness = make_harness()
    drawn = {
        _style_of(t.name)
        for seed in range(40)
        for t in _apply("tools.rename", harness, seed, {"style": ["camel", "pascal"]}).harness.tools
    }
    assert drawn == {"camel", "pascal"}
    ids = {
        _style_of(s.id)
        for seed in range(40)
        for s in _apply("skill_ids.rename", harness, seed, {"style": ["random"]}).harness.skills
    }
    assert ids == {"random"}


def test_a_style_list_of_one_style_is_that_style():
    harness = make_harness()
    for seed in range(5):
        listed = _apply("tools.rename", harness, seed, {"style": ["kebab"]}).harness
        named = _apply("tools.rename", harness, seed, {"style": "kebab"}).harness
        assert [t.name for t in listed.tools] == [t.name for t in named.tools]


def test_a_style_list_naming_an_unknown_style_is_refused_naming_the_rule():
    with pytest.raises(RuleError, match=r"tools\.rename"):
        get_rule("tools.rename").resolve_params({"style": ["camel", "leet"]})


def test_wrapping_leaves_alone_a_tool_whose_required_names_another_keyword_declares():
    # the moves name the declared properties only: 'id' would stay outside the wrapper
    harness = make_harness()
    tool = Tool(
        "upd",
        "Update.",
        {
            "type": "object",
            "allOf": [{"$ref": "#/$defs/base"}],
            "$defs": {"base": {"type": "object", "properties": {"id": {"type": "string"}}}},
            "properties": {"note": {"type": "string"}},
            "required": ["id"],
        },
    )
    harness = harness.replace(tools=[tool])
    for seed in range(4):
        rewrite, _ = apply_chain(
            harness, [(get_rule("tools.wrap_args"), {"fraction": 1.0})], seed=seed
        )
        assert rewrite.harness.tools[0].parameters == tool.parameters


def test_an_output_format_section_of_its_own_is_never_titled_as_calling_convention():
    # "Reply in one short paragraph" under "## How to call tools": the title contradicted
    # the body; only a section filled with the call instructions may take such a title
    calls = {"How to call tools", "Calling convention", "Tool call format"}
    harness = make_harness()
    own = Section("format", "Output format", "Reply in one short paragraph.", "output_format")
    filled = Section("calls", "Output format", "", "output_format")
    seen: dict[str, set[str]] = {"own": set(), "filled": set()}
    for sections, key in (((own,), "own"), ((filled,), "filled")):
        changed = harness.replace(prompt=dataclasses.replace(harness.prompt, sections=sections))
        for seed in range(40):
            rewrite = _apply("prompt.section_titles", changed, seed)
            seen[key].add(rewrite.harness.prompt.sections[0].title)
    assert not seen["own"] & calls and seen["own"]
    assert seen["filled"] & calls


_BOOL_NAMES = ["city", "opts", "tags", "mode", "zip"]


def _bool_schema(draw, depth: int):
    """An object schema whose sub-schemas may be booleans (``true``: any value, ``false``:
    none), as properties, array items and ``additionalProperties``."""
    props: dict = {}
    for name in draw(st.lists(st.sampled_from(_BOOL_NAMES), min_size=1, max_size=3, unique=True)):
        kind = draw(
            st.sampled_from(["true", "false", "enum", "array", "object"][: 5 if depth else 4])
        )
        if kind in ("true", "false"):
            props[name] = kind == "true"
        elif kind == "enum":
            props[name] = {"type": "string", "enum": ["by_mail", "in_store"]}
        elif kind == "array":
            props[name] = {
                "type": "array",
                "items": draw(st.sampled_from([True, {"type": "string"}])),
            }
        else:
            props[name] = _bool_schema(draw, depth - 1)
    schema = {"type": "object", "properties": props}
    schema["required"] = [k for k in props if props[k] is not False and draw(st.booleans())]
    if draw(st.booleans()):
        schema["additionalProperties"] = draw(st.booleans())
    return schema


def _bool_value(schema):
    """A value ``schema`` accepts (a property whose schema is ``false`` left out)."""
    if schema is True:
        return 1
    if "enum" in schema:
        return schema["enum"][0]
    if schema["type"] == "array":
        return ["x"]
    return {k: _bool_value(s) for k, s in schema["properties"].items() if s is not False}


#: the rules that rewrite a tool's parameter schema or read through it
_SCHEMA_RULES = [
    "tools.add_optional",
    "tools.descriptions",
    "tools.enum_values",
    "tools.flatten_args",
    "tools.rename",
    "tools.rename_params",
    "tools.reorder_properties",
    "tools.wrap_args",
]


@settings(max_examples=15, deadline=None, derandomize=True)
@given(schema=st.composite(lambda draw: _bool_schema(draw, 2))(), seed=st.integers(0, 20))
def test_tool_schema_rules_take_boolean_sub_schemas(schema, seed):
    from hsa.harness.arguments import schema_class

    harness = make_harness().replace(tools=[Tool("act", "Act.", schema)])
    args = _bool_value(schema)
    validator = schema_class(schema)
    assert validator(schema).is_valid(args)
    for name in _SCHEMA_RULES:
        rewrite, _ = apply_chain(harness, [(get_rule(name), {})], seed=seed)
        tool = rewrite.mapping.tools.get("act", ToolMap("act"))
        rewritten = next(t.parameters for t in rewrite.harness.tools if t.name == tool.name)
        validator.check_schema(dict(rewritten))
        surface = apply_steps(args, tool.steps)
        assert validator(dict(rewritten)).is_valid(surface), (name, rewritten, surface)
        back = rewrite.mapping.inverse().tools.get(tool.name, ToolMap(tool.name)).steps
        assert apply_steps(surface, back) == args


def test_flattening_keeps_a_field_whose_schema_is_a_boolean_as_the_object_it_means():
    schema = {
        "type": "object",
        "properties": {"opts": {"type": "object", "properties": {"a": True, "b": False}}},
        "required": ["opts"],
    }
    harness = make_harness().replace(tools=[Tool("act", "Act.", schema)])
    rewrite = _apply("tools.flatten_args", harness, params={"join": "_"})
    props = rewrite.harness.tools[-1].parameters["properties"]
    assert props == {
        "opts_a": {"description": "Field 'a' of opts."},
        "opts_b": {"not": {}, "description": "Field 'b' of opts."},
    }


def _nested(depth: int) -> dict:
    """A tool's parameters whose ``x`` nests objects ``depth`` levels deep."""
    schema: dict = {"type": "string", "enum": ["by_mail", "in_store"]}
    for _ in range(depth):
        schema = {"type": "object", "properties": {"a": schema}, "required": ["a"]}
    return {"type": "object", "properties": {"x": schema}, "required": ["x"]}


def test_wrapping_leaves_alone_a_tool_whose_deepest_parts_it_would_take_past_the_walks():
    for depth, wrapped in ((62, True), (63, False), (200, False)):
        harness = make_harness().replace(tools=[Tool("act", "Act.", _nested(depth))])
        for seed in range(3):
            rewrite = _apply("tools.wrap_args", harness, seed)
            assert ("act" in rewrite.mapping.tools) is wrapped, (depth, seed)


@pytest.mark.parametrize("name", _SCHEMA_RULES)
def test_tool_schema_rules_take_a_schema_nested_as_deep_as_the_importer_reads(name):
    # (the importer reads JSON about 990 levels deep: 490 levels of properties)
    harness = make_harness().replace(tools=[Tool("act", "Act.", _nested(450))])
    rewrite, _ = apply_chain(
        harness, [(get_rule(name), {})], seed=0, context=Context.of(make_events()), strict=True
    )
    assert rewrite.harness.tools
