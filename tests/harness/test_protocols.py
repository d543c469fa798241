"""Call formats and doc formats: exact surface forms, round trips, BFCL compatibility, leniency."""

from __future__ import annotations

import ast
import json
import math
import re
import sys
import threading
import time
import warnings
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from hsa.errors import ProtocolError
from hsa.harness import Tool
from hsa.harness.model import CALL_FORMATS as MODEL_CALL_FORMATS
from hsa.harness.model import DOC_FORMATS as MODEL_DOC_FORMATS
from hsa.harness.protocols import CALL_FORMATS, DOC_FORMATS, join_prefix, split_prefix
from hsa.harness.protocols.literals import MAX_DEPTH, from_literal, nesting, to_literal
from tests.harness.strategies import arguments, json_values, texts, tool_names

BFCL_FORMATS = ("json", "python", "xml_verbose", "xml_concise")
CALL = [("get_weather", {"city": "Paris", "days": 3})]


def test_every_format_the_schema_allows_is_registered() -> None:
    assert set(CALL_FORMATS) == set(MODEL_CALL_FORMATS)
    assert set(DOC_FORMATS) == set(MODEL_DOC_FORMATS)


# --- exact surface forms (BFCL v4's OUTPUT_FORMAT_MAPPING shapes) ----------------------------


@pytest.mark.parametrize(
    ("fmt", "expected"),
    [
        ("python", "[get_weather(city='Paris', days=3)]"),
        (
            "json",
            '```json\n[{"function":"get_weather","parameters":{"city":"Paris","days":3}}]\n```',
        ),
        (
            "xml_verbose",
            '<functions><function name="get_weather"><params>'
            '<param name="city" value="Paris" type="string"/>'
            '<param name="days" value="3" type="integer"/>'
            "</params></function></functions>",
        ),
        (
            "xml_concise",
            '<functions><function name="get_weather">'
            '<param name="city" type="string">Paris</param>'
            '<param name="days" type="integer">3</param>'
            "</function></functions>",
        ),
        (
            "hermes",
            '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris", "days": 3}}\n'
            "</tool_call>",
        ),
    ],
)
def test_surface_forms(fmt: str, expected: str) -> None:
    format_calls = CALL_FORMATS[fmt].format_calls
    assert format_calls(CALL, False) == expected
    tagged = expected if fmt == "hermes" else f"<TOOLCALL>{expected}</TOOLCALL>"
    assert format_calls(CALL, True) == tagged


def test_hermes_ignores_the_tag_and_always_allows_text() -> None:
    hermes = CALL_FORMATS["hermes"]
    assert hermes.format_calls(CALL, True) == hermes.format_calls(CALL, False)
    assert hermes.allows_prefix(False) and hermes.allows_prefix(True)


@pytest.mark.parametrize("fmt", BFCL_FORMATS)
def test_only_tagged_bfcl_formats_share_a_message_with_text(fmt: str) -> None:
    assert CALL_FORMATS[fmt].allows_prefix(True)
    assert not CALL_FORMATS[fmt].allows_prefix(False)


@pytest.mark.parametrize("fmt", sorted(MODEL_CALL_FORMATS))
@pytest.mark.parametrize("tag", [False, True])
def test_instructions_describe_the_format(fmt: str, tag: bool) -> None:
    text = CALL_FORMATS[fmt].instructions(tag)
    assert text.strip()
    assert ("<TOOLCALL>" in text) == (tag and fmt != "hermes")


def test_xml_instructions_list_the_value_types() -> None:
    text = CALL_FORMATS["xml_verbose"].instructions(False)
    for kind in ("string", "integer", "float", "boolean", "null", "array", "dict"):
        assert kind in text


# --- round trips at the protocol level ------------------------------------------------------


def _names(fmt: str) -> st.SearchStrategy[str]:
    # Python call syntax needs identifiers; every other format takes any string as a name.
    return tool_names(python=True) if fmt == "python" else texts(12)


@pytest.mark.parametrize("fmt", sorted(MODEL_CALL_FORMATS))
@settings(
    max_examples=100, derandomize=True, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
@given(data=st.data())
def test_parse_calls_inverts_format_calls(fmt: str, data: st.DataObject) -> None:
    """Any names (any string outside Python) and arguments; test_render_parse covers the rest."""
    call_format = CALL_FORMATS[fmt]
    tag = data.draw(st.booleans(), label="tag")
    calls = data.draw(st.lists(st.tuples(_names(fmt), arguments()), min_size=1, max_size=3))
    block = call_format.format_calls(calls, tag)
    assert call_format.parse_calls(block, tag) == (None, calls)
    if call_format.allows_prefix(tag):
        prefix = data.draw(texts())
        if fmt == "hermes":
            # Hermes blocks are not enclosed: text ending in a block would join the calls.
            assume(call_format.parse_calls(prefix, tag) is None)
        assert call_format.parse_calls(join_prefix(prefix, block), tag) == (prefix, calls)


@settings(max_examples=200, derandomize=True, deadline=None)
@given(json_values())
def test_python_literals_round_trip(value: Any) -> None:
    text = to_literal(value)
    back = from_literal(text)
    assert json.dumps(back) == json.dumps(value)
    assert ast.literal_eval(text) == value  # BFCL reads array/dict values with literal_eval


def test_python_literal_edge_values() -> None:
    for value in (-0.0, 1e308, 5e-324, 2**70, -(2**70), "\x00\n\t'\"\\", "🦍", [], {}):
        assert json.dumps(from_literal(to_literal(value))) == json.dumps(value)
    assert from_literal(to_literal(math.inf)) == math.inf
    with pytest.raises(ProtocolError, match="NaN"):
        to_literal(math.nan)
    with pytest.raises(ProtocolError, match="nests deeper"):
        nested: Any = 1
        for _ in range(150):
            nested = [nested]
        to_literal(nested)


def test_literals_read_in_threads_leave_the_warning_filters_as_they_were() -> None:
    # an unknown escape warns as the text is read; the filter that quiets it is the process's
    before = list(warnings.filters)
    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # threads switch often, as under load
    try:
        threads = [
            threading.Thread(target=lambda: [from_literal("'a\\d'") for _ in range(4000)])
            for _ in range(4)
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    finally:
        sys.setswitchinterval(interval)
    assert warnings.filters == before
    assert from_literal("'a\\d'") == "a\\d"


@pytest.mark.parametrize("name", sorted(CALL_FORMATS))
@pytest.mark.parametrize("inner", [1, [], {"k": []}])
def test_a_call_format_writes_arguments_as_deep_as_its_max_depth_says(name, inner) -> None:
    # the augment picker passes over a variant whose format cannot write a trajectory's
    # arguments (``CallFormat.max_depth``, by ``nesting``), so the two must agree
    fmt = CALL_FORMATS[name]
    for depth in (MAX_DEPTH - 1, MAX_DEPTH, MAX_DEPTH + 1):
        value: Any = inner
        while nesting(value) < depth:
            value = [value] if nesting(value) % 2 else {"a": value}
        assert nesting(value) == depth
        call = [("f", {"x": value})]
        if fmt.max_depth is not None and depth > fmt.max_depth:
            with pytest.raises(ProtocolError, match="nests deeper"):
                fmt.format_calls(call, False)
        else:
            assert fmt.parse_calls(fmt.format_calls(call, True), True) == (None, call)
    assert {n for n, f in CALL_FORMATS.items() if f.max_depth} == {
        "python",
        "xml_verbose",
        "xml_concise",
    }


# --- BFCL compatibility: BFCL's own decoding reads what we write ------------------------------


def _bfcl_xml(text: str, verbose: bool) -> list[dict[str, dict[str, Any]]]:
    """Decode like BFCL's xml_parser: ElementTree, then convert by the type attribute."""
    convert = {
        "string": lambda raw: raw,
        "integer": int,
        "float": float,
        "boolean": lambda raw: raw.lower() == "true",
        "null": lambda raw: None,
        "array": ast.literal_eval,
        "dict": ast.literal_eval,
    }
    out = []
    for func in ET.fromstring(text).findall("function"):
        params = func.find("params") if verbose else func
        args = {}
        for param in params.findall("param"):
            raw = param.attrib.get("value", "") if verbose else (param.text or "")
            args[param.attrib["name"]] = convert[param.attrib["type"]](raw)
        out.append({func.attrib["name"]: args})
    return out


_PRINTABLE = st.text(
    st.characters(codec="utf-8", exclude_categories=("Cc", "Cs", "Zl", "Zp")), max_size=12
).map(str.strip)  # BFCL strips concise values and XML 1.0 cannot hold control characters
_BFCL_VALUES = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | _PRINTABLE,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_PRINTABLE, inner, max_size=3),
    max_leaves=6,
)


@pytest.mark.parametrize("fmt", ["xml_verbose", "xml_concise"])
@settings(max_examples=100, derandomize=True, deadline=None)
@given(args=st.dictionaries(_PRINTABLE, _BFCL_VALUES, max_size=4), name=_PRINTABLE)
def test_bfcl_xml_parser_reads_our_xml(fmt: str, args: dict[str, Any], name: str) -> None:
    text = CALL_FORMATS[fmt].format_calls([(name, args)], False)
    assert _bfcl_xml(text, fmt == "xml_verbose") == [{name: args}]


def test_xml_escapes_what_xml_cannot_hold_raw() -> None:
    args = {"a": "line\nnext\ttab\rcr", "b": "\x00\x1f", "c": "<&>\"'"}
    verbose = CALL_FORMATS["xml_verbose"].format_calls([("f", args)], False)
    assert "&#10;" in verbose and "&#9;" in verbose and "&#13;" in verbose and "&#0;" in verbose
    assert "\n" not in verbose
    concise = CALL_FORMATS["xml_concise"].format_calls([("f", args)], False)
    assert "line\nnext\ttab&#13;cr" in concise and "&lt;&amp;&gt;\"'" in concise
    for text in (verbose, concise):
        assert CALL_FORMATS["xml_concise"].parse_calls(text, False) == (None, [("f", args)])


def test_bfcl_python_decoding_reads_our_calls() -> None:
    calls = [("math.factorial", {"number": 5}), ("f", {"s": 'it\'s "x"\n', "l": [1.5, None]})]
    text = CALL_FORMATS["python"].format_calls(calls, False)
    tree = ast.parse(text, mode="eval").body
    decoded = [
        (ast.unparse(c.func), {k.arg: ast.literal_eval(k.value) for k in c.keywords})
        for c in tree.elts
    ]
    assert decoded == calls


def test_python_writes_awkward_argument_names_as_a_dict_splat() -> None:
    args = {"a": 1, "class": 2, "x-y": 3, "b": 4, "ﬁ": 5, "": 6}
    text = CALL_FORMATS["python"].format_calls([("f", args)], False)
    assert text == "[f(a=1, **{'class': 2, 'x-y': 3}, b=4, **{'ﬁ': 5, '': 6})]"
    assert CALL_FORMATS["python"].parse_calls(text, False) == (None, [("f", args)])


def test_python_refuses_tool_names_it_cannot_write() -> None:
    for name in ("get-weather", "3d", "class", "a..b", ""):
        with pytest.raises(ProtocolError, match="not a Python identifier"):
            CALL_FORMATS["python"].format_calls([(name, {})], False)


def test_tagged_python_hides_tags_inside_strings() -> None:
    text = CALL_FORMATS["python"].format_calls([("f", {"s": "</TOOLCALL><TOOLCALL>"})], True)
    assert text == "<TOOLCALL>[f(s='\\x3c/TOOLCALL>\\x3cTOOLCALL>')]</TOOLCALL>"
    assert CALL_FORMATS["python"].parse_calls("said\n" + text, True) == (
        "said",
        [("f", {"s": "</TOOLCALL><TOOLCALL>"})],
    )


# --- lenient reading of what models write -------------------------------------------------------


@pytest.mark.parametrize(
    ("fmt", "tag", "text", "expected"),
    [
        (
            "python",
            False,
            '  get_weather(city="Paris")\n',
            (None, [("get_weather", {"city": "Paris"})]),
        ),
        (
            "python",
            False,
            "```python\n[f(a=True, b=None)]\n```",
            (None, [("f", {"a": True, "b": None})]),
        ),
        (
            "python",
            False,
            "[f(t=(1, 2), d={'k': -1})]",
            (None, [("f", {"t": [1, 2], "d": {"k": -1}})]),
        ),
        ("python", True, "Sure.<TOOLCALL>[f()]</TOOLCALL>\n", ("Sure.", [("f", {})])),
        ("json", False, '[{"function": "f", "parameters": {"a": 1}}]', (None, [("f", {"a": 1})])),
        ("json", False, '{"function": "f"}', (None, [("f", {})])),
        (
            "json",
            True,
            '<TOOLCALL>\n```\n[{"function":"f","parameters":{}}]\n```\n</TOOLCALL>',
            (None, [("f", {})]),
        ),
        (
            "xml_concise",
            False,
            "<functions>\n  <function name='f'>\n    <param name='n' type='int'> 3 </param>\n"
            "    <param name='l' type='list'>[true, null]</param>\n  </function>\n</functions>",
            (None, [("f", {"n": 3, "l": [True, None]})]),
        ),
        (
            "xml_verbose",
            False,
            '<functions><function name="f"><param name="x" value="1.5" type="number"/>'
            '<param name="s" value="a &amp; b"/></function></functions>',
            (None, [("f", {"x": 1.5, "s": "a & b"})]),
        ),
        (
            "hermes",
            False,
            'Hi<tool_call>{"name": "f", "arguments": {}}</tool_call>  \n',
            ("Hi", [("f", {})]),
        ),
        (
            "hermes",
            False,
            '<tool_call>\n{"name": "a", "arguments": {}}\n</tool_call>\n\n'
            '<tool_call>\n{"name": "b", "arguments": {}}\n</tool_call>',
            (None, [("a", {}), ("b", {})]),
        ),
        # a model's JSON is not escaped as ours: `<` and `>` in a value, as vLLM reads them
        (
            "hermes",
            False,
            '<tool_call>\n{"name": "f", "arguments": {"q": "price < 50", "h": "<b>x</b>"}}\n'
            "</tool_call>",
            (None, [("f", {"q": "price < 50", "h": "<b>x</b>"})]),
        ),
    ],
)
def test_lenient_parsing(fmt: str, tag: bool, text: str, expected: Any) -> None:
    assert CALL_FORMATS[fmt].parse_calls(text, tag) == expected


@pytest.mark.parametrize(
    ("fmt", "tag", "text"),
    [
        ("python", False, "The answer is 42."),
        ("python", False, "[]"),
        ("python", False, "[f(1)]"),  # positional arguments cannot be mapped to names
        ("python", False, "[f(a=x)]"),  # a name, not a literal
        ("python", False, "[f(a=1+2)]"),
        ("python", False, "[f(a=1), 3]"),
        ("python", False, "[f(a=1, **{'a': 2})]"),
        ("python", True, "[f()]"),  # the tag is required
        ("json", False, "[]"),
        ("json", False, '[{"name": "f"}]'),
        ("json", False, '[{"function": "f", "parameters": [1]}]'),
        ("json", False, "```json\nnot json\n```"),
        ("xml_concise", False, "<functions></functions>"),
        (
            "xml_concise",
            False,
            "<functions><function name='f'><param>1</param></function></functions>",
        ),
        ("xml_concise", False, "<functions><function name='f'></functions>"),
        (
            "xml_concise",
            False,
            "<functions><function name='f'><param name='a' type='integer'>x</param>"
            "</function></functions>",
        ),
        ("xml_verbose", False, "<functions><function name='f'>text</function></functions>"),
        ("hermes", False, "<tool_call>\nnot json\n</tool_call>"),
        ("hermes", False, '<tool_call>{"arguments": {}}</tool_call>'),
        # no "arguments" (vLLM reads no call either): its parameters were dropped, a call of {}
        ("hermes", False, '<tool_call>{"name": "f"}</tool_call>'),
        ("hermes", False, '<tool_call>{"name": "f", "parameters": {"id": "A1"}}</tool_call>'),
        ("hermes", False, "no calls here"),
        ("hermes", False, '<tool_call>{"name": "f"}</tool_call></tool_call>'),
        ("json", True, "<TOOLCALL>[]</TOOLCALL>"),
        ("xml_verbose", True, "</TOOLCALL>"),
        # a key given twice in a call or its arguments: which was meant cannot be told (the
        # last value was taken, and a second "name" called another tool)
        ("hermes", False, '<tool_call>{"name": "f", "arguments": {}, "name": "g"}</tool_call>'),
        ("hermes", False, '<tool_call>{"name": "f", "arguments": {"a": 5, "a": 500}}</tool_call>'),
        ("hermes", False, '<tool_call>{"name": "f", "arguments": {}, "arguments": {}}</tool_call>'),
        ("json", False, '[{"function": "f", "function": "g", "parameters": {}}]'),
        ("json", False, '[{"function": "f", "parameters": {"a": 5, "a": 500}}]'),
        ("json", True, '<TOOLCALL>{"function": "f", "parameters": {"a": 5, "a": 5}}</TOOLCALL>'),
        ("json", False, '[{"function": "f", "parameters": {"": 1, "": 2}}]'),
    ],
)
def test_not_a_call_message(fmt: str, tag: bool, text: str) -> None:
    assert CALL_FORMATS[fmt].parse_calls(text, tag) is None


@given(name=tool_names(), args=arguments())
def test_a_hermes_block_of_unescaped_json_reads_as_its_call(name: str, args: dict) -> None:
    # as a model writes it (vLLM's parser reads `<tool_call>(.*?)</tool_call>`): `<` and `>`
    # as they are, only a tag would end the block
    body = json.dumps({"name": name, "arguments": args}, ensure_ascii=False)
    assume("tool_call>" not in body)
    block = f"<tool_call>\n{body}\n</tool_call>"
    assert CALL_FORMATS["hermes"].parse_calls(block, False) == (None, [(name, args)])


def test_a_malformed_hermes_block_before_calls_is_text() -> None:
    good = CALL_FORMATS["hermes"].format_calls([("f", {})], False)
    text = "<tool_call>\nnot json\n</tool_call>\n" + good
    assert CALL_FORMATS["hermes"].parse_calls(text, False) == (
        "<tool_call>\nnot json\n</tool_call>",
        [("f", {})],
    )


_HERMES_BLOCK = re.compile(r"<tool_call>\s*((?:(?!</?tool_call>).)*?)\s*</tool_call>\Z", re.DOTALL)


def _hermes_reference(text: str) -> tuple[str | None, list] | None:
    """hermes' parse as it was written first: one anchored regex search per block."""
    calls: list = []
    rest = text
    while (match := _HERMES_BLOCK.search(rest.rstrip())) is not None:
        block = f"<tool_call>{match.group(1)}</tool_call>"
        parsed = CALL_FORMATS["hermes"].parse_calls(block, False)
        if parsed is None:
            if not calls:
                return None
            break
        calls.extend(parsed[1])
        rest = rest[: match.start()]
    return split_prefix(rest, calls[::-1])


_HERMES_PIECES = (
    "<tool_call>",
    "</tool_call>",
    "tool_call>",
    " ",
    "\n",
    "\u00a0",
    "x",
    "<",
    '{"name": "f", "arguments": {}}',
    '{"name": "g", "arguments": {"q": "<b>"}}',
    '{"name": "g", "arguments": "{}"}',
)


@settings(max_examples=500)
@given(st.lists(st.sampled_from(_HERMES_PIECES), max_size=12).map("".join))
def test_hermes_parse_reads_what_one_regex_search_per_block_read(text: str) -> None:
    assert CALL_FORMATS["hermes"].parse_calls(text, False) == _hermes_reference(text)


def test_hermes_parse_is_linear_in_the_number_of_blocks() -> None:
    # one search over the rest of the text per block took 44 s for these 4,000 blocks
    text = '<tool_call>\n{"name": "f", "arguments": {}}\n</tool_call>\n' * 4000
    started = time.monotonic()
    parsed = CALL_FORMATS["hermes"].parse_calls(text, False)
    assert time.monotonic() - started < 1  # about 0.05 s
    assert parsed == (None, [("f", {})] * 4000)


_PARIS = '{"name": "get_weather", "arguments": {"city": "Paris"}}'


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        # generation stopped right after the JSON, before the closing tag
        (f"<tool_call>\n{_PARIS}\n", (None, [("get_weather", {"city": "Paris"})])),
        (
            f"Checking.\n<tool_call>\n{_PARIS}\n</tool_call>\n<tool_call>\n"
            '{"name": "get_weather", "arguments": {"city": "Rome"}}',
            ("Checking.", [("get_weather", {"city": "Paris"}), ("get_weather", {"city": "Rome"})]),
        ),
        # the arguments object written as a JSON string (which vLLM's server parser passes on
        # undecoded: a format failure through the openai backend, docs/vllm.md)
        (
            '<tool_call>\n{"name": "get_weather", "arguments": "{\\"city\\": \\"Paris\\"}"}'
            "\n</tool_call>",
            (None, [("get_weather", {"city": "Paris"})]),
        ),
        # a malformed block before the calls is the assistant's text, as in training text
        (
            f"<tool_call>not json</tool_call>\n<tool_call>{_PARIS}",
            ("<tool_call>not json</tool_call>", [("get_weather", {"city": "Paris"})]),
        ),
    ],
)
def test_a_hermes_reply_is_read_leniently_and_training_text_is_not(
    text: str, expected: Any
) -> None:
    hermes = CALL_FORMATS["hermes"]
    assert hermes.parse_reply is not None
    assert hermes.parse_reply(text, False) == expected
    assert hermes.parse_calls(text, False) is None  # a row's text must round-trip


@pytest.mark.parametrize(
    "text",
    [
        '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Par',  # cut off in the JSON
        f"<tool_call>\n{_PARIS}\n</tool_",  # cut off in the closing tag
        f"<tool_call>\n{_PARIS}\n</tool_call>\nand then some text",
        '<tool_call>{"name": "f", "arguments": "[1, 2]"}</tool_call>',  # not an object
        '<tool_call>{"name": "f", "arguments": "{\\"a\\": 1, \\"a\\": 2}"}</tool_call>',
        '<tool_call>{"name": "f", "arguments": "not json"}</tool_call>',
    ],
)
def test_a_hermes_reply_that_is_no_call_to_hsa_is_none(text: str) -> None:
    # cut off, it is no call to vLLM's parser either; followed by text it is one there (the
    # text dropped), not here: a rollout rejects it as a format failure (docs/vllm.md); string
    # arguments that are no JSON object, or give a key twice, hsa refuses
    assert CALL_FORMATS["hermes"].parse_reply(text, False) is None  # type: ignore[misc]


# --- the real BFCL corpus -------------------------------------------------------------------------


def _ground_truth_calls(external: Path) -> list[tuple[str, dict[str, Any]]]:
    calls = []
    for path in sorted((external / "bfcl" / "possible_answer").glob("*.json")):
        if "multi_turn" in path.name:
            continue
        for line in path.read_text("utf-8").splitlines():
            for call in json.loads(line)["ground_truth"]:
                for name, options in call.items():
                    args = {k: v[0] for k, v in options.items() if v and v[0] != ""}
                    calls.append((name, args))
    return calls


def test_every_bfcl_ground_truth_call_round_trips_in_every_format(external: Path) -> None:
    calls = _ground_truth_calls(external)
    assert len(calls) > 1000
    for fmt in sorted(MODEL_CALL_FORMATS):
        call_format = CALL_FORMATS[fmt]
        for tag in (False, True):
            for call in calls:
                if fmt == "python" and not all(p.isidentifier() for p in call[0].split(".")):
                    continue
                text = call_format.format_calls([call], tag)
                assert call_format.parse_calls(text, tag) == (None, [call]), (fmt, tag, call)


def test_bfcl_multi_turn_answers_parse_as_python_calls(external: Path) -> None:
    python = CALL_FORMATS["python"]
    path = external / "bfcl" / "possible_answer" / "BFCL_v4_multi_turn_base.json"
    count = 0
    for line in path.read_text("utf-8").splitlines():
        for turn in json.loads(line)["ground_truth"]:
            for source in turn:
                node = ast.parse(source, mode="eval").body
                if node.args:  # positional arguments: no names to map them to without a schema
                    assert python.parse_calls(source, False) is None
                    continue
                parsed = python.parse_calls(source, False)
                assert parsed is not None, source
                (name, args) = parsed[1][0]
                assert name == ast.unparse(node.func)
                assert args == {k.arg: ast.literal_eval(k.value) for k in node.keywords}
                again = python.format_calls(parsed[1], True)
                assert python.parse_calls(again, True) == parsed
                count += 1
    assert count > 500


# --- doc formats ------------------------------------------------------------------------------


def _bfcl_tools(external: Path) -> list[Tool]:
    tools = []
    for line in (external / "bfcl" / "BFCL_v4_simple_python.json").read_text("utf-8").splitlines():
        for fn in json.loads(line)["function"]:
            tools.append(Tool(fn["name"], fn.get("description", ""), fn["parameters"]))
    return tools


def _tau2_tools(external: Path, domain: str) -> list[Tool]:
    data = json.loads((external / "tau2" / domain / "tools.json").read_text("utf-8"))
    return [Tool.from_dict(entry["function"]) for entry in data]


def test_json_docs_are_bfcl_s_indented_list(external: Path) -> None:
    tools = _bfcl_tools(external)[:5]
    text = DOC_FORMATS["json"](tools)
    assert json.loads(text) == [t.to_dict() for t in tools]
    assert text.startswith('[\n    {\n        "name"')


def test_xml_docs_are_well_formed_and_complete(external: Path) -> None:
    tools = _bfcl_tools(external) + _tau2_tools(external, "retail")
    root = ET.fromstring("<tools>" + DOC_FORMATS["xml"](tools) + "</tools>")
    functions = root.findall("function")
    assert [f.attrib["name"] for f in functions] == [t.name for t in tools]
    first = functions[0]
    assert first.find("desc").text == tools[0].description
    params = first.find("params").findall("param")
    assert {p.attrib["name"] for p in params} == set(tools[0].parameters["properties"])
    assert {p.attrib["required"] for p in params} <= {"true", "false"}


def test_python_docs_are_valid_python_with_typed_signatures(external: Path) -> None:
    tools = _tau2_tools(external, "airline")
    text = DOC_FORMATS["python"](tools)
    module = ast.parse(text)
    defs = [node for node in module.body if isinstance(node, ast.FunctionDef)]
    assert [d.name for d in defs] == [t.name for t in tools]
    for node, tool in zip(defs, tools, strict=True):
        assert [a.arg for a in node.args.kwonlyargs] == list(tool.parameters["properties"])
        assert ast.get_docstring(node) is not None
    # $refs resolve: FlightInfo's fields are documented under the parameter that uses it.
    booking = text[text.index("def book_reservation") :]
    assert "flights (list[FlightInfo | dict]): " in booking
    assert "            flight_number (str): Flight number" in booking


def test_python_docs_pass_names_that_are_not_python_names_in_kwargs_as_calls_do() -> None:
    properties = {"class": {"type": "string"}, "q": {"type": "string"}, "a-b": {"type": "integer"}}
    tool = Tool("lookup", "Look up.", {"type": "object", "properties": properties})
    text = DOC_FORMATS["python"]([tool])
    (node,) = ast.parse(text).body  # was `def lookup(*, class: str, ...)`: not Python
    assert isinstance(node, ast.FunctionDef)
    assert [a.arg for a in node.args.kwonlyargs] == ["q"] and node.args.kwarg.arg == "kwargs"
    assert "        'class' (str, optional):\n" in text and "        q (str, optional):\n" in text
    assert "lookup(**{'class': ..., 'a-b': ...})." in text
    call = CALL_FORMATS["python"].format_calls([("lookup", {"class": "x", "a-b": 1})], False)
    assert call == "[lookup(**{'class': 'x', 'a-b': 1})]"
    # a parameter named kwargs leaves the name to it; __debug__ cannot be assigned at all
    properties = {"kwargs": {"type": "string"}, "__debug__": {"type": "string"}}
    text = DOC_FORMATS["python"]([Tool("f", "F.", {"type": "object", "properties": properties})])
    compile(text, "<doc>", "exec")
    assert "def f(*, kwargs: str = ..., **kw):" in text
    call = CALL_FORMATS["python"].format_calls([("f", {"kwargs": 1, "__debug__": 2})], False)
    assert call == "[f(kwargs=1, **{'__debug__': 2})]"
    compile(call, "<call>", "eval")


def test_python_docs_types_defaults_and_enums() -> None:
    tool = Tool(
        "convert",
        'Convert """units""".',
        {
            "type": "object",
            "properties": {
                "value": {"type": "number", "description": "Amount."},
                "unit": {"type": "string", "enum": ["c", "f"], "default": "c"},
                "tags": {"type": "array", "items": {"type": "string"}},
                "extra": {"type": ["integer", "null"]},
            },
            "required": ["value"],
        },
    )
    assert DOC_FORMATS["python"]([tool]) == (
        "def convert(*, value: float, unit: Literal['c', 'f'] = 'c', tags: list[str] = ..., "
        "extra: int | None = ...):\n"
        '    """\n'
        '    Convert \\"\\"\\"units\\"\\"\\".\n'
        "\n"
        "    Args:\n"
        "        value (float): Amount.\n"
        "        unit (Literal['c', 'f'], default='c'): Enum values: [\"c\", \"f\"].\n"
        "        tags (list[str], optional):\n"
        "        extra (int | None, optional):\n"
        '    """'
    )
    ast.parse(DOC_FORMATS["python"]([tool]))


def test_markdown_docs(external: Path) -> None:
    tools = _tau2_tools(external, "retail")
    text = DOC_FORMATS["markdown"](tools)
    for tool in tools:
        assert f"### {tool.name}" in text
        for name in tool.parameters.get("properties", {}):
            assert f"- `{name}` (" in text
    assert "Parameters: none." in DOC_FORMATS["markdown"]([Tool("ping")])


@pytest.mark.parametrize("doc", sorted(MODEL_DOC_FORMATS))
def test_every_doc_format_handles_every_bfcl_function(doc: str, external: Path) -> None:
    tools = _bfcl_tools(external)
    text = DOC_FORMATS[doc](tools)
    for tool in tools:
        assert tool.name in text


@pytest.mark.parametrize("fmt", ["xml", "python", "markdown"])
def test_a_doc_shows_every_alternative_an_optional_enum_and_a_const(fmt):
    # only the first anyOf alternative with properties was documented (a call by iban could
    # not be told from the prompt), an enum inside anyOf lost its values (xml, markdown), and
    # a const was dropped
    tool = Tool(
        name="pay",
        description="Pay.",
        parameters={
            "type": "object",
            "properties": {
                "method": {
                    "anyOf": [
                        {"type": "object", "properties": {"card_no": {"type": "string"}}},
                        {"$ref": "#/$defs/Bank"},
                    ]
                },
                "status": {"anyOf": [{"enum": ["open_state", "closed_state"]}, {"type": "null"}]},
                "api_version": {"type": "string", "const": "v2"},
                "note": {"anyOf": [{"enum": ["a"]}, {"type": "string"}]},
            },
            "$defs": {
                "Bank": {
                    "type": "object",
                    "properties": {"iban": {"type": "string"}},
                    "required": ["iban"],
                }
            },
        },
    )
    doc = DOC_FORMATS[fmt]([tool])
    for shown in ("card_no", "iban", "open_state", "closed_state", "v2"):
        assert shown in doc, (shown, doc)
    assert 'Enum values: ["a"]' not in doc  # "note" takes any string too


@pytest.mark.parametrize("fmt", ["xml", "python", "markdown", "lines"])
def test_recursive_unions_and_trees_give_a_bounded_doc(fmt):
    # documenting every alternative followed each recursive branch to the depth bound: a
    # filter expression's doc never finished
    expr = {
        "$defs": {
            "Expr": {
                "anyOf": [{"$ref": "#/$defs/And"}, {"$ref": "#/$defs/Or"}, {"type": "string"}]
            },
            "And": {
                "type": "object",
                "properties": {"and": {"type": "array", "items": {"$ref": "#/$defs/Expr"}}},
            },
            "Or": {
                "type": "object",
                "properties": {"or": {"type": "array", "items": {"$ref": "#/$defs/Expr"}}},
            },
            "Node": {
                "type": "object",
                "properties": {"l": {"$ref": "#/$defs/Node"}, "r": {"$ref": "#/$defs/Node"}},
                "required": ["l", "r"],
            },
            # eight types, each a property of every other: as many paths as orderings
            **{
                f"T{i}": {
                    "type": "object",
                    "properties": {f"to{j}": {"$ref": f"#/$defs/T{j}"} for j in range(8) if j != i},
                    "required": [f"to{j}" for j in range(8) if j != i],
                }
                for i in range(8)
            },
        },
        "type": "object",
        "properties": {
            "filter": {"$ref": "#/$defs/Expr"},
            "tree": {"$ref": "#/$defs/Node"},
            "graph": {"$ref": "#/$defs/T0"},
            "any": {"anyOf": [{"$ref": f"#/$defs/T{i}"} for i in range(8)]},
        },
        "required": ["tree", "graph"],
    }
    started = time.monotonic()
    doc = DOC_FORMATS[fmt]([Tool(name="find", description="Find.", parameters=expr)])
    assert time.monotonic() - started < 10  # (it never finished)
    assert len(doc) < 200_000 and all(name in doc for name in ("filter", "tree", "graph"))


@pytest.mark.parametrize("fmt", ["xml", "python", "markdown"])
def test_a_discriminator_the_alternatives_declare_differently_shows_each_value(fmt):
    # merged by name, the first alternative's const was shown as the only value
    def method(kind: str, field: str) -> dict:
        return {
            "type": "object",
            "properties": {"kind": {"const": kind}, field: {"type": "string"}},
            "required": ["kind", field],
        }

    params = {
        "type": "object",
        "properties": {"method": {"oneOf": [method("card", "card_no"), method("bank", "iban")]}},
    }
    doc = DOC_FORMATS[fmt]([Tool(name="pay", description="Pay.", parameters=params)])
    assert "card" in doc and "bank" in doc and "iban" in doc
    assert 'Enum values: ["card"].' not in doc and "Literal['card'])" not in doc
    # what the alternatives say alike of it is kept (its description was lost)
    described = {"oneOf": [method("card", "card_no"), method("bank", "iban")]}
    for alternative in described["oneOf"]:
        alternative["properties"]["kind"]["description"] = "How to pay."
    params = {"type": "object", "properties": {"method": described}}
    doc = DOC_FORMATS[fmt]([Tool(name="pay", description="Pay.", parameters=params)])
    assert "How to pay." in doc and "any | any" not in doc


@pytest.mark.parametrize("fmt", ["xml", "python", "markdown", "lines"])
def test_a_type_repeated_among_alternatives_and_many_plain_objects_are_documented_whole(fmt):
    # a type met a second time among alternatives was named (an undefined "A"), typed "Any"
    # or lost its values; and the cap on nested objects cut the 65th plain object's fields
    params = {
        "$defs": {"A": {"type": "string", "enum": ["a", "b"]}, "my-enum": {"enum": ["x", "y"]}},
        "type": "object",
        "properties": {
            "twice": {"anyOf": [{"$ref": "#/$defs/A", "enum": ["a"]}, {"$ref": "#/$defs/A"}]},
            "mixed": {
                "anyOf": [
                    {"type": "array", "items": {"$ref": "#/$defs/my-enum"}},
                    {"$ref": "#/$defs/my-enum"},
                ]
            },
            **{
                f"p{i}": {
                    "type": "object",
                    "properties": {f"f{i}": {"type": "string"}},
                    "required": [f"f{i}"],
                }
                for i in range(70)
            },
        },
        "required": [f"p{i}" for i in range(70)],
    }
    doc = DOC_FORMATS[fmt]([Tool(name="t", description="T.", parameters=params)])
    assert "f69" in doc and "| A" not in doc and "| Any" not in doc
    if fmt != "lines":
        assert 'Enum values: ["a", "b"]' in doc


# --- integers past Python's digit limit -----------------------------------------------------

_DIGITS = "9" * 4301  # Python reads and writes no integer of more than 4,300 digits as text


@pytest.mark.parametrize(
    ("fmt", "text"),
    [
        ("hermes", '<tool_call>\n{"name": "f", "arguments": {"a": ' + _DIGITS + "}}\n</tool_call>"),
        ("json", '[{"function":"f","parameters":{"a":' + _DIGITS + "}}]"),
        ("python", f"[f(a={_DIGITS})]"),
        ("python", "[f(a=0x" + "f" * 4000 + ")]"),  # a hex literal Python reads but cannot write
        ("python", "[f(a=[0x" + "f" * 4000 + "])]"),
        (
            "xml_concise",
            f'<functions><function name="f"><param name="a" type="integer">{_DIGITS}</param>'
            "</function></functions>",
        ),
        (
            "xml_concise",
            f'<functions><function name="f"><param name="a" type="array">[{_DIGITS}]</param>'
            "</function></functions>",
        ),
    ],
    ids=["hermes", "json", "python", "python-hex", "python-hex-in-list", "xml-int", "xml-array"],
)
def test_an_integer_past_pythons_digit_limit_is_no_call(fmt: str, text: str) -> None:
    # hermes and json raised ValueError; python read a hex literal no writer could write back
    assert CALL_FORMATS[fmt].parse_calls(text, False) is None


@pytest.mark.parametrize("fmt", sorted(MODEL_CALL_FORMATS))
def test_an_integer_past_pythons_digit_limit_is_refused_when_written(fmt: str) -> None:
    for args in ({"a": 10**5000}, {"a": [{"b": -(10**5000)}]}):
        with pytest.raises(ProtocolError, match="more than 4,300 digits"):
            CALL_FORMATS[fmt].format_calls([("f", args)], False)


@pytest.mark.parametrize("fmt", ["xml_verbose", "xml_concise"])
def test_xml_refuses_nan_and_writes_infinities_as_python_does(fmt: str) -> None:
    # NaN was written as "nan", and the call read back as assistant text
    with pytest.raises(ProtocolError, match="NaN") as err:
        CALL_FORMATS[fmt].format_calls([("f", {"a": math.nan})], False)
    assert err.value.where == "f.a"
    args = {"a": math.inf, "b": -math.inf}
    text = CALL_FORMATS[fmt].format_calls([("f", args)], False)
    assert "1e999" in text and "inf" not in text
    assert CALL_FORMATS[fmt].parse_calls(text, False) == (None, [("f", args)])


def test_a_dict_key_given_twice_keeps_its_last_value_as_python_and_json_readers_do() -> None:
    # (an argument given twice is refused: Python itself refuses f(a=1, a=2), and every
    # format follows it, test_not_a_call_message)
    expected = (None, [("f", {"a": {"k": 2}})])
    assert CALL_FORMATS["python"].parse_calls("[f(a={'k': 1, 'k': 2})]", False) == expected
    assert CALL_FORMATS["python"].parse_calls("[f(a=1, a=2)]", False) is None
    hermes = '<tool_call>{"name": "f", "arguments": {"a": {"k": 1, "k": 2}}}</tool_call>'
    assert CALL_FORMATS["hermes"].parse_calls(hermes, False) == expected
    body = '[{"function": "f", "parameters": {"a": {"k": 1, "k": 2}}}]'
    assert CALL_FORMATS["json"].parse_calls(body, False) == expected


_REPLACED = '{"v": {"w": {"k": 1, "k": 2}, "w": 3}}'  # the repeating object is dropped in reading
_KEPT = {"v": {"w": 3}}


@pytest.mark.parametrize(
    ("fmt", "text", "expected"),
    [
        # a fresh {} for the second call's missing parameters took the id of the dropped
        # object, and the message "gave a key twice": no call
        (
            "json",
            f'[{{"function": "g", "parameters": {_REPLACED}}}, {{"function": "f"}}]',
            [("g", _KEPT), ("f", {})],
        ),
        (
            "json",
            f'[{{"function": "g", "parameters": {_REPLACED}}}, {{"function": "f"}}, '
            '{"function": "h", "parameters": {}}, {"function": "i"}]',
            [("g", _KEPT), ("f", {}), ("h", {}), ("i", {})],
        ),
        (
            "json",
            '[{"function": "g", "parameters": {"a": {"b": {"c": {"k": 1, "k": 2}, '
            '"c": {"k": {"j": 1, "j": 2}}}, "b": []}}}, {"function": "f"}, {"function": "h"}]',
            [("g", {"a": {"b": []}}), ("f", {}), ("h", {})],
        ),
        ("json", f'{{"function": "g", "parameters": {_REPLACED}}}', [("g", _KEPT)]),
        (
            "hermes",
            f'<tool_call>{{"name": "g", "arguments": {_REPLACED}}}</tool_call>\n'
            '<tool_call>{"name": "f", "arguments": {}}</tool_call>',
            [("g", _KEPT), ("f", {})],
        ),
    ],
)
def test_a_key_repeated_inside_a_replaced_value_leaves_every_call_whole(
    fmt: str, text: str, expected: list[tuple[str, dict[str, Any]]]
) -> None:
    assert CALL_FORMATS[fmt].parse_calls(text, False) == (None, expected)


@pytest.mark.parametrize(
    ("type_", "raw", "expected"),
    [
        ("float", "1.5", 1.5),
        ("float", " -2 ", -2.0),
        ("float", "1e999", math.inf),
        ("float", "+.5E-1", 0.05),
        ("float", "3.", 3.0),
        ("float", "1_0", None),  # float() read 10.0
        ("float", "١٢", None),  # Arabic-Indic digits: float() read 12.0, as integer refuses
        ("float", "nan", None),
        ("float", "inf", None),
        ("float", "0x10", None),
        ("integer", "١٢", None),
        ("dict", '{"k": 1, "k": 2}', {"k": 2}),  # JSON, as models write it: the last value
        ("dict", "{'k': 1, 'k': 2}", {"k": 2}),
        ("array", "[NaN, 1]", None),  # JSON's readers take NaN; no format writes it
        ("array", "[Infinity]", None),
        ("dict", '{"k": true}', {"k": True}),
    ],
)
def test_xml_values_are_read_as_written(type_: str, raw: str, expected: Any) -> None:
    text = (
        f'<functions><function name="f"><param name="a" type="{type_}">{raw}</param>'
        "</function></functions>"
    )
    found = CALL_FORMATS["xml_concise"].parse_calls(text, False)
    assert found == (None if expected is None else (None, [("f", {"a": expected})]))
