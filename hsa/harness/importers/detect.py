"""Tell which importer a source path needs, from its layout, name and first record."""

from __future__ import annotations

import json
from pathlib import Path

from hsa.errors import ImportFormatError, UnknownFormatError, first_few
from hsa.harness.importers.base import invalid_json, read_text, text_lines
from hsa.harness.importers.bfcl import DOC_DIR, QUESTION_FILE, is_bfcl_dir
from hsa.harness.importers.skills import skill_folders
from hsa.harness.importers.tau2 import TASKS_FILE, domains, not_a_domain
from hsa.harness.skillfile import SKILL_FILES
from hsa.harness.toolformats import SCHEMA_KEYS

FORMATS = ("tools", "agent-skills", "bfcl", "tau2", "openai-jsonl")


def detect_format(src: str | Path) -> str:
    """The format of ``src``: one of ``FORMATS``.

    ``UnknownFormatError`` when it cannot tell, saying what it expected but not how to name
    the format: that is the caller's to add (``hsa harness import``: ``--format``).
    Other ``ImportFormatError``s when ``src`` is missing, empty or not JSON."""
    path = Path(src)
    if not path.exists():
        raise ImportFormatError("no such file or directory", file=str(path))
    if path.is_dir():
        if skill_folders(path):
            return "agent-skills"
        if domains(path):
            return "tau2"
        if is_bfcl_dir(path):
            return "bfcl"
        if _tasks_without_tools(path):
            raise not_a_domain(path)  # tau2-bench's own data folder: how to write tools.json
        raise UnknownFormatError(
            "cannot tell the format of this folder: expected Agent Skills (folders with "
            "SKILL.md), tau2 domains (tools.json + tasks.json) or BFCL files (BFCL_v4_*.json, "
            f"{DOC_DIR}/)",
            file=str(path),
        )
    if path.name in SKILL_FILES:  # not JSON: the skills importer says what to import instead
        return "agent-skills"
    if QUESTION_FILE.match(path.name) or path.parent.name == DOC_DIR:
        return "bfcl"
    first, more = _first_lines(path)
    if first is None:
        raise ImportFormatError(
            "is empty: expected a tools file (JSON), OpenAI chat rows (JSON Lines) or a BFCL file",
            file=str(path),
        )
    if more:
        try:  # several JSON values, one a line: JSON Lines (read no further than line 2)
            return _record_format(json.loads(first), path)
        except json.JSONDecodeError:
            pass  # one JSON document over several lines
    text = read_text(path)
    try:
        # without the final line break: an error at the end is placed on the last line
        doc = json.loads(text.rstrip())
    except json.JSONDecodeError as exc:
        if exc.msg != "Extra data":  # several JSON values, one a line: JSON Lines
            raise invalid_json(exc, path, exc.lineno) from None
        first = next((line for line in text.split("\n") if line.strip()), "")
        try:
            doc = json.loads(first)
        except json.JSONDecodeError as line_exc:
            raise invalid_json(line_exc, path, 1) from None
        return _record_format(doc, path)
    if isinstance(doc, dict) and "messages" in doc:
        return "openai-jsonl"  # a single-row JSONL file
    if isinstance(doc, list) and doc and isinstance(doc[0], dict) and "messages" in doc[0]:
        raise ImportFormatError(
            "a JSON array of chat rows: chat rows are read as JSON Lines, one row per line "
            "(write each element of the array on a line of its own)",
            file=str(path),
        )
    if isinstance(doc, dict) and "question" in doc:
        return "bfcl"
    if isinstance(doc, list) and doc and isinstance(doc[0], dict):
        keys = doc[0].keys()
        if "user_scenario" in keys:
            raise ImportFormatError(
                "a tau2 tasks file: import its domain folder (tools.json and tasks.json)",
                file=str(path),
            )
        if not keys & _TOOL_KEYS and doc[0].get("type") != "function":
            shown = first_few(sorted(map(str, keys)), 6) if keys else "no fields"
            raise ImportFormatError(
                "a JSON array of records that are neither tool definitions nor chat rows "
                f"(the first has {shown}): hsa imports OpenAI chat rows "
                '({"messages": [...]}, as JSON Lines), tool lists, BFCL, tau2 and Agent Skills; '
                "convert the records to OpenAI chat rows",
                file=str(path),
            )
    return "tools"


#: fields of some tool definition (OpenAI, MCP, Anthropic), even one the tools importer refuses
_TOOL_KEYS = frozenset(("name", "function", *SCHEMA_KEYS.values()))


def _tasks_without_tools(path: Path) -> bool:
    """Whether ``path`` or a folder in it holds tau2's ``tasks.json`` (and no tools file)."""
    return (path / TASKS_FILE).is_file() or any(
        (sub / TASKS_FILE).is_file() for sub in path.iterdir() if sub.is_dir()
    )


def _first_lines(path: Path) -> tuple[str | None, bool]:
    """The first non-blank line of ``path`` (``None``: the file is blank), and whether
    another follows it. A line that cannot be read (not UTF-8) is refused naming it."""
    first = None
    for _, line in text_lines(path):
        if first is not None:
            return first, True
        first = line
    return first, False


def _record_format(record: object, path: Path) -> str:
    if isinstance(record, dict):
        if "messages" in record:
            return "openai-jsonl"
        if "question" in record or "involved_classes" in record:
            return "bfcl"
    raise UnknownFormatError(
        "cannot tell the format of this JSON Lines file: expected OpenAI chat rows "
        '({"messages": [...]}) or BFCL entries ({"id", "question", "function"})',
        file=str(path),
    )
