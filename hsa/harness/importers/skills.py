"""Import Agent Skills: one skill folder, or a folder of skill folders, as one harness."""

from __future__ import annotations

from pathlib import Path

from hsa.errors import ImportFormatError
from hsa.harness.importers.base import ImportResult, api_sections, harness_id
from hsa.harness.model import Harness, Prompt, Section, Tool
from hsa.harness.skillfile import load_skill_dir

SKILL_FILE = "SKILL.md"
SKILL_TOOL = Tool(
    name="load_skill",
    description=(
        "Load the full instructions of one of the skills listed in the system prompt. "
        "Call it before following a skill."
    ),
    parameters={
        "type": "object",
        "properties": {"name": {"type": "string", "description": "The id of the skill to load."}},
        "required": ["name"],
    },
)


def skill_folders(path: Path) -> list[Path]:
    """The skill folders at ``path``: itself when it holds a SKILL.md, else its children that do."""
    if (path / SKILL_FILE).is_file():
        return [path]
    return sorted(p for p in path.iterdir() if p.is_dir() and (p / SKILL_FILE).is_file())


def import_skills(path: Path) -> ImportResult:
    """A harness with the skills at ``path``, a ``load_skill`` tool and a skills catalogue.

    Skills reach the model by progressive disclosure: the prompt lists ids and descriptions,
    and the model loads a skill's content through ``load_skill(name=...)``. The folder name is
    the skill id; a SKILL.md with bad front matter is refused with its file and line.
    """
    if not path.is_dir():
        hint = f": import {path.parent}, the skill's folder" if path.name == SKILL_FILE else ""
        raise ImportFormatError(f"Agent Skills are imported from a folder{hint}", file=str(path))
    folders = skill_folders(path)
    if not folders:
        raise ImportFormatError(
            "no skills here: expected a folder with SKILL.md, or folders that each hold one",
            file=str(path),
        )
    skills = tuple(load_skill_dir(folder) for folder in folders)
    harness = Harness(
        id=harness_id(path.resolve().name, fallback="skills"),
        prompt=Prompt(sections=api_sections(Section(id="skills", kind="skills", title="Skills"))),
        skills=skills,
        skill_tool=SKILL_TOOL,
        metadata={"source": "agent-skills"},
    )
    return ImportResult(harnesses=(harness,), source=str(path), format="agent-skills")
