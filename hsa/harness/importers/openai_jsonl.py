"""Import OpenAI chat JSONL (``{"messages": [...], "tools": [...]}`` per line) as trajectories."""

from __future__ import annotations

import hashlib
import json
import math
import re
import unicodedata
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping, MutableMapping, Sequence
from dataclasses import replace
from functools import partial
from itertools import chain
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from hsa.errors import (
    HsaError,
    ImportFormatError,
    ProtocolError,
    TemplateError,
    first_few,
    refuse_unreadable,
)
from hsa.harness.arguments import checker_of
from hsa.harness.events import (
    AssistantMessage,
    Event,
    HookFired,
    SkillLoad,
    ToolCall,
    ToolResult,
    Trajectory,
    UserMessage,
    dumps_json,
    normalize_call_ids,
    results_in_call_order,
)
from hsa.harness.importers.base import (
    ImportResult,
    api_sections,
    check_harnesses,
    harness_id,
    read_json_lines,
    system_section,
    task_row,
    text_lines,
)
from hsa.harness.jsonvalues import WIDE_INTEGER, may_be_unwritable, unwritable
from hsa.harness.model import Harness, Prompt, Skill, Tool
from hsa.harness.parse import READ_AS, call_like, match_hook, split_tool_hooks
from hsa.harness.prompt import surface_tools, system_prompt
from hsa.harness.protocols import CALL_FORMATS
from hsa.harness.protocols.hermes import read_json
from hsa.harness.sandbox import MAX_TEMPLATE_CHARS, check_template
from hsa.harness.toolformats import (
    DuplicateToolName,
    ToolPlace,
    legalize,
    read_tools,
    tools_from_document,
)

SYSTEM_ROLES = ("system", "developer")


#: rows a chunk of ``read_openai_jsonl`` holds
CHUNK = 1024
#: distinct tools shared as one ``Tool`` object, at most (more are shared afresh)
POOLED = 65536


class Chunk(NamedTuple):
    """Rows of a chat JSONL file, in order: their trajectories, the harnesses first met in
    them (final ids, checked against the harness schema), and the bytes of the file read
    up to the chunk's last row."""

    harnesses: list[Harness]
    trajectories: list[Trajectory]
    read: int = 0
    #: rows left out, each as (its line, why: one of ``LEFT_OUT``'s reasons)
    left_out: tuple[tuple[int, str], ...] = ()
    #: the message fields a row cannot hold, each with the number of messages it was in
    unkept: tuple[tuple[str, int], ...] = ()
    #: the lines of rows kept with a call its tool's schema refuses (as the corpus has it)
    off_schema: tuple[int, ...] = ()


def import_openai_jsonl(path: Path, *, harness: Harness | None = None) -> ImportResult:
    """Canonical trajectories (one per row), and the harnesses they were produced under
    (``read_openai_jsonl``, collected).

    Each row also yields a task (``env: jsonl``) whose turns are the row's user messages and
    whose reference is the trajectory. Two rows that write one id are refused, naming both
    lines (an id made for a row without one is no id a row writes: ``read_openai_jsonl``).
    """
    harnesses: list[Harness] = [] if harness is None else [harness]
    trajectories: list[Trajectory] = []
    left_out: list[tuple[int, str]] = []
    unkept: Counter[str] = Counter()
    off_schema: list[int] = []
    for chunk in read_openai_jsonl(path, harness=harness):
        harnesses.extend(chunk.harnesses)
        trajectories.extend(chunk.trajectories)
        left_out.extend(chunk.left_out)
        unkept.update(dict(chunk.unkept))
        off_schema.extend(chunk.off_schema)
    repeat = first_repeat(pa.array([t.id for t in trajectories], pa.string()))
    if repeat is not None:
        first, second = (trajectories[i] for i in repeat)
        raise repeated_id(path, second.id, first.metadata["line"], second.metadata["line"])
    tasks = [
        task_row(
            id=t.id,
            env="jsonl",
            kind="chat",
            split="train",
            harness_id=t.harness_id,
            turns=[e.text for e in t.events if isinstance(e, UserMessage)],
            ground_truth={"trajectory": t.id},
            metadata={"source": path.name, "line": t.metadata["line"]},
        )
        for t in trajectories
    ]
    silent = [t.metadata["line"] for t in trajectories if is_silent(t)]
    return ImportResult(
        harnesses=tuple(harnesses),
        tasks=tuple(tasks),
        trajectories=tuple(trajectories),
        source=str(path),
        format="openai-jsonl",
        notes=reading_notes(renamed_tools(harnesses), silent, left_out, unkept, off_schema),
    )


def reading_notes(
    renamed: Mapping[str, str],
    silent: Sequence[int],
    left_out: Sequence[tuple[int, str]],
    unkept: Mapping[str, int],
    off_schema: Sequence[int] = (),
) -> tuple[str, ...]:
    """What a user reads about how a chat file was read: tool names made legal
    (``renamed``), rows without an assistant turn (``silent``, their lines), rows left out
    (``left_out``: their lines, and why), message fields not kept (``unkept``: how many
    messages had each) and rows kept with a call their own tools' schemas refuse
    (``off_schema``, their lines)."""
    notes = [legal_names_note(renamed), silent_note(silent)]
    if off_schema:
        notes.append(
            f"{len(off_schema):,} row(s) kept with a call its tool's schema refuses (as the "
            "file has it; their rows train on it as written, and hsa rules check skips such "
            f"calls): line(s) {first_few([str(n) for n in off_schema], LINES_SHOWN)}"
        )
    for reason in LEFT_OUT.values():
        lines = [line for line, why in left_out if why == reason]
        if lines:
            notes.append(
                f"{len(lines):,} row(s) left out: {reason}: line(s) "
                f"{first_few([str(n) for n in lines], LINES_SHOWN)}"
            )
    beyond = unkept.get(BEYOND_SKILL, 0)
    counted = (BEYOND_SKILL, OWN_TOOLS, OWN_SYSTEM, DEVELOPER, REORDERED, MOVED_ID, JOINED)
    fields = ", ".join(
        f"{k} ({v:,} message(s))" for k, v in sorted(unkept.items()) if k not in counted
    )
    if fields:
        notes.append(f"message fields a row does not hold, not kept: {fields}")
    if beyond:
        notes.append(
            f"{beyond:,} skill load result(s) held text besides the skill (a base directory, "
            "a notice), not kept: a row shows a load's result as the harness renders it, the "
            "skill's content"
        )
    if unkept.get(DEVELOPER):
        notes.append(
            f"{unkept[DEVELOPER]:,} row(s) began with a developer message, read as the system "
            "prompt (the harness's, which a row shows in the system role)"
        )
    if unkept.get(REORDERED):
        notes.append(
            f"{unkept[REORDERED]:,} row(s) answered parallel tool calls out of call order: their "
            "results are put in call order (matched by tool_call_id), since text protocols and "
            "chat templates that show no call ids pair a result with its call by position"
        )
    if unkept.get(JOINED):
        notes.append(
            f"{unkept[JOINED]:,} row(s) had an assistant message of text followed by one of tool "
            "calls alone: their rows show the two as one assistant message (the text, then the "
            "calls), since hsa's events hold a turn's text and its calls as one turn"
        )
    if unkept.get(MOVED_ID):
        notes.append(
            f"{unkept[MOVED_ID]:,} row(s) without an id of their own are named "
            "<file>-<line>-2 (or -3, ...), not <file>-<line>: another line of the file writes "
            "that id"
        )
    for key in (OWN_TOOLS, OWN_SYSTEM):
        if unkept.get(key):
            notes.append(
                f"{unkept[key]:,} row(s) had {key}, unlike the harness given (--harness, or a "
                "build's source.harness), which their rows show instead (not kept): check that "
                "they were recorded under it"
            )
    return tuple(n for n in notes if n)


#: the ``unkept`` count of skill loads whose recorded result held more than the skill
BEYOND_SKILL = "text besides the skill"
#: the ``unkept`` counts of rows read under a given harness whose own tools, or whose own
#: leading system message, are not the harness's (the harness's are what their rows show)
OWN_TOOLS = "tools of their own"
OWN_SYSTEM = "a system message of their own"
#: the ``unkept`` count of rows whose tool results answered parallel calls out of call order
REORDERED = "results out of call order"
#: the ``unkept`` count of rows without an id whose made id another row writes (moved aside)
MOVED_ID = "a made id another row writes"
#: the ``unkept`` count of rows where an assistant's text and its calls came as two messages
JOINED = "text and calls in two messages"


def _functions(harness: Harness) -> dict[str, Any]:
    """The tools a request under ``harness`` sends, by name, as OpenAI functions."""
    return {t.name: t.to_function() for t in surface_tools(harness)}


def _same_tools(entries: list[str], functions: dict[str, Any]) -> bool:
    """Whether a row's tools (each as JSON text) are ``functions`` (``_functions``), in any
    order."""
    try:
        tools, _ = tools_from_document([json.loads(e) for e in entries])
    except HsaError:
        return False
    return {t.name: t.to_function() for t in tools} == functions


#: line numbers a note lists before it counts the rest
LINES_SHOWN = 50


def is_silent(trajectory: Trajectory) -> bool:
    """Whether ``trajectory`` has no assistant turn: nothing a model could be trained to say
    (an empty chat, a system message alone, user messages alone)."""
    return not any(
        isinstance(e, AssistantMessage | ToolCall | SkillLoad) for e in trajectory.events
    )


def silent_note(lines: Sequence[int]) -> str | None:
    """What a user reads about rows without an assistant turn (``lines``: where they are)."""
    if not lines:
        return None
    return (
        f"{len(lines):,} row(s) have no assistant turn, so nothing to train on (kept, as read): "
        f"line(s) {first_few([str(n) for n in lines], LINES_SHOWN)}"
    )


#: why a row of a chat file is left out (valid chat data that hsa's events cannot hold, each
#: said in the import's notes with the lines), by a short key
LEFT_OUT = {
    "unlike_skill": "a skill load's recorded result is not the skill's content (an error, or "
    "other text), and a rendered row shows a load's result from the harness's skill, so it "
    "would show a load that did not happen",
    "later_system": "a system or developer message after the first (the first becomes the "
    "harness prompt; a later one is read only as a firing of a hook of the harness given with "
    "--harness or a build's source.harness)",
    "unlisted_tool": "a call to a tool the row's tools do not list (a variant could neither "
    "rename nor describe it)",
    "unlisted_by_harness": "a call to a tool the harness does not list (the harness given with "
    "--harness or a build's source.harness, which every row is read under: a variant could "
    "neither rename nor describe it)",
    "not_text": "content other than text (an image, audio, a file), which a row cannot hold",
    "bad_arguments": "tool-call arguments that are not a JSON object (models sometimes write "
    "them so; a call's arguments are an object in a row)",
    "repeated_argument": "tool-call arguments that give a key twice (which value the model "
    "meant cannot be told; hsa's parse refuses such a call)",
    "custom_tools": "an OpenAI custom tool (type custom: free-form input, not JSON arguments), "
    "which a harness's JSON Schema tools cannot hold",
    "unknown_skill": "a call to the skill tool that names no skill of the harness (a variant "
    "renames the skills it has)",
    "wide_integer": "an integer beyond 64 bits in a call's arguments or a tool's schema, which "
    "the datasets library's JSON reader refuses (a dataset holding it would not load for "
    "training)",
    "huge_number": "a number past a double's range in a call's arguments (valid JSON, such as "
    "1e400, that JSON readers read as an infinity, which no dataset row can hold)",
    "duplicate_tools": "two tools of one name in the row's tools (a call could not say which "
    "it calls)",
    "long_system": "a system message that, as a prompt section (its '{{', '{%', '{#' and "
    f"carriage returns written as template expressions), is over {MAX_TEMPLATE_CHARS:,} "
    "characters, the limit of a prompt template (a system message without them is never "
    "refused for its length)",
    "hooks_alike": "a message that reads as the firings of two hooks of the harness (given with "
    "--harness or a build's source.harness; the payload makes their wordings meet), so which "
    "of them fired cannot be told",
    "weight_zero": "an assistant message with weight 0 (OpenAI's fine-tuning format: not "
    "trained on), and a row trains on every assistant turn it shows",
    "text_calls": "assistant text that writes calls in a text call format (such as Hermes' "
    "<tool_call> tags, or a listed tool's call as Glaive's <functioncall> JSON, Llama's "
    "<function=NAME>, Mistral's [TOOL_CALLS] or a ReAct Action line write it), which hsa does "
    "not read as calls (a variant would rename the tools and leave the calls as written); "
    "write such calls as tool_calls",
}
#: how the notes name a leading developer message's role, which a row holds as the system's
DEVELOPER = "a developer message first"
#: the message fields a row holds (or reads: a tool message's name is its call's)
_READ = frozenset(
    ("role", "content", "tool_calls", "tool_call_id", "function_call", "reasoning_content")
)
#: fields read from an assistant message besides those
_READ_ASSISTANT = frozenset(("reasoning",))


class _LeftOut(Exception):
    """The row is left out, for ``LEFT_OUT[reason]``."""

    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = LEFT_OUT[reason]


def _is_skill(content: str, skill: Skill) -> bool:
    """Whether a skill load's recorded result ``content`` shows ``skill``: it holds the
    skill's content (whitespace aside: a source may add the front matter or a heading), as
    text or in a string of a JSON result (``{"name": ..., "content": ...}``, as tools
    return it)."""
    wanted = " ".join(skill.content.split())
    if not wanted:  # a skill of front matter only: every text holds it, an error's included
        if content.lstrip().startswith("{"):  # {"name": ..., "content": ""}, as tools return it
            try:
                found = json.loads(content)
            except ValueError:
                return False
            inner = found.get("content") if isinstance(found, dict) else None
            return isinstance(inner, str) and not _after_front_matter(inner).strip()
        return not _after_front_matter(content).strip()
    if wanted in " ".join(content.split()):
        return True
    if not content.lstrip().startswith(("{", "[")):
        return False
    try:
        found = json.loads(content)
    except ValueError:
        return False
    return any(wanted in " ".join(text.split()) for text in _strings(found))


def _beyond_skill(content: str, skill: Skill) -> bool:
    """Whether a skill load's result ``content`` (one ``_is_skill`` accepts, as text) holds
    text besides the skill's: more than its front matter, a heading and its content."""
    if content.lstrip().startswith(("{", "[")):
        return False  # the skill in a JSON result: its other fields are the tool's framing
    wanted = " ".join(skill.content.split())
    body = _after_front_matter(content)
    rest = " ".join(body.split()).replace(wanted, "", 1).strip()
    if not rest:
        return False
    first = next((line for line in body.splitlines() if line.strip()), "")
    return not (first.lstrip().startswith("#") and " ".join(first.split()) == rest)


def _after_front_matter(text: str) -> str:
    """``text`` without the YAML front matter it opens with, if any."""
    stripped = text.lstrip()
    if stripped.startswith("---"):
        closing = re.search(r"\n---[ \t]*(\r?\n|$)", stripped)
        if closing is not None:
            return stripped[closing.end() :]
    return text


def _strings(value: Any) -> Iterator[str]:
    """The strings of a JSON value, at any depth."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for item in value.values():
            yield from _strings(item)
    elif isinstance(value, list):
        for item in value:
            yield from _strings(item)


def renamed_tools(harnesses: Iterable[Harness]) -> dict[str, str]:
    """The tool names of the source that ``harnesses`` renamed to be API-legal: source name ->
    the name rows use (each harness keeps its own in ``metadata["name_map"]``)."""
    return {
        source: legal
        for harness in harnesses
        for legal, source in (harness.metadata.get("name_map") or {}).items()
    }


def legal_names_note(renamed: Mapping[str, str]) -> str | None:
    """What a user reads about the tool names made API-legal (None when there are none)."""
    if not renamed:
        return None
    pairs = [f"{source!r} -> {legal!r}" for source, legal in sorted(renamed.items())]
    shown = first_few(pairs)
    return (
        f"{len(pairs)} tool name(s) are not legal in an OpenAI API request (letters, digits, "
        f"_ and - only) and are written in their legal form in every row: {shown}; each "
        "harness keeps the source names in its metadata (name_map)"
    )


def read_openai_jsonl(
    path: Path,
    *,
    harness: Harness | None = None,
    groups: MutableMapping[bytes, Harness] | None = None,
    chunk: int | None = None,
    numbered: bool = False,
) -> Iterator[Chunk]:
    """The rows of a chat JSONL file as trajectories, ``chunk`` rows at a time (``CHUNK``), one
    line in memory at a time.

    Without ``harness``, rows are grouped by (tools, leading system message) and each group
    becomes one harness: the system message as a ``persona`` section, the tools as tools. The
    harness id is the file stem, suffixed ``-1``, ``-2``, ... in order of first appearance
    when there are several groups (a first pass reads lines until it meets a second group;
    ``numbered`` numbers them without it, for a caller that renames a lone ``-1`` itself).
    ``groups`` holds the groups met, by key: a dict by default; a store on disk keeps a
    corpus whose every row brings its own tools out of memory. With ``harness``, every row is
    read under it: calls to its skill tool become skill loads, and messages that match its
    hooks become hook firings. A row whose skill load came back as other than the skill (an
    error) is left out, its line in ``Chunk.left_out``.

    Call ids are normalised (``call_0``, ``call_1``, ...); the originals, in call order, are
    kept in ``metadata["call_ids"]``. A source may reuse an id on a later turn (tau-bench's
    gpt-4o trajectories do, and the OpenAI API accepts them): a ``tool`` message answers the
    latest call with its id. Refused, naming the line: a ``tool`` message whose id matches no
    earlier call, or one whose id two calls of the same assistant message share.

    A row's id is its ``id``; a row without one is named ``<stem>-<line>`` (``_made_id``), or
    ``<stem>-<line>-2`` (``-3``, ...) where a line of the file writes that id: a made id never
    is one a row writes, wherever in the file it is. Ids rows write are not checked for
    repeats here (``first_repeat`` does, over a whole file's ids).
    """
    stem = harness_id(path.stem, fallback="chat")
    groups = {} if groups is None else groups
    chunk = chunk or CHUNK
    several = harness is None and (numbered or _several_groups(path))
    pool: dict[tuple[str, str], Tool] = {}  # one Tool object per distinct tool, shared
    found: list[Harness] = []
    first_lines: list[int] = []  # the line each harness of ``found`` was first met on
    found_places: list[Callable[[], list[ToolPlace]]] = []  # where each's tools are in its row
    trajectories: list[Trajectory] = []
    left_out: list[tuple[int, str]] = []
    unkept: Counter[str] = Counter()
    called: list[tuple[int, Harness, list[ToolCall]]] = []  # rows with calls, to check
    same_tools: dict[bytes, bool] = {}  # whether a row's own tools are the harness's, by key
    harness_tools = _functions(harness) if harness is not None else {}
    harness_prompt = system_prompt(harness).strip() if harness is not None else ""
    written: frozenset[str] | None = None  # the ids rows write that a made id could be
    read = 0

    def at(offset: int) -> None:
        nonlocal read
        read = offset

    for lineno, row in read_json_lines(path, at=at):
        where = f"line {lineno}"
        if not isinstance(row, Mapping) or not isinstance(row.get("messages"), list):
            raise ImportFormatError(
                'each line must be an object with a "messages" list', file=str(path), where=where
            )
        messages = row["messages"]
        try:
            _no_custom_tools(row)
            system, start = _leading_system(messages, path, where)
        except _LeftOut as exc:
            left_out.append((lineno, exc.reason))
            continue
        leading: Counter[str] = Counter()  # counted once the row is kept
        if start:  # what the leading system (or developer) message says besides its text
            first = messages[0]
            leading.update(key for key in first.keys() - _READ if not _kept(first, key))
            if first.get("role") == "developer":
                leading[DEVELOPER] += 1
        under = harness
        if harness is not None:  # the row is read under it: say what of its own is not kept
            own = _entries(_tools_doc(row, path, where))
            if own:
                key = _group_key(own, None)
                same = same_tools.get(key)
                if same is None:  # once per distinct tool list
                    same = same_tools[key] = _same_tools(own, harness_tools)
                if not same:
                    leading[OWN_TOOLS] += 1
            if system is not None and system.strip() != harness_prompt:
                leading[OWN_SYSTEM] += 1
        if under is None:
            tools_doc = _tools_doc(row, path, where)
            entries = _entries(tools_doc)
            key = _group_key(entries, system)
            under = groups.get(key)
            if under is None:
                tools_key = _tools_key(row)
                try:
                    under, places = _group_harness(tools_doc, system, path, where, tools_key)
                except _LeftOut as exc:
                    left_out.append((lineno, exc.reason))
                    continue
                if len(under.tools) == len(entries):  # a list of tools: share repeated ones
                    if len(pool) > POOLED:
                        pool.clear()
                    pairs = zip(entries, under.tools, strict=True)
                    under = under.replace(tools=[pool.setdefault((e, t.name), t) for e, t in pairs])
                under = under.replace(id=f"{stem}-{len(groups) + 1}" if several else stem)
                groups[key] = under
                found.append(under)
                first_lines.append(lineno)
                found_places.append(partial(_in_row, places, tools_key))
        try:
            given = harness is not None
            events, call_ids = _events(messages, start, under, path, where, leading, given=given)
        except _LeftOut as exc:
            left_out.append((lineno, exc.reason))
            continue
        unkept.update(leading)
        calls = [e for e in events if isinstance(e, ToolCall)]
        if calls:
            called.append((lineno, under, calls))
        extra = {k: v for k, v in row.items() if k not in ("messages", *TOOL_KEYS)}
        metadata: dict[str, Any] = {"line": lineno, "call_ids": call_ids}
        if extra:
            metadata["row"] = extra
        if isinstance(extra.get("id"), str) and extra["id"]:  # "" is no id
            traj_id = extra["id"]
        else:
            if written is None:  # read once, when a row first needs an id made for it
                written = _written_ids(path, stem)
            traj_id = _made_id(stem, lineno, written)
            if traj_id != f"{stem}-{lineno}":
                unkept[MOVED_ID] += 1
        trajectories.append(
            Trajectory(
                id=traj_id,
                events=tuple(events),
                task_id=traj_id,
                harness_id=under.id,
                source=path.name,
                metadata=metadata,
            )
        )
        if len(trajectories) == chunk:
            check_harnesses(found, source=str(path), lines=first_lines, places=found_places)
            yield Chunk(
                found, trajectories, read, tuple(left_out), tuple(unkept.items()), _off(called)
            )
            found, first_lines, found_places = [], [], []
            trajectories, left_out, called = [], [], []
            unkept = Counter()
    if trajectories or found or left_out or unkept:
        check_harnesses(found, source=str(path), lines=first_lines, places=found_places)
        size = path.stat().st_size
        yield Chunk(found, trajectories, size, tuple(left_out), tuple(unkept.items()), _off(called))


def _written_ids(path: Path, stem: str) -> frozenset[str]:
    """The ids the rows of ``path`` write that ``_made_id`` could make (``<stem>-<line>``,
    ``<stem>-<line>-<n>``), whatever the row: a quick look at each line, and only a line that
    could hold one is parsed (one holding the stem and a dash, or an escape of an ASCII
    character: an id may be written with escapes)."""
    prefix = f"{stem}-"
    made = re.compile(re.escape(prefix) + r"[0-9]+(-[0-9]+)?")  # the line, and a number of its own
    found: set[str] = set()
    try:
        for _, line in text_lines(path):
            if prefix not in line and not ("\\u00" in line and _ASCII_ESCAPE.search(line)):
                continue
            try:
                row = json.loads(line)
            except (ValueError, RecursionError):
                continue  # the reading pass names the line
            written = row.get("id") if isinstance(row, dict) else None
            if isinstance(written, str) and made.fullmatch(written):
                found.add(written)
    except ImportFormatError:
        pass  # a line not UTF-8: the reading pass refuses it (at it or at a line before)
    return frozenset(found)


#: a JSON escape of an ASCII character (``\u0063``: ``c``)
_ASCII_ESCAPE = re.compile(r"\\u00[0-7]")


def _made_id(stem: str, line: int, written: frozenset[str]) -> str:
    """The id of the row on ``line``, which writes none: ``<stem>-<line>``, or where a row
    writes that (``written``: ``_written_ids``), the first of ``<stem>-<line>-2``, ``-3``, ...
    that none writes. Made ids differ from each other (each holds its line) and from every
    written id, and a file where no row writes one keeps the ids it always had."""
    made = f"{stem}-{line}"
    n = 1
    while made in written:
        n += 1
        made = f"{stem}-{line}-{n}"
    return made


def _off(called: Sequence[tuple[int, Harness, Sequence[ToolCall]]]) -> tuple[int, ...]:
    """The lines of the rows one of whose calls its tool's schema refuses (each harness
    checked already: its schemas compile)."""
    return tuple(
        line
        for line, harness, calls in called
        if any(checker_of(harness).problem(c.tool, c.args) for c in calls)
    )


def _several_groups(path: Path) -> bool:
    """Whether the rows of ``path`` fall in more than one group (read until the second)."""
    first = None
    for lineno, row in read_json_lines(path):
        if not isinstance(row, Mapping) or not isinstance(row.get("messages"), list):
            return False  # the reading pass names the line
        try:
            _no_custom_tools(row)
            system, _ = _leading_system(row["messages"], path, f"line {lineno}")
        except _LeftOut:
            continue  # the reading pass leaves it out
        except ImportFormatError:
            return False
        try:
            tools_doc = _tools_doc(row, path, "")
            key = _group_key(_entries(tools_doc), system)
            if key == first:
                continue
            _group_harness(tools_doc, system, path, "", _tools_key(row))  # (as the reading pass)
        except _LeftOut:
            continue  # rows whose tools it leaves out make no group
        except ImportFormatError:
            return False
        if first is not None:
            return True
        first = key
    return False


def first_repeat(ids: pa.Array) -> tuple[int, int] | None:
    """The positions of the first id to occur twice: (its first, its second occurrence), or
    None when every id is distinct. Vectorised: a million ids take a few MB, not a set."""
    if len(ids) < 2:
        return None
    codes = pc.dictionary_encode(ids).indices.to_numpy(zero_copy_only=False)
    # codes count up in order of first appearance: a row repeats an earlier id exactly when
    # its code is at most the largest code before it
    before = np.maximum.accumulate(codes)[:-1]
    repeats = np.flatnonzero(codes[1:] <= before)
    if not repeats.size:
        return None
    second = int(repeats[0]) + 1
    return int(np.argmax(codes == codes[second])), second


def repeated_id(path: Path, traj_id: str, first_line: int, line: int) -> ImportFormatError:
    """The error for a row id used on two lines."""
    return ImportFormatError(
        f"row id {traj_id!r} is also used on line {first_line}",
        file=str(path),
        where=f"line {line}: $.id",
    )


#: where a row lists its tools: ``tools``, or ``functions`` in the older function-calling
#: form (with ``function_call`` replies and ``function`` results)
TOOL_KEYS = ("tools", "functions")


def _no_custom_tools(row: Mapping[str, Any]) -> None:
    """Leave out (``_LeftOut``) a row that lists an OpenAI custom tool (``type: custom``): its
    input is free text, with no JSON Schema for a harness to hold (a call of one is left out
    by ``_call``)."""
    tools = row.get("tools")
    if isinstance(tools, list) and any(
        isinstance(t, Mapping) and t.get("type") == "custom" for t in tools
    ):
        raise _LeftOut("custom_tools")


def _tools_doc(row: Mapping[str, Any], path: Path, where: str) -> Any:
    """A row's tools document: ``tools``, or the older ``functions`` (not both)."""
    if row.get("tools") and row.get("functions"):
        raise ImportFormatError(
            'a row lists its tools in "tools" or, in the older form, "functions", not both',
            file=str(path),
            where=f"{where}: $.functions",
        )
    return row.get(_tools_key(row)) or []


def _entries(tools_doc: Any) -> list[str]:
    """A row's tools, each as JSON text (a document that is not a list: one entry)."""
    if isinstance(tools_doc, list):
        return [dumps_json(e) for e in tools_doc]
    return [dumps_json(tools_doc)]


def _group_key(entries: list[str], system: str | None) -> bytes:
    """A digest of a row's tools (each as JSON text) and leading system message: rows with
    the same one share a harness. A digest, not the text, is kept for every group."""
    digest = hashlib.sha256()
    for entry in entries:
        digest.update(entry.encode("utf-8"))
        digest.update(b"\x1e")  # JSON text holds no raw control character
    digest.update(dumps_json(system).encode("utf-8"))
    return digest.digest()


def _leading_system(messages: Sequence[Any], path: Path, where: str) -> tuple[str | None, int]:
    first = messages[0] if messages else None
    if isinstance(first, Mapping) and first.get("role") in SYSTEM_ROLES:
        return _text(first.get("content"), path, f"{where}: $.messages[0].content"), 1
    return None, 0


def _tools_key(row: Mapping[str, Any]) -> str:
    """The key a row lists its tools under (``_tools_doc``): ``tools``, or ``functions``."""
    return "functions" if not row.get("tools") and row.get("functions") else "tools"


def _group_harness(
    tools_doc: Any, system: str | None, path: Path, where: str, key: str = "tools"
) -> tuple[Harness, list[ToolPlace]]:
    """The harness of rows with the tools ``tools_doc`` (listed under ``key``) and leading
    ``system`` message, and where each of its tools is in ``tools_doc`` (``_in_row``: in a
    row); the row is left out (``_LeftOut``) when two of its tools share a name, a schema
    holds an integer beyond 64 bits or the system message is too long a template."""
    bad = unwritable(tools_doc, "$") if tools_doc is not None else None
    if bad is not None and bad[1] == WIDE_INTEGER:
        raise _LeftOut("wide_integer")
    try:
        tools, places = read_tools(tools_doc)
        tools, name_map = legalize(tools, places=places)
    except DuplicateToolName:
        raise _LeftOut("duplicate_tools") from None
    except ImportFormatError as exc:
        inside = (exc.where or "$")[1:]
        raise ImportFormatError(
            exc.message, file=str(path), where=f"{where}: $.{key}{inside}"
        ) from None
    leading = (system_section(system),) if system else ()
    if leading:
        try:
            check_template(leading[0].body)
        except TemplateError:  # (a literal template is valid: only its length is refused)
            raise _LeftOut("long_system") from None
    metadata: dict[str, Any] = {"source": path.name}
    if name_map:
        metadata["name_map"] = name_map
    harness = Harness(
        id="pending",  # named by read_openai_jsonl
        prompt=Prompt(sections=api_sections(*leading)),
        tools=tuple(tools),
        metadata=metadata,
    )
    return harness, places


def _in_row(places: Sequence[ToolPlace], key: str) -> list[ToolPlace]:
    """Where tools at ``places`` in a tools document are in a row that lists them under
    ``key`` (``$.tools[0].function``: a problem with one is said there); made only when a
    problem is found (most harnesses have none)."""
    return [replace(p, entry=f"$.{key}{p.entry[1:]}", body=f"$.{key}{p.body[1:]}") for p in places]


def _text(content: Any, path: Path, where: str) -> str:
    """A message's content as text: a string, or the API's list of parts (``text`` parts, and
    the assistant's ``refusal`` parts, which are what it said), one per line as vLLM's server
    joins them. A part of another type (an image, audio, a file) leaves the row out
    (``_LeftOut``)."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list) and all(isinstance(p, Mapping) for p in content):
        texts: list[str] = []
        other = False  # a part of another type than text
        for part in content:
            kind = part.get("type", "text")
            text = part.get("refusal" if kind == "refusal" else "text")
            if kind not in ("text", "refusal"):
                other = True
            elif isinstance(text, str):
                texts.append(text)
            else:
                break  # a text part without its text: malformed
        else:
            if other:
                raise _LeftOut("not_text")
            return "\n".join(texts)  # as vLLM's server joins text parts into one prompt
    raise ImportFormatError(
        "content must be a string or a list of content parts (text parts, refusal parts)",
        file=str(path),
        where=where,
    )


#: a call block in tags whose body starts as calls do (a JSON object with a key, a list, a
#: fenced block, an XML call, ``name(``): Hermes' <tool_call>, BFCL's <TOOLCALL>; not prose
#: about the tags or a placeholder (``<tool_call>{...}</tool_call>``)
_TAGGED_CALLS = re.compile(
    r"<(tool_call|TOOLCALL)>\s*(?:\{\s*[\"']|\[\s*[\w{\"'\[]|```|<(?:function|invoke)|[A-Za-z_][\w.]*\()"
    r".*?(?:</\1>|\Z)",  # (or to the end: a reply cut off before its closing tag)
    re.DOTALL,
)


def _calls_in_text(text: str, tools: set[str]) -> bool:
    """Whether assistant ``text`` writes calls in some text call format: calls to one of
    ``tools``, or any calls in tags (Hermes' ``<tool_call>``, ``<TOOLCALL>``), as corpora that
    list their tools in the system prompt write them (a quick look first: most text looks
    like no format's calls). Calls to one of ``tools`` in the shapes other corpora write
    (``_foreign_calls``) count too, wherever in the text."""
    if tools and _foreign_calls(text, tools):
        return True
    if not call_like(text):
        return False
    if _TAGGED_CALLS.search(text):  # parsed or not (a Python-dict body, arguments as a string)
        return True
    for key, fmt in CALL_FORMATS.items():
        for tag in (False, True):
            try:
                parsed = fmt.parse_calls(text, tag)
            except HsaError:
                continue
            if parsed is None or not parsed[1]:
                continue
            if tag or key == "hermes" or any(name in tools for name, _ in parsed[1]):
                return True
    return False


#: the marks of a call to a tool written in text that is no hsa format, each found by a
#: search for its literal start and the tool's name as group 1: Llama 3.1's
#: ``<function=NAME>``; Mistral's ``[TOOL_CALLS]NAME[ARGS]{...}`` or ``[TOOL_CALLS]NAME{...}``
#: (v11+ tokenizers' calls, as vLLM's Mistral parser reads them); a ReAct ``Action: NAME`` line
#: (``Action 1: NAME``, as HotpotQA's numbered steps write it) at a line's start, with its
#: input right after the name (``[...]``, ``(...)``, group 2) or none (a line's end)
_FUNCTION_TAG = re.compile(r"<function=([^>\s]+)>")
_MISTRAL_CALL = re.compile(r"\[TOOL_CALLS\]\s*([A-Za-z_][\w.-]*)\s*(?:\[ARGS\]|\{)")
_REACT_ACTION = re.compile(
    r"^[ \t]*Action[ \t]*(?:\d+[ \t]*)?:[ \t]*`?([^\s`\[(]+)`?[ \t]*([\[(]|\r?$)", re.MULTILINE
)

#: a line that shows a ReAct agent's steps besides ``Action:`` (a line that alone may be
#: prose: "Action: search" heading a piece of advice)
_REACT_STEP = re.compile(
    r"^[ \t]*(?:Action[ \t]+Input|Thought|Observation)[ \t]*(?:\d+[ \t]*)?:", re.MULTILINE
)

#: the keys that name what a JSON call calls (``name``; LangChain's ``action``), in either
#: quotes (from after the opening quote, looked at apart: a search that starts with a
#: literal is fast), with the name as group 1
_NAME_KEYS = (
    re.compile(r"""name["']\s*:\s*["']([^"'\\]+)["']"""),
    re.compile(r"""action["']\s*:\s*["']([^"'\\]+)["']"""),
)

#: what follows a tool's name in Glaive's call, whose ``"arguments": '{...}'`` no JSON
#: reader reads
_ARGUMENTS_NEXT = re.compile(r"""\s*,\s*["']arguments["']\s*:""")

#: what the braces are counted by: a brace, a double quote (a JSON string's end), an
#: escaped character (no string's end) and a line's end (no JSON string goes past one, so a
#: stray quote in prose counts for its line only)
_MARK = re.compile(r'\\.|["{}\n]')

#: the most JSON reads in one text that fail or may overlap another (a brace read again
#: as an enclosing one): a failed reading costs up to the text's length (its error counts
#: the lines before it), while the reads that succeed at a brace past those read before
#: never overlap, so a text of many objects that name a listed tool is read in linear time
_MOST_READS = 32


def _is_call(item: dict[str, Any], tools: set[str]) -> bool:
    """Whether a JSON object read from assistant text calls one of ``tools``: its ``name``
    with ``arguments`` (OpenAI's, Glaive's, Mistral's) or ``parameters`` (Llama 3.1's), or
    its ``action`` with ``action_input`` (LangChain's JSON agent). A tool's definition
    (``name``, ``description``, ``parameters`` a schema) calls nothing."""
    name = item.get("name")
    if isinstance(name, str) and name in tools:
        if "arguments" in item:
            return True
        if "parameters" in item:
            schema = item["parameters"]
            return "description" not in item and not (
                isinstance(schema, dict) and "properties" in schema
            )
    action = item.get("action")
    return isinstance(action, str) and action in tools and "action_input" in item


def _foreign_calls(text: str, tools: set[str]) -> bool:
    """Whether assistant ``text`` writes a call to one of ``tools`` in a shape other corpora
    write, anywhere in it (after ``<functioncall>`` as Glaive does, ``[TOOL_CALLS]`` as
    Mistral does, in a code fence, in prose): a JSON object (or one in a list) whose ``name``
    is the tool's with ``arguments`` or ``parameters`` beside it, a ``<function=NAME>``
    tag, a ReAct ``Action: NAME`` line in text that shows ReAct's steps (an ``Action
    Input:``, ``Thought:`` or ``Observation:`` line, or the input right after the name).
    Text that only names a tool is no call. Linear in the text: each mark is a search, and
    JSON is read only where an object names a listed tool under its ``name`` key."""
    if "<function=" in text and any(f[1] in tools for f in _FUNCTION_TAG.finditer(text)):
        return True
    if "[TOOL_CALLS]" in text and any(f[1] in tools for f in _MISTRAL_CALL.finditer(text)):
        return True
    if "Action" in text and _react_call(text, tools):
        return True
    return "{" in text and _json_calls(text, tools)


def _react_call(text: str, tools: set[str]) -> bool:
    """Whether ``text`` holds a ReAct ``Action: NAME`` line (``_REACT_ACTION``) calling one
    of ``tools``, with its input after the name or ReAct's other steps in the text."""
    steps: bool | None = None  # whether the text holds ReAct's other steps, once looked for
    for found in _REACT_ACTION.finditer(text):
        if found[1] not in tools:
            continue
        if found[2] in ("[", "("):
            return True
        if steps is None:
            steps = _REACT_STEP.search(text) is not None
        if steps:
            return True
    return False


def _json_calls(text: str, tools: set[str]) -> bool:
    """Whether ``text`` holds a JSON object calling one of ``tools`` (``_holds_call``), or
    Glaive's call, which needs no reading. At a ``name`` (or ``action``) key that names a
    listed tool the object read is the innermost one open there, by braces outside JSON
    strings; where that reading fails or ends before the key, the next enclosing brace is
    read, then the innermost brace counting every one (a stray quote in the line). A read
    that fails or may overlap another counts toward ``_MOST_READS``; past those, only the
    keys' Glaive shape is looked for."""
    named = [
        found
        for key in _NAME_KEYS
        for found in key.finditer(text)
        if found[1] in tools and found.start() and text[found.start() - 1] in "\"'"
    ]
    if not named:
        return False
    named.sort(key=lambda found: found.start())
    decoder = json.JSONDecoder()
    marks = _MARK.finditer(text)
    mark = next(marks, None)
    opened: list[int] = []  # the braces opened before ``mark`` and not closed, outside strings
    loose: list[int] = []  # the same, counting the braces in strings too
    quoted = False  # whether ``mark`` is in a JSON string
    read_to = 0  # the end of the objects read: a key before it was looked at
    dear = 0  # the reads that failed or may overlap another
    for found in named:
        key_at = found.start() - 1  # (its opening quote)
        if key_at < read_to:
            continue
        if found.re is _NAME_KEYS[0] and _ARGUMENTS_NEXT.match(text, found.end()):
            return True  # (Glaive's, whatever its arguments' quotes)
        while mark is not None and mark.start() < key_at:
            sign = mark[0]
            if sign == '"':
                quoted = not quoted
            elif sign == "\n":
                quoted = False
            elif sign == "{":
                loose.append(mark.start())
                if not quoted:
                    opened.append(mark.start())
            elif sign == "}":
                if loose:
                    loose.pop()
                if opened and not quoted:
                    opened.pop()
            mark = next(marks, None)
        tried: set[int] = set()
        for start in chain(reversed(opened), loose[-1:]):
            if start in tried:
                continue
            if dear == _MOST_READS:
                break  # (the keys left are looked at for Glaive's shape only)
            cheap = not tried and start >= read_to  # (read past all read before)
            dear += not cheap
            tried.add(start)
            try:
                value, end = decoder.raw_decode(text, start)
            except (ValueError, RecursionError):
                dear += cheap
                continue
            if _holds_call(value, tools):
                return True
            read_to = max(read_to, end)
            if end > key_at:
                break  # the object that holds the key calls nothing
    return False


def _holds_call(value: Any, tools: set[str]) -> bool:
    """Whether a JSON value read from assistant text is, or holds at any depth, an object
    calling one of ``tools`` (``_is_call``)."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            if _is_call(item, tools):
                return True
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return False


def _hook_of(harness: Harness, text: str, positions: Sequence[str]) -> HookFired | None:
    """``match_hook``; a message that reads as two hooks' firings leaves its row out (which
    hook fired cannot be told, and a guess would be a wrong row)."""
    try:
        return match_hook(harness, text, positions)
    except ProtocolError:
        raise _LeftOut("hooks_alike") from None


def _tool_hooks(harness: Harness, content: str) -> tuple[str, list[HookFired]]:
    """``split_tool_hooks``; a note that reads as two hooks' leaves its row out."""
    try:
        return split_tool_hooks(harness, content)
    except ProtocolError:
        raise _LeftOut("hooks_alike") from None


def _events(
    messages: Sequence[Any],
    start: int,
    harness: Harness,
    path: Path,
    where: str,
    unkept: Counter[str],
    *,
    given: bool = False,
) -> tuple[list[Event], list[str]]:
    """A row's ``messages`` from ``start`` (past its leading system message) as events under
    ``harness``, and the source's call ids in call order; ``given``: whether ``harness`` is
    the one given to read every row under (not the row's own tools)."""
    rename = {source: legal for legal, source in (harness.metadata.get("name_map") or {}).items()}
    tools = {t.name for t in harness.tools}
    callable_names = tools | rename.keys()  # as the row's tools and calls spell them
    skill_tool = harness.skill_tool.name if harness.skill_tool is not None else None
    # a skill whose folder name was no legal id is called by that name in a source's rows
    skill_ids = {
        unicodedata.normalize("NFC", source): legal
        for legal, source in (harness.metadata.get("skill_id_map") or {}).items()
    }
    events: list[Event] = []
    call_ids: list[str] = []  # the source ids, in call order (repeats kept)
    # Each call gets a unique internal id (its position in call_ids) so that a reused source
    # id cannot merge two calls; a source id points at its latest call, or at None when two
    # calls of one assistant message share it, with the index of that message.
    latest: dict[str, tuple[str | None, int]] = {}
    answered_by_skill: dict[str, Skill] = {}  # call id -> the skill it loads
    function_call: tuple[str, str] | None = None  # the older form's call (id, name) to answer
    text_only = False  # whether the message before was an assistant's text, with no calls
    joined = False  # whether an assistant's calls came in a message of their own after its text
    for k in range(start, len(messages)):
        message = messages[k]
        after_text, text_only = text_only, False
        at = f"{where}: $.messages[{k}]"
        if not isinstance(message, Mapping):
            raise ImportFormatError("a message must be an object", file=str(path), where=at)
        role = message.get("role")
        read = _READ | _READ_ASSISTANT if role == "assistant" else _READ
        if role == "assistant" and message.get("weight") == 0 and message["weight"] is not False:
            raise _LeftOut("weight_zero")
        if role == "assistant" and message.get("audio") and not message.get("content"):
            raise _LeftOut("not_text")  # a spoken reply (with text, audio is a field not kept)
        for key in message.keys() - read:
            if not _kept(message, key):
                unkept[key] += 1
        if role == "user":
            text = _text(message.get("content"), path, f"{at}.content")
            fired = _hook_of(harness, text, READ_AS["user"]) if harness.hooks else None
            events.append(fired if fired is not None else UserMessage(text))
        elif role == "assistant":
            content = message.get("content")
            said = False  # whether the message gave an AssistantMessage
            # vLLM writes `reasoning`, and `reasoning_content` as its older name: the first
            # that is set (the other, when it says something else, counted as not kept)
            reasoning = None
            for field in ("reasoning_content", "reasoning"):
                value = message.get(field)
                if value is None:
                    continue
                if not isinstance(value, str):
                    raise ImportFormatError(
                        f"{field} must be a string", file=str(path), where=f"{at}.{field}"
                    )
                if reasoning is None:
                    reasoning = value
                elif value != reasoning:
                    unkept[field] += 1
            calls = message.get("tool_calls") or []
            legacy = message.get("function_call")
            if legacy is not None:
                if calls:
                    raise ImportFormatError(
                        "a message has tool_calls or, in the older form, a function_call, not both",
                        file=str(path),
                        where=f"{at}.function_call",
                    )
                # one call, answered by the next "function" message: an id of its own
                calls = [{"id": f"function_call:{k}", "function": legacy}]
                called = legacy.get("name") if isinstance(legacy, Mapping) else None
                function_call = (f"function_call:{k}", str(called))
            refusal = message.get("refusal")
            if content in (None, "") and isinstance(refusal, str) and refusal:
                content = refusal  # what the assistant said instead of an answer
            if content is not None or reasoning is not None or not calls:
                # (an assistant turn with neither text nor calls is kept, as an empty one)
                text = _text(content, path, f"{at}.content")
                if _calls_in_text(text, callable_names):
                    raise _LeftOut("text_calls")
                # "" before calls is no text, as chat templates read it (a message of its own
                # under a text protocol otherwise)
                if text or reasoning is not None or not calls:
                    events.append(AssistantMessage(text, reasoning))
                    said = True
            if not isinstance(calls, list):
                raise ImportFormatError(
                    "tool_calls must be a list", file=str(path), where=f"{at}.tool_calls"
                )
            in_message: set[str] = set()
            for i, call in enumerate(calls):
                cat = f"{at}.function_call" if legacy is not None else f"{at}.tool_calls[{i}]"
                fat = cat if legacy is not None else f"{cat}.function"  # the function's path
                source_id, name, args = _call(call, path, cat, fat)
                call_id = str(len(call_ids))
                call_ids.append(source_id)
                latest[source_id] = (None if source_id in in_message else call_id, k)
                in_message.add(source_id)
                name = rename.get(name, name)
                if name == skill_tool:
                    skill = args.get(harness.skill_arg or "")
                    loaded = (
                        harness.skill(skill_ids.get(unicodedata.normalize("NFC", skill), skill))
                        if isinstance(skill, str)
                        else None
                    )
                    if loaded is None:
                        raise _LeftOut("unknown_skill")
                    answered_by_skill[call_id] = loaded
                    events.append(SkillLoad(loaded.id))
                elif name not in tools:
                    raise _LeftOut("unlisted_by_harness" if given else "unlisted_tool")
                else:
                    events.append(ToolCall(call_id, name, args))
            # calls after the text of the message before are that turn's: one message
            joined = joined or bool(calls and after_text and not said)
            text_only = said and not calls
        elif role in ("tool", "function"):
            reply_to = message.get("tool_call_id")
            if role == "function":  # the older form: the result of the last function_call
                if function_call is None:
                    raise ImportFormatError(
                        "a function message answers no earlier function_call of this row",
                        file=str(path),
                        where=at,
                    )
                (reply_to, called), function_call = function_call, None
                if message.get("name", called) != called:
                    raise ImportFormatError(
                        f"the function message names {message.get('name')!r}, and the "
                        f"function_call it answers calls {called!r}",
                        file=str(path),
                        where=f"{at}.name",
                    )
            if not isinstance(reply_to, str) or reply_to not in latest:
                raise ImportFormatError(
                    f"tool_call_id {reply_to!r} answers no earlier tool call of this row",
                    file=str(path),
                    where=f"{at}.tool_call_id",
                )
            answered, called_at = latest[reply_to]
            if answered is None:
                raise ImportFormatError(
                    f"tool_call_id {reply_to!r} is ambiguous: two tool calls of the assistant "
                    f"message at $.messages[{called_at}] have that id",
                    file=str(path),
                    where=f"{at}.tool_call_id",
                )
            content = _text(message.get("content"), path, f"{at}.content")
            # hooks of the harness injected into the result (appended in their wrappers, as
            # the harness renders them) are firings of those hooks, after the result
            content, fired_after = _tool_hooks(harness, content) if harness.hooks else (content, [])
            if answered in answered_by_skill:
                # the skill's content, shown by the harness when it renders the load; a result
                # that is not the skill (a failed load) cannot be shown so: the row is left out
                skill = answered_by_skill[answered]
                if message.get("is_error") or not _is_skill(content, skill):
                    raise _LeftOut("unlike_skill")
                if _beyond_skill(content, skill):
                    unkept[BEYOND_SKILL] += 1
            else:
                error = bool(message.get("is_error", False))
                events.append(ToolResult(answered, content, error))
            events.extend(fired_after)
        elif role in SYSTEM_ROLES:
            text = _text(message.get("content"), path, f"{at}.content")
            fired = _hook_of(harness, text, READ_AS["system"])
            if fired is None:
                raise _LeftOut("later_system")
            events.append(fired)
        else:
            raise ImportFormatError(
                f"unknown role {role!r} (expected system, user, assistant or tool; function "
                "in the older form)",
                file=str(path),
                where=f"{at}.role",
            )
    if joined:
        unkept[JOINED] += 1
    events, moved = results_in_call_order(events)
    if moved:
        unkept[REORDERED] += 1
    return normalize_call_ids(events), call_ids


def _kept(message: Mapping[str, Any], key: str) -> bool:
    """Whether a message's field ``key`` (one ``_events`` does not read) says nothing a row
    loses: empty, a tool message's ``name`` (its call's), a ``refusal`` read as the text (when
    there is no other), an ``is_error`` flag of a result, an assistant turn's ``weight`` of 1
    (trained on; weight 0 leaves the row out)."""
    role, value = message.get("role"), message[key]
    if value is None or value == [] or value == "":
        return True
    if key == "name":
        return role in ("tool", "function")
    if key == "weight":  # OpenAI's fine-tuning format: 1 trains on the turn, as a row does
        return role == "assistant" and value == 1 and value is not True
    if key == "refusal":
        return role == "assistant" and message.get("content") in (None, "")
    return key == "is_error" and role in ("tool", "function")


def _call(call: Any, path: Path, where: str, fat: str) -> tuple[str, str, dict[str, Any]]:
    """A call at ``where`` as (source id, name, arguments); ``fat``: the path of its function
    object (``where.function``, or ``where`` itself for the older form's function_call)."""
    if isinstance(call, Mapping) and call.get("type") == "custom":
        raise _LeftOut("custom_tools")  # free-form input, no arguments object
    function = call.get("function") if isinstance(call, Mapping) else None
    if not isinstance(function, Mapping) or not isinstance(function.get("name"), str):
        shape = (
            '{"name", "arguments"}'  # the older form's function_call
            if fat == where
            else '{"id", "type": "function", "function": {"name", "arguments"}}'
        )
        raise ImportFormatError(f"a tool call must be {shape}", file=str(path), where=where)
    call_id = call.get("id")
    if not isinstance(call_id, str) or not call_id:
        raise ImportFormatError(
            "a tool call needs a string id", file=str(path), where=f"{where}.id"
        )
    raw = function.get("arguments")
    if isinstance(raw, Mapping):  # an object already (not the API's JSON text)
        args: Any = dict(raw)
        return call_id, function["name"], _narrow(args, fat, path)
    if raw in (None, ""):
        return call_id, function["name"], {}
    if not isinstance(raw, str) or not raw.strip():
        if isinstance(raw, str):  # blank: no arguments, as ""
            return call_id, function["name"], {}
        raise _LeftOut("bad_arguments")  # a number, a list: no object either
    numbers = _Numbers()
    suspect = may_be_unwritable(raw)  # (a quick look: NaN, 1e400, 20 digits are rare)
    hooks: dict[str, Any] = (
        {"parse_constant": _no_constant, "parse_float": numbers.read} if suspect else {}
    )
    try:
        args, repeated = read_json(raw, **hooks)
    except json.JSONDecodeError:
        raise _LeftOut("bad_arguments") from None  # as a model wrote them: said, not refused
    except ValueError:  # an integer of more than 4,300 digits, so beyond 64 bits too
        raise _LeftOut("wide_integer") from None
    except RecursionError as exc:
        refuse_unreadable(exc, ImportFormatError, file=str(path), where=f"{fat}.arguments")
    if not isinstance(args, dict):
        raise _LeftOut("bad_arguments")
    if repeated.of(args) is not None:  # as parse refuses them: which was meant is not known
        raise _LeftOut("repeated_argument")
    if not suspect:
        return call_id, function["name"], args
    return call_id, function["name"], _narrow(args, fat, path, past_double=numbers.past)


def _no_constant(text: str) -> float:
    """NaN or an infinity in a call's arguments text: Python's reader takes them, JSON has
    none, so the arguments are no JSON object (the row is left out, as for other text a model
    wrote that is not JSON, whatever else the text holds)."""
    raise _LeftOut("bad_arguments")


class _Numbers:
    """The numbers of a call's arguments text as they are read, with whether one was past a
    double's range (``1e400``: valid JSON, read as an infinity; read as 0 here, the row being
    left out once nothing refuses the file)."""

    def __init__(self) -> None:
        self.past = False

    def read(self, text: str) -> float:
        value = float(text)
        if math.isinf(value):
            self.past = True
            return 0.0
        return value


def _narrow(
    args: dict[str, Any], fat: str, path: Path, *, past_double: bool = False
) -> dict[str, Any]:
    """``args`` (of the function at ``fat``), refused when they hold a value no dataset row
    can hold (``unwritable``); valid JSON a dataset cannot hold leaves the row out: a number
    past a double's range (``past_double``: the text held one) or an integer beyond 64 bits.
    Whatever the order of the keys, a refusal comes first, then a number past a double."""
    bad = unwritable(args, f"{fat}.arguments", wide=False)  # not JSON, nor UTF-8: refused
    if bad is not None:
        raise ImportFormatError(bad[1], file=str(path), where=bad[0])
    if past_double:
        raise _LeftOut("huge_number")
    if unwritable(args, "") is not None:
        raise _LeftOut("wide_integer")
    return args
