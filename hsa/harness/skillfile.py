"""SKILL.md files in the Agent Skills format: YAML front matter, then Markdown."""

from __future__ import annotations

from pathlib import Path

import yaml

from hsa.errors import HarnessError
from hsa.harness.model import Skill

FRONT_MATTER_FIELDS = ("name", "description")


def parse_skill_md(text: str, *, skill_id: str, file: str | None = None) -> Skill:
    """Parse SKILL.md text; the front matter must hold at least ``name`` and ``description``."""
    if text.startswith("\ufeff"):
        text = text[1:]
    lines = text.splitlines(keepends=True)
    if not lines or lines[0].rstrip("\r\n") != "---":
        raise HarnessError(
            "SKILL.md must start with '---' and YAML front matter", file=file, where="line 1"
        )
    end = next((i for i in range(1, len(lines)) if lines[i].rstrip("\r\n") == "---"), None)
    if end is None:
        raise HarnessError(
            "front matter is not closed by a '---' line", file=file, where="front matter"
        )
    try:
        front = yaml.safe_load("".join(lines[1:end]))
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = f"line {mark.line + 2}" if mark is not None else "front matter"
        reason = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise HarnessError(
            f"front matter is not valid YAML: {reason}", file=file, where=line
        ) from None
    if not isinstance(front, dict):
        raise HarnessError("front matter must be a YAML mapping", file=file, where="front matter")
    for key in FRONT_MATTER_FIELDS:
        if not isinstance(front.get(key), str) or not front[key].strip():
            raise HarnessError(
                f"front matter needs a non-empty string {key!r}",
                file=file,
                where=f"front matter.{key}",
            )
    extra = {k: v for k, v in front.items() if k not in FRONT_MATTER_FIELDS}
    return Skill(
        id=skill_id,
        name=front["name"],
        description=front["description"],
        content="".join(lines[end + 1 :]),
        extra=extra,
    )


def dump_skill_md(skill: Skill) -> str:
    """The SKILL.md text for ``skill``; ``parse_skill_md`` reads it back unchanged."""
    front = {"name": skill.name, "description": skill.description, **dict(skill.extra)}
    header = yaml.safe_dump(front, sort_keys=False, allow_unicode=True, width=100)
    return f"---\n{header}---\n{skill.content}"


def load_skill_dir(path: str | Path) -> Skill:
    """Load an Agent Skills folder (``<id>/SKILL.md``); the folder name is the skill id."""
    path = Path(path)
    file = path / "SKILL.md"
    if not file.is_file():
        raise HarnessError("no SKILL.md in the skill folder", file=str(path))
    try:
        text = file.read_text("utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise HarnessError(f"cannot read: {exc}", file=str(file)) from None
    return parse_skill_md(text, skill_id=path.name, file=str(file))
