"""One pattern for every settings object in hsa, in the style of TRL's configs.

A config is a frozen dataclass. Each field is declared with ``setting``: its default -- the one
place a default is written -- and a ``help`` line, which command-line help is built from
(``cli_help``) and the published JSON Schemas are tested against. ``None`` means unset: a later
source decides (one precedence everywhere: a command-line flag, then a config file, then the
recipe or the environment). Validation lives in ``__post_init__``, so an invalid config cannot
exist; it raises the layer's error naming the field (``refuse``). ``from_mapping`` builds a config
from a YAML section: unknown keys are refused with a "did you mean", values of the wrong type are
named before any field sees them. A config file checked against a published JSON Schema names an
unknown key the same way (``schema_problem``).

Like ``hsa.errors``, this module belongs to no layer: every layer may import it.
"""

from __future__ import annotations

import dataclasses
import difflib
import hashlib
import json
import math
import os
import re
import time
import types
import typing
from collections.abc import Iterable, Mapping
from functools import cache
from pathlib import Path
from typing import Any, NoReturn

from hsa.errors import HsaError, refuse_unreadable, schema_message


def setting(
    default: Any = dataclasses.MISSING,
    *,
    help: str,
    default_factory: Any = dataclasses.MISSING,
    secret: bool = False,
) -> Any:
    """A config field with its default and one line of help.

    ``secret`` fields (API keys) are left out of ``repr`` and comparison.
    """
    metadata = {"help": " ".join(help.split())}
    if default_factory is not dataclasses.MISSING:
        return dataclasses.field(
            default_factory=default_factory, metadata=metadata, repr=not secret, compare=not secret
        )
    return dataclasses.field(
        default=default, metadata=metadata, repr=not secret, compare=not secret
    )


def same_as(config: type, name: str) -> Any:
    """A setting that another config declares (its default and help): a lower-level config
    that a job config feeds shares the job's default instead of writing its own."""
    found = _field(config, name)
    if found.default_factory is not dataclasses.MISSING:
        return setting(default_factory=found.default_factory, help=found.metadata["help"])
    return setting(found.default, help=found.metadata["help"])


def settings_of(config: type) -> tuple[dataclasses.Field, ...]:
    """The fields a user sets (``init`` fields), in declaration order."""
    return tuple(f for f in dataclasses.fields(config) if f.init)


def help_of(config: type, name: str) -> str:
    """The help line of setting ``name``."""
    return _field(config, name).metadata["help"]


def default_of(config: type, name: str) -> Any:
    """The default of setting ``name`` (a fresh value for factory defaults)."""
    found = _field(config, name)
    if found.default is not dataclasses.MISSING:
        return found.default
    if found.default_factory is not dataclasses.MISSING:
        return found.default_factory()
    raise KeyError(f"{config.__name__}.{name} has no default")


def cli_help(config: type, name: str) -> str:
    """Command-line help for setting ``name``: its help line and its default.

    A default of None (unset) is not shown: the help line says what unset means. The flag
    itself defaults to None, so the config's default applies and is written once.
    """
    default = default_of(config, name)
    text = help_of(config, name)
    return text if default is None else f"{text}  [default: {show(default)}]"


def show(value: Any) -> str:
    """A default as a person reads it."""
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, Mapping):
        return ", ".join(f"{k}={show(v)}" for k, v in value.items()) or "none"
    return str(value)


def did_you_mean(key: str, known: Iterable[str]) -> str:
    """``did you mean 'x'?`` for the nearest known name, else the list of known names."""
    known = sorted(known)
    close = difflib.get_close_matches(key, known, n=1)
    return f"did you mean {close[0]!r}?" if close else f"known: {', '.join(known)}"


def first_schema_problem(errors: Iterable[Any]) -> tuple[list[Any], str] | None:
    """``schema_problem`` of the first of a config's JSON Schema errors (None when there are
    none): by path, and at one path an unknown key before the rest, so that a misspelt
    required key (``rulez:``) is named with its nearest key rather than reported missing."""
    found = min(
        errors,
        key=lambda e: (list(map(str, e.path)), e.validator != "additionalProperties"),
        default=None,
    )
    return None if found is None else schema_problem(found)


def schema_problem(error: Any) -> tuple[list[Any], str]:
    """The path and the message for a JSON Schema error (a ``jsonschema.ValidationError``) in
    a config file: an unknown key is named at its own path with the nearest allowed key
    (``did_you_mean``), as ``from_mapping`` names an unknown setting; any other error keeps
    jsonschema's message, at its path."""
    schema, instance = error.schema, error.instance
    if (
        error.validator == "additionalProperties"
        and isinstance(schema, Mapping)
        and isinstance(instance, Mapping)
    ):
        allowed = list(schema.get("properties") or {})
        patterns = list(schema.get("patternProperties") or {})
        for key in instance:
            if key in allowed or any(re.search(p, str(key)) for p in patterns):
                continue
            hint = did_you_mean(str(key), allowed) if allowed else "no settings are allowed here"
            return [*error.absolute_path, key], f"unknown setting {key!r}; {hint}"
    options = error.validator_value if error.validator == "oneOf" else None
    if isinstance(options, list) and all(
        isinstance(o, Mapping) and set(o) == {"required"} and len(o["required"]) == 1
        for o in options
    ):  # one of several keys (a source's env or trajectories): say so, not jsonschema's dump
        keys = " and ".join(repr(o["required"][0]) for o in options)
        return list(error.absolute_path), f"set exactly one of {keys}"
    if error.validator == "pattern" and isinstance(schema, Mapping) and schema.get("description"):
        # the pattern's meaning in words, where the schema gives it
        return list(error.absolute_path), f"{instance!r} is not {schema['description']}"
    return list(error.absolute_path), schema_message(error)


def bounded(
    config: Any,
    *names: str,
    low: float | None = None,
    high: float | None = None,
    low_open: bool = False,
) -> list[tuple[str, str]]:
    """(setting, message) for each setting of ``config`` among ``names`` outside ``[low,
    high]`` (``(low, high]`` with ``low_open``); unset (None) settings are skipped."""
    if high is not None:
        rule = f"must be in {'(' if low_open else '['}{low}, {high}]"
    elif low_open:
        rule = f"must be more than {low}"
    else:
        rule = "must not be negative" if low == 0 else f"must be at least {low}"
    problems = []
    for name in names:
        value = getattr(config, name)
        if value is None:
            continue
        below = low is not None and (value <= low if low_open else value < low)
        if below or (high is not None and value > high):
            problems.append((name, f"{rule}, got {value}"))
    return problems


def typed(config: object) -> list[tuple[str, str]]:
    """(setting, message) for each setting of ``config`` whose value is not of its annotated
    type (as ``from_mapping`` checks a YAML section's): a config made in code is checked as
    one read from a file is, before its ranges are."""
    problems = []
    kind: type = type(config)
    for name, hint in _hints(kind).items():
        value = getattr(config, name)
        expected = type_problem(value, hint)
        if expected:
            problems.append((name, f"expected {expected}, got {value!r}"))
    return problems


def refuse(problems: list[tuple[str, str]], error: type[HsaError]) -> None:
    """Raise ``error`` for the first (field, message) problem, if any."""
    if problems:
        where, message = problems[0]
        raise error(message, where=where)


def from_mapping(
    config: type,
    data: Any,
    *,
    error: type[HsaError],
    file: str | None = None,
    root: str | None = None,
) -> Any:
    """``config`` from a mapping (a YAML section): unknown keys and mistyped values refused.

    Errors name ``file`` and the setting, as ``root.key`` when ``root`` (a JSON path such as
    ``$.teach``) is given.
    """

    def where(key: str | None) -> str | None:
        if root is None or (key or "").startswith("$"):  # none, or a JSON path already
            return key
        return f"{root}.{key}" if key else root

    if not isinstance(data, Mapping):
        raise error(
            f"expected a mapping of settings, got {type(data).__name__}",
            file=file,
            where=where(None),
        )
    hints = _hints(config)
    known = [f.name for f in settings_of(config)]
    for key, value in data.items():
        if key not in hints:
            raise error(
                f"unknown setting {key!r}; {did_you_mean(str(key), known)}",
                file=file,
                where=where(str(key)),
            )
        expected = type_problem(value, hints[key])
        if expected:
            raise error(f"expected {expected}, got {value!r}", file=file, where=where(key))
    try:
        return config(**data)
    except HsaError as exc:
        raise error(exc.message, file=exc.file or file, where=where(exc.where)) from None


@cache
def _hints(config: type) -> dict[str, Any]:
    names = {f.name for f in settings_of(config)}
    return {k: v for k, v in typing.get_type_hints(config).items() if k in names}


def _field(config: type, name: str) -> dataclasses.Field:
    for found in dataclasses.fields(config):
        if found.name == name:
            return found
    raise KeyError(f"{config.__name__} has no setting {name!r}")


_SIMPLE: dict[Any, str] = {
    bool: "true or false",
    int: "an integer",
    float: "a finite number",
    str: "a string",
}


def type_problem(value: Any, hint: Any) -> str | None:
    """What ``value`` should have been under annotation ``hint``; None when it fits (types
    hsa cannot check here are left to the config's own validation)."""
    options = typing.get_args(hint) if _is_union(hint) else (hint,)
    wanted = []
    for option in options:
        if option is type(None):
            if value is None:
                return None
            wanted.append("null")
            continue
        origin = typing.get_origin(option) or option
        if origin in _SIMPLE:
            if _fits(value, origin):
                return None
            wanted.append(_SIMPLE[origin])
        elif origin in (Mapping, dict, typing.Mapping):
            if isinstance(value, Mapping):
                return None
            wanted.append("a mapping")
        elif isinstance(origin, type) and origin.__module__.startswith("hsa."):
            if isinstance(value, origin):  # one of hsa's own values (a Recipe, say)
                return None
            article = "an" if origin.__name__[:1] in "AEIOU" else "a"
            wanted.append(f"{article} {origin.__name__}")
        else:
            return None  # not a kind checked here
    return " or ".join(wanted) if wanted else None


def _fits(value: Any, kind: type) -> bool:
    if kind is bool or isinstance(value, bool):
        return kind is bool and isinstance(value, bool)
    if kind is float:  # NaN and the infinities are no setting's value
        return isinstance(value, (int, float)) and math.isfinite(value)
    return isinstance(value, kind)


def _is_union(hint: Any) -> bool:
    return typing.get_origin(hint) in (typing.Union, types.UnionType)


def settings_hash(chosen: Mapping[str, Any], files: Iterable[str] = ()) -> str:
    """A hash of the settings ``chosen``, the settings named in ``files`` (paths) taken by
    their file's content rather than their path (``content_hash``), so a moved recipe is the
    same job and an edited one another. An unreadable file is hashed by its path (reported
    when loaded)."""
    chosen = dict(chosen)
    for name in files:
        if chosen.get(name) is not None:
            chosen[name] = by_content(chosen[name])
    text = json.dumps(chosen, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def by_content(path: Any) -> Any:
    """The file or folder ``path`` by its content (``content_hash``), or ``path`` as given
    where it cannot be read (reported where it is loaded)."""
    try:
        return content_hash(Path(path))
    except OSError:
        return path


def content_hash(path: Path, *, stand_ins: Mapping[str, bytes] | None = None) -> str:
    """The content of the file or folder ``path`` as a hash, whatever the path it is named by:
    a file's SHA-256; a folder's, ``files_hash`` of its files (``folder_files``) by their
    names relative to it. ``OSError`` (``FileNotFoundError`` when it is not there, with the
    name of the file that could not be read). Each file is read once per process while its
    size and times stay the same, so that hashing a job's settings again is cheap."""
    if path.is_file():
        return file_hash(path)
    if path.is_dir():
        return files_hash(named_files(path), stand_ins=stand_ins)
    raise FileNotFoundError(2, "No such file or directory", str(path))


def files_hash(files: Mapping[str, Path], *, stand_ins: Mapping[str, bytes] | None = None) -> str:
    """A hash of the files ``files`` gives by name (their paths relative to a folder, say):
    each name and its file's SHA-256, in path order; one file under the empty name, its
    SHA-256 alone. ``stand_ins`` gives the bytes hashed in place of the file of that name
    (what of a record is input: an import's ``import.json`` by its notes)."""
    if set(files) == {""}:  # one file, whose name says nothing: its content alone
        return file_hash(files[""])
    stand_ins = stand_ins or {}
    lines = []
    for name in sorted(files, key=lambda name: name.split("/")):  # (as paths sort)
        if name in stand_ins:
            found = hashlib.sha256(stand_ins[name]).hexdigest()
        else:
            found = file_hash(files[name])
        lines.append(f"{name}\0{found}\n")
    text = json.dumps({"files": "".join(lines)}, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


#: the folder an hsa job keeps its state in (``hsa.datasets.manifest.STATE``): a folder that
#: holds one is a job's output
JOB_STATE = ".hsa"


def folder_files(folder: Path) -> list[Path]:
    """The files under ``folder`` at any depth, through folders that are links too, in path
    order; not hidden entries (``.git``, an editor's swap file, ``.DS_Store``, an hsa job's
    ``.hsa``) nor the folders of hsa jobs (holding a ``.hsa``: a teach job or an evaluation
    whose ``--out`` is inside), which are no one's input. A link back to a folder it is in
    is not followed."""
    out: list[Path] = []

    def walk(here: Path, above: frozenset[tuple[int, int]]) -> None:
        found = here.stat()
        if (found.st_dev, found.st_ino) in above:
            return
        if above and (here / JOB_STATE).is_dir():
            return
        above |= {(found.st_dev, found.st_ino)}
        for entry in sorted(p for p in here.iterdir() if not p.name.startswith(".")):
            if entry.is_dir():
                walk(entry, above)
            elif entry.is_file():
                out.append(entry)

    walk(folder, frozenset())
    return sorted(out)


def named_files(folder: Path, files: Iterable[Path] | None = None) -> dict[str, Path]:
    """``files`` under ``folder`` (None: ``folder_files``) by their paths relative to it, as
    ``files_hash`` takes them."""
    found = folder_files(folder) if files is None else files
    return {file.relative_to(folder).as_posix(): file for file in found}


#: file hashes by what ``os.stat`` says of the file (device, inode, size, times)
_FILE_HASHES: dict[tuple[int, ...], str] = {}
#: how long after its last change a file's hash is kept: file times tick coarsely (a few
#: milliseconds), so a file rewritten at once to the same size can keep its times
_SETTLED_NS = 2_000_000_000


def file_hash(path: Path) -> str:
    """The SHA-256 of the file ``path`` (hex), read once per process while its size and times
    stay the same (``content_hash``); ``OSError`` as ``open`` raises it."""
    with open(path, "rb") as fh:
        found = os.fstat(fh.fileno())
        key = (found.st_dev, found.st_ino, found.st_size, found.st_mtime_ns, found.st_ctime_ns)
        if (known := _FILE_HASHES.get(key)) is not None:
            return known
        digest = hashlib.sha256()
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    if time.time_ns() - max(found.st_mtime_ns, found.st_ctime_ns) > _SETTLED_NS:
        _FILE_HASHES[key] = digest.hexdigest()
    return digest.hexdigest()


_TIMESTAMP = "tag:yaml.org,2002:timestamp"
_MERGE = "tag:yaml.org,2002:merge"
_FLOAT = "tag:yaml.org,2002:float"
#: how many values the aliases of one YAML document may stand for in all, each alias counting
#: every value of its anchor (aliases in it counted so too): a few hundred bytes of aliases of
#: aliases (an "alias bomb") stand for billions, which every walk of the value read goes through
YAML_ALIASED_VALUES = 1_000_000
#: how deeply YAML collections may nest, as deeply as Python reads JSON (its recursion limit):
#: libyaml's composer recurses in C, and 50,000 levels overflow its stack (SIGSEGV, no message)
YAML_MAX_DEPTH = 1000
#: YAML 1.2's floats with an exponent that YAML 1.1 (PyYAML's rule) reads as text: no dot
#: (1e-3, 1E5) or no sign in the exponent (1.5e3); its other floats YAML 1.1 reads as floats
_FLOAT_12 = re.compile(r"^[-+]?(?:\.[0-9]+|[0-9]+(?:\.[0-9]*)?)[eE][-+]?[0-9]+$")


@cache
def yaml_loader() -> type:
    """hsa's one YAML loader: safe (libyaml's when present: several times faster), refusing a
    key given twice in one mapping, where YAML readers silently keep the last, and reading
    dates and times as the text they are written as (``created: 2024-01-05``): every value
    read is a JSON value, which harness documents, rows and manifests hold. A number with an
    exponent is a float as YAML 1.2 and JSON read it (``temperature: 1e-3``), not the text
    YAML 1.1 reads it as. Merge keys (``<<: *defaults``) merge as ``yaml.safe_load`` merges
    them: a key of the mapping's own overrides a merged one; a key given twice in a merged
    mapping, or ``<<`` given twice, is refused too. An alias inside its own anchor (a value
    holding itself) is refused, and so are aliases standing for more than
    ``YAML_ALIASED_VALUES`` values in all (``count_aliased``), and collections nested more
    than ``YAML_MAX_DEPTH`` deep (``refuse_deep``)."""
    import yaml

    base: type = getattr(yaml, "CSafeLoader", yaml.SafeLoader)

    class UniqueKeys(base):
        def __init__(self, stream: Any) -> None:
            super().__init__(stream)
            self._source = stream

        def get_single_node(self) -> Any:
            # each collection a text opens takes a character of it at least, so only a text
            # longer than the limit can nest past it (a count of brackets and indentation
            # missed ``? a\n: - - - ...``): that one is parsed for its depth first
            if isinstance(self._source, str) and len(self._source) > YAML_MAX_DEPTH:
                refuse_deep(yaml.parse(self._source, Loader=base))
            # (a text without "&" has no anchor, so no alias: the common case parses once)
            if not isinstance(self._source, str) or "&" in self._source:
                count_aliased(yaml.parse(self._source, Loader=base))
            return super().get_single_node()

        def construct_mapping(self, node: Any, deep: bool = False) -> Any:
            # a mapping is checked once, as written: constructing it flattens its merges into
            # it in place (its own keys beside the merged ones it overrides), and a chain of
            # merges (``leaf: {<<: *mid}``, ``mid`` overriding what it merged) meets it again
            checked = self.__dict__.setdefault("_checked", set())
            if id(node) not in checked:
                self.refuse_twice(node, deep, checked)
            return super().construct_mapping(node, deep=deep)

        def refuse_twice(self, node: Any, deep: bool, checking: set[int]) -> None:
            """Refuse a key given twice in ``node`` or in a mapping it merges (``<<: *a``,
            ``<<: [*a, *b]``, at any depth): a mapping written only inside a merge is never
            constructed on its own, and merging keeps the last of two silently. A mapping's
            own keys override merged ones, as YAML's merge keys say; ``<<`` is itself a key
            given once."""
            checking.add(id(node))  # (a mapping merged in several places: checked once)
            seen: set[Any] = set()
            merges = False
            for key_node, value_node in node.value:
                if key_node.tag == _MERGE:
                    key, twice = "<<", merges
                    merges = True
                    merged = value_node.value if isinstance(value_node, yaml.SequenceNode) else []
                    for each in [value_node, *merged]:
                        if isinstance(each, yaml.MappingNode) and id(each) not in checking:
                            self.refuse_twice(each, deep, checking)
                else:
                    key = self.construct_object(key_node, deep=deep)
                    twice = isinstance(key, typing.Hashable) and key in seen
                    if isinstance(key, typing.Hashable):
                        seen.add(key)
                if twice:
                    raise yaml.constructor.ConstructorError(
                        None, None, f"the key {key!r} is given twice", key_node.start_mark
                    )

    resolvers = {
        first: [(tag, pattern) for tag, pattern in found if tag != _TIMESTAMP]
        for first, found in base.yaml_implicit_resolvers.items()  # type: ignore[attr-defined]
    }
    UniqueKeys.yaml_implicit_resolvers = resolvers
    yaml_12_floats(UniqueKeys)
    # a date tagged as one (!!timestamp 2024-01-05) is text too
    UniqueKeys.add_constructor(_TIMESTAMP, lambda loader, node: loader.construct_scalar(node))
    for tag in _NOT_JSON:  # values JSON has no form for: refused where they are written
        UniqueKeys.add_constructor(tag, _not_json)
    return UniqueKeys


def refuse_deep(events: Iterable[Any]) -> None:
    """Raise ``ComposerError`` at the collection of a YAML document's parse ``events`` that
    nests past ``YAML_MAX_DEPTH``: libyaml's parser keeps its own stack, its composer would
    overflow the C one."""
    import yaml

    depth = 0
    for event in events:
        if isinstance(event, yaml.CollectionStartEvent):
            depth += 1
            if depth > YAML_MAX_DEPTH:
                at: Any = event.start_mark  # (libyaml's Mark, read as PyYAML's)
                raise yaml.composer.ComposerError(
                    None, None, f"nested more than {YAML_MAX_DEPTH:,} levels deep", at
                )
        elif isinstance(event, yaml.CollectionEndEvent):
            depth -= 1


def count_aliased(events: Iterable[Any]) -> int:
    """How many values the aliases among a YAML document's parse ``events`` stand for, each
    counting every value of its anchor (aliases in it included: what the value read holds,
    a value reached through two aliases counted twice). Raises ``ComposerError`` at the alias
    that takes the count past ``YAML_ALIASED_VALUES``, or at one inside its own anchor."""
    import yaml

    sizes: dict[str, int] = {}  # the values of each anchor closed so far
    open_: list[tuple[str | None, int]] = []  # each collection not closed: anchor, count before
    reached = aliased = 0
    for event in events:
        if isinstance(event, yaml.AliasEvent):
            name = str(event.anchor)
            size = sizes.get(name)
            if size is None and any(anchor == name for anchor, _ in open_):
                _refuse_alias(
                    f"the alias *{name} is inside its own anchor &{name} (a value cannot hold "
                    "itself)",
                    event,
                )
            if size is None:
                continue  # an undefined alias: the composer's error
            reached += size
            aliased += size
            if aliased > YAML_ALIASED_VALUES:
                _refuse_alias(
                    f"the alias *{name} takes the values aliases repeat past "
                    f"{YAML_ALIASED_VALUES:,} (an alias repeats every value of its anchor, those "
                    "of the aliases in it included: an alias bomb?); use fewer aliases",
                    event,
                )
        elif isinstance(event, yaml.ScalarEvent):
            reached += 1
            if event.anchor is not None:
                sizes[event.anchor] = 1
        elif isinstance(event, yaml.CollectionStartEvent):
            open_.append((event.anchor, reached))
            reached += 1
        elif isinstance(event, yaml.CollectionEndEvent):
            anchor, before = open_.pop()
            if anchor is not None:
                sizes[anchor] = reached - before
    return aliased


def _refuse_alias(problem: str, alias: Any) -> NoReturn:
    import yaml

    raise yaml.composer.ComposerError(None, None, problem, alias.start_mark)


def yaml_12_floats(resolver: Any) -> None:
    """Have the loader or dumper class ``resolver`` take a number with an exponent for a float
    as YAML 1.2 does (``1e-3``): hsa's loader reads it so, and a dumper that knows it quotes a
    string that looks so, which the loader would read back as a number."""
    resolver.add_implicit_resolver(_FLOAT, _FLOAT_12, list("-+.0123456789"))


#: YAML's types that no JSON value is
_NOT_JSON = ("tag:yaml.org,2002:set", "tag:yaml.org,2002:binary")


def _not_json(loader: Any, node: Any) -> Any:
    import yaml

    kind = node.tag.rsplit(":", 1)[-1]
    raise yaml.constructor.ConstructorError(
        None,
        None,
        f"a {kind} (!!{kind}) has no JSON form; write a list or a string",
        node.start_mark,
    )


def yaml_problem(exc: Exception) -> str:
    """What PyYAML's error ``exc`` says is wrong, in a line: libyaml's own bound on nesting
    (PyYAML 6.0.4's, as deep as ``refuse_deep``'s) said as ``refuse_deep`` says it."""
    reason = getattr(exc, "problem", None) or str(exc).splitlines()[0]
    if reason == "exceeded maximum nesting depth":
        return f"nested more than {YAML_MAX_DEPTH:,} levels deep"
    return reason


def loads_yaml(text: str, *, error: type[HsaError], file: str | None = None) -> Any:
    """``text`` parsed as YAML (a key given twice in a mapping refused); a syntax error raised
    as ``error`` naming the line."""
    import yaml

    try:
        return yaml.load(text, Loader=yaml_loader())
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"line {mark.line + 1}" if mark is not None else None
        reason = yaml_problem(exc)
        context, at = getattr(exc, "context", None), getattr(exc, "context_mark", None)
        # ("found duplicate anchor 'a'; first occurrence"; not beside hsa's own wording)
        if context and at is not None and reason == getattr(exc, "problem", None):
            reason = f"{context} at line {at.line + 1}, {reason}"
        raise error(f"invalid YAML: {reason}", file=file, where=where) from None
    except (RecursionError, ValueError) as exc:
        refuse_unreadable(exc, error, file=file)


class KeyGivenTwice(ValueError):
    """A JSON object names one key twice (``keys_once``)."""

    def __init__(self, key: str, name: object = None):
        inside = f"the object named {name!r}" if isinstance(name, str) else "one object"
        super().__init__(
            f"the key {key!r} is given twice in {inside} (JSON readers keep only the last, "
            "dropping the other without a word): keep one"
        )


def keys_once(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """``json.loads``'s ``object_pairs_hook`` for documents people write (a harness's tools):
    a key given twice is refused (``KeyGivenTwice``, naming the object by its ``name`` when
    it has one), as ``loads_yaml`` refuses it."""
    found = dict(pairs)
    if len(found) != len(pairs):
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                raise KeyGivenTwice(key, found.get("name"))
            seen.add(key)
    return found


def loads_written_json(text: str, **options: Any) -> Any:
    """A JSON document a person wrote (a tools file, a command line's JSON option): a byte
    order mark at its start (as editors save it) skipped, a key given twice refused
    (``keys_once``); ``options``: ``json.loads``'s others (``parse_constant``). Raises
    ``json.JSONDecodeError`` or ``KeyGivenTwice``."""
    return json.loads(text.removeprefix("\ufeff"), object_pairs_hook=keys_once, **options)


def read_yaml(path: str | Path, *, error: type[HsaError]) -> Any:
    """The YAML file at ``path``; an unreadable file or a syntax error raised as ``error``."""
    try:
        text = Path(path).read_text("utf-8")
    except OSError as exc:
        raise error(f"cannot read: {exc.strerror or exc}", file=str(path)) from None
    except UnicodeDecodeError as exc:
        raise error(
            f"not UTF-8 text (byte {exc.start}: {exc.object[exc.start : exc.start + 1]!r}); "
            "save it as UTF-8",
            file=str(path),
        ) from None
    return loads_yaml(text, error=error, file=str(path))
