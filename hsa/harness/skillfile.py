"""SKILL.md files in the Agent Skills format: YAML front matter, then Markdown.

The specification's front-matter values are strings (``metadata`` a map of strings), and its
reference parser reads them with strictyaml: ``version: 1.10`` is the text ``1.10``, not the
number 1.1, and ``name: 2048`` a name. Front matter is read so, every plain scalar as the text
written; a value of another type (a harness document's skill may hold one) is written with its
tag. A string that other YAML readers would type is written as the source wrote it: plain where
it was plain (``user-invocable: false``, ``license:``, a ``PlainText``), which such a reader
takes for the boolean or null the source meant to it, else quoted (``version: "1.10"``).
"""

from __future__ import annotations

import re
from functools import cache
from pathlib import Path
from typing import Any

import yaml

from hsa.config import yaml_12_floats, yaml_loader, yaml_problem
from hsa.errors import HarnessError
from hsa.harness.jsonvalues import unwritable
from hsa.harness.model import Skill

FRONT_MATTER_FIELDS = ("name", "description")
#: the names a skill folder's file is read by, the one preferred first: the specification's
#: SKILL.md, and skill.md, which its reference parser (skills-ref's ``find_skill_md``) accepts
SKILL_FILES = ("SKILL.md", "skill.md")
# YAML counts these as line breaks; PyYAML's emitter writes them raw inside quoted scalars and
# reads them back folded into spaces, so strings holding one are written double-quoted, where
# they are escaped (\N, \L, \P).
_YAML_BREAKS = ("\x85", "\u2028", "\u2029")


class _Dumper(yaml.SafeDumper):
    pass


def _str_representer(dumper: yaml.SafeDumper, value: str) -> yaml.Node:
    style: str | None
    if any(c in value for c in _YAML_BREAKS):
        style = '"'
    else:
        style = "|" if "\n" in value else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)


_Dumper.add_representer(str, _str_representer)
yaml_12_floats(_Dumper)  # "1e3" written plain would be read back as a number


class PlainText(str):
    """Front-matter text the source wrote as a plain scalar that YAML readers other than the
    specification's type (``true``, ``1.10``, ``~``, nothing): written back plain, so that it
    means to every reader what the source meant. Equal to the text itself."""

    __slots__ = ()


class _PlainScalar(yaml.ScalarNode):
    """A ``PlainText``'s node: written plain, though the dumper resolves it to another type."""


class _TypedScalar(yaml.ScalarNode):
    """A front-matter scalar that is no string: written with its tag, which the front-matter
    reader needs to read it back as what it is."""


class _FrontMatterDumper(_Dumper):
    def serialize_node(self, node: yaml.Node, parent: Any, index: Any) -> None:
        if isinstance(node, _TypedScalar):  # neither tag implicit: the emitter writes it
            self.emit(yaml.ScalarEvent(None, node.tag, (False, False), node.value))
        elif isinstance(node, _PlainScalar):  # the plain tag implicit: written plain
            self.emit(yaml.ScalarEvent(None, node.tag, (True, False), node.value))
        else:
            super().serialize_node(node, parent, index)


def _typed_representer(represent: Any) -> Any:
    def typed(dumper: yaml.SafeDumper, value: Any) -> yaml.Node:
        node = represent(dumper, value)
        return _TypedScalar(node.tag, node.value)

    return typed


for _type, _represent in (
    (bool, yaml.SafeDumper.represent_bool),
    (int, yaml.SafeDumper.represent_int),
    (float, yaml.SafeDumper.represent_float),
    (type(None), yaml.SafeDumper.represent_none),
):
    _FrontMatterDumper.add_representer(_type, _typed_representer(_represent))


def _plain_representer(dumper: yaml.SafeDumper, value: PlainText) -> yaml.Node:
    return _PlainScalar("tag:yaml.org,2002:str", str(value))


_FrontMatterDumper.add_representer(PlainText, _plain_representer)


class _Typing(yaml.resolver.BaseResolver):
    """The types ``_FrontMatterDumper`` resolves a plain scalar to."""

    yaml_implicit_resolvers = _FrontMatterDumper.yaml_implicit_resolvers


def _typed_elsewhere(text: str) -> bool:
    """Whether YAML readers other than the front matter's take plain ``text`` for no string."""
    return _Typing().resolve(yaml.ScalarNode, text, (True, False)) != "tag:yaml.org,2002:str"


@cache
def _front_matter_loader() -> type:
    """``hsa.config.yaml_loader`` reading every untagged scalar as the text written (no
    implicit types: no numbers, booleans or nulls); lists and maps stay lists and maps."""

    class FrontMatter(yaml_loader()):  # type: ignore[misc]
        pass

    FrontMatter.yaml_implicit_resolvers = {}

    def text(loader: Any, node: yaml.ScalarNode) -> str:
        value = loader.construct_scalar(node)
        plain = not node.style  # None, or "" from libyaml
        return PlainText(value) if plain and _typed_elsewhere(value) else value

    FrontMatter.add_constructor("tag:yaml.org,2002:str", text)
    return FrontMatter


class _PlainDumper(_Dumper):
    """``_Dumper`` writing a value that occurs twice (one dict two tools share) in full at
    each place, never as an anchor (``&id001``) and its aliases (``*id001``)."""

    def ignore_aliases(self, data: Any) -> bool:
        return True


def dump_yaml(data: Any, *, aliases: bool = True) -> str:
    """YAML the way hsa writes it: key order kept, Unicode as is, multi-line strings as blocks.

    Always the pure-Python emitter, so that the bytes written never depend on libyaml.
    ``aliases=False`` writes a value reached twice in full each time, as a text to read or
    diff needs (``hsa rules preview``: an alias is no change); files keep the default, so the
    bytes written stay as they were.
    """
    dumper = _Dumper if aliases else _PlainDumper
    return yaml.dump(data, Dumper=dumper, sort_keys=False, allow_unicode=True, width=100)


def _lines(text: str) -> list[str]:
    """``text`` cut after each "\n" only (``str.splitlines`` also cuts at \x0c, \x85, ...)."""
    lines = re.split(r"(?<=\n)", text)
    return lines[:-1] if lines and lines[-1] == "" else lines


def _delimiter(line: str) -> bool:
    """Whether ``line`` is a front-matter delimiter: ``---``, spaces or tabs after it allowed
    as YAML allows them after its document markers (and common front-matter readers do)."""
    return line.rstrip(" \t\r\n") == "---"


def parse_skill_md(text: str, *, skill_id: str, file: str | None = None) -> Skill:
    """Parse SKILL.md text; the front matter must hold at least ``name`` and ``description``.

    Errors name the line of the SKILL.md file they concern (``where="line N"``).
    """
    if text.startswith("\ufeff"):
        text = text[1:]
    lines = _lines(text)
    if not lines or not _delimiter(lines[0]):
        raise HarnessError(
            "SKILL.md must start with a '---' line opening the YAML front matter",
            file=file,
            where="line 1",
        )
    end = next((i for i in range(1, len(lines)) if _delimiter(lines[i])), None)
    if end is None:
        raise HarnessError(
            "the front matter opened by '---' on line 1 is never closed by a '---' line",
            file=file,
            where="line 1",
        )
    source = "".join(lines[1:end])
    try:
        front = yaml.load(source, Loader=_front_matter_loader())
        node = (
            yaml.compose(source, Loader=_front_matter_loader()) if isinstance(front, dict) else None
        )
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
        # +2: the YAML starts on line 2 of the file, and marks count from 0.
        line = mark.line + 2 if mark is not None else 2
        raise HarnessError(
            f"front matter is not valid YAML: {yaml_problem(exc)}", file=file, where=f"line {line}"
        ) from None
    if not isinstance(front, dict):
        raise HarnessError(
            "front matter must be a YAML mapping (name: ..., description: ...)",
            file=file,
            where="line 2",
        )
    key_lines = _key_lines(node)
    for key in FRONT_MATTER_FIELDS:
        value = front.get(key)
        if not isinstance(value, str) or not value.strip():
            # Point at the key when it is there, else at the line closing the front matter.
            line = key_lines.get(key, end + 1)
            problem = "is missing" if key not in front else "must be a non-empty string"
            raise HarnessError(
                f"front matter field {key!r} {problem}", file=file, where=f"line {line}"
            )
    # each top-level key's node, in order (a mapping's keys keep their order, none twice)
    key_nodes = [k for k, _ in node.value] if isinstance(node, yaml.MappingNode) else []
    for index, (key, value) in enumerate(front.items()):
        odd = _key_not_text(key, value)
        if odd is not None:  # JSON (so a harness document) would write it as text
            written = key_nodes[index] if index < len(key_nodes) else None
            line = written.start_mark.line + 2 if written is not None else 2
            if odd is key and isinstance(written, yaml.ScalarNode):
                what = f"key {written.value!r} is read as {key!r}, not a string"
            else:
                what = f"key {odd!r} under {str(key)!r} is not a string"
            raise HarnessError(
                f"front matter {what} (JSON keys are): quote it", file=file, where=f"line {line}"
            )
        bad = unwritable(value, f"$.{key}")
        if bad is not None:  # .nan, .inf: YAML has them, JSON (so a harness document) not
            line = key_lines.get(key, 2)
            raise HarnessError(f"front matter {bad[0]}: {bad[1]}", file=file, where=f"line {line}")
    extra = {k: v for k, v in front.items() if k not in FRONT_MATTER_FIELDS}
    return Skill(
        id=skill_id,
        name=front["name"],
        description=front["description"],
        content="".join(lines[end + 1 :]),
        extra=extra,
    )


def _key_not_text(key: Any, value: Any) -> Any:
    """The first mapping key in ``key: value`` (the key itself, or one within the value) that
    is not a string, or None."""
    if not isinstance(key, str):
        return key
    if isinstance(value, dict):
        return next(
            (odd for k, v in value.items() if (odd := _key_not_text(k, v)) is not None), None
        )
    if isinstance(value, list):
        return next((odd for v in value if (odd := _key_not_text("", v)) is not None), None)
    return None


def _key_lines(node: yaml.Node | None) -> dict[str, int]:
    """File line of each top-level front-matter key."""
    if not isinstance(node, yaml.MappingNode):
        return {}
    return {
        key.value: key.start_mark.line + 2
        for key, _ in node.value
        if isinstance(key, yaml.ScalarNode)
    }


def own_field_in_extra(extra: Any) -> str | None:
    """The first key of a skill's ``extra`` that is a front-matter field the skill holds
    itself (``name``, ``description``), or None: SKILL.md has one key for both, so saved, the
    extra value would replace the skill's own."""
    if not isinstance(extra, dict):
        return None
    return next((key for key in FRONT_MATTER_FIELDS if key in extra), None)


def own_field_reason(key: str) -> str:
    """Why ``extra`` may not hold the skill's own field ``key`` (``own_field_in_extra``)."""
    return (
        f"{key!r} is the skill's own field, which SKILL.md front matter holds under the same "
        f"key: saved, this value would replace the skill's {key}; drop it from extra or rename it"
    )


def dump_skill_md(skill: Skill) -> str:
    """The SKILL.md text for ``skill``; ``parse_skill_md`` reads it back unchanged."""
    own = own_field_in_extra(dict(skill.extra))
    if own is not None:
        raise HarnessError(own_field_reason(own), where=f"extra.{own} of skill {skill.id!r}")
    front = {"name": skill.name, "description": skill.description, **dict(skill.extra)}
    header = yaml.dump(
        front, Dumper=_FrontMatterDumper, sort_keys=False, allow_unicode=True, width=100
    )
    return f"---\n{header}---\n{skill.content}"


def skill_file(folder: Path) -> Path | None:
    """The file ``folder`` holds its skill in: its SKILL.md, else its skill.md (``SKILL_FILES``),
    else None."""
    for name in SKILL_FILES:
        if (folder / name).is_file():
            return folder / name
    return None


def load_skill_dir(path: str | Path) -> Skill:
    """Load an Agent Skills folder (``<id>/SKILL.md``, or ``skill.md``: ``skill_file``); the
    folder name is the skill id."""
    path = Path(path)
    file = skill_file(path)
    if file is None:
        raise HarnessError("no SKILL.md (nor skill.md) in the skill folder", file=str(path))
    try:
        text = file.read_bytes().decode("utf-8")  # exact: keeps "\r" in the content
    except (OSError, UnicodeDecodeError) as exc:
        raise HarnessError(f"cannot read: {exc}", file=str(file)) from None
    return parse_skill_md(text, skill_id=path.name, file=str(file))
