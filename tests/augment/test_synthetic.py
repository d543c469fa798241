"""The synthetic trajectory a harness with no recorded data is previewed and checked with."""

from __future__ import annotations

from conftest import make_harness

from hsa.augment.synthetic import example_value, sample_trajectory
from hsa.harness.arguments import checker_of
from hsa.harness.events import HookFired, SkillLoad, ToolCall


def test_every_tool_is_called_validly_with_its_required_then_all_its_arguments():
    harness = make_harness()
    events = sample_trajectory(harness).events
    calls = [e for e in events if isinstance(e, ToolCall)]
    checker = checker_of(harness)
    assert all(checker.problem(c.tool, c.args) is None for c in calls)
    assert {c.tool for c in calls} == {t.name for t in harness.tools}
    for tool in harness.tools:
        made = [c.args for c in calls if c.tool == tool.name]
        declared = set(tool.parameters["properties"])
        required = set(tool.parameters.get("required") or ())
        assert set(made[0]) == required or not required
        # a tool with optional parameters is called once more with all of them
        assert len(made) == (2 if declared - set(made[0]) else 1)
        assert set(made[-1]) == declared
    assert any(isinstance(e, SkillLoad) for e in events)
    assert any(isinstance(e, HookFired) for e in events)


def test_every_fills_nested_objects_too():
    schema = {
        "type": "object",
        "properties": {
            "a": {"type": "object", "properties": {"x": {"type": "integer"}, "y": {"enum": [2]}}},
            "b": {"type": "array", "items": {"type": "string"}},
        },
        "required": ["b"],
    }
    assert example_value(schema, schema) == {"b": ["example"]}
    assert example_value(schema, schema, every=True) == {"a": {"x": 1, "y": 2}, "b": ["example"]}


def test_a_rule_renaming_an_optional_parameter_unrecorded_fails_its_check_on_a_harness_alone():
    # hsa rules check --harness DIR (no trajectories) passed such a rule: the synthetic
    # trajectory called each tool with its required arguments only. The tool's schema holds a
    # $ref, so planning's own argument check does not read it: only this call can tell.
    import dataclasses

    from hsa.augment import Rewrite, Rule
    from hsa.augment.suite import Job, Replay, Subject, describe, run
    from hsa.harness import Tool

    schema = {
        "type": "object",
        "$defs": {"page": {"type": "integer", "minimum": 1}},
        "properties": {"customer": {"type": "string"}, "page": {"$ref": "#/$defs/page"}},
        "required": ["customer"],
        "additionalProperties": False,
    }
    harness = make_harness()
    harness = harness.replace(tools=(*harness.tools, Tool("list_orders", "List.", schema)))

    def rename_page(harness, rng, params, context):
        tools = []
        for tool in harness.tools:
            if tool.name == "list_orders":
                props = dict(tool.parameters["properties"])
                props["pageNumber"] = props.pop("page")
                tool = dataclasses.replace(
                    tool, parameters={**tool.parameters, "properties": props}
                )
            tools.append(tool)
        return Rewrite(harness.replace(tools=tools))

    rule = Rule("tools.rename_page", "1", rename_page, doc="Rename page, unrecorded.")
    subject = Subject(harness, sample_trajectory(harness), Replay(), "sample")
    (report,) = run([Job(rule)], [subject], seeds=(0,))
    assert report.outcomes["harness"] == "pass"  # planning did not see it
    assert report.outcomes["schema"] == "fail"
    assert "list_orders" in describe(report) and "'page' was unexpected" in describe(report)


def test_all_of_adds_to_the_schemas_own_properties_and_required_names():
    # a top-level allOf used to replace the schema: its call was "example", then {}, invalid,
    # and `hsa rules check --harness` skipped the schema check everywhere
    schema = {
        "type": "object",
        "properties": {"room": {"type": "string"}, "nights": {"type": "integer", "minimum": 1}},
        "required": ["room"],
        "allOf": [{"required": ["nights"]}, {"properties": {"late": {"type": "boolean"}}}],
    }
    assert example_value(schema, schema) == {"room": "example", "nights": 1}
    assert example_value(schema, schema, every=True) == {
        "room": "example",
        "nights": 1,
        "late": True,
    }
