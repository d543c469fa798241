"""Import a tools file (OpenAI, MCP or Anthropic format, detected per entry) as one harness."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from hsa.errors import HarnessError, HarnessValidationError, HsaError
from hsa.harness.importers.base import (
    ImportResult,
    api_sections,
    drop_self,
    harness_id,
    read_json,
    renamed_note,
)
from hsa.harness.model import Harness, Prompt
from hsa.harness.toolformats import ToolPlace, in_file, legalize, read_tools
from hsa.harness.validate import harness_problems


def import_tools(path: Path) -> ImportResult:
    """One harness holding the tools of ``path``, stored in OpenAI form with legal names.

    ``metadata["name_map"]`` maps each renamed tool's legal name back to its source name. The
    tools are those the tau2 importer makes of the same file (a tau2 domain's tools.json
    imported on its own): a bound method's ``self`` is dropped (``drop_self``). The result's
    notes say which names were made legal and how many ``self`` parameters were dropped. A
    tool the harness schema refuses is refused at its JSON path in the file.
    """
    tools, places = read_tools(read_json(path, once=True), file=str(path))
    tools, name_map = legalize(tools, file=str(path), places=places)
    tools, note = drop_self(tools, path.name)
    notes = tuple(n for n in (renamed_note(name_map), note) if n)
    metadata: dict[str, Any] = {"source": path.name}
    if name_map:
        metadata["name_map"] = name_map
    if notes:  # what the import changed of the tools, kept with them
        metadata["import_notes"] = list(notes)
    harness = Harness(
        id=harness_id(path.stem, fallback="tools"),
        prompt=Prompt(sections=api_sections()),
        tools=tuple(tools),
        metadata=metadata,
    )
    _refuse_invalid_tools(harness, places, str(path))
    return ImportResult(harnesses=(harness,), source=str(path), format="tools", notes=notes)


def _refuse_invalid_tools(harness: Harness, places: Sequence[ToolPlace], file: str) -> None:
    """Refuse the tools the harness schema does not take, each problem at its path in the
    file (the harness document's path would name what the file does not hold: its
    ``parameters`` are the file's ``inputSchema`` or ``input_schema``)."""
    found: list[HsaError] = []
    for problem in harness_problems(harness):
        if (inside := in_file(problem.where or "$", problem.message, places)) is not None:
            where, message = inside
            found.append(HarnessError(message, file=file, where=where))
    if found:
        raise HarnessValidationError(found)
