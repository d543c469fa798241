"""Validation: the published schema, the semantic checks it cannot express, render checks."""

from __future__ import annotations

import copy
import tracemalloc
from collections.abc import Iterator, Mapping
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from jsonschema import SchemaError
from jsonschema.validators import Draft202012Validator

from hsa.errors import HarnessValidationError
from hsa.harness import Harness, validate_document
from hsa.harness.model import Prompt, Section, Tool
from hsa.harness.validate import (
    ROOT_KEYWORDS,
    TOOL_DEFINITION,
    _root_plainly_valid,
    _root_validator,
    document_problems,
    harness_problems,
    harness_schema,
    json_path,
    plainly_valid,
    ref_problems,
    render_problems,
    tool_plainly_valid,
)
from tests.harness.strategies import harnesses

TOOL = {
    "name": "get",
    "description": "Get.",
    "parameters": {"type": "object", "properties": {"id": {"type": "string"}}, "required": ["id"]},
}
VALID = {
    "id": "h",
    "tools": [TOOL],
    "skills": [{"id": "s", "name": "S", "description": "D", "content": "C"}],
    "hooks": [
        {
            "id": "k",
            "event": "pre_tool_use",
            "effect": "add_context",
            "message": "Careful with {{ tool }}.",
            "inject": "tool_result",
            "wrapper": "note",
            "matcher": {"tool": "get.*"},
        }
    ],
    "prompt": {"sections": [{"id": "p", "title": "P", "body": "Hi {{ harness_id }}"}]},
    "skill_tool": {
        "name": "load",
        "parameters": {"type": "object", "properties": {"name": {"type": "string"}}},
    },
}


def problems_of(change) -> list[tuple[str, str]]:
    doc = copy.deepcopy(VALID)
    change(doc)
    return [(p.where, p.message) for p in document_problems(doc, file="h.json")]


def test_valid_document_has_no_problems():
    assert document_problems(VALID) == []
    validate_document(VALID)
    Draft202012Validator.check_schema(harness_schema())


CASES = [
    (lambda d: d.pop("id"), "$", "'id' is a required property"),
    (lambda d: d.update(id="-bad"), "$.id", "does not match"),
    (lambda d: d.update(colour="blue"), "$.colour", "unknown field 'colour'; allowed here: id"),
    (lambda d: d["tools"][0].update(name="a.b"), "$.tools[0].name", "does not match"),
    (lambda d: d["tools"][0].update(colour=1), "$.tools[0].colour", "unknown field 'colour'"),
    (lambda d: d["tools"][0].update(extra=1), "$.tools[0].extra", "1 is not of type 'object'"),
    (lambda d: d["tools"].append(copy.deepcopy(TOOL)), "$.tools[1].name", "duplicate tool name"),
    (
        lambda d: d["tools"][0]["parameters"].update(required=["id", "nope"]),
        "$.tools[0].parameters.required",
        "required parameter 'nope' is not in properties",
    ),
    (
        lambda d: d["tools"][0]["parameters"]["properties"].update(n={"type": 5}),
        "$.tools[0].parameters.properties.n.type",
        "not a valid JSON Schema",
    ),
    (
        lambda d: d["tools"][0]["parameters"].update(type="array"),
        "$.tools[0].parameters.type",
        "'object' was expected",
    ),
    (  # valid JSON Schema, but a dataset holding it would not load in datasets
        lambda d: d["tools"][0]["parameters"]["properties"].update(
            n={"type": "integer", "enum": [1, 2**64]}
        ),
        "$.tools[0].parameters.properties.n.enum[1]",
        "an integer beyond 64 bits",
    ),
    (lambda d: d.update(protocol={"name": "smoke"}), "$.protocol.name", "is not one of"),
    # Python's "$" matches before a final newline: the patterns must not let one by
    (lambda d: d.update(id="h\n"), "$.id", "does not match"),
    (lambda d: d["tools"][0].update(name="get\n"), "$.tools[0].name", "does not match"),
    (lambda d: d["skills"][0].update(id="s\n"), "$.skills[0].id", "does not match"),
    (lambda d: d["hooks"][0].update(wrapper="note\n"), "$.hooks[0].wrapper", "does not match"),
    (lambda d: d["skill_tool"].update(name="get"), "$.skill_tool.name", "is also a tool"),
    (
        lambda d: d["skill_tool"].update(parameters={"type": "object"}),
        "$.skill_tool.parameters",
        "needs a parameter naming the skill",
    ),
    (lambda d: d["skills"].append(dict(d["skills"][0])), "$.skills[1].id", "duplicate skill id"),
    (lambda d: d["skills"][0].update(description=" "), "$.skills[0].description", "blank"),
    (lambda d: d["skills"][0].pop("name"), "$.skills[0]", "'name' is a required property"),
    (  # SKILL.md has one 'name' key: saved, extra's would replace the skill's own
        lambda d: d["skills"][0].update(extra={"license": "MIT", "name": "shadow"}),
        "$.skills[0].extra.name",
        "'name' is the skill's own field",
    ),
    (
        lambda d: d["skills"][0].update(extra={"description": "shadow"}),
        "$.skills[0].extra.description",
        "'description' is the skill's own field",
    ),
    (lambda d: d["hooks"].append(dict(d["hooks"][0])), "$.hooks[1].id", "duplicate hook id"),
    # two hooks whose messages read alike: parsing a conversation could not tell which fired
    (
        lambda d: d["hooks"].append({**d["hooks"][0], "id": "k2", "event": "stop"}),
        "$.hooks[1]",
        "every message hook 'k2' shows reads as a message of hook 'k' ($.hooks[0]) too",
    ),
    (
        lambda d: d["hooks"].insert(0, {**d["hooks"][0], "id": "all", "message": "{{ x }}"}),
        "$.hooks[1]",
        "every message hook 'k' shows reads as a message of hook 'all' ($.hooks[0]) too",
    ),
    # what JSON cannot write, as SKILL.md front matter refuses it: a harness saved as JSON held NaN
    (lambda d: d.update(metadata={"score": float("nan")}), "$.metadata.score", "NaN or Infinity"),
    (
        lambda d: d["hooks"][0].update(params={"set": {"limit": float("inf")}}),
        "$.hooks[0].params.set.limit",
        "NaN or Infinity",
    ),
    (lambda d: d["tools"][0].update(extra={"n": [-float("inf")]}), "$.tools[0].extra.n[0]", "NaN"),
    (
        lambda d: d["skills"][0].update(extra={"x": float("nan")}),
        "$.skills[0].extra.x",
        "NaN or Infinity",
    ),
    (
        lambda d: d["skill_tool"].update(extra={"x": "\ud800"}),
        "$.skill_tool.extra.x",
        "a lone surrogate",
    ),
    (
        lambda d: d["hooks"][0].update(message="{{ a + b }}"),
        "$.hooks[0].message",
        "only contain text and {{ name }} placeholders",
    ),
    (lambda d: d["hooks"][0].pop("wrapper"), "$.hooks[0].wrapper", "needs a wrapper tag"),
    (
        lambda d: d["hooks"][0]["matcher"].update(tool="(["),
        "$.hooks[0].matcher.tool",
        "invalid regular expression",
    ),
    (
        lambda d: d["prompt"]["sections"].append({"id": "p"}),
        "$.prompt.sections[1].id",
        "duplicate section id",
    ),
    (
        lambda d: d["prompt"]["sections"][0].update(body="{% if %}"),
        "$.prompt.sections[0].body",
        "template syntax error",
    ),
    (
        lambda d: d["prompt"].update(template="{{ harness_id }}" + "x" * 1_000_000),
        "$.prompt.template",
        "the limit is 1,000,000",
    ),
]


@pytest.mark.parametrize(("change", "where", "reason"), CASES)
def test_each_problem_names_its_json_path(change, where, reason):
    found = problems_of(change)
    assert any(w == where and reason in m for w, m in found), found


def test_more_hooks_than_a_harness_may_have_are_refused_before_every_pair_is_compared():
    # 600 hooks kept `hsa harness validate` past 300 s (each pair compared, and each message
    # parsed again per pair once the sandbox's caches of 512 thrashed)
    from hsa.harness.validate import MAX_HOOKS

    def hooks(count: int):
        def change(doc):
            doc["hooks"] = [
                {**doc["hooks"][0], "id": f"k{i}", "message": f"Note {i}: {{{{ tool }}}}."}
                for i in range(count)
            ]

        return change

    assert problems_of(hooks(MAX_HOOKS)) == []
    assert problems_of(hooks(MAX_HOOKS + 1)) == [
        (
            "$.hooks",
            f"{MAX_HOOKS + 1:,} hooks; a harness may have at most {MAX_HOOKS:,} (each pair of "
            "hooks is compared to tell their messages apart)",
        )
    ]


@pytest.mark.parametrize(
    "change",
    [
        {"wrapper": "other"},
        {"message": "Careful with {{ tool }}!"},
        {"inject": "user", "message": "Careful: {{ tool }}."},
        {"id": "k", "message": "{{ x }}"},  # a second hook of one id: reported as that alone
    ],
)
def test_hooks_told_apart_by_wrapper_or_wording_are_valid(change):
    def add(doc):
        doc["hooks"].append({**doc["hooks"][0], "id": "k2", **change})

    found = problems_of(add)
    assert found == ([("$.hooks[1].id", "duplicate hook id 'k'")] if "id" in change else [])


def test_an_integer_beyond_64_bits_in_metadata_is_json_and_kept():
    # an importer may keep one there (a BFCL recorded response); NaN is what JSON cannot write
    assert problems_of(lambda d: d.update(metadata={"n": 2**64, "r": {"x": -(2**70)}})) == []


def test_every_problem_is_reported_not_just_the_first():
    def break_twice(doc):
        doc["tools"][0]["name"] = "a b"
        doc["hooks"][0]["event"] = "never"

    assert len(problems_of(break_twice)) == 2
    doc = copy.deepcopy(VALID)
    doc["tools"].append(copy.deepcopy(TOOL))
    doc["skills"].append(dict(doc["skills"][0]))
    with pytest.raises(HarnessValidationError) as err:
        validate_document(doc, file="h.json")
    assert len(err.value.problems) == 2
    assert all(line.startswith("h.json: $.") for line in str(err.value).splitlines())


def test_a_schema_problem_does_not_hide_the_other_parts_problems():
    # tool 0's name breaks the schema; tool 1's parameters and the duplicate hook are problems
    # only the checks beyond the schema find, and they are reported beside it
    def break_three(doc):
        doc["tools"][0]["name"] = "a b"
        doc["tools"].append(
            {"name": "other", "parameters": {"type": "object", "properties": {"n": {"type": 5}}}}
        )
        doc["hooks"].append(dict(doc["hooks"][0]))

    assert [where for where, _ in problems_of(break_three)] == [
        "$.tools[0].name",
        "$.tools[1].parameters.properties.n.type",
        "$.hooks[1].id",
    ]


def test_a_part_with_a_schema_problem_is_reported_once():
    # parameters of type "array" break the schema; they are not checked again as a JSON Schema
    found = problems_of(lambda d: d["tools"][0]["parameters"].update(type="array"))
    assert [where for where, _ in found] == ["$.tools[0].parameters.type"]


_BREAKS: list[Any] = [None, 3, "x", "", [], {}, [3], {"id": 3}, "-bad", "{{ a + b }}"]


def _paths(node: Any, path: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    found = [path]
    if isinstance(node, dict):
        for key, value in node.items():
            found += _paths(value, (*path, key))
    elif isinstance(node, list):
        for index, value in enumerate(node):
            found += _paths(value, (*path, index))
    return found


_VALID_PATHS = [p for p in _paths(VALID) if p]


@settings(max_examples=300, derandomize=True, deadline=None)
@given(
    st.lists(
        st.tuples(st.sampled_from(_VALID_PATHS), st.sampled_from(_BREAKS)), min_size=1, max_size=3
    )
)
def test_any_broken_part_is_reported_and_never_stops_the_check(changes):
    doc = copy.deepcopy(VALID)
    for path, value in changes:
        node: Any = doc
        for step in path[:-1]:
            if not isinstance(node, dict | list):
                break
            try:
                node = node[step]
            except (KeyError, IndexError):
                break
        else:
            if isinstance(node, dict) or (isinstance(node, list) and path[-1] < len(node)):
                node[path[-1]] = copy.deepcopy(value)
    validator = Draft202012Validator(harness_schema())
    schema_errors = {json_path(e.absolute_path) for e in validator.iter_errors(doc)}
    found = {p.where for p in document_problems(doc)}  # raises nothing, whatever is broken
    assert all(any(w.startswith(e) for w in found) for e in schema_errors)


def schema_with(**defs):
    return {"type": "object", "properties": {"x": {"$ref": "#/$defs/A"}}, "$defs": defs}


@pytest.mark.parametrize(
    ("schema", "expected"),
    [
        (schema_with(A={"type": "string"}), []),
        (
            schema_with(A={"type": "array", "items": {"$ref": "#/$defs/B"}}, B={"type": "integer"}),
            [],
        ),
        (schema_with(A={"$ref": "#/$defs/A"}), ["$ref cycle: #/$defs/A -> #/$defs/A"]),
        (
            schema_with(A={"allOf": [{"$ref": "#/$defs/B"}]}, B={"not": {"$ref": "#/$defs/A"}}),
            ["$ref cycle: #/$defs/A -> #/$defs/B -> #/$defs/A"],
        ),
        # references to nodes outside $defs: a property that is itself, two that are each
        # other, and an alternative that is its own schema (validate said ok; checking a
        # call then ran out of stack)
        (
            {"properties": {"a": {"$ref": "#/properties/a"}}},
            ["$ref cycle: #/properties/a -> #/properties/a"],
        ),
        (
            {"properties": {"a": {"$ref": "#/properties/b"}, "b": {"$ref": "#/properties/a"}}},
            ["$ref cycle: #/properties/a -> #/properties/b -> #/properties/a"],
        ),
        (
            {"properties": {"a": {"anyOf": [{"$ref": "#/properties/a"}, {"type": "null"}]}}},
            ["$ref cycle: #/properties/a -> #/properties/a"],
        ),
        (
            {"properties": {"a": {"$ref": "#/properties/b"}, "b": {"type": "string"}}},
            [],
        ),
        (
            {"properties": {"a": {"type": "array", "items": {"$ref": "#/properties/a"}}}},
            [],
        ),
        # recursive types: a cycle through a part of the value (a property, an item) is valid
        (schema_with(A={"properties": {"b": {"$ref": "#/$defs/B"}}}, B={"$ref": "#/$defs/A"}), []),
        (schema_with(A={"type": "array", "items": {"$ref": "#/$defs/A"}}), []),
        ({"type": "object", "properties": {"sub": {"$ref": "#"}}}, []),
        # a pointer in a URI fragment is percent-encoded (RFC 6901, section 6)
        (
            {"properties": {"x": {"$ref": "#/$defs/My%20Type"}}, "$defs": {"My Type": {}}},
            [],
        ),
        (schema_with(B={}), ["$ref '#/$defs/A' does not resolve"]),
        (
            {"type": "object", "properties": {"x": {"$ref": "https://example.com/s.json"}}},
            ["is not local"],
        ),
    ],
)
def test_ref_problems(schema, expected):
    found = [reason for _, reason in ref_problems(schema)]
    assert len(found) == len(expected)
    for reason, fragment in zip(found, expected, strict=True):
        assert fragment in reason


def test_ref_cycle_in_a_tool_is_a_document_problem():
    doc = {"id": "h", "tools": [{"name": "t", "parameters": schema_with(A={"$ref": "#/$defs/A"})}]}
    ((where, reason),) = [(p.where, p.message) for p in document_problems(doc)]
    assert where == "$.tools[0].parameters" and reason.startswith("$ref cycle")


def test_json_path():
    assert json_path(["tools", 0, "name"]) == "$.tools[0].name"
    assert json_path(["properties", "a b", "x-y"]) == '$.properties["a b"]["x-y"]'
    assert json_path([]) == "$"


def test_render_problems_catch_what_only_rendering_shows():
    ok = Harness(id="h", prompt=Prompt(sections=(Section("p", "P", "Hello {{ harness_id }}"),)))
    assert render_problems(ok) == []
    for body in ("{{ ''.__class__.__mro__ }}", "{{ nothing_here }}", "{{ 'x' * 10**9 }}"):
        bad = ok.replace(prompt=Prompt(sections=(Section("p", "P", body),)))
        (problem,) = render_problems(bad)
        assert problem.where == "$.prompt.sections[0].body", body


# plainly_valid is a fast path: it may say "not sure", but never "valid" for an invalid schema.
schemas = st.recursive(
    st.one_of(
        st.booleans(),
        st.fixed_dictionaries(
            {},
            optional={
                "type": st.sampled_from(["string", "integer", "object", "nope", 3])
                | st.lists(st.sampled_from(["string", "null", "string"]), max_size=3),
                "description": st.sampled_from(["d", 5]),
                "pattern": st.sampled_from(["^a+$", "(", "[a-"]),
                "minimum": st.sampled_from([0, 1.5, "1", True]),
                "minItems": st.sampled_from([0, 2, -1, 1.5]),
                "required": st.lists(st.sampled_from(["a", "b", 1]), max_size=3),
                "enum": st.sampled_from([[1, 2], [], "x"]),
                "default": st.integers(),
                "format": st.sampled_from(["date", 7]),
                "$ref": st.sampled_from(["#/$defs/A", 4]),
                "unknownKeyword": st.just(1),
            },
        ),
    ),
    lambda inner: st.one_of(
        st.fixed_dictionaries({"properties": st.dictionaries(st.sampled_from("abc"), inner)}),
        st.fixed_dictionaries({"items": inner}),
        st.fixed_dictionaries({"anyOf": st.lists(inner, max_size=2)}),
        st.fixed_dictionaries({"$defs": st.dictionaries(st.sampled_from("AB"), inner)}),
    ),
    max_leaves=6,
)


@settings(max_examples=300, derandomize=True, deadline=None)
@given(schema=schemas)
def test_plainly_valid_never_accepts_an_invalid_schema(schema):
    if plainly_valid(schema):
        Draft202012Validator.check_schema(schema)  # raises when the fast path was wrong


class _Object(Mapping[str, Any]):
    """A mapping that is no dict, so ``plainly_valid`` reads it by its abstract type."""

    def __init__(self, items: dict[str, Any]):
        self._items = items

    def __getitem__(self, key: str) -> Any:
        return self._items[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._items)

    def __len__(self) -> int:
        return len(self._items)


class _Name(str):
    """A string that is no str, so ``plainly_valid`` reads a type name by the general path."""


def _abstract(schema: Any) -> Any:
    """``schema`` with every object a ``_Object`` and every string a ``_Name``."""
    if isinstance(schema, dict):
        return _Object({key: _abstract(value) for key, value in schema.items()})
    if isinstance(schema, list):
        return [_abstract(value) for value in schema]
    return _Name(schema) if isinstance(schema, str) else schema


@settings(max_examples=300, derandomize=True, deadline=None)
@given(schema=schemas)
def test_plainly_valid_reads_dicts_and_type_names_as_any_mapping_and_string(schema):
    # the fast paths for a dict and a single type name give the general path's verdict
    assert plainly_valid(schema) == plainly_valid(_abstract(schema))


def test_plainly_valid_accepts_common_schemas_and_defers_on_others():
    assert plainly_valid(TOOL["parameters"])
    assert plainly_valid(schema_with(A={"type": ["string", "null"], "enum": ["a", None]}))
    assert not plainly_valid({"type": "object", "patternProperties": {"^x": {}}})
    assert not plainly_valid({"pattern": "("})
    with pytest.raises(SchemaError):
        Draft202012Validator.check_schema({"pattern": "("})


@pytest.mark.parametrize(
    "change",
    [
        {},
        {"surprise": 1},
        {"id": ""},
        {"protocol": {"name": "smoke"}},
        {"prompt": {"sections": "none"}},
        {"tools": "none"},
        {"tools": [{"name": "", "parameters": {"type": "object"}}, 3]},
        {"hooks": [{"id": "h", "event": "never"}]},
        {"skills": [{"id": "s"}], "metadata": []},
    ],
)
def test_checking_by_part_finds_what_checking_the_whole_document_finds(change) -> None:
    # the document is checked property by property and tool by tool (each once per distinct
    # value); the errors must be exactly those of validating it whole
    from hsa.harness.validate import _schema_errors, _validator

    doc = {
        "id": "demo",
        "tools": [{"name": "get_order", "description": "d", "parameters": {"type": "object"}}],
        **change,
    }
    whole = sorted(
        ((json_path(e.absolute_path), e.message) for e in _validator().iter_errors(doc)),
    )
    by_part = sorted((json_path(path), e.message) for path, e in _schema_errors(doc))
    assert by_part == whole


def test_the_hand_checked_tool_definition_is_the_published_one():
    assert harness_schema()["$defs"]["tool"] == TOOL_DEFINITION


def test_the_hand_checked_root_keywords_are_the_published_ones():
    # _root_plainly_valid reads type, required and additionalProperties; the root
    # validator's properties are all true; the other keywords only annotate
    schema = harness_schema()
    annotations = {"$schema", "$id", "title", "$defs"}
    assert set(schema) - annotations == ROOT_KEYWORDS
    assert schema["type"] == "object" and schema["additionalProperties"] is False
    assert all(v is True for v in _root_validator().schema["properties"].values())


_ROOT_KEYS = st.sampled_from([*harness_schema()["properties"], "surprise", 1])


@settings(max_examples=300, deadline=None)
@given(
    st.one_of(
        st.dictionaries(_ROOT_KEYS, st.none(), max_size=4),
        st.dictionaries(_ROOT_KEYS, st.none(), max_size=4).map(lambda d: {"id": "h", **d}),
        st.lists(st.none(), max_size=1),
    )
)
def test_a_root_passed_by_hand_has_no_schema_errors(doc):
    errors = list(_root_validator().iter_errors(doc))
    assert _root_plainly_valid(doc) == (not errors)


_TOOL_VALUES = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.sampled_from(["get", "get-2", "a" * 64, "a" * 65, "", "bad name", "ok\n", "über"]),
    st.lists(st.sampled_from(["id", 1, None]), max_size=3),
    st.dictionaries(st.sampled_from(["type", "properties", "required"]), st.just("object")),
)


@st.composite
def _near_tools(draw: st.DrawFn) -> object:
    """Tool-like documents, valid and invalid in every field the definition constrains."""
    if draw(st.integers(0, 9)) == 0:
        return draw(_TOOL_VALUES)
    tool: dict[str, object] = {}
    if draw(st.booleans()) or draw(st.booleans()):
        tool["name"] = draw(
            st.one_of(st.sampled_from(["get", "a" * 64, "a" * 65, "x y", "ok\n"]), _TOOL_VALUES)
        )
    for key in ("description", "extra", "other"):
        if draw(st.integers(0, 3)) == 0:
            tool[key] = draw(st.one_of(st.just("Get."), st.just({}), _TOOL_VALUES))
    if draw(st.booleans()):
        params: dict[str, object] = {}
        for key, good in (("type", "object"), ("properties", {"id": {}}), ("required", ["id"])):
            choice = draw(st.integers(0, 3))
            if choice == 1:
                params[key] = good
            elif choice == 2:
                params[key] = draw(_TOOL_VALUES)
        if draw(st.integers(0, 4)) == 0:
            params = draw(_TOOL_VALUES)  # type: ignore[assignment]
        tool["parameters"] = params
    return tool


@settings(max_examples=400, deadline=None)
@given(_near_tools())
def test_a_tool_passed_by_hand_has_no_schema_errors(tool):
    errors = list(Draft202012Validator(TOOL_DEFINITION).iter_errors(tool))
    assert tool_plainly_valid(tool) == (not errors)


_BROKEN_TOOLS = [
    Tool("get", "Get.", {"type": "object", "properties": {}, "required": ["id"]}),
    Tool("bad name", "Get."),
    Tool("list", "", {"type": "object", "properties": {"q": {"type": "strin"}}}),
    Tool("ref", "", {"type": "object", "properties": {"x": {"$ref": "#/$defs/Nope"}}}),
    Tool("get", "Again."),
    Tool("plain", "", {"type": "array"}),
]


@pytest.mark.parametrize("count", [1, 2, 3, 4, 5, 6])
def test_a_harness_has_the_problems_of_its_document(count) -> None:
    # harness_problems keeps each tool's findings on the tool: the same problems, in the same
    # order, as validating the document, the first time and every time after
    tools = (*_BROKEN_TOOLS[:count], TOOL_OBJECT)
    harness = Harness("h", tools=tools, skill_tool=Tool("load", "", {"type": "object"}))
    expected = [(p.where, p.message) for p in document_problems(harness.to_dict(), file="f")]
    assert expected
    for _ in range(2):
        found = [(p.where, p.message) for p in harness_problems(harness, file="f")]
        assert found == expected
    # a variant sharing the tools (a rewrite that left them alone) is found the same way
    variant = harness.replace(id="h2", tools=tools[::-1])
    assert [(p.where, p.message) for p in harness_problems(variant)] == [
        (p.where, p.message) for p in document_problems(variant.to_dict())
    ]


TOOL_OBJECT = Tool.from_dict(TOOL)


@pytest.mark.parametrize(
    ("change", "where"),
    [
        ({"name": "get it"}, "$.tools[0].name"),
        ({"description": 1}, "$.tools[0].description"),
        (
            {"parameters": {**TOOL["parameters"], "required": ["id", "q"]}},
            "$.tools[0].parameters.required",
        ),
        (
            {"parameters": {"type": "object", "properties": {"id": {"default": float("nan")}}}},
            "$.tools[0].parameters.properties.id.default",
        ),
        ({"extra": {"x": float("inf")}}, "$.tools[0].extra.x"),
    ],
)
def test_tools_that_differ_in_one_field_are_each_found_as_they_are(change, where) -> None:
    # what is found once per distinct tool or schema (by hand, by its JSON, on the tool) never
    # answers for a tool that differs from one checked before: before and after it, the valid
    # tool has no problems, and the changed one has its own
    changed = Tool.from_dict({**TOOL, **change})
    for _ in range(2):
        assert harness_problems(Harness("h", tools=(TOOL_OBJECT,))) == []
        found = [p.where for p in harness_problems(Harness("h", tools=(changed,)))]
        expected = [p.where for p in document_problems({"id": "h", "tools": [{**TOOL, **change}]})]
        assert found == expected
        assert found[0] == where
        assert document_problems({"id": "h", "tools": [TOOL]}) == []


@settings(max_examples=100, deadline=None)
@given(harnesses(rich=True))
def test_a_valid_harness_has_no_problems_either_way(harness) -> None:
    assert harness_problems(harness) == [] == document_problems(harness.to_dict())


@pytest.mark.parametrize(
    "parameters",
    [
        {  # declared by a schema that applies to the same object: JSON Schema takes it
            "type": "object",
            "allOf": [{"$ref": "#/$defs/base"}],
            "$defs": {"base": {"type": "object", "properties": {"id": {"type": "string"}}}},
            "properties": {"note": {"type": "string"}},
            "required": ["id"],
        },
        {"type": "object", "patternProperties": {"^x-": {"type": "string"}}, "required": ["x-k"]},
        {"type": "object", "anyOf": [{"properties": {"id": {}}}], "required": ["id"]},
    ],
)
def test_a_required_name_another_keyword_declares_is_valid(parameters):
    doc = copy.deepcopy(VALID)
    doc["tools"][0]["parameters"] = parameters
    assert document_problems(doc) == []


def test_what_validation_keeps_for_later_is_not_the_documents_texts() -> None:
    # each part's errors are kept for the next document with that part (a harness's variants
    # share most of theirs), but not the part itself: 40 harnesses whose prompts are 200 KB
    # each kept 8 MB (2,000 of them, 379 MB)
    body = "x" * 200_000
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        for number in range(40):
            doc = {**VALID, "prompt": {"sections": [{"id": "p", "body": f"{number} {body}"}]}}
            assert document_problems(doc) == []
            del doc
        kept = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert kept < 1_000_000
