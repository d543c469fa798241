"""Load and save harnesses as one JSON document or as a harness directory.

A harness directory::

    harness.yaml          id, version, protocol, prompt, hooks, skill_tool, metadata, and
                          references: ``tools: tools.json``, ``skills: [id, ...]``,
                          ``prompt.template_file: prompt.md.j2``
    prompt.md.j2          the system prompt template, when the harness has one
    tools.json            tools (OpenAI, MCP or Anthropic format; saved as OpenAI)
    skills/<id>/SKILL.md  one Agent Skill per folder, named by its id (hidden folders skipped;
                          read from ``skill.md`` where there is no SKILL.md; saved as SKILL.md)

``prompt.md.j2``, ``tools.json`` and ``skills/`` are found by convention: each is loaded even
when ``harness.yaml`` does not reference it (skills in folder-name order). A manifest that names
another file or lists skills keeps the last word; one that sets ``prompt.template`` inline
beside a ``prompt.md.j2`` is refused, since one of the two would be ignored. Every file is the
folder's own: one that is no regular file inside it (``_unreadable``) is refused, unread.

Each file is read on its own: a file, a tools.json entry or a skill that cannot be read is a
problem, and the rest of the harness is still read and checked, so ``problems`` lists every
problem of every file, in file order.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from hsa.config import KeyGivenTwice, loads_written_json, loads_yaml
from hsa.errors import (
    HarnessError,
    HarnessValidationError,
    HsaError,
    ImportFormatError,
    TemplateError,
    first_few,
    refuse_kind,
    refuse_path,
    refuse_unreadable,
)
from hsa.harness.files import replacing_directory, write_atomic
from hsa.harness.model import Harness
from hsa.harness.sandbox import MAX_TEMPLATE_CHARS
from hsa.harness.skillfile import SKILL_FILES, dump_skill_md, dump_yaml, load_skill_dir, skill_file
from hsa.harness.toolformats import ToolPlace, in_file, tool_entries, tool_from_entry
from hsa.harness.validate import document_problems, render_problems

MANIFEST = "harness.yaml"
TOOLS_FILE = "tools.json"
TEMPLATE_FILE = "prompt.md.j2"
SKILLS_DIR = "skills"
BOM = "\ufeff"


class _Sources:
    """Which file each part of an assembled document came from, to point errors at it."""

    def __init__(self, root: Path, manifest: Path):
        self.root = root
        self.manifest = manifest
        self.tools: Path | None = None
        # where in the tools file each tool of the document is
        self.tool_places: list[ToolPlace] = []
        self.template: Path | None = None
        self.skills: dict[int, Path] = {}
        # whether the manifest lists the skills, or they are the skill folders found there
        self.skills_listed = True

    def locate(self, err: HsaError) -> HsaError:
        where = err.where or "$"
        if self.tools is not None and (inside := in_file(where, err.message, self.tool_places)):
            # the path, and any path in the message, as the tools file has them
            return HarnessError(inside[1], file=str(self.tools), where=inside[0])
        if (m := re.match(r"^\$\.skills\[(\d+)\](.*)$", where)) and (
            file := self.skills.get(int(m.group(1)))
        ):
            rest = m.group(2)
            if rest == ".id":  # an entry of the manifest's list, or a skill folder's name
                entry = f"$.skills[{m.group(1)}]"
                if self.skills_listed:
                    return HarnessError(err.message, file=str(self.manifest), where=entry)
                return HarnessError(_folder_id(err.message), file=str(file.parent))
            # front-matter keys: name, description and each key of extra
            rest = rest.removeprefix(".extra")
            key = None if rest in ("", ".content") else f"front matter{rest}"
            return HarnessError(err.message, file=str(file), where=key)
        if self.template is not None and where == "$.prompt.template":
            return HarnessError(err.message, file=str(self.template), where=None)
        return HarnessError(err.message, file=str(self.manifest), where=where)


def _folder_id(message: str) -> str:
    """``message``, of a skill id that is a skill folder's name, saying so and what to do.

    The loader does not rename: a skill's id is what trajectories load it by, and what a
    save writes its folder as, so an id other than the folder's name would not survive a
    load and save. ``hsa harness import`` makes legal ids of any folder names (and keeps
    them in ``skill_id_map``), for a harness of its own.
    """
    return f"{message} (a skill's id is its folder's name: {_ID_RULE}; rename the folder{_IMPORT})"


_ID_RULE = "letters, digits and _.:- only, a letter or digit first"
_IMPORT = (
    ", or import the skills folder with `hsa harness import`, which gives each skill a legal "
    "id and keeps the folder's name in skill_id_map"
)


def _not_found(sources: _Sources, path: Path, where: str) -> HarnessError | None:
    """The problem with the file at ``path`` that the manifest names at ``where``, at the
    manifest's key (the key is what to correct): ``_unreadable``'s, or none there."""
    if not path.exists():
        return HarnessError(f"file not found: {path}", file=str(sources.manifest), where=where)
    if problem := _unreadable(sources, path):
        return HarnessError(problem, file=str(sources.manifest), where=where)
    return None


def _unreadable(sources: _Sources, path: Path) -> str | None:
    """Why the existing file at ``path`` is none a harness may read, or None.

    A harness is a folder sent in by others and built without a person reading it: it reads
    only its own files, so an absolute path, a ``..`` or a symbolic link leading out of the
    folder (to ``/etc/passwd``, to ``/dev/zero``) is refused, as is anything but a regular
    file (a folder, a FIFO that would wait for a writer forever).
    """
    if not path.resolve().is_relative_to(sources.root.resolve()):
        return (
            f"{path} is outside the harness folder {sources.root}: a harness reads only its "
            "own files (no absolute path, '..' or symbolic link leading out); copy the file in"
        )
    if not path.is_file():
        return f"not a regular file: {path}"
    return None


def _read_text(path: Path, *, max_chars: int | None = None) -> str:
    """The text of ``path``; with ``max_chars``, refused as a ``TemplateError`` when it is
    surely over that many characters, without reading more than that could take."""
    try:
        # Bytes, then decode: text mode would turn "\r\n" and "\r" into "\n", and prompt
        # templates and skill contents must come back exactly as they were saved.
        data = path.read_bytes() if max_chars is None else _read_capped(path, max_chars)
        return data.decode("utf-8")
    except FileNotFoundError:
        raise HarnessError("file not found", file=str(path)) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise HarnessError(f"cannot read: {exc}", file=str(path)) from None


def _read_capped(path: Path, max_chars: int) -> bytes:
    """The bytes of ``path``, refused when they are surely over ``max_chars`` characters
    (UTF-8 takes at most 4 bytes a character): by the file's size before anything is read,
    and, for a file whose size says 0 (a device, a ``/proc`` file), once one byte too many is."""
    cap = 4 * max_chars
    size = path.stat().st_size
    if size <= cap:
        with path.open("rb") as fh:
            data = fh.read(cap + 1)
        if len(data) <= cap:
            return data
    what = f"{size:,} bytes" if size > cap else f"over {cap:,} bytes"
    raise TemplateError(
        f"template file is {what}; the limit is {max_chars:,} characters", file=str(path)
    )


def _read_json(path: Path) -> Any:
    return _parse_json(_read_text(path), file=str(path))


def _parse_json(text: str, *, file: str | None) -> Any:
    """JSON a person wrote (``loads_written_json``), each way it can be unreadable raised as
    a ``HarnessError``: a key given twice, a value nested too deeply to read."""
    try:
        return loads_written_json(text)
    except json.JSONDecodeError as exc:
        raise HarnessError(
            f"invalid JSON: {exc.msg} (line {exc.lineno}, column {exc.colno})", file=file
        ) from None
    except KeyGivenTwice as exc:
        raise HarnessError(str(exc), file=file) from None
    except (RecursionError, ValueError) as exc:
        refuse_unreadable(exc, HarnessError, file=file)


def _read_yaml(path: Path) -> Any:
    # (writing always uses the pure-Python dumper, so output bytes never depend on libyaml)
    return loads_yaml(_read_text(path), error=HarnessError, file=str(path))


def _hint(folder: Path) -> str:
    """Where the harnesses are, for a folder that holds harness folders (an import of several)."""
    inside = sorted(p.name for p in folder.iterdir() if (p / MANIFEST).is_file())
    if not inside:
        return ""
    return (
        f"; it holds {len(inside):,} harness folder(s), e.g. {folder / inside[0]} "
        "(`hsa harness validate` checks them all)"
    )


def _read(path: str | Path) -> tuple[dict[str, Any], list[HsaError]]:
    """The harness document at ``path``, assembled file by file, and every problem with it
    (see ``problems``); the document is whole only when there are none."""
    path = Path(path)
    if path.is_dir():
        manifest = path / MANIFEST
        if not manifest.is_file():
            return {}, [
                HarnessError(f"not a harness directory: no {MANIFEST}{_hint(path)}", file=str(path))
            ]
    elif path.is_file():
        manifest = path
    else:
        return {}, [HarnessError("no such file or directory", file=str(path))]
    root = manifest.parent
    sources = _Sources(root, manifest)
    found: list[HsaError] = []
    read = _read_json if manifest.suffix == ".json" else _read_yaml
    try:
        doc = read(manifest)
    except HsaError as exc:
        found.append(exc)
        doc = None
    if not isinstance(doc, dict) and not found:  # read, but empty or not a mapping
        what = "it is empty" if doc is None else f"it is a {type(doc).__name__}"
        found.append(
            HarnessError(
                f"a harness document must be a mapping with at least an id; {what}",
                file=str(manifest),
                where="$",
            )
        )
        doc = None
    # Without a manifest to read, the files found by convention are still checked.
    manifest_read = doc is not None
    doc = doc if doc is not None else {}
    sources.skills_listed = "skills" in doc
    if manifest.name == MANIFEST:
        try:
            _by_convention(doc, root, manifest)
        except HsaError as exc:
            found.append(exc)

    tools_data: Any = None
    if isinstance(doc.get("tools"), str):
        sources.tools = root / doc["tools"]
        tools_data, doc["tools"] = _read_tools(sources, found)
    prompt = doc.get("prompt")
    if isinstance(prompt, dict) and "template_file" in prompt:
        ref = prompt.pop("template_file")
        if not isinstance(ref, str):
            found.append(
                HarnessError("must name a file", file=str(manifest), where="$.prompt.template_file")
            )
        elif missing := _not_found(sources, root / ref, "$.prompt.template_file"):
            found.append(missing)
        else:
            sources.template = root / ref
            try:
                text = _read_text(sources.template, max_chars=MAX_TEMPLATE_CHARS)
            except HsaError as exc:
                found.append(exc)
            else:  # a byte order mark (as editors save it) is no part of the prompt
                prompt["template"] = text.removeprefix(BOM)
    skill_index: list[int] | None = None  # entry of the manifest's list each doc skill is
    skills = doc.get("skills")
    if isinstance(skills, list) and all(isinstance(s, str) for s in skills):
        doc["skills"], skill_index = _read_skills(skills, sources, found)

    checked = document_problems(doc)
    if not found and not checked:
        checked = render_problems(Harness.from_dict(doc))
    for problem in checked:
        where, message = problem.where or "$", problem.message
        if skill_index is not None:
            where, message = _reindex("skills", skill_index, where, message)
        located = sources.locate(HarnessError(message, where=where))
        if manifest_read or located.file != str(manifest):
            found.append(located)
    data = {str(manifest): doc, str(sources.tools): tools_data}
    return doc, _in_file_order(found, sources, data)


def _by_convention(doc: dict[str, Any], root: Path, manifest: Path) -> None:
    """Reference the files at their conventional places that ``harness.yaml`` does not name.

    A file the user put in the harness directory must not be skipped because the manifest
    forgot it; a manifest that names a part (or sets it inline) keeps the last word.
    """
    if "tools" not in doc and (root / TOOLS_FILE).is_file():
        doc["tools"] = TOOLS_FILE
    if "skills" not in doc and (root / SKILLS_DIR).is_dir():
        found = sorted(p.name for p in _skill_folders(root))
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


def _skill_folders(root: Path) -> list[Path]:
    """The skill folders of the harness directory ``root``: those under ``skills/`` that hold a
    skill file (``skill_file``), hidden ones left out (a ``.old-skill`` put aside, ``.git``),
    as ``hsa harness import`` of a skills folder leaves them out."""
    return [
        p
        for p in (root / SKILLS_DIR).iterdir()
        if not p.name.startswith(".") and skill_file(p) is not None
    ]


def _read_tools(sources: _Sources, found: list[HsaError]) -> tuple[Any, list[dict[str, Any]]]:
    """The tools file's data and its tools as harness-document tools, each one's place in the
    file kept in ``sources``; an entry that cannot be converted is a problem in ``found``, and
    left out."""
    assert sources.tools is not None
    file = str(sources.tools)
    if missing := _not_found(sources, sources.tools, "$.tools"):
        found.append(missing)
        return None, []
    try:
        data = _read_json(sources.tools)
        entries = tool_entries(data)
    except ImportFormatError as exc:
        found.append(HarnessError(exc.message, file=file, where=exc.where or "$"))
        return None, []
    except HsaError as exc:
        found.append(exc)
        return None, []
    tools: list[dict[str, Any]] = []
    for where, entry in entries:
        try:
            tool, place = tool_from_entry(entry, where=where)
        except ImportFormatError as exc:
            found.append(HarnessError(exc.message, file=file, where=exc.where or "$"))
            continue
        sources.tool_places.append(place)
        tools.append(tool.to_dict())
    return data, tools


def _read_skills(
    ids: list[str], sources: _Sources, found: list[HsaError]
) -> tuple[list[dict[str, Any]], list[int]]:
    """The skills the manifest lists, as harness-document skills, and the entry of the list
    each is; a skill that cannot be read is a problem in ``found``, and left out."""
    skills: list[dict[str, Any]] = []
    index: list[int] = []
    for i, skill_id in enumerate(ids):
        # The id names a folder: the pattern (no '/', no leading '.') keeps it inside skills/.
        folder = sources.root / SKILLS_DIR / skill_id
        if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.:-]*", skill_id):
            found.append(_bad_id(f"{skill_id!r} is not a valid skill id", i, folder, sources))
            continue
        sources.skills[i] = file = skill_file(folder) or folder / SKILL_FILES[0]
        if sources.skills_listed:
            if missing := _not_found(sources, file, f"$.skills[{i}]"):
                found.append(missing)  # a folder renamed, the list not; or a link out
                continue
        elif problem := _unreadable(sources, file):  # a folder found there holds its file
            found.append(HarnessError(problem, file=str(file)))
            continue
        try:
            skills.append(load_skill_dir(folder).to_dict())
        except HsaError as exc:
            found.append(exc)
            continue
        index.append(i)
    return skills, index


def _bad_id(message: str, index: int, folder: Path, sources: _Sources) -> HarnessError:
    """A problem with the id of the skill ``index``: at its entry of the manifest's list, or
    at its folder when the skills are the folders found there (the manifest lists none)."""
    if sources.skills_listed:
        message += f" ({_ID_RULE}; the id names its folder in {SKILLS_DIR}/: rename both{_IMPORT})"
        return HarnessError(message, file=str(sources.manifest), where=f"$.skills[{index}]")
    return HarnessError(_folder_id(message), file=str(folder))


def _reindex(part: str, index: list[int], where: str, message: str) -> tuple[str, str]:
    """``where`` and ``message`` with each ``$.PART[k]`` made ``$.PART[index[k]]``: the
    entries of a part left out (unreadable) do not shift the paths of the others."""

    def entry(match: re.Match[str]) -> str:
        k = int(match.group(1))
        return f"$.{part}[{index[k] if k < len(index) else k}]"

    pattern = re.compile(rf"\$\.{part}\[(\d+)\]")
    return pattern.sub(entry, where), pattern.sub(entry, message)


#: one step of a JSON path as ``hsa.harness.validate`` writes them (``json_path``,
#: ``ref_problems``)
_STEP = re.compile(r'\.([^.\[]+)|\[(\d+)\]|\[("(?:[^"\\]|\\.)*")\]')


def _in_file_order(
    found: list[HsaError], sources: _Sources, data: Mapping[str, Any]
) -> list[HsaError]:
    """``found`` sorted by file (see ``problems``), then by place in the file: a line,
    or a JSON path followed through the file's ``data``, a key by its place among its
    siblings. Problems at the same place keep their order."""
    files = [sources.manifest, sources.template, sources.tools]
    files += [sources.skills[i] for i in sorted(sources.skills)]
    rank = {str(f): n for n, f in enumerate(files) if f is not None}

    def key(item: tuple[int, HsaError]) -> tuple[int, tuple[int, ...], int]:
        n, problem = item
        place = _place(problem.where, data.get(problem.file or ""))
        return rank.get(problem.file or "", -1), place, n

    return [problem for _, problem in sorted(enumerate(found), key=key)]


def _place(where: str | None, data: Any) -> tuple[int, ...]:
    """A sort key for ``where`` in a file holding ``data`` (see ``_in_file_order``)."""
    if not where:
        return ()
    if line := re.match(r"line (\d+)", where):
        return (int(line.group(1)),)
    if not where.startswith("$"):
        return ()
    place: list[int] = []
    node = data
    for name, number, quoted in _STEP.findall(where[1:]):
        if number:
            step = int(number)
            node = node[step] if isinstance(node, list) and step < len(node) else None
        else:
            key = json.loads(quoted) if quoted else name
            keys = list(node) if isinstance(node, Mapping) else []
            step = keys.index(key) if key in keys else len(keys)
            node = node[key] if key in keys else None
        place.append(step)
    return tuple(place)


def problems(path: str | Path) -> list[HsaError]:
    """Every problem with the harness at ``path`` (a directory, harness.yaml or JSON document),
    each naming its file and JSON path (or line), in file order.

    Each file is read on its own: a harness.yaml that does not parse, a tools.json entry that
    cannot be converted or a SKILL.md with bad front matter is reported, and the rest of the
    harness is still checked. Files come in the order harness.yaml, prompt template,
    tools.json, then the skills; a file's problems in the order of what they concern in it.
    Beyond the schema, the system prompt is rendered once in the sandbox when nothing else is
    wrong, so a template that only fails at render time (unsafe attribute access, an undefined
    name, oversize output) is reported here rather than in the middle of a build.
    """
    return _read(path)[1]


def _listed_skills(manifest: Any) -> set[str] | None:
    """The skill ids a harness manifest lists, or None when it lists none (every skill folder
    is then the harness's)."""
    listed = manifest.get("skills") if isinstance(manifest, Mapping) else None
    if isinstance(listed, list) and all(isinstance(s, str) for s in listed):
        return set(listed)
    return None


def unlisted_skills(path: str | Path) -> list[str]:
    """The skill folders of the harness directory ``path`` (``skills/<id>/SKILL.md``) that its
    manifest's ``skills`` list leaves out: not part of the harness (the list has the last
    word), which a user who added one may not know. Empty when the manifest lists none (every
    folder is then loaded) or cannot be read."""
    root = Path(path)
    if root.name == MANIFEST:
        root = root.parent
    try:
        found = loads_yaml((root / MANIFEST).read_text("utf-8"), error=HarnessError)
    except (OSError, ValueError, HsaError):
        return []
    listed = _listed_skills(found)
    if listed is None or not (root / SKILLS_DIR).is_dir():
        return []
    return sorted(f"{SKILLS_DIR}/{p.name}" for p in _skill_folders(root) if p.name not in listed)


def load(path: str | Path) -> Harness:
    """Load and validate a harness; raise ``HarnessValidationError`` listing every problem."""
    refuse_path(path, HarnessError)
    doc, found = _read(path)
    if found:
        raise HarnessValidationError(found)
    return Harness.from_dict(doc)


def loads(text: str, *, file: str | None = None) -> Harness:
    """A harness from one JSON document (as written by ``Harness.to_json``), read as
    ``load`` reads a JSON file."""
    doc = _parse_json(text, file=file)
    found = document_problems(doc, file=file)
    if found:
        raise HarnessValidationError(found)
    harness = Harness.from_dict(doc)
    # as ``load``: a template that cannot render (an undefined value) is a problem too
    rendered: list[HsaError] = [
        HarnessError(p.message, file=file, where=p.where) for p in render_problems(harness)
    ]
    if rendered:
        raise HarnessValidationError(rendered)
    return harness


def save(harness: Harness, path: str | Path, *, beside: tuple[str, ...] = ()) -> Path:
    """Write ``harness`` to ``path``: a ``.json`` file, or else a harness directory.

    The directory is written beside its destination, synced and renamed into place
    (``hsa.harness.files``), so a failure never leaves a half-written harness. An existing
    directory is replaced only if it is an earlier save of this harness: the same id, and
    no file but those a harness directory holds (and the files named ``beside``, which the
    caller writes there too); a folder with files of its own (notes, a skill's scripts, a
    ``.git``) or another harness is refused, not replaced.
    """
    refuse_kind(harness, Harness, "harness", "hsa.load_harness(path) reads one", HarnessError)
    refuse_path(path, HarnessError)
    path = Path(path)
    if path.suffix == ".json":
        text = json.dumps(harness.to_dict(), ensure_ascii=False, indent=2) + "\n"
        write_atomic(path, text, error=HarnessError)
        return path
    if path.exists():
        _check_replaceable(harness, path, beside)
    with replacing_directory(path, error=HarnessError) as staging:
        write_dir(harness, staging)
    return path


def _check_replaceable(harness: Harness, path: Path, beside: tuple[str, ...]) -> None:
    if not (path / MANIFEST).is_file():
        if path.is_dir() and not any(path.iterdir()):
            return  # an empty folder
        raise HarnessError(
            "refusing to overwrite: it exists and is not a harness directory", file=str(path)
        )
    try:
        found = loads_yaml((path / MANIFEST).read_text("utf-8"), error=HarnessError)
    except (OSError, ValueError, HsaError):
        found = None
    held = found.get("id") if isinstance(found, Mapping) else None
    if held is None:
        raise HarnessError(
            f"refusing to overwrite: its {MANIFEST} cannot be read as a harness's (so it is "
            f"not known to hold {harness.id!r}); choose another folder or remove it",
            file=str(path),
        )
    if held != harness.id:
        raise HarnessError(
            f"refusing to overwrite: it holds harness {held!r}, not {harness.id!r}; choose "
            "another folder or remove it",
            file=str(path),
        )
    known = {MANIFEST, TOOLS_FILE, TEMPLATE_FILE, *beside}
    # the skills of the harness there: those its manifest lists (which has the last word), or
    # every skill folder when it lists none (hidden ones are not read); another skill folder
    # is the user's (a draft, one put aside)
    ours = _listed_skills(found)

    def saved(name: str) -> bool:
        # a file write_dir writes, or a skill's file it replaces with a SKILL.md: the one the
        # loader read the skill from (``skill_file``: a skill.md beside a SKILL.md is not)
        parts = name.split("/")
        return name in known or (
            len(parts) == 3
            and parts[0] == SKILLS_DIR
            and (parts[1] in ours if ours is not None else not parts[1].startswith("."))
            and skill_file(path / SKILLS_DIR / parts[1]) == path / name
        )

    names = (p.relative_to(path).as_posix() for p in path.rglob("*") if not p.is_dir())
    foreign = sorted(name for name in names if not saved(name))
    if foreign:
        raise HarnessError(
            f"refusing to overwrite: it holds file(s) a saved harness does not "
            f"({first_few(foreign)}), which replacing it would delete; choose another folder "
            "or move them out",
            file=str(path),
        )


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
        template = prompt.pop("template")
        # a template's own leading U+FEFF would be read as a byte order mark: one before it
        # is read as that, and the template comes back exactly
        _write_text(root / TEMPLATE_FILE, (BOM if template.startswith(BOM) else "") + template)
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
