"""What an importer returns, and the pieces importers share: source reading, prompt text, tasks."""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from hsa.config import KeyGivenTwice, loads_written_json
from hsa.errors import (
    HarnessError,
    HarnessValidationError,
    HsaError,
    ImportFormatError,
    first_few,
    refuse_unreadable,
)
from hsa.harness.events import Trajectory
from hsa.harness.jsonvalues import may_be_unwritable, unwritable
from hsa.harness.model import Harness, Section, Tool
from hsa.harness.toolformats import ToolPlace, in_file
from hsa.harness.validate import harness_problems

ID_PATTERN = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.:-]*")  # fullmatch: "$" lets a final "\n" by


@dataclass(frozen=True, slots=True)
class ImportResult:
    """Harnesses, tasks (``tasks.jsonl`` rows) and canonical trajectories read from one source.

    Task rows are plain dicts in the row format of ``hsa.envs.Task.to_dict``: ``id``, ``env``,
    ``kind``, ``split``, ``harness_id``, ``turns``, ``ground_truth``, ``metadata``.
    """

    harnesses: tuple[Harness, ...]
    tasks: tuple[dict[str, Any], ...] = ()
    trajectories: tuple[Trajectory, ...] = ()
    source: str = ""
    format: str = ""
    #: Files of a folder that could not be imported (each error names its file and why);
    #: the result holds everything else.
    failures: tuple[HsaError, ...] = ()
    #: What a user should know about the import, one sentence each (e.g. unscored tasks).
    notes: tuple[str, ...] = ()

    def counts(self) -> dict[str, int]:
        """How many harnesses, tools, skills, tasks and trajectories the import holds."""
        return {
            "harnesses": len(self.harnesses),
            "tools": sum(len(h.tools) for h in self.harnesses),
            "skills": sum(len(h.skills) for h in self.harnesses),
            "tasks": len(self.tasks),
            "trajectories": len(self.trajectories),
        }


#: the splits a task may be in
SPLITS = ("train", "dev", "test")


def task_row(
    *,
    id: str,
    env: str,
    kind: str,
    split: str,
    harness_id: str | None,
    turns: Sequence[str],
    ground_truth: Mapping[str, Any],
    metadata: Mapping[str, Any],
) -> dict[str, Any]:
    """One ``tasks.jsonl`` row, keys in the order ``hsa.envs.Task.to_dict`` writes them."""
    return {
        "id": id,
        "env": env,
        "kind": kind,
        "split": split,
        "harness_id": harness_id,
        "turns": list(turns),
        "ground_truth": dict(ground_truth),
        "metadata": dict(metadata),
    }


def literal_template(text: str) -> str:
    """A Jinja2 template that renders exactly ``text``.

    Prompt section bodies are templates; imported text (policies, system messages) is data,
    so every Jinja2 opening delimiter in it is emitted as a string expression instead, and so
    is every carriage return (Jinja2 reads a template's line breaks as ``\n``: a CRLF system
    message would come out LF).
    """
    return _LITERAL.sub(_literal_part, text)


#: what ``literal_template`` writes as an expression: an opening delimiter, a carriage return,
#: and a ``{`` before one (it would open a delimiter with the expression written after it)
_LITERAL = re.compile(r"\{[{%#]|\{(?=\r)|\r")


def _literal_part(match: re.Match[str]) -> str:
    found = match.group(0)
    return "{{ '\\r' }}" if found == "\r" else "{{ '" + found + "' }}"


def system_section(text: str) -> Section:
    """A persona section holding a source system message, verbatim.

    It has no title: an untitled section renders as its bare body, so under the ``api``
    protocol the harness's system prompt is exactly the source's system message.
    """
    return Section(
        id="system", kind="persona", title="", body=literal_template(text), verbatim=True
    )


def api_sections(*leading: Section) -> tuple[Section, ...]:
    """``leading`` sections, then tool docs and call instructions for in-prompt protocols.

    Both trailing sections render empty (and are left out) under the ``api`` protocol; they are
    there so that switching the harness to a text protocol shows the tools and the call format.
    """
    return (
        *leading,
        Section(id="tools", kind="tools", title="Tools"),
        Section(id="output_format", kind="output_format", title="Output format"),
    )


def drop_self(tools: Sequence[Tool], file: str = "tools.json") -> tuple[list[Tool], str | None]:
    """``tools`` without the untyped ``self`` parameter of schemas generated from bound Python
    methods (tau2-bench's ``tools.json``), and the import note saying so (None when no tool
    had one).

    Such a schema lists ``self: {"title": "Self"}`` as a required argument: it is the method's
    receiver, never shown to an agent, and no reference call passes it, so the schema would
    reject every one. A tools file gives the same tools whichever importer reads it. A schema
    whose ``properties`` is no object, or whose ``required`` is no list, is left as it is: the
    harness validation that follows refuses it, naming its JSON path.
    """
    out: list[Tool] = []
    dropped: list[str] = []
    for tool in tools:
        props = tool.parameters.get("properties")
        required = tool.parameters.get("required", [])
        if not isinstance(props, Mapping) or not isinstance(required, list):
            out.append(tool)
            continue
        receiver = props.get("self")
        if isinstance(receiver, Mapping) and "type" not in receiver and set(receiver) <= {"title"}:
            params = {
                **tool.parameters,
                "properties": {k: v for k, v in props.items() if k != "self"},
            }
            if "required" in params:
                params["required"] = [r for r in required if r != "self"]
            tool = replace(tool, parameters=params)
            dropped.append(tool.name)
        out.append(tool)
    if not dropped:
        return out, None
    return out, (
        f"dropped the untyped 'self' parameter that {file} lists for "
        f"{len(dropped)} tool(s) ({first_few(dropped)}): it is the Python method receiver, "
        "never a model argument"
    )


def renamed_note(name_map: Mapping[str, str]) -> str | None:
    """What a user reads about the tool names an import made API-legal (``name_map``: legal
    name -> source name, as a harness keeps it); None when none was renamed."""
    if not name_map:
        return None
    pairs = [f"{source!r} -> {legal!r}" for legal, source in name_map.items()]
    return (
        f"{len(pairs)} tool name(s) are not legal in an OpenAI API request (letters, digits, "
        f"_ and - only, at most 64 characters) and were renamed: {first_few(pairs)}; the "
        "harness keeps the source names in its metadata (name_map)"
    )


def harness_id(name: str, *, fallback: str = "harness") -> str:
    """``name`` made into a valid harness id (letters, digits, ``_.:-``; no leading symbol)."""
    cleaned = re.sub(r"[^A-Za-z0-9_.:-]+", "-", name).strip("-_.:")
    return cleaned if cleaned and ID_PATTERN.fullmatch(cleaned) else fallback


def read_text(path: Path) -> str:
    """The text of ``path`` (UTF-8; a byte order mark at the start is skipped)."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise ImportFormatError("file not found", file=str(path)) from None
    except OSError as exc:
        raise ImportFormatError(f"cannot read: {exc}", file=str(path)) from None
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        bom = 3 if data.startswith(b"\xef\xbb\xbf") else 0
        start = exc.start + bom  # the decoder's offset is past the byte order mark
        line = data.count(b"\n", 0, start) + 1
        column = start - max(data.rfind(b"\n", 0, start) + 1, bom)  # as text_lines counts
        raise ImportFormatError(
            f"not UTF-8: {exc.reason} at byte {column}", file=str(path), where=f"line {line}"
        ) from None


def invalid_json(
    exc: json.JSONDecodeError, path: Path, line: int, hint: str = ""
) -> ImportFormatError:
    """The error for JSON in ``path`` that does not parse: the reason, the line and column
    (and ``hint``, what the reader makes of it)."""
    return ImportFormatError(
        f"invalid JSON: {exc.msg} (column {exc.colno}){hint}", file=str(path), where=f"line {line}"
    )


def read_json(path: Path, *, once: bool = False) -> Any:
    """The JSON document at ``path``; a syntax error names its line and column. ``once``: a
    document people write (a tools file), where a key given twice is refused rather than
    read as the last (``hsa.config.keys_once``)."""
    text = read_text(path)
    if not text.strip():
        raise ImportFormatError("is empty: expected a JSON document", file=str(path))
    try:
        doc = loads_written_json(text) if once else json.loads(text)
    except json.JSONDecodeError as exc:
        raise invalid_json(exc, path, exc.lineno) from None
    except KeyGivenTwice as exc:
        raise ImportFormatError(str(exc), file=str(path)) from None
    except (RecursionError, ValueError) as exc:
        refuse_unreadable(exc, ImportFormatError, file=str(path))
    if may_be_unwritable(text):
        _refuse_unwritable(doc, path, "$")
    return doc


def text_lines(path: Path, *, at: Callable[[int], None] | None = None) -> Iterator[tuple[int, str]]:
    """``(line number, text)`` for every non-blank line of ``path`` (1-based), read a line at
    a time: a file is never held whole, as one string or a list of lines. Lines end at ``\n``
    (a ``\r`` before it is whitespace), not at the other line boundaries ``str.splitlines``
    knows: a JSON string may hold U+2028, U+2029 or U+0085 unescaped. A UTF-8 byte order mark
    at the start is skipped. ``at``, when given, is told the bytes read so far before each line
    is yielded (for progress)."""
    try:
        handle = path.open("rb")
    except FileNotFoundError:
        raise ImportFormatError("file not found", file=str(path)) from None
    except OSError as exc:
        raise ImportFormatError(f"cannot read: {exc}", file=str(path)) from None
    read = 0
    with handle:
        for lineno, raw in enumerate(handle, start=1):
            read += len(raw)
            try:
                # a byte order mark before the first line (Windows tools write one) is no text
                line = raw.decode("utf-8-sig" if lineno == 1 else "utf-8")
            except UnicodeDecodeError as exc:
                raise ImportFormatError(
                    f"not UTF-8: {exc.reason} at byte {exc.start}",
                    file=str(path),
                    where=f"line {lineno}",
                ) from None
            if line.strip():
                if at is not None:
                    at(read)
                yield lineno, line


def read_json_lines(
    path: Path, *, at: Callable[[int], None] | None = None
) -> Iterator[tuple[int, Any]]:
    """``(line number, object)`` for every non-blank line of a JSON Lines file (1-based; see
    ``text_lines``, and its ``at``)."""
    first = True
    for lineno, line in text_lines(path, at=at):
        try:
            # without its line break: an error at the end of the line is placed on it, not at
            # column 1 of the next
            row, odd = _loads(line.rstrip("\r\n"))
        except json.JSONDecodeError as exc:
            hint = ""
            if first and _one_document(path):
                hint = (
                    "; the file is one JSON document spread over lines, and this format reads "
                    "JSON Lines: one JSON value per line"
                )
            raise invalid_json(exc, path, lineno, hint) from None
        except (RecursionError, ValueError) as exc:
            refuse_unreadable(exc, ImportFormatError, file=str(path), where=f"line {lineno}")
        first = False
        if odd or ("\\u" in line and _SURROGATE_ESCAPE.search(line)):
            _refuse_unwritable(row, path, f"line {lineno}: $")
        yield lineno, row


class _NotFinite(ValueError):
    """A JSON number that reads as NaN or an infinity."""


def _finite(text: str) -> float:
    value = float(text)
    if math.isinf(value):
        raise _NotFinite
    return value


def _not_finite(text: str) -> float:
    raise _NotFinite


def _loads(text: str) -> tuple[Any, bool]:
    """``json.loads(text)``, and whether it holds NaN or an infinity (found as it is read:
    a pattern searched over every line cost half as much as reading it)."""
    try:
        return json.loads(text, parse_float=_finite, parse_constant=_not_finite), False
    except _NotFinite:
        return json.loads(text), True


#: a JSON escape of a UTF-16 surrogate: half of a pair, or a lone one
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")


def _refuse_unwritable(value: Any, path: Path, where: str) -> None:
    """Refuse ``value`` (read from ``path``) when it holds NaN, Infinity or a lone surrogate,
    which Python's JSON reader accepts and no dataset row can hold. (Integers past 64 bits,
    valid JSON, are checked where they reach a row: a chat row holding one in its arguments or
    schemas is left out; a tools file holding one is refused.)"""
    bad = unwritable(value, where, wide=False)
    if bad is not None:
        raise ImportFormatError(bad[1], file=str(path), where=bad[0])


def _one_document(path: Path, limit: int = 64 << 20) -> bool:
    """Whether ``path`` (up to ``limit`` bytes) holds one JSON document over several lines."""
    try:
        if path.stat().st_size > limit:
            return False
        text = path.read_text("utf-8-sig")
        json.loads(text)
    except (OSError, UnicodeDecodeError, ValueError):
        return False
    return text.strip().count("\n") > 0


def check_harnesses(
    harnesses: Sequence[Harness],
    *,
    source: str,
    lines: Sequence[int] | None = None,
    places: Sequence[Callable[[], Sequence[ToolPlace]]] | None = None,
) -> None:
    """Raise ``HarnessValidationError`` if an imported harness breaks the harness schema;
    ``lines``, when given, are the lines of ``source`` the harnesses were first met on (each
    problem names its line); ``places``, when given, make where each harness's tools are in
    that line (a problem with a tool is named at the path the line holds,
    ``$.tools[0].function``, not the harness document's), called only for a harness with a
    problem."""
    found: list[HsaError] = []
    seen: set[str] = set()
    for index, harness in enumerate(harnesses):
        if harness.id in seen:
            found.append(HarnessError(f"two harnesses are both called {harness.id!r}", file=source))
        seen.add(harness.id)
        at = f"harness {harness.id}"
        if lines is not None:
            at = f"line {lines[index]} (harness {harness.id})"
        in_line: Sequence[ToolPlace] | None = None  # made once, at its first problem
        for problem in harness_problems(harness):
            where, message = problem.where, problem.message
            if places is not None:
                in_line = places[index]() if in_line is None else in_line
                inside = in_file(where or "$", message, in_line)
                where, message = inside if inside is not None else (where, message)
            found.append(HarnessError(message, file=source, where=f"{at}: {where}"))
    if found:
        raise HarnessValidationError(found)
