"""Import a tools file (OpenAI, MCP or Anthropic format, detected per entry) as one harness."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from hsa.harness.importers.base import (
    ImportResult,
    api_sections,
    drop_self,
    harness_id,
    read_json,
    renamed_note,
)
from hsa.harness.model import Harness, Prompt
from hsa.harness.toolformats import tools_from_document


def import_tools(path: Path) -> ImportResult:
    """One harness holding the tools of ``path``, stored in OpenAI form with legal names.

    ``metadata["name_map"]`` maps each renamed tool's legal name back to its source name. The
    tools are those the tau2 importer makes of the same file (a tau2 domain's tools.json
    imported on its own): a bound method's ``self`` is dropped (``drop_self``). The result's
    notes say which names were made legal and how many ``self`` parameters were dropped.
    """
    tools, name_map = tools_from_document(read_json(path, once=True), file=str(path))
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
    return ImportResult(harnesses=(harness,), source=str(path), format="tools", notes=notes)
