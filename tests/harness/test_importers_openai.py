"""OpenAI chat JSONL import: the bundled example, derived harnesses, --harness, bad rows."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from hsa.errors import HarnessValidationError, HsaError, ImportFormatError
from hsa.harness import (
    Harness,
    HookFired,
    SkillLoad,
    ToolCall,
    ToolResult,
    load_harness,
    render,
    save_harness,
    trajectories_from_table,
)
from hsa.harness.importers import detect_format, import_source, write_import
from hsa.harness.model import Hook, Protocol, Skill, Tool
from hsa.harness.parse import parse
from hsa.harness.prompt import system_prompt
from tests.apart import runs_apart

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "chat" / "support.jsonl"


def hsa(*args: str) -> subprocess.CompletedProcess[str]:
    code = "from hsa.cli import main; main()"
    return subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True)


@pytest.fixture(scope="module")
def example():
    return import_source(EXAMPLE)


def rows() -> list[dict]:
    return [json.loads(line) for line in EXAMPLE.read_text("utf-8").splitlines()]


def test_example_groups_rows_by_tools_and_system_message(example):
    assert detect_format(EXAMPLE) == "openai-jsonl"
    assert [h.id for h in example.harnesses] == ["support-1", "support-2"]
    assert [len(h.tools) for h in example.harnesses] == [6, 2]
    assert len(example.trajectories) == len(example.tasks) == len(rows()) >= 10
    by_harness = {t.harness_id for t in example.trajectories}
    assert by_harness == {"support-1", "support-2"}
    assert [t.id for t in example.trajectories] == [r["id"] for r in rows()]


def _canonical(messages: list[dict], ids: dict[str, str]) -> list[dict]:
    """Messages with call ids renamed; an assistant's empty and missing content are alike."""
    out = []
    for message in messages:
        message = dict(message)
        if message["role"] == "assistant" and message.get("tool_calls"):
            message["content"] = message.get("content") or None
            message["tool_calls"] = [
                {**c, "id": ids.get(c["id"], c["id"])} for c in message["tool_calls"]
            ]
        if message["role"] == "tool":
            message["tool_call_id"] = ids.get(message["tool_call_id"], message["tool_call_id"])
        out.append(message)
    return out


def test_rendering_under_the_derived_harness_gives_back_every_row(example):
    harnesses = {h.id: h for h in example.harnesses}
    for row, trajectory in zip(rows(), example.trajectories, strict=True):
        original = trajectory.metadata["call_ids"]
        ids = {old: f"call_{i}" for i, old in enumerate(original)}
        conversation = render(trajectory.events, harnesses[trajectory.harness_id])
        assert _canonical(conversation.messages, {}) == _canonical(row["messages"], ids)
        assert conversation.tools == row["tools"]


def test_call_ids_are_normalised_and_parallel_calls_kept(example):
    trajectory = next(t for t in example.trajectories if t.id == "support-0004")
    calls = [e for e in trajectory.events if isinstance(e, ToolCall)]
    assert [c.call_id for c in calls] == ["call_0", "call_1", "call_2"]
    assert trajectory.metadata["call_ids"] == ["call_p0", "call_p1", "call_p2"]
    results = [e.call_id for e in trajectory.events if isinstance(e, ToolResult)]
    assert results == ["call_0", "call_1", "call_2"]
    task = next(t for t in example.tasks if t["id"] == "support-0004")
    assert task["env"] == "jsonl" and task["harness_id"] == "support-1"
    assert task["ground_truth"] == {"trajectory": "support-0004"}


def _files(root: Path) -> list[Path]:
    return sorted(p.relative_to(root) for p in root.rglob("*") if p.is_file())


def test_written_import_round_trips_and_is_deterministic(example, tmp_path):
    first = write_import(example, tmp_path / "a")
    write_import(import_source(EXAMPLE), tmp_path / "b")
    names = sorted(
        p.relative_to(tmp_path / "a") for p in (tmp_path / "a").rglob("*") if p.is_file()
    )
    assert names == sorted(
        p.relative_to(tmp_path / "b") for p in (tmp_path / "b").rglob("*") if p.is_file()
    )
    for name in names:
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes(), name
    assert tmp_path / "a" / "trajectories.parquet" in first
    table = pq.read_table(tmp_path / "a" / "trajectories.parquet")
    assert trajectories_from_table(table) == list(example.trajectories)
    tasks = [json.loads(line) for line in (tmp_path / "a" / "tasks.jsonl").read_text().splitlines()]
    assert tasks == list(example.tasks)
    assert load_harness(tmp_path / "a" / "support-1") == example.harnesses[0]


def test_reimport_replaces_an_earlier_import_but_nothing_else(example, tmp_path):
    out = tmp_path / "out"
    write_import(example, out)
    (out / "stale.txt").write_text("left from before")
    write_import(example, out)
    assert not (out / "stale.txt").exists()
    other = tmp_path / "mine"
    other.mkdir()
    (other / "notes.txt").write_text("keep me")
    with pytest.raises(ImportFormatError) as err:
        write_import(example, other)
    assert "refusing to overwrite" in err.value.message
    assert (other / "notes.txt").read_text() == "keep me"


@pytest.mark.parametrize(
    "marker", ['{"imports": ["a", "b"]}', "not JSON", '["format", "layout", "counts"]']
)
def test_a_file_named_import_json_is_no_earlier_import(example, tmp_path, marker):
    # any import.json let the folder be replaced: a project's main.py and src/ were deleted
    mine = tmp_path / "mine"
    (mine / "src").mkdir(parents=True)
    (mine / "import.json").write_text(marker)
    (mine / "src" / "notes.txt").write_text("keep me")
    with pytest.raises(ImportFormatError, match="refusing to overwrite"):
        write_import(example, mine)
    assert (mine / "src" / "notes.txt").read_text() == "keep me"


def _row(*messages, tools=None) -> dict:
    return {"messages": list(messages), "tools": tools or []}


CALL = {"id": "c1", "type": "function", "function": {"name": "echo", "arguments": '{"x": 1}'}}
ECHO = {"type": "function", "function": {"name": "echo", "parameters": {"type": "object"}}}


@pytest.mark.parametrize(
    ("row", "where", "reason"),
    [
        (
            _row(
                {"role": "assistant", "content": None, "tool_calls": [CALL]},
                {"role": "tool", "tool_call_id": "c9", "content": "1"},
                tools=[ECHO],
            ),
            "line 2: $.messages[1].tool_call_id",
            "answers no earlier tool call",
        ),
        (
            _row({"role": "robot", "content": "a"}),
            "line 2: $.messages[0].role",
            "unknown role",
        ),
        ({"no": "messages"}, "line 2", '"messages" list'),
        (
            _row(
                {"role": "assistant", "content": None, "tool_calls": [CALL]},
                {"role": "function", "name": "echo", "content": "1"},
                tools=[ECHO],
            ),
            "line 2: $.messages[1]",
            "answers no earlier function_call",
        ),
        (
            _row(
                {"role": "assistant", "function_call": {"name": "echo", "arguments": "{}"}},
                {"role": "function", "name": "other", "content": "1"},
                tools=[ECHO],
            ),
            "line 2: $.messages[1].name",
            "the function_call it answers calls 'echo'",
        ),
        (
            {**_row({"role": "user", "content": "a"}, tools=[ECHO]), "functions": [ECHO]},
            "line 2: $.functions",
            'in "tools" or, in the older form, "functions", not both',
        ),
        *(
            (
                _row(
                    {
                        "role": "assistant",
                        "content": None,
                        "tool_calls": [
                            {**CALL, "function": {"name": "echo", "arguments": arguments}}
                        ],
                    },
                    tools=[ECHO],
                ),
                "line 2: $.messages[0].tool_calls[0].function.arguments.n",
                reason,
            )
            for arguments, reason in [
                # (NaN, Infinity and 1e309 leave their row out: a model wrote them)
                ('{"n": "\\ud800"}', "a lone surrogate"),
            ]
        ),
        (
            _row({"role": "tool", "tool_call_id": "c0", "content": "half \ud83d"}),
            "line 2: $.messages[0].content",
            "a lone surrogate",
        ),
        (
            {**_row({"role": "user", "content": "a"}), "meta": {"score": float("nan")}},
            "line 2: $.meta.score",
            "NaN or Infinity",
        ),
    ],
)
def test_bad_rows_name_file_line_and_path(tmp_path, row, where, reason):
    path = tmp_path / "chat.jsonl"
    good = _row({"role": "user", "content": "fine"})
    path.write_text(json.dumps(good) + "\n" + json.dumps(row) + "\n")
    with pytest.raises(ImportFormatError) as err:
        import_source(path)
    assert (err.value.file, err.value.where) == (str(path), where)
    assert reason in err.value.message


def test_rows_whose_calls_their_own_schema_refuses_are_kept_and_said(tmp_path):
    # kept as the corpus has them (valid chat data), but never silently: a row trains on the
    # call as written
    tool = {
        "type": "function",
        "function": {
            "name": "lookup",
            "description": "Find a customer.",
            "parameters": {
                "type": "object",
                "properties": {"email": {"type": "string"}},
                "required": ["email"],
                "additionalProperties": False,
            },
        },
    }

    def row(arguments: dict) -> dict:
        call = {"id": "a", "type": "function", "function": {"name": "lookup"}}
        call["function"]["arguments"] = json.dumps(arguments)
        messages = [
            {"role": "user", "content": "find me"},
            {"role": "assistant", "content": None, "tool_calls": [call]},
            {"role": "tool", "tool_call_id": "a", "content": "found"},
            {"role": "assistant", "content": "done"},
        ]
        return {"messages": messages, "tools": [tool]}

    rows = [row({"email": "a@b.c"}), row({"email": 42}), row({}), row({"email": "x", "y": 1})]
    path = tmp_path / "chat.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    result = import_source(path)
    assert len(result.trajectories) == 4
    assert result.notes == (
        "3 row(s) kept with a call its tool's schema refuses (as the file has it; their rows "
        "train on it as written, and hsa rules check skips such calls): line(s) 2, 3, 4",
    )
    from hsa.datasets.source import open_source

    assert open_source(path).notes == result.notes  # what hsa augment reads, and says


def test_valid_rows_a_row_cannot_hold_are_left_out_and_said_and_the_rest_kept(tmp_path):
    image = {"type": "image_url", "image_url": {"url": "https://example.com/a.png"}}
    rows = [
        _row({"role": "user", "content": "fine"}),
        _row({"role": "assistant", "content": None, "tool_calls": [CALL]}),  # echo not listed
        _row({"role": "user", "content": "a"}, {"role": "system", "content": "Be brief."}),
        _row({"role": "user", "content": [{"type": "text", "text": "what is it?"}, image]}),
        _row(
            {"role": "user", "content": "hi", "name": "alice"},
            {"role": "assistant", "content": "hello", "name": "bot", "audio": None},
        ),
    ]
    path = tmp_path / "chat.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    result = import_source(path)
    assert [t.metadata["line"] for t in result.trajectories] == [1, 5]
    notes = "\n".join(result.notes)
    assert "1 row(s) left out: a call to a tool the row's tools do not list" in notes
    assert "1 row(s) left out: a system or developer message after the first" in notes
    assert "1 row(s) left out: content other than text (an image" in notes
    assert "message fields a row does not hold, not kept: name (2 message(s))" in notes


def test_calls_written_as_text_leave_the_row_out_and_are_said(tmp_path):
    # Hermes-style corpora write calls in the assistant's text: hsa reads calls from
    # tool_calls, and a variant would rename the tools around calls it cannot see
    hermes = '<tool_call>\n{"name": "echo", "arguments": {"x": 1}}\n</tool_call>'
    rows = [
        _row({"role": "user", "content": "a"}, {"role": "assistant", "content": hermes}),
        _row(  # no tools listed (the system prompt's <tools> block): the tags tell
            {"role": "user", "content": "b"}, {"role": "assistant", "content": hermes}
        ),
        _row({"role": "user", "content": "c"}, {"role": "assistant", "content": "[echo(x=1)]"}),
        # a listed tool's call in an untagged format; and text that only looks like one
        _row({"role": "user", "content": "d"}, {"role": "assistant", "content": "[other(x=1)]"}),
        _row({"role": "user", "content": "e"}, {"role": "assistant", "content": "ok [1, 2]"}),
        _row({"role": "user", "content": "f"}, {"role": "assistant", "content": "Use <tool_call>"}),
    ]
    for prose in (  # about the tags, not calls: kept
        "Wrap each call in <tool_call> and </tool_call> tags.",
        "Use `<tool_call>{...}</tool_call>` around the JSON.",
        "The regex `<tool_call>(.*?)</tool_call>` reads the body.",
    ):
        rows.append(_row({"role": "user", "content": "h"}, {"role": "assistant", "content": prose}))
    # tagged bodies Hermes' own parser would not read: Python-dict style, arguments as a
    # string, text after the block
    for body in (
        "<tool_call>\n{'arguments': {'x': 1}, 'name': 'echo'}\n</tool_call>",
        '<tool_call>\n{"name": "echo", "arguments": "{\\"x\\": 1}"}\n</tool_call>',
        hermes + "\nAnything else?",
        "<TOOLCALL>[echo(x=1)]</TOOLCALL>",
        hermes.removesuffix("</tool_call>"),  # cut off before its closing tag
    ):
        rows.append(_row({"role": "user", "content": "g"}, {"role": "assistant", "content": body}))
    rows[0]["tools"] = rows[2]["tools"] = rows[3]["tools"] = [ECHO]
    path = tmp_path / "chat.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    result = import_source(path)
    assert [t.metadata["line"] for t in result.trajectories] == [4, 5, 6, 7, 8, 9]
    notes = "\n".join(result.notes)
    assert "8 row(s) left out: assistant text that writes calls in a text call format" in notes
    assert "line(s) 1, 2, 3, 10, 11, 12, 13, 14" in notes


WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
    },
}


PYTHON = {
    "type": "function",
    "function": {
        "name": "python",
        "parameters": {"type": "object", "properties": {"code": {"type": "string"}}},
    },
}


def test_calls_to_a_listed_tool_in_other_corpora_s_shapes_leave_the_row_out(tmp_path):
    # calls written as text in shapes hsa has no format for: a variant would rename the tool
    # and leave the call as written, so the row is left out like a Hermes-tagged one
    call = '{"name": "get_weather", "arguments": {"city": "Paris"}}'
    definition = '{"name": "get_weather", "description": "w", "parameters": {"type": "object"}}'
    definitions = ", ".join([definition] * 40)
    after_definitions = [
        '{"arguments": {"city": "Paris"}, "name": "get_weather"}',
        '{"name": "get_weather", "arguments": \'{"city": "Paris"}\'}',
        '{"name": "get_weather", "parameters": {"city": "Paris"}}',
    ]
    written = [
        '<functioncall> {"name": "get_weather", "arguments": "{\\"city\\": \\"Paris\\"}"}',
        '<functioncall> {"name": "get_weather", "arguments": \'{"city": "Paris"}\'}',
        call,
        'Sure. {"name": "get_weather", "parameters": {"city": "Paris"}}',
        f"[TOOL_CALLS] [{call}]",
        '[TOOL_CALLS]get_weather[ARGS]{"city": "Paris"}',
        '[TOOL_CALLS]get_weather{"city": "Paris"}[TOOL_CALLS]python{"code": "1"}',
        f"Let me check.\n```json\n{call}\n```",
        '<function=get_weather>{"city": "Paris"}</function>',
        f"[{call}, {call}]",
        '{"arguments": {"city": "Paris"}, "name": "get_weather"}',
        '{"action": "get_weather", "action_input": {"city": "Paris"}}',
        "Thought: I need the weather.\nAction: get_weather\nAction Input: Paris",
        "Action: get_weather[Paris]",
        "Thought: I need the weather.\r\nAction: get_weather\r\nAction Input: Paris",
        "Thought 1: I need the weather.\nAction 1: get_weather[Paris]",
        "  Action: `get_weather`\nObservation: sunny",
        # arguments first whose strings hold a brace with no match: the braces are counted
        # outside strings, and a failed reading tries the enclosing brace
        '{"arguments": {"q": "a } b"}, "name": "get_weather"}',
        '{"arguments": {"code": "if x {"}, "name": "python"}',
        '{"arguments": {"code": "d = {1: 2}\\nprint(d[1])}"}, "name": "python"}',
        '{"action_input": {"q": "}"}, "action": "get_weather"}',
        'He said "it is {"name": "get_weather", "parameters": {"city": "Paris"}}',
        # after many tools' definitions (each read once, none a failed reading)
        *(f"{definitions} {call}" for call in after_definitions),
        *(f"[{definitions}, {call}]" for call in after_definitions),
    ]
    kept = [  # prose that names the tool, other tools' calls, a tool's definition
        "I used get_weather and it says sunny {as always}.",
        "Call get_weather with the city, e.g. {city}.",
        'The tool {"name": "get_weather", "description": "w", "parameters": {"type": "object"}}',
        '{"name": "get_weather", "parameters": {"type": "object", "properties": {}}}',
        '{"name": "other_tool", "arguments": {"city": "Paris"}}',
        "<function=other_tool>{}</function>",
        '[TOOL_CALLS]other_tool{"city": "Paris"}',
        "Action: get_weather is what I took.",
        "Here is what I recommend.\nAction: get_weather\nReason: it is quick.",
        "Thought: no.\nThe Action: get_weather[Paris] line is what an agent writes.",
        'My name is {"name": "get_weather"} and no arguments.',
    ]
    rows = [
        _row(
            {"role": "user", "content": "Weather in Paris?"},
            {"role": "assistant", "content": text},
            tools=[WEATHER, PYTHON],
        )
        for text in written + kept
    ]
    # with no tools listed, such JSON is text (no listed tool to call)
    rows.append(_row({"role": "user", "content": "q"}, {"role": "assistant", "content": call}))
    path = tmp_path / "chat.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    result = import_source(path)
    lines = [t.metadata["line"] for t in result.trajectories]
    assert lines == list(range(len(written) + 1, len(rows) + 1))
    notes = "\n".join(result.notes)
    left = f"{len(written)} row(s) left out: assistant text that writes calls in a text call"
    assert left in notes


def test_text_is_read_as_json_only_where_an_object_names_a_listed_tool(monkeypatch):
    # a reading that fails costs the text's length: reading at every object made a text of
    # many (a code fence of dict literals, with a tool called python) quadratic to look at
    from hsa.harness.importers.openai_jsonl import _calls_in_text

    reads: list[int] = []

    class Counting(json.JSONDecoder):
        def raw_decode(self, s: str, idx: int = 0) -> tuple[object, int]:
            reads.append(idx)
            return super().raw_decode(s, idx)

    monkeypatch.setattr(json, "JSONDecoder", Counting)
    tools = {"python", "get_weather"}
    fence = "\n".join(f'c{i} = {{"name": "x{i}", "value": {{"v": "python"}}}}' for i in range(2000))
    assert not _calls_in_text(f"```python\n{fence}\n```", tools)
    assert reads == []
    tool = '{"name": "get_weather", "description": "w", "parameters": {"type": "object"}}'
    call = '{"arguments": {"city": "Paris"}, "name": "get_weather"}'
    assert _calls_in_text(f"The tools: [{tool}, {tool}]\nThen {call}", tools)
    assert len(reads) == 3  # each definition, then the call (from its opening brace)
    reads.clear()
    text = " ".join([tool] * 500)
    assert not _calls_in_text(text, tools)
    # each definition read once, none read again: linear, however many name a listed tool
    assert sorted(set(reads)) == [i * (len(tool) + 1) for i in range(500)]
    assert len(reads) <= 501  # (and a call format's own look at the text's start)
    reads.clear()
    broken = tool.replace('"object"', "")  # a reading that fails costs the text's length
    assert not _calls_in_text(" ".join([broken] * 500), tools)
    assert len(reads) < 50  # bounded, however many fail
    reads.clear()
    glaive = '{"name": "get_weather", "arguments": \'{"city": "Paris"}\'}'
    assert _calls_in_text(" ".join([broken] * 500) + f" {glaive}", tools)
    assert len(reads) < 50  # Glaive's shape needs no reading


def test_react_marks_are_found_in_one_pass_over_spaces(tmp_path):
    # "Action" then 60,000 spaces took 18 s to import: `Action[ \t]*\d*[ \t]*:` tried every
    # split of the spaces between its two runs (quadratic; 300,000 spaces, hours). Run apart,
    # so that a quadratic pattern fails at the time limit rather than holding the suite
    from hsa.harness.importers.openai_jsonl import _calls_in_text

    tools = {"get_weather"}
    assert _calls_in_text("Action 2 :\tget_weather[Paris]", tools)
    assert _calls_in_text("Thought 3 : hm\nAction\t:  get_weather", tools)
    assert not _calls_in_text("Action 2 3: get_weather[Paris]", tools)
    probe = (
        "from hsa.harness.importers.openai_jsonl import _calls_in_text as f\n"
        "s = ' ' * 300_000\n"
        "assert not f('Action' + s + 'x', {'x'})\n"
        "assert not f('Action' + s + 'Input' + s + 'x', {'x'})\n"
        # each line tried once: a match tried at every 'Action' of a line rescanned the line
        "assert not f('Action:a' * 40_000 + ' x', {'a'})\n"
    )
    runs_apart(probe)


def test_an_assistant_s_text_then_its_calls_in_a_message_of_their_own_are_said(tmp_path):
    # the row shows them as one assistant message (hsa's events hold a turn's text and its
    # calls as one turn): counted in the notes, not done silently
    text = {"role": "assistant", "content": "Let me check."}
    calls = {"role": "assistant", "content": None, "tool_calls": [CALL]}
    result_ = {"role": "tool", "tool_call_id": "c1", "content": "1"}
    rows = [
        _row({"role": "user", "content": "q"}, text, calls, result_, tools=[ECHO]),
        _row({"role": "user", "content": "q"}, text, text, tools=[ECHO]),  # two texts: as read
        _row(  # text and calls in one message
            {"role": "user", "content": "q"},
            {**calls, "content": "Let me check."},
            result_,
            tools=[ECHO],
        ),
    ]
    path = tmp_path / "chat.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    result = import_source(path)
    assert len(result.trajectories) == 3
    assert result.notes == (
        "1 row(s) had an assistant message of text followed by one of tool calls alone: their "
        "rows show the two as one assistant message (the text, then the calls), since hsa's "
        "events hold a turn's text and its calls as one turn",
    )


def test_an_audio_reply_leaves_the_row_out_and_an_empty_id_is_no_id(tmp_path):
    spoken = {"role": "assistant", "content": None, "audio": {"id": "audio_abc123"}}
    rows = [
        _row({"role": "user", "content": "Say hi"}, spoken),
        _row({"role": "user", "content": "Say hi"}, {**spoken, "content": ""}),
        {**_row({"role": "user", "content": "a"}, {"role": "assistant", "content": "b"}), "id": ""},
        {**_row({"role": "user", "content": "c"}, {"role": "assistant", "content": "d"}), "id": ""},
    ]
    path = tmp_path / "chat.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    result = import_source(path)
    assert [t.id for t in result.trajectories] == ["chat-3", "chat-4"]
    assert result.notes == (
        "2 row(s) left out: content other than text (an image, audio, a file), which a row "
        "cannot hold: line(s) 1, 2",
    )


def test_an_assistant_s_text_with_audio_beside_it_is_kept_as_its_text(tmp_path):
    from hsa.harness import AssistantMessage

    # the text is the reply (audio is a rendering of it): a field not kept, said in the notes
    said = {"role": "assistant", "content": "Hi!", "audio": {"id": "audio_abc123"}}
    path = tmp_path / "chat.jsonl"
    path.write_text(json.dumps(_row({"role": "user", "content": "Say hi"}, said)) + "\n")
    result = import_source(path)
    assert result.trajectories[0].events[-1] == AssistantMessage("Hi!")
    assert result.notes == ("message fields a row does not hold, not kept: audio (1 message(s))",)


def test_a_refusal_is_what_the_assistant_said(tmp_path):
    from hsa.harness import AssistantMessage

    rows = [
        _row(
            {"role": "user", "content": "Do it."},
            {"role": "assistant", "content": None, "refusal": "I can't help with that."},
        ),
        _row(
            {"role": "user", "content": "Do it."},
            {"role": "assistant", "content": [{"type": "refusal", "refusal": "I can't."}]},
        ),
        _row(
            {"role": "user", "content": "Do it."},
            {"role": "assistant", "content": "", "refusal": "No."},
        ),
    ]
    path = tmp_path / "chat.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    result = import_source(path)
    said = [t.events[-1] for t in result.trajectories]
    assert said == [
        AssistantMessage("I can't help with that."),
        AssistantMessage("I can't."),
        AssistantMessage("No."),
    ]
    assert not result.notes
    # beside other text, a refusal is not what a row shows: counted as not kept
    both = _row(
        {"role": "user", "content": "x"}, {"role": "assistant", "content": "Hm.", "refusal": "No."}
    )
    path.write_text(json.dumps(both) + "\n")
    assert import_source(path).notes == (
        "message fields a row does not hold, not kept: refusal (1 message(s))",
    )


def test_a_tool_that_breaks_the_harness_schema_names_the_line_that_brought_it(tmp_path):
    broken = {
        "type": "function",
        "function": {"name": "get", "parameters": {"type": "object", "required": ["id"]}},
    }
    rows = [
        _row({"role": "user", "content": "a"}, tools=[ECHO]),
        _row({"role": "user", "content": "b"}, tools=[ECHO]),
        _row({"role": "user", "content": "c"}, tools=[broken]),
    ]
    path = tmp_path / "chat.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    with pytest.raises(HarnessValidationError) as err:
        import_source(path)
    (problem,) = err.value.problems
    assert problem.file == str(path)
    # the path the line holds (the harness document's would be $.tools[0].parameters...)
    assert problem.where == "line 3 (harness chat-2): $.tools[0].function.parameters.required"
    assert "'id' is not in properties" in problem.message
    # the older form lists its tools under "functions", unwrapped
    path.write_text(json.dumps({**rows[0], "tools": [], "functions": [broken["function"]]}))
    with pytest.raises(HarnessValidationError) as err:
        import_source(path)
    (problem,) = err.value.problems
    assert problem.where == "line 1 (harness chat): $.functions[0].parameters.required"


def test_a_line_holds_unescaped_unicode_line_separators_and_crlf(tmp_path):
    # valid JSON may hold U+2028, U+2029 and U+0085 raw inside a string; only \n ends a line
    text = "one\u2028two\u2029three\x85four"
    rows = [_row({"role": "user", "content": text}), _row({"role": "user", "content": "b"})]
    path = tmp_path / "chat.jsonl"
    lines = [json.dumps(r, ensure_ascii=False) for r in rows]
    path.write_bytes(("\r\n".join(lines) + "\r\n\n").encode("utf-8"))
    result = import_source(path)
    assert [t.events[0].text for t in result.trajectories] == [text, "b"]
    assert [t.metadata["line"] for t in result.trajectories] == [1, 2]


@pytest.mark.parametrize("newline", ["\n", "\r\n"])
def test_a_line_cut_short_is_named_with_its_column(tmp_path, newline):
    # the error is at the end of line 2 (column 26), not at column 1 of a line after it; the
    # reader `hsa augment --input` opens a JSONL file with gives the same
    from hsa.datasets import open_source

    path = tmp_path / "chat.jsonl"
    good = json.dumps(_row({"role": "user", "content": "fine"}))
    path.write_text(good + newline + '{"id": "x", "messages": [' + newline, newline="")
    for read in (import_source, open_source):
        with pytest.raises(HsaError) as err:  # open_source gives it as a DatasetError
            read(path)
        assert (err.value.file, err.value.where) == (str(path), "line 2")
        assert err.value.message == "invalid JSON: Expecting value (column 26)"
    # a file of that one line: format detection reads it whole, and places the error the same
    path.write_text('{"id": "x", "messages": [' + newline, newline="")
    for read in (import_source, open_source):
        with pytest.raises(HsaError) as err:
            read(path)
        assert (err.value.where, err.value.message) == (
            "line 1",
            "invalid JSON: Expecting value (column 26)",
        )


def test_a_line_that_is_not_utf8_is_named(tmp_path):
    path = tmp_path / "chat.jsonl"
    good = json.dumps(_row({"role": "user", "content": "fine"})).encode()
    path.write_bytes(good + b"\n" + good + b"\n" + good.replace(b"fine", b"fi\xffne") + b"\n")
    with pytest.raises(ImportFormatError) as err:
        import_source(path)
    assert (err.value.file, err.value.where) == (str(path), "line 3")
    assert "not UTF-8" in err.value.message


def test_empty_content_beside_calls_is_no_text(tmp_path):
    # A chat template reads "" and null alike; as text it would render under a text protocol
    # as an empty assistant message before the calls.
    row = _row(
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": "", "tool_calls": [CALL]},
        {"role": "tool", "tool_call_id": "c1", "content": "1"},
        {"role": "assistant", "content": ""},
        tools=[ECHO],
    )
    path = tmp_path / "chat.jsonl"
    path.write_text(json.dumps(row) + "\n")
    imported = import_source(path)
    events = imported.trajectories[0].events
    assert [e.kind for e in events] == ["user", "tool_call", "tool_result", "assistant"]
    harness = imported.harnesses[0].replace(protocol=Protocol("text", "json", False, "json"))
    roles = [m["role"] for m in render(list(events), harness).messages]
    assert roles == ["system", "user", "assistant", "tool", "assistant"]
    answer = {"role": "assistant", "content": "", "tool_calls": [CALL]}
    assert [e.kind for e in parse([answer], imported.harnesses[0])] == ["tool_call"]


def test_tool_names_made_legal_are_said(tmp_path):
    from hsa.datasets import open_source

    cafe = {"type": "function", "function": {"name": "suche_café", "parameters": {}}}
    call = {"id": "c1", "type": "function", "function": {"name": "suche_café", "arguments": "{}"}}
    row = _row(
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": None, "tool_calls": [call]},
        tools=[cafe],
    )
    path = tmp_path / "chat.jsonl"
    path.write_text(json.dumps(row) + "\n")
    imported = import_source(path)
    (note,) = imported.notes
    assert "'suche_café' -> 'suche_cafe'" in note
    assert imported.harnesses[0].metadata["name_map"] == {"suche_cafe": "suche_café"}
    assert open_source(path).notes == (note,)
    # a name with nothing legal left gets a name that reads as a tool; other fields of the
    # entry (strict) are kept aside, never shown to a model
    weather = {"type": "function", "function": {"name": "天気", "strict": True, "parameters": {}}}
    call = {"id": "c1", "type": "function", "function": {"name": "天気", "arguments": "{}"}}
    row = _row({"role": "assistant", "content": None, "tool_calls": [call]}, tools=[weather])
    path.write_text(json.dumps(row) + "\n")
    (tool,) = import_source(path).harnesses[0].tools
    assert re.fullmatch(r"tool_[0-9a-f]{6}", tool.name) and tool.extra == {"strict": True}
    assert "strict" not in tool.to_function()


def test_rows_share_one_tool_object_per_distinct_tool(tmp_path):
    other = {"type": "function", "function": {"name": "other", "parameters": {"type": "object"}}}
    first = {"type": "function", "function": {"name": "echo", "description": "first"}}
    rows = [
        _row({"role": "user", "content": "a"}, tools=[ECHO, other]),
        _row({"role": "user", "content": "b"}, tools=[other]),
        _row({"role": "user", "content": "c"}, tools=[first, other]),
    ]
    path = tmp_path / "chat.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    one, two, three = import_source(path).harnesses
    assert one.tools[1] is two.tools[0] is three.tools[1]
    assert one.tools[0] is not three.tools[0]  # the same name, another tool
    assert three.tools[0].description == "first" and one.tools[0].description == ""


def test_arguments_a_model_wrote_that_are_no_json_object_leave_their_row_out(tmp_path):
    # one such row stopped the whole import: models write them, and logs keep them
    path = tmp_path / "chat.jsonl"
    good = _row({"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"})
    rows = [good]
    for arguments in ("{'x': 1}", "null", [1]):  # text, or the value itself
        call = {**CALL, "function": {"name": "echo", "arguments": arguments}}
        rows.append(
            _row({"role": "assistant", "content": None, "tool_calls": [call]}, tools=[ECHO])
        )
    legacy = {"role": "assistant", "function_call": {"name": "echo", "arguments": "{x"}}
    rows += [{"messages": [legacy], "functions": [ECHO]}, good]  # the older form too
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    done = hsa("harness", "import", str(path), "--out", str(tmp_path / "out"))
    assert done.returncode == 0, done.stderr
    result = import_source(path)
    assert [t.metadata["line"] for t in result.trajectories] == [1, 6]
    assert any(
        note.startswith("4 row(s) left out: tool-call arguments that are not a JSON object")
        and note.endswith("line(s) 2, 3, 4, 5")
        for note in result.notes
    ), result.notes


def test_valid_rows_no_dataset_can_hold_or_train_as_written_are_left_out_not_the_file(tmp_path):
    # an integer past 64 bits (in arguments or a schema) and two tools of one name refused the
    # whole file; an assistant turn of weight 0 (OpenAI fine-tuning: not trained on) was kept
    # and trained on, and weight 1 was said to be lost
    wide = '{"n": [1, 18446744073709551616]}'
    big = {
        "type": "function",
        "function": {
            **ECHO["function"],
            "parameters": {
                "type": "object",
                "properties": {"n": {"type": "integer", "maximum": 2**70}},
            },
        },
    }
    call = {**CALL, "function": {"name": "echo", "arguments": wide}}
    said = {"role": "assistant", "content": "hello"}
    rows = [
        _row({"role": "user", "content": "fine"}, {**said, "weight": 1}),
        _row({"role": "assistant", "content": None, "tool_calls": [call]}, tools=[ECHO]),
        _row({"role": "user", "content": "a"}, said, tools=[big]),
        _row({"role": "user", "content": "a"}, said, tools=[ECHO, ECHO]),
        _row({"role": "user", "content": "a"}, {**said, "weight": 0}, said),
        _row({"role": "user", "content": "a"}, said, tools=[big]),  # the same tools again
    ]
    path = tmp_path / "chat.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    result = import_source(path)
    assert [t.metadata["line"] for t in result.trajectories] == [1]
    assert result.notes == (
        "3 row(s) left out: an integer beyond 64 bits in a call's arguments or a tool's schema, "
        "which the datasets library's JSON reader refuses (a dataset holding it would not load "
        "for training): line(s) 2, 3, 6",
        "1 row(s) left out: two tools of one name in the row's tools (a call could not say "
        "which it calls): line(s) 4",
        "1 row(s) left out: an assistant message with weight 0 (OpenAI's fine-tuning format: "
        "not trained on), and a row trains on every assistant turn it shows: line(s) 5",
    )


def test_arguments_past_what_pythons_reader_takes_leave_the_row_out_or_refuse_it(tmp_path):
    # an integer of more than 4,300 digits (beyond 64 bits) raised ValueError from the import
    said = {"role": "assistant", "content": "hello"}
    long = {**CALL, "function": {"name": "echo", "arguments": '{"n": ' + "9" * 4301 + "}"}}
    rows = [
        _row({"role": "user", "content": "a"}, said),
        _row({"role": "assistant", "content": None, "tool_calls": [long]}, tools=[ECHO]),
    ]
    path = tmp_path / "chat.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    result = import_source(path)
    assert [t.metadata["line"] for t in result.trajectories] == [1]
    assert result.notes[0].startswith("1 row(s) left out: an integer beyond 64 bits")
    deep = {**CALL, "function": {"name": "echo", "arguments": '{"n": ' + "[" * 5000 + "]" * 5000}}
    deep["function"]["arguments"] += "}"
    rows[1] = _row({"role": "assistant", "content": None, "tool_calls": [deep]}, tools=[ECHO])
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    with pytest.raises(ImportFormatError, match="nested too deeply") as err:
        import_source(path)
    assert err.value.where == "line 2: $.messages[0].tool_calls[0].function.arguments"


def test_results_of_parallel_calls_answered_out_of_order_are_put_in_call_order(tmp_path):
    # text protocols pair a result with its call by position: Paris's call was shown Tokyo's
    # result
    calls = [
        {"id": i, "type": "function", "function": {"name": "echo", "arguments": json.dumps(a)}}
        for i, a in (("a", {"city": "Paris"}), ("b", {"city": "Tokyo"}))
    ]
    messages = [
        {"role": "user", "content": "weather in Paris and Tokyo?"},
        {"role": "assistant", "content": None, "tool_calls": calls},
        {"role": "tool", "tool_call_id": "b", "content": "20C"},
        {"role": "tool", "tool_call_id": "a", "content": "15C"},
        {"role": "assistant", "content": "Paris 15C, Tokyo 20C."},
    ]
    path = tmp_path / "chat.jsonl"
    path.write_text(json.dumps(_row(*messages, tools=[ECHO])) + "\n")
    result = import_source(path)
    (trajectory,) = result.trajectories
    shown = [(e.call_id, e.content) for e in trajectory.events if isinstance(e, ToolResult)]
    assert shown == [("call_0", "15C"), ("call_1", "20C")]
    assert trajectory.metadata["call_ids"] == ["a", "b"]
    assert result.notes == (
        "1 row(s) answered parallel tool calls out of call order: their results are put in "
        "call order (matched by tool_call_id), since text protocols and chat templates that "
        "show no call ids pair a result with its call by position",
    )
    # as a text protocol shows them, by position: Paris's call, then its result first
    text = result.harnesses[0].replace(protocol=Protocol(name="text"))
    shown = [m["content"] for m in render(trajectory.events, text).messages[-3:-1]]
    assert "15C" in shown[0] and "20C" in shown[1], shown


def test_a_group_of_tools_left_out_names_no_harness_and_values_are_refused_first(tmp_path):
    # a row left out for its tools made the import's one harness "chat-1" instead of "chat";
    # whether NaN refused the file or a wide integer left the row out hung on key order (NaN,
    # not JSON, now leaves the row out too, and what a row is left out for hangs on no order)
    good = _row({"role": "user", "content": "a"}, {"role": "assistant", "content": "b"})
    path = tmp_path / "chat.jsonl"
    path.write_text(json.dumps(good) + "\n" + json.dumps({**good, "tools": [ECHO, ECHO]}) + "\n")
    result = import_source(path)
    assert [h.id for h in result.harnesses] == ["chat"]
    assert [t.harness_id for t in result.trajectories] == ["chat"]
    wide, surrogate = "18446744073709551616", '"\\ud800"'
    for values, outcome in [
        ((wide, "NaN"), "left out: tool-call arguments that are not a JSON object"),
        (("1e400", "NaN"), "left out: tool-call arguments that are not a JSON object"),
        ((wide, "1e400"), "left out: a number past a double's range"),
        ((surrogate, "NaN"), "left out: tool-call arguments that are not a JSON object"),
        ((surrogate, "1e400"), "a lone surrogate"),
        ((surrogate, wide), "a lone surrogate"),
    ]:
        for first, second in (values, values[::-1]):
            arguments = f'{{"a": {first}, "b": {second}}}'
            call = {**CALL, "function": {"name": "echo", "arguments": arguments}}
            row = _row({"role": "assistant", "content": None, "tool_calls": [call]}, tools=[ECHO])
            path.write_text(json.dumps(row) + "\n")
            if outcome.startswith("left out"):
                assert import_source(path).notes[0].startswith(f"1 row(s) {outcome}")
            else:
                with pytest.raises(ImportFormatError, match=outcome):
                    import_source(path)


def test_a_row_with_an_openai_custom_tool_is_left_out_not_the_file(tmp_path):
    # a valid OpenAI tool (type custom: free-form input) stopped the whole import
    path = tmp_path / "chat.jsonl"
    custom = {"type": "custom", "custom": {"name": "code_exec", "format": {"type": "text"}}}
    call = {"id": "c1", "type": "custom", "custom": {"name": "code_exec", "input": "print(1)"}}
    rows = [
        _row(
            {"role": "user", "content": "run"},
            {"role": "assistant", "content": "ok"},
            tools=[ECHO, custom],
        ),
        _row({"role": "assistant", "content": None, "tool_calls": [call]}),  # called, unlisted
        _row({"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}),
    ]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    result = import_source(path)
    assert [t.metadata["line"] for t in result.trajectories] == [3]
    assert any(
        n.startswith("2 row(s) left out: an OpenAI custom tool") and n.endswith("line(s) 1, 2")
        for n in result.notes
    ), result.notes


def test_vllms_reasoning_field_text_parts_and_a_leading_developer_message(tmp_path):
    path = tmp_path / "chat.jsonl"
    parts = [{"type": "text", "text": "Summarize:"}, {"type": "text", "text": "The cat sat."}]
    row = _row(
        {"role": "developer", "content": "Be brief.", "name": "ops"},
        {"role": "user", "content": parts},
        {"role": "assistant", "content": "A cat sat.", "reasoning": "Short it is."},
    )
    path.write_text(json.dumps(row) + "\n")
    result = import_source(path)
    (trajectory,) = result.trajectories
    user, answer = trajectory.events
    assert user.text == "Summarize:\nThe cat sat."  # one per line, as vLLM joins text parts
    assert answer.reasoning == "Short it is."  # vLLM's name for reasoning_content
    (note,) = [n for n in result.notes if n.startswith("message fields a row does not hold")]
    assert note.endswith("not kept: name (1 message(s))")
    assert "1 row(s) began with a developer message, read as the system prompt" in " ".join(
        result.notes
    )


@pytest.mark.parametrize(
    ("fields", "reasoning", "unkept"),
    [
        ({"reasoning_content": None, "reasoning": "think"}, "think", False),
        ({"reasoning_content": "A", "reasoning": "A"}, "A", False),
        ({"reasoning_content": "A", "reasoning": "B"}, "A", True),  # said, not dropped
    ],
)
def test_reasoning_is_the_first_of_its_two_names_that_is_set(tmp_path, fields, reasoning, unkept):
    path = tmp_path / "chat.jsonl"
    answer = {"role": "assistant", "content": "ok", **fields}
    path.write_text(json.dumps(_row({"role": "user", "content": "hi"}, answer)) + "\n")
    result = import_source(path)
    assert result.trajectories[0].events[-1].reasoning == reasoning
    assert ("reasoning (1 message(s))" in " ".join(result.notes)) is unkept


def test_the_fields_of_a_row_left_out_are_not_counted(tmp_path):
    path = tmp_path / "chat.jsonl"
    call = {**CALL, "function": {"name": "echo", "arguments": "oops"}}
    first = {"role": "developer", "content": "Be brief.", "name": "ops"}
    rows = [
        _row(first, {"role": "assistant", "content": None, "tool_calls": [call]}, tools=[ECHO]),
        _row(first, {"role": "user", "content": "hi"}),
    ]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    notes = " ".join(import_source(path).notes)
    assert "name (1 message(s))" in notes and "1 row(s) began with a developer message" in notes


def test_rows_under_a_given_harness_read_skill_loads_and_hooks(tmp_path):
    harness = Harness(
        id="agent",
        tools=(Tool("echo"),),
        skills=(Skill("greet", "greet", "How to greet.", "Say hello."),),
        skill_tool=Tool(
            "load_skill",
            parameters={"type": "object", "properties": {"name": {"type": "string"}}},
        ),
        hooks=(
            Hook(
                "remind",
                "user_prompt_submit",
                "add_context",
                "Be brief, {{ name }}.",
                inject="user",
                wrapper="reminder",
            ),
            Hook(
                "audit",
                "post_tool_use",
                "add_context",
                "Logged {{ call }}.",
                inject="tool_result",
                wrapper="audit-note",
            ),
        ),
    )
    save_harness(harness, tmp_path / "agent")
    load_call = {
        "id": "x",
        "type": "function",
        "function": {"name": "load_skill", "arguments": '{"name": "greet"}'},
    }
    row = _row(
        {"role": "user", "content": "hi"},
        {"role": "user", "content": "<reminder>\nBe brief, Ada.\n</reminder>"},
        {"role": "assistant", "content": None, "tool_calls": [load_call]},
        {"role": "tool", "tool_call_id": "x", "content": "Say hello."},
        {"role": "assistant", "content": None, "tool_calls": [{**CALL, "id": "e"}]},
        {
            "role": "tool",
            "tool_call_id": "e",
            "content": '{"ok": 1}\n<audit-note>\nLogged c0.\n</audit-note>',
        },
        {"role": "assistant", "content": "Hello!"},
    )
    path = tmp_path / "rows.jsonl"
    path.write_text(json.dumps(row) + "\n")
    out = tmp_path / "out"
    done = hsa(
        "harness", "import", str(path), "--out", str(out), "--harness", str(tmp_path / "agent")
    )
    assert done.returncode == 0, done.stderr
    (trajectory,) = trajectories_from_table(pq.read_table(out / "trajectories.parquet"))
    assert trajectory.harness_id == "agent"
    assert HookFired("remind", "user_prompt_submit", {"name": "Ada"}) in trajectory.events
    assert SkillLoad("greet") in trajectory.events
    # a hook injected into a tool's result is a firing after the result, as rendering made it
    result, fired = trajectory.events[-3:-1]
    assert result == ToolResult("call_1", '{"ok": 1}', False)
    assert fired == HookFired("audit", "post_tool_use", {"call": "c0"})
    assert load_harness(out) == harness
    with pytest.raises(ImportFormatError, match="only for openai-jsonl"):
        import_source(tmp_path / "agent" / "tools.json", harness=harness)


def _skill_agent(skill: Skill) -> tuple[Harness, dict]:
    """A harness with one skill and its skill tool, and a call loading the skill."""
    harness = Harness(
        id="agent",
        skills=(skill,),
        skill_tool=Tool(
            "load_skill",
            parameters={"type": "object", "properties": {"name": {"type": "string"}}},
        ),
    )
    arguments = json.dumps({"name": skill.id})
    load = {
        "id": "x",
        "type": "function",
        "function": {"name": "load_skill", "arguments": arguments},
    }
    return harness, load


def _skill_row(load: dict, result: dict) -> dict:
    """A row that loads a skill, gets ``result`` back, and answers."""
    return _row(
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": None, "tool_calls": [load]},
        {"role": "tool", "tool_call_id": load["id"], **result},
        {"role": "assistant", "content": "Hello!"},
    )


def test_a_row_whose_skill_load_came_back_as_other_than_the_skill_is_left_out_and_said(
    tmp_path,
):
    harness, load = _skill_agent(
        Skill("greet", "greet", "How to greet.", "Say hello.\n\nThen wave.")
    )

    def row(result: dict) -> dict:
        return _skill_row(load, result)

    as_json = json.dumps({"name": "greet", "content": "Say hello.\n\nThen wave."})
    rows = [
        row({"content": "---\nname: greet\n---\nSay hello.\r\n\r\nThen wave.\n"}),  # kept
        row({"content": "ERROR: skill temporarily unavailable"}),
        row({"content": "Say hello.\n\nThen wave.", "is_error": True}),
        row({"content": as_json}),  # kept: the skill in a JSON result, as a tool returns it
        *[row({"content": "Say hello."})] * 4,  # cut short
    ]
    path = tmp_path / "rows.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    result = import_source(path, harness=harness)
    assert [t.metadata["line"] for t in result.trajectories] == [1, 4]
    (note,) = result.notes
    assert note.startswith("6 row(s) left out: a skill load's recorded result is not the skill")
    assert note.endswith("line(s) 2, 3, 5, 6, 7, 8")  # every line, not the first three
    unknown = {"function": {"name": "load_skill", "arguments": '{"name": "wave"}'}}
    rows.append(_row({"role": "assistant", "content": None, "tool_calls": [{**load, **unknown}]}))
    # kept, and said: what a runtime adds beside the skill is not in the row
    base = "Base directory for this skill: /home/u/.claude/skills/greet\n\n"
    rows.append(row({"content": base + "Say hello.\n\nThen wave."}))
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    result = import_source(path, harness=harness)
    assert [t.metadata["line"] for t in result.trajectories] == [1, 4, 10]
    assert result.notes[1] == (
        "1 row(s) left out: a call to the skill tool that names no skill of the harness (a "
        "variant renames the skills it has): line(s) 9"
    )
    assert result.notes[2].startswith(
        "1 skill load result(s) held text besides the skill (a base directory, a notice), not kept"
    )


def test_a_skill_load_by_its_folder_name_is_read_under_the_imported_skills(tmp_path):
    # a folder name that was no legal id (café -> cafe): the source's rows load it by its
    # folder's name
    (tmp_path / "skills" / "café").mkdir(parents=True)
    text = "---\nname: café\ndescription: Coffee.\n---\nBrew.\n"
    (tmp_path / "skills" / "café" / "SKILL.md").write_text(text, "utf-8")
    (harness,) = import_source(tmp_path / "skills").harnesses
    (skill,) = harness.skills
    load = {
        "id": "x",
        "type": "function",
        "function": {"name": "load_skill", "arguments": json.dumps({"name": "café"})},
    }
    path = tmp_path / "rows.jsonl"
    path.write_text(json.dumps(_skill_row(load, {"content": "Brew."})) + "\n")
    (trajectory,) = import_source(path, harness=harness).trajectories
    assert SkillLoad(skill.id) in trajectory.events


def test_a_skill_of_front_matter_only_is_read_from_an_empty_result_not_from_an_error(
    tmp_path,
):
    harness, load = _skill_agent(Skill("noted", "noted", "A skill of front matter only.", ""))
    results = [
        "",
        "---\nname: noted\ndescription: d\n---\n",
        '{"name": "noted", "content": ""}',
        "Error: permission denied",
        '{"error": "permission denied"}',
    ]
    rows = [_skill_row(load, {"content": text}) for text in results]
    path = tmp_path / "rows.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    result = import_source(path, harness=harness)
    assert [t.metadata["line"] for t in result.trajectories] == [1, 2, 3]
    assert result.notes[0].endswith("line(s) 4, 5")


def _lookup(call_id: str, order: str) -> dict:
    arguments = json.dumps({"order_id": order})
    return {
        "id": call_id,
        "type": "function",
        "function": {"name": "get_order", "arguments": arguments},
    }


GET_ORDER = {
    "type": "function",
    "function": {
        "name": "get_order",
        "description": "Get an order.",
        "parameters": {
            "type": "object",
            "properties": {"order_id": {"type": "string"}},
            "required": ["order_id"],
        },
    },
}


def test_a_call_id_reused_on_a_later_turn_answers_the_latest_call(tmp_path):
    # The shape of tau-bench's gpt-4o trajectories: "call_1" again on a later turn.
    row = _row(
        {"role": "system", "content": "You are a retail agent."},
        {"role": "user", "content": "Where are #1 and #2?"},
        {"role": "assistant", "content": None, "tool_calls": [_lookup("call_1", "#1")]},
        {"role": "tool", "tool_call_id": "call_1", "content": "#1 shipped"},
        {"role": "assistant", "content": None, "tool_calls": [_lookup("call_1", "#2")]},
        {"role": "tool", "tool_call_id": "call_1", "content": "#2 pending"},
        {"role": "assistant", "content": "#1 shipped, #2 is pending."},
        tools=[GET_ORDER],
    )
    path = tmp_path / "tau.jsonl"
    path.write_text(json.dumps(row) + "\n")
    (trajectory,) = import_source(path).trajectories
    calls = [(e.call_id, e.args) for e in trajectory.events if isinstance(e, ToolCall)]
    results = [(e.call_id, e.content) for e in trajectory.events if isinstance(e, ToolResult)]
    assert calls == [("call_0", {"order_id": "#1"}), ("call_1", {"order_id": "#2"})]
    assert results == [("call_0", "#1 shipped"), ("call_1", "#2 pending")]
    assert trajectory.metadata["call_ids"] == ["call_1", "call_1"]


@pytest.mark.parametrize(
    ("messages", "where", "reason"),
    [
        (
            [
                {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [_lookup("call_1", "#1"), _lookup("call_1", "#2")],
                },
                {"role": "tool", "tool_call_id": "call_1", "content": "shipped"},
            ],
            "line 1: $.messages[1].tool_call_id",
            "two tool calls of the assistant message at $.messages[0] have that id",
        ),
        (
            [
                {"role": "assistant", "content": None, "tool_calls": [_lookup("call_1", "#1")]},
                {"role": "tool", "tool_call_id": "call_1", "content": "shipped"},
                {"role": "tool", "tool_call_id": "call_2", "content": "pending"},
            ],
            "line 1: $.messages[2].tool_call_id",
            "answers no earlier tool call",
        ),
    ],
)
def test_a_tool_message_that_no_call_answers_unambiguously_is_refused(
    tmp_path, messages, where, reason
):
    path = tmp_path / "tau.jsonl"
    path.write_text(json.dumps(_row(*messages, tools=[GET_ORDER])) + "\n")
    with pytest.raises(ImportFormatError) as err:
        import_source(path)
    assert (err.value.file, err.value.where) == (str(path), where)
    assert reason in err.value.message


def test_the_older_function_call_form_reads_as_tool_calls(tmp_path):
    # OpenAI's older function-calling rows: "functions", "function_call" replies answered by
    # "function" messages (the form of older fine-tuning files)
    function = {"name": "echo", "description": "Echo.", "parameters": {"type": "object"}}
    older = {
        "messages": [
            {"role": "user", "content": "hi"},
            {
                "role": "assistant",
                "content": None,
                "function_call": {"name": "echo", "arguments": '{"x": 1}'},
            },
            {"role": "function", "name": "echo", "content": "1"},
            {"role": "assistant", "content": "done"},
        ],
        "functions": [function],
    }
    newer = _row(
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": None, "tool_calls": [CALL]},
        {"role": "tool", "tool_call_id": "c1", "content": "1"},
        {"role": "assistant", "content": "done"},
        tools=[{"type": "function", "function": function}],
    )
    read = []
    for name, row in (("older", older), ("newer", newer)):
        path = tmp_path / f"{name}.jsonl"
        path.write_text(json.dumps(row) + "\n")
        read.append(import_source(path))
    assert read[0].trajectories[0].events == read[1].trajectories[0].events
    assert read[0].harnesses[0].tools == read[1].harnesses[0].tools
    assert read[0].trajectories[0].metadata["call_ids"] == ["function_call:1"]
    assert "row" not in read[0].trajectories[0].metadata  # "functions" is not an extra key


def test_a_byte_order_mark_and_an_empty_assistant_turn_are_read(tmp_path):
    from hsa.datasets import open_source
    from hsa.harness import AssistantMessage

    row = _row(
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": None},  # neither text nor calls: kept, empty
        {"role": "user", "content": "hello?"},
        {"role": "assistant", "content": "yes"},
    )
    path = tmp_path / "chat.jsonl"
    path.write_bytes(b"\xef\xbb\xbf" + json.dumps(row).encode() + b"\r\n")
    (trajectory,) = import_source(path).trajectories
    assert [e.kind for e in trajectory.events] == ["user", "assistant", "user", "assistant"]
    assert trajectory.events[1] == AssistantMessage("")
    # rows a model has nothing to learn from are kept, and said
    silent = [{"messages": []}, _row({"role": "user", "content": "only me"}), row]
    path.write_text("".join(json.dumps(r) + "\n" for r in silent))
    (note,) = import_source(path).notes
    assert note.startswith("2 row(s) have no assistant turn") and note.endswith("line(s) 1, 2")
    assert open_source(path).notes == (note,)


def test_rows_read_under_a_harness_say_what_of_their_own_is_not_kept(tmp_path):
    # --harness: the harness's tools and prompt are what the rows show; a row of other tools
    # (or another system message) was likely recorded under another harness, and is said
    from hsa.envs import get_env
    from hsa.harness import render

    env = get_env("livestream")
    harness = env.harness()
    rendered = render(env.solve(env.tasks()[0]).trajectory.events, harness)
    mine = {"messages": list(rendered.messages), "tools": list(rendered.tools)}
    tools = [dict(t, function=dict(t["function"], description="other")) for t in rendered.tools]
    other_tools = dict(mine, tools=tools)
    system = dict(rendered.messages[0], content="Another prompt.")
    other_system = dict(mine, messages=[system, *rendered.messages[1:]])
    path = tmp_path / "rows.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in [mine, mine]))
    assert import_source(path, harness=harness).notes == ()
    path.write_text("".join(json.dumps(r) + "\n" for r in [mine, other_tools, other_system]))
    result = import_source(path, harness=harness)
    assert len(result.trajectories) == 3
    assert result.notes == (
        "1 row(s) had tools of their own, unlike the harness given (--harness, or a build's "
        "source.harness), which their rows show instead (not kept): check that they were "
        "recorded under it",
        "1 row(s) had a system message of their own, unlike the harness given (--harness, or a "
        "build's source.harness), which their rows show instead (not kept): check that they "
        "were recorded under it",
    )


def test_an_id_made_for_a_row_without_one_is_never_an_id_another_row_writes(tmp_path):
    # a row without an id was named chat-<line>, and a row that wrote that id (before it or
    # after it) had the valid file refused as using one id twice
    from hsa.datasets import open_source
    from hsa.harness.importers.openai_jsonl import read_openai_jsonl

    said = _row({"role": "user", "content": "a"}, {"role": "assistant", "content": "b"})
    path = tmp_path / "chat.jsonl"
    for order in ([None, "chat-1"], ["chat-2", None], ["chat-2-2", "chat-2", None]):
        path.write_text("".join(json.dumps({**said, "id": i} if i else said) + "\n" for i in order))
        ids = [t.id for t in import_source(path).trajectories]
        assert sorted(ids) == sorted({*ids}) and set(ids) >= {i for i in order if i}, ids
    assert ids == ["chat-2-2", "chat-2", "chat-3"]  # no clash: the id it always had
    rows = [said, {**said, "id": "chat-1-2"}, said, {**said, "id": "chat-1"}]
    text = "".join(json.dumps(r) + "\n" for r in rows)
    path.write_text(text.replace('"chat-1"', '"\\u0063hat-1"'))  # written with an escape too
    result = import_source(path)
    assert [t.id for t in result.trajectories] == ["chat-1-3", "chat-1-2", "chat-3", "chat-1"]
    assert result.notes == (
        "1 row(s) without an id of their own are named <file>-<line>-2 (or -3, ...), not "
        "<file>-<line>: another line of the file writes that id",
    )
    assert open_source(path).notes == result.notes  # what hsa augment reads
    for chunk in (1, 3):  # read a chunk at a time, the ids are the file's alone
        chunks = read_openai_jsonl(path, chunk=chunk, numbered=True)
        assert [t.id for c in chunks for t in c.trajectories] == [
            "chat-1-3",
            "chat-1-2",
            "chat-3",
            "chat-1",
        ]


def test_a_row_left_out_under_a_given_harness_is_not_counted_as_its_own(tmp_path):
    # a row left out was said twice: left out, and as having tools and a system message of
    # its own; and its call to a tool the given harness lacks read as one its row lacks
    from hsa.envs import get_env
    from hsa.harness import render

    env = get_env("livestream")
    harness = env.harness()
    rendered = render(env.solve(env.tasks()[0]).trajectory.events, harness)
    mine = {"messages": list(rendered.messages), "tools": list(rendered.tools)}
    call = {**CALL, "function": {"name": "echo", "arguments": "{}"}}
    other = _row(
        {"role": "system", "content": "Another prompt."},
        {"role": "assistant", "content": None, "tool_calls": [call]},
        tools=[ECHO],
    )
    path = tmp_path / "rows.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in [mine, other]))
    result = import_source(path, harness=harness)
    assert [t.metadata["line"] for t in result.trajectories] == [1]
    assert result.notes == (
        "1 row(s) left out: a call to a tool the harness does not list (the harness given with "
        "--harness or a build's source.harness, which every row is read under: a variant could "
        "neither rename nor describe it): line(s) 2",
    )


def test_nan_infinity_or_a_number_past_a_double_in_arguments_text_leaves_the_row_out(tmp_path):
    # Python's reader took them, and the file was refused as holding what no row can hold,
    # though other arguments a model wrote that are not JSON leave their row out
    said = {"role": "assistant", "content": "hello"}
    rows = [_row({"role": "user", "content": "a"}, said)]
    for arguments in ('{"x": NaN}', '{"x": [-Infinity]}', '{"x": 1e400}', '{"x": -1E+999}'):
        call = {**CALL, "function": {"name": "echo", "arguments": arguments}}
        rows.append(
            _row({"role": "assistant", "content": None, "tool_calls": [call]}, tools=[ECHO])
        )
    small = {**CALL, "function": {"name": "echo", "arguments": '{"x": 1e-400, "y": 2.5e300}'}}
    rows.append(_row({"role": "assistant", "content": None, "tool_calls": [small]}, tools=[ECHO]))
    path = tmp_path / "chat.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    result = import_source(path)
    assert [t.metadata["line"] for t in result.trajectories] == [1, 6]
    assert result.trajectories[1].events[0].args == {"x": 0.0, "y": 2.5e300}
    assert result.notes == (
        "2 row(s) left out: tool-call arguments that are not a JSON object (models sometimes "
        "write them so; a call's arguments are an object in a row): line(s) 2, 3",
        "2 row(s) left out: a number past a double's range in a call's arguments (valid JSON, "
        "such as 1e400, that JSON readers read as an infinity, which no dataset row can hold): "
        "line(s) 4, 5",
    )


def test_arguments_text_that_gives_a_key_twice_leaves_the_row_out(tmp_path):
    # json.loads kept the last value silently ({"limit": 3, "limit": 5} imported as 5), while
    # parse refuses such api arguments; a key repeated inside a value keeps its last value
    rows = []
    for arguments in (
        '{"limit": 3, "limit": 5}',
        '{"limit": 3, "x": NaN, "limit": 5}',  # no JSON object: said as such, whatever the order
        '{"limit": "\\ud800", "limit": 5}',  # (the surrogate is no value of the row's)
        '{"limit": 5, "limit": "\\ud800"}',
        '{"limit": {"k": 1, "k": 2}, "q": {"k": {"j": 1, "j": 2}, "k": 3}}',
    ):
        call = {**CALL, "function": {"name": "echo", "arguments": arguments}}
        rows.append(
            _row({"role": "assistant", "content": None, "tool_calls": [call]}, tools=[ECHO])
        )
    path = tmp_path / "chat.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    result = import_source(path)
    assert [t.metadata["line"] for t in result.trajectories] == [5]
    assert result.trajectories[0].events[0].args == {"limit": {"k": 2}, "q": {"k": 3}}
    assert result.notes == (
        "1 row(s) left out: tool-call arguments that are not a JSON object (models sometimes "
        "write them so; a call's arguments are an object in a row): line(s) 2",
        "3 row(s) left out: tool-call arguments that give a key twice (which value the model "
        "meant cannot be told; hsa's parse refuses such a call): line(s) 1, 3, 4",
    )


def test_a_message_that_reads_as_two_hooks_leaves_its_row_out_and_is_said(tmp_path):
    def hook(hook_id, message, inject="system", wrapper=None):
        return Hook(hook_id, "stop", "add_context", message, inject=inject, wrapper=wrapper)

    # told apart by their wording, but "Error: rm denied" reads as both: neither is a guess,
    # and one such row (its payload's doing) does not cost the file's other rows
    harness = Harness(
        id="agent",
        tools=(Tool("echo"),),
        hooks=(
            hook("deny", "{{ tool }} denied"),
            hook("error", "Error: {{ what }}"),
            hook("late", "{{ call }} late", "tool_result", "note"),
            hook("logged", "Logged {{ call }}", "tool_result", "note"),
        ),
    )
    save_harness(harness, tmp_path / "agent")
    said = {"role": "user", "content": "hi"}
    note = "<note>\nLogged c1 late\n</note>"
    tool = {"role": "tool", "tool_call_id": "c1", "content": '{"ok": 1}\n' + note}
    called = {"role": "assistant", "content": None, "tool_calls": [CALL]}
    rows = [
        _row(said, {"role": "system", "content": "Error: disk full"}),
        _row(said, {"role": "system", "content": "Error: rm denied"}),
        _row(said, called, tool),
    ]
    path = tmp_path / "rows.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    result = import_source(path, harness=harness)
    assert [t.metadata["line"] for t in result.trajectories] == [1]
    fired = [e for e in result.trajectories[0].events if isinstance(e, HookFired)]
    assert [(e.hook_id, e.payload) for e in fired] == [("error", {"what": "disk full"})]
    notes = "\n".join(result.notes)
    assert "2 row(s) left out: a message that reads as the firings of two hooks" in notes
    assert "line(s) 2, 3" in notes


def test_a_system_message_over_the_template_limit_is_kept_or_its_row_left_out(tmp_path):
    # one row's 1.2M-character system message stopped the whole import ("template is
    # 1,222,000 characters; the limit is 1,000,000"): text without template syntax is no
    # template and is kept whatever its length; one that must be written as a template
    # (CRLF, or '{{' in it) and is over the limit leaves its row out, not the file
    plain = "Policy line about orders. " * 47_000
    crlf = "Policy line about orders.\r\n" * 47_000
    chat = ({"role": "user", "content": "hi"}, {"role": "assistant", "content": "done"})
    rows = [
        _row({"role": "system", "content": plain}, *chat),
        _row({"role": "system", "content": crlf}, *chat),
        _row({"role": "system", "content": "small"}, *chat),
    ]
    path = tmp_path / "chat.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    result = import_source(path)
    assert [t.metadata["line"] for t in result.trajectories] == [1, 3]
    assert system_prompt(result.harnesses[0]) == plain
    assert any(
        n.startswith("1 row(s) left out: a system message that, as a prompt section")
        and n.endswith("line(s) 2")
        for n in result.notes
    ), result.notes
