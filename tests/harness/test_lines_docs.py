"""The ``lines`` doc format: one line per tool, and never drawn by the protocol rules."""

from __future__ import annotations

from hsa.augment import Context, apply_chain, get_rule
from hsa.harness import Harness, Prompt, Protocol, Section, Tool, ToolCall, system_prompt
from hsa.harness.protocols import DOC_FORMATS, DRAWN_DOC_FORMATS
from hsa.harness.protocols.docs import lines_docs

SEARCH = Tool.from_dict(
    {
        "name": "search",
        "description": "Search the catalogue.  Results come\nten to a page. Never cached.",
        "parameters": {
            "type": "object",
            "properties": {
                "query": {"type": "string", "description": "Words to look for. Not shown."},
                "sort": {"type": "string", "enum": ["price", "rating"], "default": "price"},
                "limit": {"type": "integer"},
            },
            "required": ["query"],
        },
    }
)


def line(tool: dict) -> str:
    return lines_docs([Tool.from_dict(tool)])


def params(properties: dict, required: tuple[str, ...] = ()) -> dict:
    return {"type": "object", "properties": properties, "required": list(required)}


def test_one_line_per_tool_with_required_and_optional_params():
    ping = Tool.from_dict({"name": "ping", "description": "Check the service is up."})
    assert lines_docs([SEARCH, ping]) == (
        "- search(query: string, sort?: price|rating, limit?: integer): Search the catalogue.\n"
        "- ping(): Check the service is up."
    )


def test_registered_under_its_name():
    assert DOC_FORMATS["lines"] is lines_docs


def test_enum_values_are_joined_by_bars():
    tool = {"name": "f", "parameters": params({"n": {"type": "integer", "enum": [1, 2, None]}})}
    assert line(tool) == "- f(n?: 1|2|null)"


def test_required_objects_are_inline_and_optional_ones_are_just_objects():
    address = params({"city": {"type": "string"}, "zip": {"type": "string"}}, ("city",))
    tool = {"name": "ship", "parameters": params({"to": address, "via": address}, ("to",))}
    assert line(tool) == "- ship(to: {city: string, zip?: string}, via?: object)"


def test_arrays_of_types_of_enums_and_of_refs():
    tool = {
        "name": "tag",
        "parameters": {
            **params(
                {
                    "ids": {"type": "array", "items": {"type": "integer"}},
                    "colors": {"type": "array", "items": {"enum": ["red", "blue"]}},
                    "items": {"type": "array", "items": {"$ref": "#/$defs/Item"}},
                }
            ),
            "$defs": {"Item": params({"sku": {"type": "string"}}, ("sku",))},
        },
    }
    assert line(tool) == "- tag(ids?: integer[], colors?: (red|blue)[], items?: object[])"


def test_only_the_first_sentence_of_the_description():
    text = lines_docs([SEARCH])
    assert text.endswith("): Search the catalogue.")
    assert "ten to a page" not in text and "Words to look for" not in text
    one = {"name": "f", "description": "  Spread\n over   lines, no stop  "}
    assert line(one) == "- f(): Spread over lines, no stop"


def test_a_tool_without_description_or_parameters():
    assert line({"name": "noop"}) == "- noop()"
    assert line({"name": "noop", "parameters": {"type": "object"}}) == "- noop()"


def test_lines_is_not_drawn():
    assert "lines" in DOC_FORMATS and "lines" not in DRAWN_DOC_FORMATS
    assert set(DOC_FORMATS) - {"lines"} == DRAWN_DOC_FORMATS


def _harness(protocol: Protocol) -> Harness:
    prompt = Prompt(
        sections=(
            Section("persona", "Persona", "You help shoppers.", "persona"),
            Section("tools", "Tools", "", "tools"),
            Section("calls", "Calls", "", "output_format"),
        )
    )
    ping = Tool.from_dict({"name": "ping", "description": "Check the service is up."})
    return Harness(id="shop", protocol=protocol, prompt=prompt, tools=(SEARCH, ping))


def test_a_harness_naming_lines_prints_them_in_its_prompt():
    harness = _harness(Protocol("text", "python", False, "lines"))
    assert lines_docs([SEARCH]) in system_prompt(harness)


def _apply(name: str, harness: Harness, seed: int) -> Harness:
    context = Context.of([ToolCall("call_1", "search", {"query": "mug"})])
    rewrite, _ = apply_chain(harness, [(get_rule(name), {})], seed=seed, context=context)
    return rewrite.harness


def test_call_format_rule_keeps_lines_docs():
    harness = _harness(Protocol("text", "python", False, "lines"))
    protocols = [_apply("protocol.call_format", harness, seed).protocol for seed in range(8)]
    assert {p.doc_format for p in protocols} == {"lines"}
    assert any(p.label != harness.protocol.label for p in protocols)


def test_doc_format_rule_never_draws_lines():
    harness = _harness(Protocol("text", "python", False, "json"))
    drawn = {_apply("protocol.doc_format", harness, seed).protocol.doc_format for seed in range(40)}
    assert "lines" not in drawn
    assert drawn == DRAWN_DOC_FORMATS - {"json"}


def test_enum_values_that_would_read_as_others_are_quoted():
    values = ["a|b", "c, d", "", "1", 1, "in progress", " x", "true", "(x)", "plain"]
    tool = {"name": "f", "parameters": params({"v": {"enum": values}}, ("v",))}
    assert line(tool) == ('- f(v: "a|b"|"c, d"|""|"1"|1|in progress|" x"|"true"|"(x)"|plain)')


def test_objects_inside_alternatives_are_unwrapped_as_the_other_docs_do():
    # tau2 airline's book_reservation: items of anyOf [$ref FlightInfo, any object] printed
    # as object[], dropping the fields the call must pass
    flight_info = params({"flight_number": {"type": "string"}, "date": {"type": "string"}})
    flight_info["required"] = ["flight_number", "date"]
    any_object = {"additionalProperties": True, "type": "object"}
    tool = {
        "name": "book_reservation",
        "parameters": {
            **params(
                {
                    "flights": {
                        "type": "array",
                        "items": {"anyOf": [{"$ref": "#/$defs/FlightInfo"}, any_object]},
                    },
                    "when": {"anyOf": [{"type": "string"}, {"$ref": "#/$defs/FlightInfo"}]},
                    "later": {"anyOf": [{"$ref": "#/$defs/FlightInfo"}, {"type": "null"}]},
                },
                ("flights", "when"),
            ),
            "$defs": {"FlightInfo": flight_info},
        },
    }
    assert line(tool) == (
        "- book_reservation(flights: {flight_number: string, date: string}[], "
        "when: string | {flight_number: string, date: string}, later?: object | null)"
    )


def test_an_object_of_its_own_is_written_inline_whatever_else_it_says():
    # "id or name" as anyOf of required sets, and a map of strings, printed as any and
    # object[string] once alternatives were read first
    either = params({"id": {"type": "string"}, "name": {"type": "string"}})
    either["anyOf"] = [{"required": ["id"]}, {"required": ["name"]}]
    mapping = {**params({"x": {"type": "string"}}), "additionalProperties": {"type": "string"}}
    tool = {
        "name": "f",
        "parameters": params(
            {"q": either, "qs": {"type": "array", "items": either}, "o": mapping},
            ("q", "qs", "o"),
        ),
    }
    assert line(tool) == (
        "- f(q: {id?: string, name?: string}, qs: {id?: string, name?: string}[], o: {x?: string})"
    )


def test_an_array_alternatives_items_are_not_the_object_alternatives_fields():
    # anyOf [an object with id, an array of objects with sku] read {id?, sku?}: sku belongs to
    # the array's items, and id is required
    one = {**params({"id": {"type": "string"}}), "required": ["id"]}
    many = {"type": "array", "items": {**params({"sku": {"type": "string"}}), "required": ["sku"]}}
    tool = {"name": "f", "parameters": params({"target": {"anyOf": [one, many]}}, ("target",))}
    assert line(tool) == "- f(target: {id: string} | array[object])"
