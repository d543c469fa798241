"""The harness value objects: document form, defaults, lookups, immutability."""

from __future__ import annotations

import dataclasses
import json
import pickle
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hsa.errors import HarnessError
from hsa.harness import Harness, Hook, Matcher, Prompt, Protocol, Section, Skill, Tool
from hsa.harness.model import _json_document, compact_json
from hsa.harness.prompt import _system_prompt, system_prompt
from hsa.harness.validate import document_problems
from tests.harness.strategies import harnesses, json_values, texts

SKILL_TOOL = Tool(
    "load_skill",
    "Load a skill.",
    {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]},
)


def full() -> Harness:
    return Harness(
        id="shop",
        version="3",
        protocol=Protocol("text", "python", False, "xml"),
        prompt=Prompt(
            sections=(Section("persona", "Persona", "Be nice.", "persona"),),
            heading_style="xml",
            placement="user",
            template="{{ body }}",
        ),
        tools=(Tool("get", "Get.", {"type": "object", "properties": {"id": {"type": "string"}}}),),
        skills=(Skill("returns", "Returns", "How returns work.", "Body", {"license": "MIT"}),),
        hooks=(
            Hook(
                "budget",
                "post_tool_use",
                "update_output",
                "Spent {{ amount }}.",
                matcher=Matcher(tool="get", turn=2, every_n_turns=3),
                inject="tool_result",
                wrapper="note",
                payload_fn="pkg.mod:fn",
                params={"remove": ["cost"]},
            ),
        ),
        skill_tool=SKILL_TOOL,
        metadata={"name_map": {"get": "shop.get"}},
    )


def test_document_round_trip_and_validity():
    harness = full()
    doc = harness.to_dict()
    assert document_problems(doc) == []
    assert Harness.from_dict(doc) == harness
    assert Harness.from_dict(json.loads(harness.to_json())) == harness
    assert list(doc) == [
        "id", "version", "protocol", "prompt", "tools", "skills", "hooks", "skill_tool",
        "metadata",
    ]  # fmt: skip


def test_minimal_document_gets_defaults():
    harness = Harness.from_dict({"id": "x"})
    assert harness == Harness(id="x")
    assert harness.protocol.is_api and harness.protocol.label == "api"
    assert harness.prompt == Prompt()
    assert harness.to_dict() == {
        "id": "x",
        "version": "1",
        "protocol": {"name": "api"},
        "prompt": {"heading_style": "markdown", "placement": "system", "sections": []},
        "tools": [],
        "skills": [],
        "hooks": [],
    }
    assert Harness.from_dict({"id": "x", "version": 2}).version == "2"


def test_component_defaults():
    assert Tool.from_dict({"name": "t"}).parameters == {"type": "object", "properties": {}}
    assert Skill.from_dict({"id": "s"}) == Skill("s", "s", "", "")
    assert Section.from_dict({"id": "a"}) == Section("a", "a", "", "custom")
    hook = Hook.from_dict({"id": "h", "event": "stop", "effect": "add_context"})
    assert (hook.message, hook.inject, hook.matcher) == ("", "system", Matcher())
    assert Matcher().to_dict() == {} and Matcher.from_dict(None) == Matcher()
    assert Protocol("text", "json", True, "python").label == "text/json+tag/python-docs"
    assert Protocol("text", "json", False, "python").label == "text/json/python-docs"
    assert Protocol().to_dict() == {"name": "api"}


def test_lookups():
    harness = full()
    assert harness.tool("get") is harness.tools[0]
    assert harness.tool("load_skill") is SKILL_TOOL
    assert harness.tool("nope") is None
    assert harness.skill("returns").extra == {"license": "MIT"}
    assert harness.skill("nope") is None
    assert harness.hook("budget").wrapper == "note"
    assert harness.skill_arg == "name"
    assert Harness(id="x").skill_arg is None
    optional_only = SKILL_TOOL.parameters | {"required": []}
    assert full().replace(skill_tool=Tool("l", "", optional_only)).skill_arg == "name"


def test_replace_makes_tuples_and_objects_are_frozen():
    harness = full()
    changed = harness.replace(tools=[Tool("a"), Tool("b")])
    assert isinstance(changed.tools, tuple) and [t.name for t in changed.tools] == ["a", "b"]
    assert harness.tools[0].name == "get"
    with pytest.raises(dataclasses.FrozenInstanceError):
        harness.id = "other"  # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError):
        harness.tools[0].name = "other"  # type: ignore[misc]


@pytest.mark.parametrize(
    ("parts", "says"),
    [
        ({"tools": ["get"]}, "tools[0] must be a Tool, got 'get'; hsa.harness.Tool(...) makes one"),
        ({"tools": None}, "tools must be a tuple of Tools, got NoneType"),
        ({"skills": [Tool("get")]}, "skills[0] must be a Skill, got Tool"),
        ({"hooks": [{"id": "h"}]}, "hooks[0] must be a Hook, got dict"),
        ({"skill_tool": "load_skill"}, "skill_tool must be a Tool, got 'load_skill'"),
        ({"protocol": "api"}, "protocol must be a Protocol, got 'api'"),
        ({"prompt": Prompt(sections=("Persona",))}, "prompt.sections[0] must be a Section"),
        (
            {"hooks": [dataclasses.replace(full().hooks[0], matcher={"tool": "get"})]},
            "hooks[0].matcher must be a Matcher, got dict",
        ),
    ],
)
def test_a_part_of_the_wrong_kind_is_refused_when_the_harness_is_made(parts, says):
    # (a harness made in code with a tool's name for its tool failed later, wherever it was
    # read first, as an AttributeError: planning, rendering, its system prompt)
    with pytest.raises(HarnessError, match=re.escape(says)):
        Harness(id="x", **parts)
    with pytest.raises(HarnessError, match=re.escape(says)):
        full().replace(**parts)


def test_replace_is_dataclasses_replace_checking_only_the_changed_parts():
    harness = full()
    for changes in (
        {"id": "other"},
        {"tools": (Tool("a"),), "metadata": {"k": 1}},
        {"protocol": Protocol(name="text"), "prompt": Prompt(), "skill_tool": None},
        {"skills": (), "hooks": ()},
    ):
        changed = harness.replace(**changes)
        assert type(changed) is Harness and changed == dataclasses.replace(harness, **changes)
        assert changed.to_json() == dataclasses.replace(harness, **changes).to_json()
        assert not changed._derived or changed._derived is not harness._derived
    with pytest.raises(TypeError, match="unexpected keyword argument 'tool'"):
        harness.replace(tool=Tool("a"))


def test_tool_openai_form():
    tool = full().tools[0]
    assert tool.to_openai() == {"type": "function", "function": tool.to_dict()}


def test_json_text_not_kept_is_the_same_text():
    harness = full()
    text = harness.to_json(keep=False)
    assert not harness._derived  # looked at, not kept
    assert text == harness.to_json() and harness._derived  # kept from here on
    assert harness.to_json(keep=False) is harness.to_json()  # the kept text, when there is one


def test_derived_values_are_kept_per_object_and_never_copied():
    harness = full()
    made: list[Harness] = []

    def size(h: Harness) -> int:
        made.append(h)
        return len(h.to_json())

    assert harness.derived(size) == harness.derived(size) == len(harness.to_json())
    assert made == [harness]
    changed = harness.replace(id="other")
    assert changed.derived(size) == len(harness.to_json()) + 1  # "other" is one letter longer
    assert made == [harness, changed]
    for copy in (pickle.loads(pickle.dumps(harness)), dataclasses.replace(harness)):
        assert copy == harness and hash(copy) == hash(harness)
        assert copy.digest == harness.digest
        assert copy._derived.get(size) is None  # derived values are not part of the value
    assert "_derived" not in repr(harness)

    def failing(h: Harness) -> int:
        made.append(h)
        raise ValueError("no")

    for _ in range(2):  # an exception is raised again, never kept
        with pytest.raises(ValueError):
            harness.derived(failing)
    assert made[-2:] == [harness, harness]


def test_a_pickled_harness_carries_the_texts_derived_from_it():
    # A worker process that plans a variant makes its JSON and system prompt; they travel
    # with it. Derived values that are not text, or not found by name, stay behind.
    harness = full()
    text, prompt = harness.to_json(), system_prompt(harness)
    harness.derived(_tool_count)
    harness.derived(lambda h: "made by a lambda")
    copy = pickle.loads(pickle.dumps(harness))
    assert copy == harness
    assert copy._derived == {_json_document: text, _system_prompt: prompt}
    assert copy.to_json(keep=False) is copy._derived[_json_document]  # not made again
    assert pickle.loads(pickle.dumps(full()))._derived == {}


def _tool_count(harness: Harness) -> int:
    return len(harness.tools)


def test_equality_is_by_document_key_order_included():
    a = Harness("h", metadata={"x": 1, "y": 2})
    b = Harness("h", metadata={"y": 2, "x": 1})
    assert a != b and a.digest != b.digest  # order is data
    assert a == Harness("h", metadata={"x": 1, "y": 2})
    assert a != "h"


@settings(max_examples=150, deadline=None)
@given(harness=harnesses(rich=True), metadata=st.sampled_from([{}, {"name_map": {"a": "a b"}}]))
def test_the_json_document_is_made_of_its_tools_own_texts(harness, metadata):
    # Harness.to_json joins each tool's kept text (Tool.to_json) into the document: the same
    # text as dumping the whole document at once
    harness = harness.replace(metadata=metadata)
    whole = json.dumps(harness.to_dict(), ensure_ascii=False, separators=(",", ":"))
    assert harness.to_json(keep=False) == whole
    assert [t.to_json() for t in harness.tools] == [
        json.dumps(t.to_dict(), ensure_ascii=False, separators=(",", ":")) for t in harness.tools
    ]


@settings(max_examples=200, deadline=None)
@given(
    name=texts(),
    description=texts(),
    parameters=st.dictionaries(texts(), json_values(), max_size=3),
    extra=st.dictionaries(texts(), json_values(), max_size=2),
)
def test_a_tools_json_is_made_of_its_parameters_own_text(name, description, parameters, extra):
    # Tool.to_json joins the parameters' kept text (Tool.parameters_json), which validation
    # looks problems up by: the same text as dumping the whole tool at once
    tool = Tool(name, description, parameters, extra)
    assert tool.parameters_json() == compact_json(parameters)
    for text, value in ((tool.to_json(), tool.to_dict()), (tool.openai_json(), tool.to_openai())):
        assert text == json.dumps(value, ensure_ascii=False, separators=(",", ":"))


@settings(max_examples=100, deadline=None)
@given(harness=harnesses(rich=True), api=st.booleans())
def test_a_requests_tools_json_is_made_of_its_tools_own_texts(harness, api):
    # render.tools_json joins each tool's kept text (Tool.openai_json): the same text as
    # dumping the request's tools list at once
    from hsa.harness.render import api_tools, tools_json

    harness = harness.replace(protocol=Protocol() if api else Protocol(name="text"))
    whole = api_tools(harness) if api else []
    assert tools_json(harness) == json.dumps(whole, ensure_ascii=False, separators=(",", ":"))


def test_a_tool_keeps_what_is_derived_from_it_and_pickles_without_it():
    tool = Tool("get", "Get.", {"type": "object", "properties": {"id": {"type": "string"}}})
    assert tool.to_json() is tool.to_json() and tool._derived
    renamed = dataclasses.replace(tool, name="fetch")
    assert not renamed._derived and '"fetch"' in renamed.to_json()
    copy = pickle.loads(pickle.dumps(tool))
    assert copy == tool and copy._derived == {} and copy.to_json() == tool.to_json()
