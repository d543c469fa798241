"""The XML, Python and Markdown tool docs: schemas they must document as JSON Schema reads them."""

from __future__ import annotations

import ast
import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from hsa.harness import Tool
from hsa.harness.protocols import DOC_FORMATS
from tests.harness.strategies import json_values, texts, tools

DOCS = ("xml", "python", "markdown", "lines")


def params(properties: dict, required: tuple[str, ...] = ()) -> dict:
    return {"type": "object", "properties": properties, "required": list(required)}


@pytest.mark.parametrize("fmt", DOCS)
def test_boolean_subschemas_are_any_value_or_none(fmt):
    # ``true`` takes any value, ``false`` none: valid JSON Schema wherever a schema goes
    properties = {
        "x": {"anyOf": [True, {"type": "string"}, False]},
        "o": {"type": "object", "properties": {"y": True}, "required": ["y"]},
    }
    doc = DOC_FORMATS[fmt]([Tool("t", "T.", params(properties, ("x", "o")))])
    assert "string" in doc or "str" in doc
    assert "any" in doc.lower()


@pytest.mark.parametrize(
    "properties",
    [
        {"x": {"enum": ['a"""b']}},
        {"x": {"type": "string", "default": 'say """hi"""'}},
        {"o": {"type": "object", "properties": {'a"""b': {"type": "string"}}}},
        {'c"""d': {"type": "string", "description": "ends in a backslash \\"}},
    ],
)
def test_python_docs_stay_python_whatever_the_schema_spells(properties):
    doc = DOC_FORMATS["python"]([Tool("my_tool", "D.", params(properties))])
    tree = ast.parse(doc)
    docstring = ast.get_docstring(tree.body[0], clean=False)
    assert docstring is not None and '"""' in docstring  # shown as it is, not cut short


def nested(levels: int) -> dict:
    schema: dict = {"type": "string"}
    for i in range(levels):
        schema = params({f"p{i}": schema}, (f"p{i}",))
    return schema


@pytest.mark.parametrize("fmt", ["xml", "python", "markdown"])
def test_every_format_documents_nested_objects_to_the_same_depth(fmt):
    doc = DOC_FORMATS[fmt]([Tool("deep", "D.", nested(40))])
    shown = [i for i in range(40) if f'"p{i}"' in doc or f"p{i} " in doc or f"`p{i}`" in doc]
    assert shown == list(range(40 - 33, 40))  # the outermost 33 levels


@given(tools(), st.lists(json_values(), max_size=3), texts())
def test_json_docs_are_the_tools_as_one_indented_json_list(drawn, values, text):
    # written tool by tool (each made once per tool object): the same text as the whole list
    odd = Tool("odd", text + "\u2028\n", {"type": "object", "properties": {}, "examples": values})
    for listed in ([], drawn, [*drawn, odd], [odd, odd]):
        expected = json.dumps([t.to_function() for t in listed], ensure_ascii=False, indent=4)
        assert DOC_FORMATS["json"](listed) == expected


@pytest.mark.parametrize("fmt", sorted(DOC_FORMATS))
@given(drawn=tools())
def test_a_doc_is_the_same_made_anew_or_kept_on_its_tools(fmt, drawn):
    # each tool's part is kept on the tool object: a doc made again from the same objects or
    # from equal copies reads the same, and a tool that differs in a field it shows gets its own
    doc = DOC_FORMATS[fmt]
    first = doc(drawn)
    assert doc(drawn) == first
    assert doc([Tool(t.name, t.description, t.parameters) for t in drawn]) == first
    tool = drawn[0]
    for changed in (
        Tool(tool.name + "_2", tool.description, tool.parameters),
        Tool(tool.name, "Zq9. " + tool.description, tool.parameters),  # (lines: 1st sentence)
        Tool(tool.name, tool.description, {"type": "object", "properties": {"zz9": {}}}),
    ):
        again = doc([changed, *drawn[1:]])
        assert again != first
        assert again == doc(
            [Tool(t.name, t.description, t.parameters) for t in [changed, *drawn[1:]]]
        )


# BFCL simple_python_277's museum_info, as imported: an array of enums
MUSEUM_INFO = params(
    {
        "museum": {"type": "string", "description": "The name of the museum."},
        "information": {
            "type": "array",
            "items": {"type": "string", "enum": ["opening_hours", "ticket_price", "address"]},
            "description": "The type of information needed from the museum.",
            "default": "all",
        },
    },
    ("museum",),
)


@pytest.mark.parametrize("fmt", ["xml", "python", "markdown"])
def test_an_array_of_enums_shows_the_values_its_items_may_take(fmt):
    # only ``array[string]`` was shown: any string looked allowed
    doc = DOC_FORMATS[fmt]([Tool("museum_info", "Museum info.", MUSEUM_INFO)])
    assert (
        'The type of information needed from the museum. Items: Enum values: ["opening_hours", '
        '"ticket_price", "address"].'
    ) in doc


@pytest.mark.parametrize("fmt", ["xml", "python", "markdown"])
def test_an_arrays_items_show_their_own_description_and_values_at_every_level(fmt):
    # BFCL irrelevance_128's user_responses: the items' description was dropped
    properties = {
        "user_responses": {
            "type": "array",
            "items": {"type": "integer", "description": "A response on a scale of 1-5"},
        },
        "grid": {
            "type": "array",
            "items": {"type": "array", "items": {"$ref": "#/$defs/Cell"}},
        },
        "tree": {"$ref": "#/$defs/Tree"},
    }
    schema = {
        **params(properties),
        "$defs": {
            "Cell": {"enum": ["x", "o"]},
            "Tree": {
                "type": "array",
                "description": "Branches.",
                "items": {"$ref": "#/$defs/Tree"},
            },
        },
    }
    doc = DOC_FORMATS[fmt]([Tool("t", "T.", schema)])
    assert "Items: A response on a scale of 1-5" in doc
    assert 'Items: Items: Enum values: ["x", "o"].' in doc
    assert "Branches. Items: Branches." in doc and "Items: Branches. Items:" not in doc


@pytest.mark.parametrize("fmt", ["xml", "python", "markdown"])
def test_every_bound_a_schema_sets_is_shown_in_json_schemas_words(fmt):
    # maximum, format, minItems/maxItems and the string bounds were dropped: BFCL
    # multiple_113's fee (maximum 400), every float the BFCL importer marks with a format
    properties = {
        "fee": {"type": "integer", "description": "Hourly fee charged by lawyer", "maximum": 400},
        "weight": {"type": "number", "description": "Weight in kg.", "format": "float"},
        "ratio": {"type": "number", "exclusiveMinimum": 0, "exclusiveMaximum": 1},
        "step": {"type": "number", "minimum": 0, "multipleOf": 0.5},
        "code": {"type": "string", "minLength": 2, "maxLength": 3, "pattern": "^[A-Z]+$"},
        "tags": {"type": "array", "items": {"type": "string"}, "minItems": 1, "uniqueItems": True},
        # BFCL irrelevance_128 puts the array's bounds on its items: shown where they stand
        "user_responses": {
            "type": "array",
            "items": {"type": "integer", "description": "A response.", "minItems": 5},
        },
    }
    doc = DOC_FORMATS[fmt]([Tool("t", "T.", params(properties, ("fee",)))])
    if fmt == "xml":
        doc = doc.replace("&quot;", '"')
    for shown in (
        'Hourly fee charged by lawyer Constraints: {"maximum": 400}.',
        'Weight in kg. Constraints: {"format": "float"}.',
        'Constraints: {"exclusiveMinimum": 0, "exclusiveMaximum": 1}.',
        'Constraints: {"multipleOf": 0.5, "minimum": 0}.',
        'Constraints: {"minLength": 2, "maxLength": 3, "pattern": "^[A-Z]+$"}.',
        'Constraints: {"minItems": 1, "uniqueItems": true}.',
        'Items: A response. Constraints: {"minItems": 5}.',
    ):
        assert shown in doc, (shown, doc)


def test_a_required_parameter_with_a_default_reads_as_required_in_python():
    # BFCL simple_python_255: `include_contributions: bool = False` read as omittable, and the
    # validator refuses a call without it
    schema = params(
        {
            "papal_name": {"type": "string", "description": "The papal name of the Pope."},
            "include_contributions": {
                "type": "boolean",
                "default": False,
                "description": "Include main contributions of the Pope in the response if true.",
            },
            "language": {"type": "string", "default": "en"},
        },
        ("papal_name", "include_contributions"),
    )
    doc = DOC_FORMATS["python"]([Tool("religious_history_get_papal_biography", "Bio.", schema)])
    signature = ast.parse(doc).body[0]
    assert isinstance(signature, ast.FunctionDef)
    names = [a.arg for a in signature.args.kwonlyargs]
    defaults = dict(zip(names, signature.args.kw_defaults, strict=True))
    assert defaults["include_contributions"] is None  # no default: it must be passed
    assert isinstance(defaults["language"], ast.Constant)  # an optional one keeps its own
    assert "include_contributions (bool, required, default=False): Include main" in doc
    assert "language (str, default='en'):" in doc


def test_an_optional_parameter_without_a_default_does_not_claim_none_is_a_value():
    # BFCL irrelevance_1's math_sum: `decimal_places: int | None = None`, and a call passing
    # None is refused (904 parameters); `...` says "may be left out" as stubs write it
    schema = params(
        {
            "numbers": {"type": "array", "items": {"type": "number"}},
            "decimal_places": {"type": "integer", "description": "Decimal places."},
            "note": {"type": ["string", "null"]},
        },
        ("numbers",),
    )
    doc = DOC_FORMATS["python"]([Tool("math_sum", "Sum.", schema)])
    assert doc.startswith(
        "def math_sum(*, numbers: list[float], decimal_places: int = ..., note: str | None = ...):"
    )
    assert "decimal_places (int, optional): Decimal places." in doc
    ast.parse(doc)
