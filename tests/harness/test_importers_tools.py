"""Tools files: OpenAI (wrapped and bare), MCP (list and tools/list) and Anthropic formats."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from hsa.errors import HarnessValidationError, ImportFormatError
from hsa.harness.importers import detect_format, import_source
from hsa.harness.toolformats import (
    detect_tool_format,
    legal_name,
    tool_from_entry,
    tools_from_document,
)

SCHEMA = {"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]}
OPENAI = {
    "type": "function",
    "function": {"name": "search", "description": "d", "parameters": SCHEMA},
}
BARE = {"name": "search", "description": "d", "parameters": SCHEMA}
MCP = {"name": "search", "description": "d", "inputSchema": SCHEMA}
ANTHROPIC = {"name": "search", "description": "d", "input_schema": SCHEMA}


@pytest.mark.parametrize(
    ("entry", "fmt"), [(OPENAI, "openai"), (BARE, "openai"), (MCP, "mcp"), (ANTHROPIC, "anthropic")]
)
def test_every_format_gives_the_same_tool(entry, fmt):
    assert detect_tool_format(entry) == fmt
    tool, place = tool_from_entry(entry, where="$[0]")
    assert place.format == fmt
    assert tool.to_openai() == OPENAI


def test_mixed_document_and_mcp_tools_list(tmp_path):
    doc = {"tools": [MCP, {**ANTHROPIC, "name": "fetch"}, {**BARE, "name": "math.sqrt"}]}
    path = tmp_path / "my tools.json"
    path.write_text(json.dumps(doc))
    assert detect_format(path) == "tools"
    (harness,) = import_source(path).harnesses
    assert harness.id == "my-tools"
    assert [t.name for t in harness.tools] == ["search", "fetch", "math_sqrt"]
    assert harness.metadata["name_map"] == {"math_sqrt": "math.sqrt"}


@pytest.mark.parametrize(
    ("text", "says"),
    [
        # corpora published as JSON arrays of their own records (xLAM, Hermes, Glaive)
        (
            json.dumps([{"id": 0, "query": "q", "answers": "[]", "tools": "[]"}]),
            "a JSON array of records that are neither tool definitions nor chat rows (the "
            "first has answers, id, query, tools)",
        ),
        (json.dumps([{"conversations": [{"from": "human", "value": "hi"}]}]), "conversations"),
        ("", "is empty"),
        ("\n  \n", "is empty"),
        ("[{}]", "(the first has no fields)"),
        (json.dumps([{"id": 1, "description": "a mug", "price": 3}]), "description, id, price"),
        (json.dumps([{"id": "0", "description": {}, "user_scenario": {}}]), "a tau2 tasks file"),
    ],
)
def test_what_is_no_tools_file_is_not_read_as_one(tmp_path, text, says):
    path = tmp_path / "corpus.json"
    path.write_text(text)
    with pytest.raises(ImportFormatError) as refused:
        detect_format(path)
    assert refused.value.file == str(path) and says in refused.value.message
    assert "not a tool definition" not in refused.value.message


@pytest.mark.parametrize(
    "entry",
    [
        {"description": "d", "parameters": {"type": "object"}},
        {"inputSchema": {"type": "object"}},
        {"input_schema": {"type": "object"}},
    ],
)
def test_a_nameless_tool_is_refused_as_a_tool(tmp_path, entry):
    path = tmp_path / "tools.json"
    path.write_text(json.dumps([entry]))
    assert detect_format(path) == "tools"
    with pytest.raises(ImportFormatError, match="tool has no name"):
        import_source(path)


def test_an_empty_tools_file_is_said_to_be_empty(tmp_path):
    path = tmp_path / "tools.json"
    path.write_text("\n")
    with pytest.raises(ImportFormatError, match="is empty"):
        import_source(path, format="tools")


def test_a_byte_after_a_byte_order_mark_is_counted_as_the_line_reader_counts_it(tmp_path):
    path = tmp_path / "tools.json"
    path.write_bytes(b"\xef\xbb\xbf" + b'[{"name": "a\xff"}]')
    with pytest.raises(ImportFormatError) as detected:
        detect_format(path)
    with pytest.raises(ImportFormatError) as read:
        import_source(path, format="tools")
    assert detected.value.message == read.value.message
    assert read.value.message == "not UTF-8: invalid start byte at byte 12"


def test_a_byte_that_is_not_utf8_in_a_json_document_is_named_by_its_line(tmp_path):
    path = tmp_path / "tools.json"
    doc = json.dumps([{"name": "caf", "description": "d"}], indent=2)
    path.write_bytes(b"\xef\xbb\xbf" + doc.replace('"d"', '"caf\u00e9"').encode("latin-1"))
    with pytest.raises(ImportFormatError) as refused:
        import_source(path)
    assert refused.value.where == "line 4" and "not UTF-8" in refused.value.message


def test_a_byte_that_is_not_utf8_is_named_by_its_line(tmp_path):
    path = tmp_path / "chat.jsonl"
    row = {"messages": [{"role": "user", "content": "hi"}]}
    path.write_bytes(json.dumps(row).encode() + b"\n" + b'{"messages": [{"content": "caf\xe9"}]}\n')
    with pytest.raises(ImportFormatError) as refused:
        detect_format(path)
    assert refused.value.where == "line 2" and "not UTF-8" in refused.value.message


def test_an_mcp_tools_list_response_is_read_in_its_json_rpc_envelope(tmp_path):
    doc = {"jsonrpc": "2.0", "id": 1, "result": {"tools": [MCP], "nextCursor": None}}
    path = tmp_path / "tools.json"
    path.write_text(json.dumps(doc))
    assert [t.name for t in import_source(path).harnesses[0].tools] == ["search"]


def test_legal_names_never_steal_a_source_spelling():
    # "a.b" would become "a_b", but a tool is already called that
    tools, name_map = tools_from_document([{**BARE, "name": "a.b"}, {**BARE, "name": "a_b"}])
    assert tools[1].name == "a_b"
    assert tools[0].name != "a_b" and name_map == {tools[0].name: "a.b"}
    long = "x" * 80
    assert len(legal_name(long, set())) == 64
    assert legal_name(long, set()) != legal_name(long + "y", set())


def test_a_name_with_a_final_newline_is_not_api_legal():
    # Python's "$" matches before a final newline: "get_order\n" was kept as a legal name
    tools, name_map = tools_from_document(
        [{**BARE, "name": "get_order\n"}, {**BARE, "name": "get_order"}]
    )
    assert tools[1].name == "get_order"
    assert "\n" not in tools[0].name and name_map == {tools[0].name: "get_order\n"}


def test_missing_parameters_and_type_are_filled():
    doc = [{"name": "ping", "description": "p"}, {"name": "echo", "parameters": {"properties": {}}}]
    tools, _ = tools_from_document(doc)
    assert tools[0].parameters == {"type": "object", "properties": {}}
    assert tools[1].parameters == {"type": "object", "properties": {}}


@pytest.mark.parametrize(
    ("doc", "where", "reason"),
    [
        ([{"description": "no name", "parameters": SCHEMA}], "$[0]", "tool has no name"),
        ([{"type": "function", "function": {"parameters": SCHEMA}}], "$[0].function", "no name"),
        ([{**BARE, "parameters": "string"}], "$[0].parameters", "must be a JSON Schema object"),
        ([{**BARE, "parameters": {"type": "array"}}], "$[0].parameters.type", "object schema"),
        ([{**MCP, "inputSchema": []}], "$[0].inputSchema", "JSON Schema object"),
        ([BARE, BARE], "$[1]", "duplicate tool name"),
        ([42], "$[0]", "expected an object"),
        ({"nothing": 1}, "$", "a tools document must be"),
        (  # its schema is Anthropic's, not in the file
            [BARE, {"type": "text_editor_20250124", "name": "str_replace_editor"}],
            "$[1]",
            "a built-in tool of its provider (type 'text_editor_20250124'",
        ),
        # other shapes of file: each problem at the file's own path
        ({"tools": [MCP, {"inputSchema": SCHEMA}]}, "$.tools[1]", "tool has no name"),
        (
            {"jsonrpc": "2.0", "result": {"tools": [MCP, {**MCP, "inputSchema": 3}]}},
            "$.result.tools[1].inputSchema",
            "must be a JSON Schema object",
        ),
        ({"tools": [MCP, MCP]}, "$.tools[1]", "duplicate tool name 'search' (also at $.tools[0])"),
        ({**MCP, "title": 5, "description": ""}, "$.title", "title of tool 'search' must be"),
    ],
)
def test_malformed_tools_are_refused_with_their_path(tmp_path, doc, where, reason):
    path = tmp_path / "tools.json"
    path.write_text(json.dumps(doc))
    with pytest.raises(ImportFormatError) as err:
        import_source(path, format="tools")
    assert (err.value.file, err.value.where) == (str(path), where)
    assert reason in err.value.message


def test_a_bound_methods_self_is_dropped_and_a_typed_self_kept(tmp_path):
    properties = {"self": {"title": "Self"}, **SCHEMA["properties"]}
    receiver = {"type": "object", "properties": properties, "required": ["self", "q"]}
    typed = {"type": "object", "properties": {"self": {"type": "string"}}, "required": ["self"]}
    path = tmp_path / "tools.json"
    entries = [dict(BARE, parameters=receiver), dict(BARE, name="me", parameters=typed)]
    path.write_text(json.dumps(entries))
    (harness,) = import_source(path).harnesses
    assert harness.tool("search").parameters == SCHEMA
    assert harness.tool("me").parameters == typed
    note = (
        "dropped the untyped 'self' parameter that tools.json lists for 1 tool(s) (search): it "
        "is the Python method receiver, never a model argument"
    )
    assert harness.metadata["import_notes"] == [note]
    assert import_source(path).notes == (note,)


def test_renamed_tools_are_said_in_the_notes_and_import_json(tmp_path):
    path = tmp_path / "tools.json"
    entries = [dict(BARE, name="search.flights"), dict(BARE, name="café"), BARE]
    path.write_text(json.dumps(entries))
    note = (
        "2 tool name(s) are not legal in an OpenAI API request (letters, digits, _ and - only, "
        "at most 64 characters) and were renamed: 'search.flights' -> 'search_flights', 'café' "
        "-> 'cafe'; the harness keeps the source names in its metadata (name_map)"
    )
    assert import_source(path).notes == (note,)
    code = "from hsa.cli import main; main()"
    out = tmp_path / "out"
    args = [sys.executable, "-c", code, "harness", "import", str(path), "--out", str(out)]
    done = subprocess.run(args, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert note in done.stdout + done.stderr
    assert json.loads((out / "import.json").read_text())["notes"] == [note]


@pytest.mark.parametrize(
    ("parameters", "where", "says"),
    [
        ({"type": "object", "properties": "a"}, "properties", "'a' is not of type 'object'"),
        ({"type": "object", "properties": 5}, "properties", "5 is not of type 'object'"),
        (  # a receiver to drop beside it: the required list is not read as one
            {"type": "object", "properties": {"self": {"title": "Self"}}, "required": 5},
            "required",
            "5 is not of type 'array'",
        ),
        (  # nor is a string split into its characters
            {"type": "object", "properties": {"self": {"title": "Self"}}, "required": "ab"},
            "required",
            "'ab' is not of type 'array'",
        ),
    ],
)
def test_a_malformed_schema_is_one_error_naming_its_path(tmp_path, parameters, where, says):
    path = tmp_path / "p.json"
    path.write_text(json.dumps([{"name": "f", "description": "x", "parameters": parameters}]))
    with pytest.raises(HarnessValidationError) as err:
        import_source(path)
    (problem,) = err.value.problems
    assert problem.file == str(path)
    assert problem.where == f"$[0].parameters.{where}"  # the file's path, as validate gives
    assert problem.message == says


BAD_X = {"type": "object", "properties": {"x": {"type": "int"}}}


@pytest.mark.parametrize(
    ("doc", "where"),
    [
        ([MCP, {**MCP, "name": "b", "inputSchema": BAD_X}], "$[1].inputSchema"),
        ({"tools": [MCP, {**MCP, "name": "b", "inputSchema": BAD_X}]}, "$.tools[1].inputSchema"),
        (  # an MCP tools/list response
            {"jsonrpc": "2.0", "id": 1, "result": {"tools": [{**MCP, "inputSchema": BAD_X}]}},
            "$.result.tools[0].inputSchema",
        ),
        ({**ANTHROPIC, "input_schema": BAD_X}, "$.input_schema"),  # one tool, on its own
        (
            {"tools": [{"type": "function", "function": {**BARE, "parameters": BAD_X}}]},
            "$.tools[0].function.parameters",
        ),
    ],
)
def test_a_schema_problem_is_at_the_files_own_path_in_every_shape(tmp_path, doc, where):
    # the import named the harness it made ("harness tools: $.tools[0].parameters..."), a
    # document the user never wrote; the path is the file's, as hsa harness validate gives it
    path = tmp_path / "tools.json"
    path.write_text(json.dumps(doc))
    with pytest.raises(HarnessValidationError) as err:
        import_source(path)
    (problem,) = err.value.problems
    assert (problem.file, problem.where) == (str(path), f"{where}.properties.x.type")
    assert problem.message.startswith("not a valid JSON Schema: 'int' is not valid")


def test_invalid_json_names_line(tmp_path):
    path = tmp_path / "tools.json"
    path.write_text('[\n  {"name": "a",}\n]')
    with pytest.raises(ImportFormatError) as err:
        import_source(path)
    assert err.value.where == "line 2" and "invalid JSON" in err.value.message


def test_cli_imports_a_real_tools_file_and_validates(external, tmp_path):
    code = "from hsa.cli import main; main()"
    src = external / "tau2" / "retail" / "tools.json"
    out = tmp_path / "retail-tools"
    args = [sys.executable, "-c", code, "harness", "import", str(src), "--out", str(out)]
    done = subprocess.run(args, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    (harness,) = import_source(src).harnesses
    assert harness.id == "tools" and len(harness.tools) == 16
    args = [sys.executable, "-c", code, "harness", "validate", str(out)]
    assert subprocess.run(args, capture_output=True, text=True).returncode == 0


def test_mcp_title_annotations_and_output_schema_survive_a_round_trip(tmp_path):
    from hsa.harness import load_harness, render, save_harness
    from hsa.harness.model import Protocol
    from hsa.harness.toolformats import tools_to_mcp

    # An MCP Tool object with every field of the spec, and a name only MCP allows.
    mcp = {
        "name": "orders.get",
        "title": "Get order",
        "description": "Fetch one order.",
        "inputSchema": SCHEMA,
        "outputSchema": {"type": "object", "properties": {"status": {"type": "string"}}},
        "annotations": {
            "title": "Get order (read-only)",
            "readOnlyHint": True,
            "destructiveHint": False,
            "idempotentHint": True,
            "openWorldHint": False,
        },
    }
    path = tmp_path / "server.json"
    path.write_text(json.dumps({"tools": [mcp]}))
    (harness,) = import_source(path).harnesses
    (tool,) = harness.tools
    assert tool.extra == {k: mcp[k] for k in ("title", "outputSchema", "annotations")}
    reloaded = load_harness(save_harness(harness, tmp_path / "h"))
    assert reloaded == harness
    assert tools_to_mcp(reloaded.tools, reloaded.metadata["name_map"]) == [mcp]
    # what a model is sent carries none of it: keys the OpenAI API accepts only
    (sent,) = render([], reloaded).tools
    assert sent == {
        "type": "function",
        "function": {"name": "orders_get", "description": "Fetch one order.", "parameters": SCHEMA},
    }
    for doc_format in ("json", "xml", "python", "markdown"):
        text = reloaded.replace(protocol=Protocol(name="text", doc_format=doc_format))
        prompt = render([], text).messages[0]["content"]
        assert "orders_get" in prompt and "readOnlyHint" not in prompt, doc_format


def test_schemas_of_other_drafts_and_recursive_types_are_imported_as_they_are(tmp_path):
    from hsa.harness.arguments import ArgumentChecker
    from hsa.harness.validate import harness_problems

    draft_07 = {  # what zod-to-json-schema writes for a tuple, for MCP servers
        "$schema": "http://json-schema.org/draft-07/schema#",
        "type": "object",
        "properties": {"at": {"type": "array", "items": [{"type": "number"}, {"type": "number"}]}},
    }
    draft_04 = {
        "$schema": "http://json-schema.org/draft-04/schema#",
        "type": "object",
        "properties": {"n": {"type": "number", "minimum": 0, "exclusiveMinimum": True}},
    }
    tree = {  # a pydantic model that holds itself
        "type": "object",
        "properties": {
            "label": {"type": "string"},
            "children": {"type": "array", "items": {"$ref": "#"}},
        },
    }
    spaced = {
        "type": "object",
        "$defs": {"My Type": {"type": "string"}},
        "properties": {"a": {"$ref": "#/$defs/My%20Type"}},
    }
    tools = [
        {"name": name, "inputSchema": schema}
        for name, schema in [("move", draft_07), ("scale", draft_04), ("tree", tree), ("a", spaced)]
    ]
    path = tmp_path / "server.json"
    path.write_text(json.dumps({"tools": tools}))
    (harness,) = import_source(path).harnesses
    assert [t.parameters for t in harness.tools] == [draft_07, draft_04, tree, spaced]
    assert not harness_problems(harness)
    checker = ArgumentChecker(harness.tools)
    assert checker.problem("move", {"at": [1, 2]}) is None
    assert checker.problem("scale", {"n": 0}) is not None  # draft-04: true excludes the minimum
    assert checker.problem("tree", {"label": "a", "children": [{"label": 1}]}) is not None
    assert checker.problem("a", {"a": 1}) is not None


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ("[" * 5000 + "]" * 5000, "nested too deeply to read"),
        ('[{"name": "a", "parameters": {"maximum": 1' + "0" * 5000 + "}}]", "4,300 digits"),
    ],
)
def test_json_past_what_python_reads_is_one_error_naming_the_file(tmp_path, text, why):
    # valid JSON that Python's reader refuses (a RecursionError, a ValueError) was a traceback
    from hsa.errors import HsaError
    from hsa.harness import load_harness

    path = tmp_path / "tools.json"
    path.write_text(text)
    with pytest.raises(ImportFormatError, match=why) as caught:
        import_source(path)
    assert caught.value.file == str(path)
    with pytest.raises(HsaError, match=why):
        load_harness(path)


def test_a_key_given_twice_is_refused_naming_the_file(tmp_path):
    # JSON readers keep the last and drop the other: the first description and the first
    # schema of `a` went without a word
    path = tmp_path / "tools.json"
    path.write_text(
        '[{"type": "function", "function": {"name": "f", "description": "first", '
        '"description": "second", "parameters": {"type": "object", "properties": '
        '{"a": {"type": "string"}, "a": {"type": "integer"}}}}}]'
    )
    with pytest.raises(ImportFormatError, match="the key 'a' is given twice") as err:
        import_source(path)  # (the inner object is read first)
    assert err.value.file == str(path)


def test_the_self_note_names_the_file_it_was_read_from(tmp_path, external):
    path = tmp_path / "mytools.json"
    path.write_text((external / "tau2" / "retail" / "tools.json").read_text("utf-8"))
    [note] = import_source(path).notes
    assert note.startswith("dropped the untyped 'self' parameter that mytools.json lists for ")
