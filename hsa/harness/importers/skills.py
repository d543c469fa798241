"""Import Agent Skills: one skill folder, or a folder of skill folders, as one harness."""

from __future__ import annotations

import os
import re
import unicodedata
from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from hsa.errors import ImportFormatError, first_few
from hsa.harness.identifiers import replace_identifiers
from hsa.harness.importers.base import ID_PATTERN, ImportResult, api_sections, harness_id
from hsa.harness.importers.write import is_import
from hsa.harness.model import Harness, Prompt, Section, Skill, Tool
from hsa.harness.skillfile import SKILL_FILES, load_skill_dir, skill_file
from hsa.harness.toolformats import legal_name
from hsa.harness.validate import harness_problems, harness_schema

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
    """The skill folders at ``path``: itself when it holds a skill file (``skill_file``), else
    its children that do (hidden folders and earlier imports left out: ``not_read``)."""
    if skill_file(path) is not None:
        return [path]
    return sorted(
        p for p in path.iterdir() if p.is_dir() and not not_read(p) and skill_file(p) is not None
    )


def not_read(folder: Path) -> bool:
    """Whether a folder beside or inside the skills is none of theirs: a hidden one (``.git``,
    the staging folder of an import) or an earlier ``hsa harness import`` (an ``--out`` inside
    the source, which a second run would otherwise read as part of it)."""
    return folder.name.startswith(".") or is_import(folder)


def import_skills(path: Path) -> ImportResult:
    """A harness with the skills at ``path``, a ``load_skill`` tool and a skills catalogue.

    Skills reach the model by progressive disclosure: the prompt lists ids and descriptions,
    and the model loads a skill's content through ``load_skill(name=...)``. The folder name is
    the skill id, made legal where it is not one (``legal_skill_ids``: ``café`` -> ``cafe``),
    and ``metadata["skill_id_map"]`` maps each such id back to its folder name; a folder that
    is a symbolic link is named by its own name, and refused when it leads outside ``path``
    (``_refuse_outside``). A SKILL.md with bad front matter is refused with its file and line.
    """
    if not path.is_dir():
        hint = f": import {path.parent}, the skill's folder" if path.name in SKILL_FILES else ""
        raise ImportFormatError(f"Agent Skills are imported from a folder{hint}", file=str(path))
    folders = skill_folders(path)
    if not folders:
        raise ImportFormatError(
            "no skills here: expected a folder with SKILL.md (or skill.md), or folders that "
            "each hold one",
            file=str(path),
        )
    _refuse_outside(path, folders)
    # each folder's own name, `.` (a skill's own folder) too; not a link's target's
    names = [Path(os.path.abspath(folder)).name for folder in folders]
    ids = legal_skill_ids(names)
    id_map = {i: name for name, i in zip(names, ids, strict=True) if i != name}
    # a skill's text that names another by its folder names it by the id it is loaded by, as
    # skill_ids.rename replaces a renamed id, but only where marked: a folder name that is no
    # legal id may be anything (`données-clients`, `c++`), and prose spells it too
    renamed = {name: i for i, name in id_map.items()}
    skills = tuple(
        _named_by_id(replace(load_skill_dir(folder), id=skill_id), renamed)
        for folder, skill_id in zip(folders, ids, strict=True)
    )
    metadata: dict[str, Any] = {"source": "agent-skills"}
    if id_map:
        metadata["skill_id_map"] = id_map
    bundled = {
        name: files
        for name, folder in zip(names, folders, strict=True)
        if (files := bundled_files(folder))
    }
    notes: tuple[str, ...] = ()
    if bundled:
        metadata["bundled_files"] = bundled
        paths = [f"{skill}/{file}" for skill, files in bundled.items() for file in files]
        notes = (
            f"{len(bundled)} skill(s) bundle {len(paths)} file(s) besides their SKILL.md "
            f"({first_few(paths)}), which the harness does not carry: a skill is loaded as its "
            "SKILL.md. The harness metadata lists them (bundled_files).",
        )
    if id_map:
        pairs = [f"{folder!r} -> {skill_id!r}" for skill_id, folder in id_map.items()]
        notes += (
            f"{len(pairs)} skill folder name(s) are not legal skill ids (letters, digits and "
            f"_.:- only, a letter or digit first, at most {_id_rules()['maxLength']} "
            f"characters) and were renamed: {first_few(pairs)}; a skill keeps its name, a "
            "skill text that names one in backticks or quotes names its id, and the harness "
            "keeps the folder names in its metadata (skill_id_map)",
        )
    folder_names = dict(zip(ids, names, strict=True))
    notes += tuple(spec_notes(skills, folder_names)) + tuple(unread_notes(path, folders))
    harness = Harness(
        id=harness_id(Path(os.path.abspath(path)).name, fallback="skills"),
        prompt=Prompt(sections=api_sections(Section(id="skills", kind="skills", title="Skills"))),
        skills=skills,
        skill_tool=SKILL_TOOL,
        metadata=metadata,
    )
    _refuse_invalid_skills(harness, folders)
    return ImportResult(harnesses=(harness,), source=str(path), format="agent-skills", notes=notes)


def _refuse_outside(path: Path, folders: Sequence[Path]) -> None:
    """Refuse a skill whose file leads outside ``path`` (a symbolic link, of its folder or of
    its SKILL.md): an import reads only the folder it is given, as a harness reads only its
    own files; a link inside it is read."""
    root = path.resolve()
    for folder in folders:
        file = skill_file(folder)
        if file is not None and not file.resolve().is_relative_to(root):
            raise ImportFormatError(
                f"its {file.name} is outside the skills folder {path} (a symbolic link leads "
                f"to {file.resolve()}): an import reads only the folder it is given; copy the "
                "skill in",
                file=str(folder),
            )


def _named_by_id(skill: Skill, renamed: dict[str, str]) -> Skill:
    if not renamed:
        return skill
    return replace(
        skill,
        description=replace_identifiers(skill.description, renamed, marked=renamed.keys()),
        content=replace_identifiers(skill.content, renamed, marked=renamed.keys()),
    )


_NAME_MAX, _DESCRIPTION_MAX = 64, 1024


def spec_name(name: str) -> bool:
    """Whether ``name`` is a name the Agent Skills specification allows: lower-case letters
    (any script's, as its reference validator reads them after NFKC: ``café``, ``技能``),
    digits and single hyphens inside, at most 64 characters."""
    name = _nfkc(name)
    return (
        0 < len(name) <= _NAME_MAX
        and name == name.lower()
        and not name.startswith("-")
        and not name.endswith("-")
        and "--" not in name
        and all(c.isalnum() or c == "-" for c in name)
    )


def legal_skill_ids(names: Sequence[str]) -> list[str]:
    """A legal, unique skill id for each folder name in ``names`` (distinct, as folder names
    are): a legal name is kept; another is made legal as tool names are (``legal_name``:
    ``café`` -> ``cafe``, ``技能`` -> ``skill_`` and a short hash), with the id pattern's
    characters and length, leading symbols cut."""
    rules = _id_rules()
    taken = {n for n in names if len(n) <= rules["maxLength"] and ID_PATTERN.fullmatch(n)}
    out = []
    for name in names:
        if name not in taken:
            name = legal_name(
                name,
                taken,
                illegal=r"[^A-Za-z0-9_.:-]",
                longest=rules["maxLength"],
                fallback="skill_",
                lead="_.:-",
            )
            taken.add(name)
        out.append(name)
    return out


def _id_rules() -> dict[str, Any]:
    """The harness schema's rules for a skill id (its pattern and ``maxLength``)."""
    rules: dict[str, Any] = harness_schema()["$defs"]["skill"]["properties"]["id"]
    return rules


def _refuse_invalid_skills(harness: Harness, folders: Sequence[Path]) -> None:
    """Refuse a skill the harness schema does not take, naming its SKILL.md (the harness
    document's JSON path would name no file the user has)."""
    for problem in harness_problems(harness):
        found = re.match(r"\$\.skills\[(\d+)\]\.?(.*)", problem.where or "")
        if found is not None:
            field = found.group(2)
            raise ImportFormatError(
                f"{field}: {problem.message}" if field else problem.message,
                file=str(skill_file(folders[int(found.group(1))])),
            )


def _nfkc(text: str) -> str:
    return unicodedata.normalize("NFKC", text)


def spec_notes(skills: Sequence[Skill], folders: Mapping[str, str] | None = None) -> list[str]:
    """What a user reads about front matter the Agent Skills specification does not allow
    (kept as it is: runtimes differ in what they accept, but one that picks skills by
    ``name`` will not show the name hsa trains on). ``folders``: skill id -> its folder's
    name, where they differ."""
    notes = []
    folder = dict(folders or {})
    other = [
        f"{folder.get(s.id, s.id)} (name: {s.name})"
        for s in skills
        if _nfkc(s.name) != _nfkc(folder.get(s.id, s.id))  # as the reference validator
    ]
    if other:
        notes.append(
            f"{len(other)} skill(s) name themselves otherwise than their folder "
            f"({first_few(other)}): the specification asks a skill's name to be its folder's; "
            "hsa uses the folder's name as the skill's id"
        )
    named: dict[str, list[str]] = {}
    for skill in skills:
        named.setdefault(skill.name, []).append(skill.id)
    twice = [f"{name} ({', '.join(ids)})" for name, ids in named.items() if len(ids) > 1]
    if twice:
        notes.append(f"{len(twice)} name(s) are given by several skills: {first_few(twice)}")
    bad = [s.name for s in skills if not spec_name(s.name)]
    if bad:
        notes.append(
            f"{len(bad)} skill name(s) are not lower-case letters, digits and single hyphens "
            f"of at most {_NAME_MAX} characters, as the specification asks: {first_few(bad)}"
        )
    long = [s.id for s in skills if len(s.description) > _DESCRIPTION_MAX]
    if long:
        notes.append(
            f"{len(long)} skill description(s) run past the specification's "
            f"{_DESCRIPTION_MAX:,} characters: {first_few(long)}"
        )
    return notes


def unread_notes(path: Path, folders: Sequence[Path]) -> list[str]:
    """What a user reads about the folders beside the skills that hold no skill file."""
    if folders == [path]:
        return []
    unread = sorted(
        p.name for p in path.iterdir() if p.is_dir() and not not_read(p) and p not in folders
    )
    if not unread:
        return []
    return [
        f"{len(unread)} folder(s) hold no SKILL.md and were not read as skills: "
        f"{first_few(unread)} (a skill is a folder with a SKILL.md at its top, spelled so or "
        "all in lower case)"
    ]


def bundled_files(folder: Path) -> list[str]:
    """The files of a skill folder other than the skill file read (``skill_file``: scripts,
    references, templates, a licence, a skill.md beside a SKILL.md), as sorted paths relative
    to it; hidden files and folders, and earlier imports (``not_read``), left out. Links to
    folders are not followed."""
    read = skill_file(folder)
    found: list[str] = []
    for root, dirs, files in os.walk(folder):
        here = Path(root)
        dirs[:] = [d for d in dirs if not not_read(here / d)]
        found.extend(
            (here / name).relative_to(folder).as_posix()
            for name in files
            if not name.startswith(".") and (here / name).is_file() and here / name != read
        )
    return sorted(found)
