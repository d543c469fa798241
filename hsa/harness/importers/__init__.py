"""Importers: tools files, Agent Skills, BFCL, tau2 and OpenAI chat JSONL into harnesses.

``import_source(src)`` detects the format (``detect_format``) and returns an ``ImportResult``
of harnesses, tasks and canonical trajectories; ``write_import`` writes it as harness
directories plus ``tasks.jsonl`` and ``trajectories.parquet``. Every harness an importer
returns passes validation.
"""

from __future__ import annotations

from pathlib import Path

from hsa.errors import ImportFormatError, refuse_unreadable
from hsa.harness.importers.base import ImportResult, check_harnesses
from hsa.harness.importers.bfcl import import_bfcl
from hsa.harness.importers.detect import FORMATS, detect_format
from hsa.harness.importers.openai_jsonl import import_openai_jsonl
from hsa.harness.importers.skills import import_skills
from hsa.harness.importers.tau2 import import_tau2
from hsa.harness.importers.tools import import_tools
from hsa.harness.importers.write import write_import
from hsa.harness.model import Harness

__all__ = [
    "FORMATS",
    "ImportResult",
    "detect_format",
    "import_source",
    "write_import",
]


def import_source(
    src: str | Path, *, format: str | None = None, harness: Harness | None = None
) -> ImportResult:
    """Import ``src`` in ``format`` (detected when None).

    ``harness`` applies to ``openai-jsonl`` only: rows are read under it instead of deriving
    harnesses from their tools and system messages.
    """
    try:
        return _import(Path(src), format, harness)
    except (RecursionError, ValueError) as exc:  # JSON past what Python's reader takes
        refuse_unreadable(exc, ImportFormatError, file=str(src))


def _import(path: Path, format: str | None, harness: Harness | None) -> ImportResult:
    if not path.exists():
        raise ImportFormatError("no such file or directory", file=str(path))
    fmt = format or detect_format(path)
    if fmt not in FORMATS:
        raise ImportFormatError(
            f"unknown format {fmt!r}; choose one of {', '.join(FORMATS)}", file=str(path)
        )
    if fmt in ("tools", "openai-jsonl") and path.is_dir():
        raise ImportFormatError(
            f"a folder, and the {fmt} format reads one file "
            f"({'a JSON tool list' if fmt == 'tools' else 'a .jsonl file of OpenAI chat rows'})",
            file=str(path),
        )
    if harness is not None and fmt != "openai-jsonl":
        raise ImportFormatError(
            f"a harness can be given only for openai-jsonl sources, not {fmt}", file=str(path)
        )
    if fmt == "tools":
        result = import_tools(path)
    elif fmt == "agent-skills":
        result = import_skills(path)
    elif fmt == "bfcl":
        result = import_bfcl(path)
    elif fmt == "tau2":
        result = import_tau2(path)
    else:  # checks each harness it derives as it meets it
        return import_openai_jsonl(path, harness=harness)
    check_harnesses(result.harnesses, source=str(path))
    return result
