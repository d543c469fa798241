"""Load and save harnesses as one JSON document or as a harness directory.

A harness directory::

    harness.yaml          id, version, protocol, prompt, hooks, skill_tool, metadata, and
                          references: ``tools: tools.json``, ``skills: [id, ...]``,
                          ``prompt.template_file: prompt.md.j2``
    prompt.md.j2          the system prompt template, when the harness has one
    tools.json            tools (OpenAI, MCP or Anthropic format; saved as OpenAI)
    skills/<id>/SKILL.md  one Agent Skill per folder

``prompt.md.j2``, ``tools.json`` and ``skills/`` are found by convention: each is loaded even
when ``harness.yaml`` does not reference it (skills in folder-name order). A manifest that names
another file or lists skills keeps the last word; one that sets ``prompt.template`` inline
beside a ``prompt.md.j2`` is refused, since one of the two would be ignored.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import yaml

from hsa.errors import (
    HarnessError,
    HarnessValidationError,
    HsaError,
    ImportFormatError,
    TemplateError,
)
from hsa.harness.files import replacing_directory, write_atomic
from hsa.harness.model import Harness
from hsa.harness.sandbox import MAX_TEMPLATE_CHARS
from hsa.harness.skillfile import dump_skill_md, dump_yaml, load_skill_dir
from hsa.harness.toolformats import SCHEMA_KEYS, tool_entries, tool_from_entry
from hsa.harness.validate import document_problems, render_problems

MANIFEST = "harness.yaml"
TOOLS_FILE = "tools.json"
TEMPLATE_FILE = "prompt.md.j2"
SKILLS_DIR = "skills"


class _Sources:
    """Which file each part of an assembled document came from, to point errors at it."""

    def __init__(self, root: Path, manifest: Path):
        self.root = root
        self.manifest = manifest
        self.tools: Path | None = None
        # per tools.json entry: the path prefix of its body and the name of its schema key
        self.tool_layout: dict[int, tuple[str, str]] = {}
        self.template: Path | None = None
        self.skills: dict[int, Path] = {}

    def locate(self, err: HsaError) -> HsaError:
        where = err.where or "$"
        if self.tools is not None and (m := re.match(r"^\$\.tools\[(\d+)\](.*)$", where)):
            index, rest = int(m.group(1)), m.group(2)
            prefix, schema_key = self.tool_layout.get(index, ("", "parameters"))
            if rest.startswith(".parameters"):
                rest = f".{schema_key}{rest[len('.parameters') :]}"
            inside = f"$[{index}]{prefix}{rest}" if rest else f"$[{index}]"
            return HarnessError(err.message, file=str(self.tools), where=inside)
        if m := re.match(r"^\$\.skills\[(\d+)\](?:\.(\w+))?", where):
            file = self.skills.get(int(m.group(1)))
            if file is not None:
                field = m.group(2)
                inside = f"front matter.{field}" if field not in (None, "content") else field
                return HarnessError(err.message, file=str(file), where=inside or None)
        if self.template is not None and where == "$.prompt.template":
            return HarnessError(err.message, file=str(self.template), where=None)
        return HarnessError(err.message, file=str(self.manifest), where=where)


def _read_text(path: Path, *, max_chars: int | None = None) -> str:
    if max_chars is not None:
        try:
            size = path.stat().st_size
        except OSError:
            size = 0
        # UTF-8 takes at most 4 bytes a character: anything larger is over the cap for sure,
        # and is refused before it is read into memory.
        if size > 4 * max_chars:
            raise TemplateError(
                f"template file is {size:,} bytes; the limit is {max_chars:,} characters",
                file=str(path),
            )
    try:
        # Bytes, then decode: text mode would turn "\r\n" and "\r" into "\n", and prompt
        # templates and skill contents must come back exactly as they were saved.
        return path.read_bytes().decode("utf-8")
    except FileNotFoundError:
        raise HarnessError("file not found", file=str(path)) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise HarnessError(f"cannot read: {exc}", file=str(path)) from None


def _read_json(path: Path) -> Any:
    text = _read_text(path)
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise HarnessError(
            f"invalid JSON: {exc.msg} (line {exc.lineno}, column {exc.colno})", file=str(path)
        ) from None


# libyaml's loader, when present, reads the same data several times faster; writing always
# uses the pure-Python dumper so that output bytes never depend on it.
_Loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def _read_yaml(path: Path) -> Any:
    text = _read_text(path)
    try:
        return yaml.load(text, Loader=_Loader)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"line {mark.line + 1}" if mark is not None else None
        reason = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise HarnessError(f"invalid YAML: {reason}", file=str(path), where=where) from None


def read_document(path: str | Path) -> tuple[dict[str, Any], _Sources]:
    """Assemble the harness document at ``path`` (directory, harness.yaml or .json file)."""
    path = Path(path)
    if path.is_dir():
        manifest = path / MANIFEST
        if not manifest.is_file():
            raise HarnessError(f"not a harness directory: no {MANIFEST}", file=str(path))
    elif path.is_file():
        manifest = path
    else:
        raise HarnessError("no such file or directory", file=str(path))
    root = manifest.parent
    sources = _Sources(root, manifest)
    doc = _read_json(manifest) if manifest.suffix == ".json" else _read_yaml(manifest)
    if not isinstance(doc, dict):
        raise HarnessError("a harness document must be a mapping", file=str(manifest), where="$")

    if manifest.name == MANIFEST:
        _by_convention(doc, root, manifest)
    if isinstance(doc.get("tools"), str):
        sources.tools = root / doc["tools"]
        doc["tools"] = _tools_from_file(sources.tools, sources)
    prompt = doc.get("prompt")
    if isinstance(prompt, dict) and "template_file" in prompt:
        ref = prompt.pop("template_file")
        if not isinstance(ref, str):
            raise HarnessError(
                "must name a file", file=str(manifest), where="$.prompt.template_file"
            )
        sources.template = root / ref
        prompt["template"] = _read_text(sources.template, max_chars=MAX_TEMPLATE_CHARS)
    skills = doc.get("skills")
    if isinstance(skills, list) and all(isinstance(s, str) for s in skills):
        loaded = []
        for i, skill_id in enumerate(skills):
            # The id names a folder: the pattern (no '/', no leading '.') keeps it inside skills/.
            if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.:-]*", skill_id):
                raise HarnessError(
                    f"{skill_id!r} is not a valid skill id",
                    file=str(manifest),
                    where=f"$.skills[{i}]",
                )
            folder = root / SKILLS_DIR / skill_id
            sources.skills[i] = folder / "SKILL.md"
            loaded.append(load_skill_dir(folder).to_dict())
        doc["skills"] = loaded
    return doc, sources


def _by_convention(doc: dict[str, Any], root: Path, manifest: Path) -> None:
    """Reference the files at their conventional places that ``harness.yaml`` does not name.

    A file the user put in the harness directory must not be skipped because the manifest
    forgot it; a manifest that names a part (or sets it inline) keeps the last word.
    """
    if "tools" not in doc and (root / TOOLS_FILE).is_file():
        doc["tools"] = TOOLS_FILE
    if "skills" not in doc and (root / SKILLS_DIR).is_dir():
        found = sorted(p.name for p in (root / SKILLS_DIR).iterdir() if (p / "SKILL.md").is_file())
        if found:
            doc["skills"] = found
    if not (root / TEMPLATE_FILE).is_file():
        return
    if doc.get("prompt") is None:
        doc["prompt"] = {}
    prompt = doc["prompt"]
    if not isinstance(prompt, dict) or "template_file" in prompt:
        return
    if "template" in prompt:
        raise HarnessError(
            f"the prompt template is given twice, here and in {TEMPLATE_FILE}: keep one",
            file=str(manifest),
            where="$.prompt.template",
        )
    prompt["template_file"] = TEMPLATE_FILE


def _tools_from_file(path: Path, sources: _Sources) -> list[dict[str, Any]]:
    data = _read_json(path)
    try:
        entries = tool_entries(data)
        tools = []
        for i, entry in enumerate(entries):
            tool, fmt = tool_from_entry(entry, where=f"$[{i}]")
            wrapped = fmt == "openai" and "function" in entry
            sources.tool_layout[i] = (".function" if wrapped else "", SCHEMA_KEYS[fmt])
            tools.append(tool.to_dict())
        return tools
    except ImportFormatError as exc:
        raise HarnessError(exc.message, file=str(path), where=exc.where or "$") from None


def problems(path: str | Path) -> list[HsaError]:
    """Every problem with the harness at ``path``, each naming its file and JSON path.

    Beyond the schema, the system prompt is rendered once in the sandbox, so a template that
    only fails at render time (unsafe attribute access, an undefined name, oversize output)
    is reported here rather than in the middle of a build.
    """
    return _check(path)[1]


def _check(path: str | Path) -> tuple[dict[str, Any] | None, list[HsaError]]:
    try:
        doc, sources = read_document(path)
    except HsaError as exc:
        return None, [exc]
    found = document_problems(doc)
    if not found:
        found = render_problems(Harness.from_dict(doc))
    return doc, [sources.locate(p) for p in found]


def load(path: str | Path) -> Harness:
    """Load and validate a harness; raise ``HarnessValidationError`` listing every problem."""
    doc, found = _check(path)
    if found or doc is None:
        raise HarnessValidationError(found)
    return Harness.from_dict(doc)


def loads(text: str, *, file: str | None = None) -> Harness:
    """A harness from one JSON document (as written by ``Harness.to_json``)."""
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as exc:
        raise HarnessError(f"invalid JSON: {exc.msg}", file=file) from None
    found = document_problems(doc, file=file)
    if found:
        raise HarnessValidationError(found)
    return Harness.from_dict(doc)


def save(harness: Harness, path: str | Path) -> Path:
    """Write ``harness`` to ``path``: a ``.json`` file, or else a harness directory.

    The directory is written beside its destination, synced and renamed into place
    (``hsa.harness.files``), so a failure never leaves a half-written harness. An existing
    directory is replaced only if it is a harness.
    """
    path = Path(path)
    if path.suffix == ".json":
        text = json.dumps(harness.to_dict(), ensure_ascii=False, indent=2) + "\n"
        write_atomic(path, text, error=HarnessError)
        return path
    if path.exists() and (
        not path.is_dir() or (any(path.iterdir()) and not (path / MANIFEST).is_file())
    ):
        raise HarnessError(
            "refusing to overwrite: it exists and is not a harness directory", file=str(path)
        )
    with replacing_directory(path, error=HarnessError) as staging:
        write_dir(harness, staging)
    return path


def write_dir(harness: Harness, root: Path) -> None:
    """Write the files of ``harness`` into the existing, empty directory ``root``.

    Not atomic on its own: ``save`` and the importers write into a staging directory that
    ``hsa.harness.files.replacing_directory`` fsyncs and renames into place.
    """
    doc = harness.to_dict()
    tools = doc.pop("tools")
    skills = doc.pop("skills")
    _write_text(
        root / TOOLS_FILE,
        json.dumps(
            [{"type": "function", "function": t} for t in tools], ensure_ascii=False, indent=2
        )
        + "\n",
    )
    manifest: dict[str, Any] = {"id": doc.pop("id"), "version": doc.pop("version")}
    manifest["protocol"] = doc.pop("protocol")
    prompt = doc.pop("prompt")
    if prompt.get("template") is not None:
        _write_text(root / TEMPLATE_FILE, prompt.pop("template"))
        prompt = {"template_file": TEMPLATE_FILE, **prompt}
    manifest["prompt"] = prompt
    manifest["tools"] = TOOLS_FILE
    manifest["skills"] = [s["id"] for s in skills]
    manifest.update(doc)
    for skill in harness.skills:
        folder = root / SKILLS_DIR / skill.id
        folder.mkdir(parents=True)
        _write_text(folder / "SKILL.md", dump_skill_md(skill))
    _write_text(root / MANIFEST, dump_yaml(manifest))


def _write_text(path: Path, text: str) -> None:
    path.write_bytes(text.encode("utf-8"))  # no newline translation, on any platform
