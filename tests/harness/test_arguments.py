"""Tool-call arguments against a tool's JSON Schema: one message format, one compile per schema."""

from __future__ import annotations

import json

from hsa.harness.arguments import ArgumentChecker, checker_of, schema_problem, validator
from hsa.harness.model import Harness, Tool

SCHEMA = {
    "type": "object",
    "properties": {
        "id": {"type": "string"},
        "items": {"type": "array", "items": {"type": "integer"}},
        "mode": {"enum": ["a", "b"]},
    },
    "required": ["id"],
    "additionalProperties": False,
}
GET = Tool("get", parameters=SCHEMA)


def test_a_problem_names_the_tool_the_json_path_and_the_reason():
    checker = ArgumentChecker([GET])
    assert checker.problem("get", {"id": "x", "items": [1, 2], "mode": "a"}) is None
    assert checker.problem("get", {}) == "invalid arguments for get: $: 'id' is a required property"
    assert checker.problem("get", {"id": "x", "items": [1, "two"]}) == (
        "invalid arguments for get: $.items[1]: 'two' is not of type 'integer'"
    )
    assert checker.problem("put", {}) == "unknown tool 'put'; available: get"
    assert "get" in checker and "put" not in checker


def test_without_values_only_the_argument_names_are_judged():
    checker = ArgumentChecker([GET])
    # values a scorer of its own judges pass: a type, an enum
    assert checker.problem("get", {"id": 1, "mode": "A"}, values=False) is None
    assert checker.problem("get", {"id": 1, "mode": "A"}) is not None
    # names do not: a required argument missing, one the schema does not allow, a tool
    assert checker.problem("get", {"mode": 3}, values=False) == (
        "invalid arguments for get: $: 'id' is a required property"
    )
    assert "'extra' was unexpected" in checker.problem("get", {"id": 1, "extra": 1}, values=False)
    assert checker.problem("put", {}, values=False) == "unknown tool 'put'; available: get"


def test_the_first_problem_is_the_first_by_path_whatever_the_order_found():
    args = {"mode": "c", "id": 1, "items": ["x"]}
    expected = "invalid arguments for get: $.id: 1 is not of type 'string'"
    assert schema_problem(GET, args) == expected
    assert schema_problem(GET, dict(reversed(list(args.items())))) == expected


def test_each_distinct_schema_is_compiled_once():
    same = Tool(
        "other", description="same schema, another tool", parameters=json.loads(json.dumps(SCHEMA))
    )
    assert validator(same) is validator(GET)
    assert validator(Tool("get", parameters={"type": "object"})) is not validator(GET)


def test_a_harness_checker_covers_its_skill_tool_and_is_kept_on_the_harness():
    load = Tool("load_skill", parameters={"type": "object", "required": ["skill"]})
    harness = Harness("h", tools=(GET,), skill_tool=load)
    checker = checker_of(harness)
    assert checker is checker_of(harness)
    assert checker.problem("load_skill", {"skill": "s"}) is None
    assert checker.problem("load_skill", {}) == (
        "invalid arguments for load_skill: $: 'skill' is a required property"
    )
    assert checker.problem("nope", {}) == "unknown tool 'nope'; available: get, load_skill"
