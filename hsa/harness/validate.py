"""Validation of harness documents: the published JSON Schema plus the checks it cannot express."""

from __future__ import annotations

import hashlib
import json
import re
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterable, Iterator, Mapping
from functools import lru_cache
from importlib import resources
from typing import Any

import jsonschema
from jsonschema.validators import Draft202012Validator

from hsa.errors import (
    HarnessError,
    HarnessValidationError,
    HsaError,
    ProtocolError,
    TemplateError,
    schema_message,
)
from hsa.harness.arguments import schema_class
from hsa.harness.jsonvalues import (
    json_path,
    may_be_unwritable,
    pointer_key,
    resolve_pointer,
    unwritable,
)
from hsa.harness.model import Harness, Hook, Tool, compact_json
from hsa.harness.parse import alike_hooks
from hsa.harness.prompt import system_prompt
from hsa.harness.sandbox import check_template, message_fields
from hsa.harness.skillfile import own_field_in_extra, own_field_reason


@lru_cache(maxsize=1)
def harness_schema() -> dict[str, Any]:
    """The published JSON Schema of a harness document."""
    text = resources.files("hsa.harness").joinpath("schema/harness.schema.json").read_text("utf-8")
    return json.loads(text)


def document_problems(doc: Any, *, file: str | None = None) -> list[HsaError]:
    """Every problem in a harness document, each with the file and JSON path it concerns."""
    return _problems(doc, file, None)


def harness_problems(harness: Harness, *, file: str | None = None) -> list[HsaError]:
    """``document_problems(harness.to_dict())``, with each tool's parameters' problems found
    once per tool object (``Tool.derived``) and looked up by its parameters' JSON
    (``Tool.parameters_json``), which planning writes once per tool object anyway."""
    return _problems(harness.to_dict(), file, harness)


def _problems(doc: Any, file: str | None, harness: Harness | None) -> list[HsaError]:
    """``document_problems``; ``harness``, when given, is the harness ``doc`` was made from."""
    problems: list[HsaError] = []
    at: list[tuple[Any, ...]] = []  # the path of each schema problem
    for path, err in _schema_errors(doc):
        if err.validator == "additionalProperties" and isinstance(err.instance, Mapping):
            # One line per unknown field, at the field itself, with the fields that are allowed.
            schema = err.schema if isinstance(err.schema, Mapping) else {}
            allowed = list(schema.get("properties") or {})
            for key in err.instance:
                if key not in allowed:
                    problems.append(
                        HarnessError(
                            f"unknown field {key!r}; allowed here: {', '.join(allowed)}",
                            file=file,
                            where=json_path([*path, key]),
                        )
                    )
                    at.append((*path, key))
            continue
        problems.append(HarnessError(_schema_reason(err), file=file, where=json_path(path)))
        at.append(tuple(path))
    if not isinstance(doc, Mapping):
        return problems
    problems.extend(
        HarnessError(reason, file=file, where=where)
        for where, reason in _semantic_problems(doc, harness, _Broken(at))
    )
    return problems


class _Broken:
    """Whether a part of a document (a path such as ``("tools", 2, "name")``) has a schema
    problem at it, inside it or in a part above it (the root aside): the checks the schema
    cannot express read only the parts that are well-formed, so a schema problem neither
    stops them nor is reported twice."""

    def __init__(self, paths: Iterable[tuple[Any, ...]]):
        self._at = {p for p in paths if p}
        self._inside = {p[:k] for p in self._at for k in range(1, len(p) + 1)}

    def __call__(self, *path: Any) -> bool:
        if not self._at:
            return False
        return path in self._inside or any(path[:k] in self._at for k in range(1, len(path)))


def validate_document(doc: Any, *, file: str | None = None) -> None:
    """Raise ``HarnessValidationError`` listing every problem, or return when ``doc`` is valid."""
    problems = document_problems(doc, file=file)
    if problems:
        raise HarnessValidationError(problems)


@lru_cache(maxsize=1)
def _validator() -> Draft202012Validator:
    return Draft202012Validator(harness_schema())


@lru_cache(maxsize=1)
def _tool_validator() -> Draft202012Validator:
    """The harness schema's ``tool`` definition as a schema of its own."""
    schema = harness_schema()
    return Draft202012Validator({"$defs": schema["$defs"], "$ref": "#/$defs/tool"})


def _schema_errors(doc: Any) -> list[tuple[list[Any], jsonschema.ValidationError]]:
    """Schema errors of ``doc`` with their paths, sorted by path.

    A document's properties are checked one by one, each once per distinct value
    (``_property_errors``), and each tool on its own, by hand when it is plainly valid
    (``tool_plainly_valid``) and else once per distinct tool: the variants of a harness, and
    the conversations of a corpus, share most of their parts. The root schema constrains
    nothing across properties (its keywords are ``type``, ``required``,
    ``additionalProperties`` and ``properties``), so this finds exactly the errors of
    validating the whole document.
    """
    if not isinstance(doc, Mapping):
        return [(list(e.absolute_path), e) for e in _validator().iter_errors(doc)]
    known = harness_schema()["properties"]
    found: list[tuple[list[Any], jsonschema.ValidationError]] = []
    if not _root_plainly_valid(doc):
        found = [(list(e.absolute_path), e) for e in _root_validator().iter_errors(doc)]
    for key, value in doc.items():
        if key not in known:
            continue  # reported by the root's additionalProperties
        tools = value if key == "tools" and isinstance(value, list) else None
        if tools is not None and all(isinstance(t, Mapping) for t in tools):
            for index, tool in enumerate(tools):
                if errors := _tool_document_errors(tool):
                    found.extend((["tools", index, *e.absolute_path], e) for e in errors)
            continue
        try:
            text = compact_json(value)
        except (TypeError, ValueError):  # not JSON: validated as it is
            errors = tuple(_property_validator(key).iter_errors(value))
        else:
            errors = _property_errors(key, text)
        if errors:
            found.extend(([key, *e.absolute_path], e) for e in errors)
    return sorted(found, key=lambda item: list(map(str, item[0])))


@lru_cache(maxsize=1)
def _root_validator() -> Draft202012Validator:
    """The root schema without its properties' own schemas (checked by property)."""
    schema = harness_schema()
    root = {k: v for k, v in schema.items() if k != "$defs"}
    root["properties"] = {key: True for key in schema["properties"]}
    return Draft202012Validator(root)


#: hooks a harness may have: validation compares every pair of them (``alike_hooks``), and a
#: real harness has tens
MAX_HOOKS = 500

#: the root schema's keywords ``_root_plainly_valid`` reads by hand (a test holds the
#: published schema to them): the others are annotations, and ``properties`` are all ``true``
ROOT_KEYWORDS = frozenset(("type", "required", "additionalProperties", "properties"))


def _root_plainly_valid(doc: Any) -> bool:
    """True when ``_root_validator`` certainly finds no error in ``doc``: an object (``type``)
    with the ``required`` properties and no others (``additionalProperties: false``). Planning
    validates every variant it makes, and this is far cheaper than jsonschema; False means
    "not sure"."""
    schema = harness_schema()
    return (
        type(doc) is dict
        and all(key in doc for key in schema["required"])
        and schema["properties"].keys() >= doc.keys()
    )


@lru_cache(maxsize=16)
def _property_validator(key: str) -> Draft202012Validator:
    schema = harness_schema()
    return Draft202012Validator({"$defs": schema["$defs"], **schema["properties"][key]})


def _property_errors(key: str, text: str) -> tuple[jsonschema.ValidationError, ...]:
    return _ERRORS.of(key, text, _property_validator)


class _ErrorsByText:
    """The schema errors of each distinct JSON text, for the most recent ``size`` texts, a
    long text by a digest of it: a harness's prompt can be 200 KB, and keyed by the texts
    themselves 2,000 such harnesses held 379 MB."""

    #: texts longer than this are kept by their digest (at most ``size`` times this kept whole)
    WHOLE = 512

    def __init__(self, size: int):
        self.size = size
        self.found: OrderedDict[object, tuple[jsonschema.ValidationError, ...]] = OrderedDict()
        self.lock = threading.Lock()

    def of(
        self, key: str, text: str, validator: Callable[[str], Draft202012Validator]
    ) -> tuple[jsonschema.ValidationError, ...]:
        """The errors ``validator(key)`` finds in ``text``."""
        name: object = (key, text)
        if len(text) > self.WHOLE:
            digest = hashlib.blake2b(key.encode(), digest_size=20)
            digest.update(b"\0" + text.encode("utf-8", "surrogatepass"))
            name = digest.digest()
        with self.lock:
            errors = self.found.get(name)
            if errors is not None:
                self.found.move_to_end(name)
                return errors
        errors = tuple(validator(key).iter_errors(json.loads(text)))
        with self.lock:
            self.found[name] = errors
            if len(self.found) > self.size:
                self.found.popitem(last=False)
        return errors


_ERRORS = _ErrorsByText(1 << 14)


#: the harness schema's ``tool`` definition that ``tool_plainly_valid`` checks by hand (a
#: test holds the published schema to it)
TOOL_DEFINITION: dict[str, Any] = {
    "type": "object",
    "required": ["name"],
    "additionalProperties": False,
    "properties": {
        "name": {"type": "string", "pattern": "^[a-zA-Z0-9_-]{1,64}$(?!\\n)"},
        "description": {"type": "string"},
        "parameters": {
            "type": "object",
            "properties": {
                "type": {"const": "object"},
                "properties": {"type": "object"},
                "required": {"type": "array", "items": {"type": "string"}},
            },
        },
        "extra": {"type": "object"},
    },
}
_TOOL_NAME = re.compile(TOOL_DEFINITION["properties"]["name"]["pattern"])
_TOOL_KEYS = frozenset(TOOL_DEFINITION["properties"])


def tool_plainly_valid(tool: Mapping[str, Any]) -> bool:
    """True when ``tool`` certainly meets ``TOOL_DEFINITION`` (checked by hand, as jsonschema
    reads it: ``pattern`` searched, JSON types by Python type). Planning validates every
    rewritten tool of every variant, and this is a hundred times cheaper than jsonschema;
    False means "not sure", and the caller asks jsonschema for the errors."""
    if type(tool) is not dict or not _TOOL_KEYS.issuperset(tool):
        return False
    name = tool.get("name")
    if type(name) is not str or _TOOL_NAME.search(name) is None:
        return False
    if type(tool.get("description", "")) is not str or type(tool.get("extra", {})) is not dict:
        return False
    params = tool.get("parameters", {})
    if type(params) is not dict or params.get("type", "object") != "object":
        return False
    if type(params.get("type", "")) is not str or type(params.get("properties", {})) is not dict:
        return False
    required = params.get("required", [])
    return type(required) is list and all(type(r) is str for r in required)


def _tool_errors(text: str) -> tuple[jsonschema.ValidationError, ...]:
    return _ERRORS.of("$defs/tool", text, lambda key: _tool_validator())


def _tool_document_errors(tool: Mapping[str, Any]) -> tuple[jsonschema.ValidationError, ...]:
    """The schema errors of one tool of a document (paths relative to the tool)."""
    if tool_plainly_valid(tool):
        return ()
    return _tool_errors(compact_json(tool))


def _tool_object_problems(tool: Tool) -> tuple[tuple[str, str], ...]:
    """The problems of ``tool``'s parameters schema, at paths relative to it, looked up by
    the JSON the tool's document is made of (``Tool.parameters_json``)."""
    try:
        text = tool.parameters_json()
    except (TypeError, ValueError):
        return tuple(_parameter_problems(tool.parameters))
    return _parameter_problems_of(text)


def render_problems(harness: Harness) -> list[HsaError]:
    """Problems that show only when the system prompt is rendered (in the sandbox)."""
    try:
        system_prompt(harness)
    except (TemplateError, ProtocolError) as exc:
        return [HarnessError(exc.message, where=exc.where or "$.prompt")]
    return []


def _schema_reason(err: jsonschema.ValidationError) -> str:
    if err.validator == "pattern" and err.validator_value == r"\S":
        return "must not be empty or blank"
    return schema_message(err)


def _semantic_problems(
    doc: Mapping[str, Any], harness: Harness | None = None, broken: _Broken | None = None
) -> Iterator[tuple[str, str]]:
    """The problems the schema cannot express; with the ``harness`` the document was made
    from, each tool's parameter problems are kept on the tool. ``broken`` says which parts
    have schema problems: those are not read here."""
    broken = broken or _Broken(())

    def parameters(index: int | None, schema: Mapping[str, Any]) -> Iterable[tuple[str, str]]:
        if harness is None:
            found: Iterable[tuple[str, str]] = _parameter_problems_at(schema)
        else:
            tool = harness.skill_tool if index is None else harness.tools[index]
            found = tool.derived(_tool_object_problems)  # type: ignore[union-attr]
        if not found:  # (the common case: no path written)
            return ()
        where = "$.skill_tool.parameters" if index is None else f"$.tools[{index}].parameters"
        return ((where + sub, reason) for sub, reason in found)

    tools = _items(doc.get("tools"))
    seen: dict[str, int] = {}
    named: list[tuple[int | None, str]] = []  # (tool index, name) of every well-formed name
    for i, tool in enumerate(tools):
        if tool is None:
            continue
        if not broken("tools", i, "name"):
            name = tool["name"]
            named.append((i, name))
            if name in seen:
                yield (
                    f"$.tools[{i}].name",
                    f"duplicate tool name {name!r} (also at $.tools[{seen[name]}])",
                )
            seen[name] = i
        if not broken("tools", i, "parameters"):
            yield from parameters(i, tool.get("parameters") or {})
        if "extra" in tool:
            yield from _unwritable(tool, "extra", f"$.tools[{i}].extra")
    skill_tool = doc.get("skill_tool")
    if not isinstance(skill_tool, Mapping):
        skill_tool = None
    protocol = doc.get("protocol")
    protocol = protocol if isinstance(protocol, Mapping) else {}
    if protocol.get("call_format") == "python" and protocol.get("name") == "text":
        from hsa.harness.protocols.pycalls import is_identifier

        if skill_tool and not broken("skill_tool", "name"):
            named.append((None, skill_tool["name"]))
        for index, name in named:
            if not is_identifier(name):
                yield (
                    "$.skill_tool.name" if index is None else f"$.tools[{index}].name",
                    (
                        f"{name!r} cannot be written in the python call format; use a name that "
                        "is a Python identifier or another call format"
                    ),
                )
    if skill_tool:
        if not broken("skill_tool", "name") and skill_tool["name"] in seen:
            yield "$.skill_tool.name", f"skill tool name {skill_tool['name']!r} is also a tool"
        if not broken("skill_tool", "parameters"):
            params = skill_tool.get("parameters") or {}
            yield from parameters(None, params)
            if not (params.get("properties") or {}):
                yield "$.skill_tool.parameters", "the skill tool needs a parameter naming the skill"
        yield from _unwritable(skill_tool, "extra", "$.skill_tool.extra")

    skill_ids: dict[str, int] = {}
    for i, skill in enumerate(_items(doc.get("skills"))):
        if skill is None:
            continue
        if not broken("skills", i, "id"):
            if skill["id"] in skill_ids:
                yield f"$.skills[{i}].id", f"duplicate skill id {skill['id']!r}"
            skill_ids[skill["id"]] = i
        if (own := own_field_in_extra(skill.get("extra"))) is not None:
            yield f"$.skills[{i}].extra.{own}", own_field_reason(own)
        yield from _unwritable(skill, "extra", f"$.skills[{i}].extra")

    hook_ids: set[str] = set()
    shown: list[tuple[int, Hook]] = []  # the hooks whose messages can be read
    for i, hook in enumerate(_items(doc.get("hooks"))):
        if hook is None:
            continue
        where = f"$.hooks[{i}]"
        if not broken("hooks", i, "id"):
            if hook["id"] in hook_ids:
                yield f"{where}.id", f"duplicate hook id {hook['id']!r}"
            elif not any(broken("hooks", i, key) for key in ("message", "inject", "wrapper")):
                shown.append((i, _shown_hook(hook)))  # (a second of one id: reported already)
            hook_ids.add(hook["id"])
        if not broken("hooks", i, "message"):
            try:
                message_fields(hook.get("message", ""))
            except TemplateError as exc:
                yield f"{where}.message", exc.message
        inject = hook.get("inject", "system")
        if (
            not broken("hooks", i, "inject")
            and not broken("hooks", i, "wrapper")
            and inject in ("user", "tool_result")
            and not hook.get("wrapper")
        ):
            yield (
                f"{where}.wrapper",
                (
                    f"a hook injected at {inject!r} needs a wrapper tag so it can be told apart "
                    "from the surrounding text"
                ),
            )
        yield from _unwritable(hook, "params", f"{where}.params")
        if broken("hooks", i, "matcher", "tool"):
            continue
        pattern = (hook.get("matcher") or {}).get("tool")
        if pattern is not None:
            try:
                re.compile(pattern)
            except re.error as exc:
                yield f"{where}.matcher.tool", f"invalid regular expression: {exc}"
    hooks = _items(doc.get("hooks"))
    if len(hooks) > MAX_HOOKS:  # (every pair is compared: refused before that)
        yield (
            "$.hooks",
            f"{len(hooks):,} hooks; a harness may have at most {MAX_HOOKS:,} (each pair of hooks "
            "is compared to tell their messages apart)",
        )
        alike = None
    else:
        alike = alike_hooks([hook for _, hook in shown])
    if alike is not None:
        (i, first), (j, second) = shown[alike[0]], shown[alike[1]]
        yield (
            f"$.hooks[{j}]",
            (
                f"every message hook {second.id!r} shows reads as a message of hook "
                f"{first.id!r} ($.hooks[{i}]) too, so a conversation cannot tell which of them "
                "fired; give one a wording, wrapper or position of its own"
            ),
        )

    prompt = doc.get("prompt")
    prompt = prompt if isinstance(prompt, Mapping) else {}
    section_ids: set[str] = set()
    for i, section in enumerate(_items(prompt.get("sections"))):
        if section is None:
            continue
        if not broken("prompt", "sections", i, "id"):
            if section["id"] in section_ids:
                yield f"$.prompt.sections[{i}].id", f"duplicate section id {section['id']!r}"
            section_ids.add(section["id"])
        if not broken("prompt", "sections", i, "body"):
            try:
                check_template(section.get("body", ""))
            except TemplateError as exc:
                yield f"$.prompt.sections[{i}].body", exc.message
    if prompt.get("template") is not None and not broken("prompt", "template"):
        try:
            check_template(prompt["template"])
        except TemplateError as exc:
            yield "$.prompt.template", exc.message
    yield from _unwritable(doc, "metadata", "$.metadata")


def _shown_hook(hook: Mapping[str, Any]) -> Hook:
    """What of a hook document shows its messages (``alike_hooks`` reads): id, position,
    wrapper and message."""
    wrapper = hook.get("wrapper")
    return Hook(
        hook["id"],
        "stop",
        "add_context",
        hook.get("message", ""),
        inject=hook.get("inject", "system"),
        wrapper=wrapper if isinstance(wrapper, str) else None,
    )


def _unwritable(part: Mapping[str, Any], key: str, where: str) -> Iterator[tuple[str, str]]:
    """The first value in a free-form object of the document (``metadata``, a hook's
    ``params``, an ``extra``) that JSON cannot write (``unwritable``): YAML reads ``.nan``,
    which a harness saved as JSON would hold as ``NaN``; SKILL.md front matter refuses it
    too. An integer beyond 64 bits is JSON, and an importer may keep one in metadata (BFCL's
    recorded responses). (A part that is no object is the schema's problem.)"""
    value = part.get(key)
    bad = unwritable(value, where, wide=False) if isinstance(value, Mapping) else None
    if bad is not None:
        yield bad


def _items(value: Any) -> list[Mapping[str, Any] | None]:
    """The entries of a list part of a document, each at its index, ``None`` for one that is
    not an object (a schema problem); a part that is not a list has none."""
    if not isinstance(value, list):
        return []
    return [item if type(item) is dict or isinstance(item, Mapping) else None for item in value]


def _parameter_problems_at(schema: Mapping[str, Any]) -> Iterable[tuple[str, str]]:
    """``_parameter_problems`` of a tool's parameters schema, once per distinct schema."""
    try:
        text = compact_json(schema)
    except (TypeError, ValueError):
        return _parameter_problems(schema)
    return _parameter_problems_of(text)


@lru_cache(maxsize=1 << 14)
def _parameter_problems_of(text: str) -> tuple[tuple[str, str], ...]:
    """``_parameter_problems`` once per distinct parameters schema."""
    # without a "$ref" key anywhere there are no reference problems to look for
    schema = json.loads(text)
    found = tuple(_parameter_problems(schema, refs='"$ref"' in text))
    bad = unwritable(schema, "") if may_be_unwritable(text) else None
    return found if bad is None else (*found, bad)


def _parameter_problems(
    schema: Mapping[str, Any], *, refs: bool = True
) -> Iterator[tuple[str, str]]:
    """Problems of a tool's parameters schema, at paths relative to it (``.required``);
    ``refs=False`` skips the ``$ref`` checks (for a schema known to have none)."""
    try:
        if not plainly_valid(schema):
            schema_class(schema).check_schema(dict(schema))
    except jsonschema.SchemaError as exc:
        yield json_path(exc.absolute_path)[1:], f"not a valid JSON Schema: {exc.message}"
        return
    props = schema.get("properties") or {}
    missing = [n for n in schema.get("required") or [] if n not in props]
    if missing:  # (rare: most schemas list every required name in their properties)
        named, patterns = declared_properties(schema, schema)
        for name in missing:
            if name not in named and not any(pattern_matches(p, name) for p in patterns):
                yield ".required", f"required parameter {name!r} is not in properties"
    if refs:
        yield from ref_problems(schema)


def declared_properties(
    root: Mapping[str, Any], node: Any, refs: frozenset[str] = frozenset()
) -> tuple[set[str], list[str]]:
    """The property names and ``patternProperties`` patterns that ``node`` (a sub-schema of
    ``root``) declares for the object it describes, with the schemas that apply to that same
    object (``allOf``, ``anyOf``, ``oneOf``, ``then``/``else``, local ``$ref``s)."""
    names: set[str] = set()
    patterns: list[str] = []
    if not isinstance(node, Mapping):
        return names, patterns
    if isinstance(node.get("properties"), Mapping):
        names.update(node["properties"])
    if isinstance(node.get("patternProperties"), Mapping):
        patterns.extend(str(p) for p in node["patternProperties"])
    subs = [s for key in ("allOf", "anyOf", "oneOf") for s in node.get(key) or ()]
    subs += [node[key] for key in ("then", "else") if key in node]
    ref = node.get("$ref")
    if isinstance(ref, str) and ref.startswith("#") and ref not in refs:
        subs.append(resolve_pointer(root, ref))
        refs = refs | {ref}
    for sub in subs:
        more, also = declared_properties(root, sub, refs)
        names |= more
        patterns += also
    return names, patterns


def pattern_matches(pattern: str, name: str) -> bool:
    """Whether a ``patternProperties`` pattern (ECMA 262, read as Python's) matches ``name``;
    one Python cannot read is taken to."""
    try:
        return re.search(pattern, name) is not None
    except re.error:
        return True


_SIMPLE_TYPES = frozenset(("array", "boolean", "integer", "null", "number", "object", "string"))
_STRING_KEYS = frozenset(("description", "title", "format", "$ref", "$comment"))
_NUMBER_KEYS = frozenset(("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"))
_COUNT_KEYS = frozenset(("minItems", "maxItems", "minLength", "maxLength"))
_ANY_KEYS = frozenset(("default", "const", "examples"))
_SCHEMA_MAP_KEYS = frozenset(("properties", "$defs", "definitions"))
_SCHEMA_KEYS = frozenset(("items", "additionalProperties", "not"))
_SCHEMA_LIST_KEYS = frozenset(("anyOf", "oneOf", "allOf", "prefixItems"))


def plainly_valid(schema: Any) -> bool:
    """True when ``schema`` uses only common keywords, each with a value of the right shape.

    Such a schema is certainly valid against the 2020-12 meta-schema, which is slow to check
    (about 3 ms a tool) and dominates validating thousands of imported tools. False means
    "not sure": the caller runs the full meta-schema check.
    """
    # (a dict, the type of every object a schema read from JSON holds, and a single type name
    # are tested first: planning reads every sub-schema of every new schema here, and the
    # abstract ``Mapping`` test costs more than the rest of a typical node's checks)
    if type(schema) is not dict:
        if isinstance(schema, bool):
            return True
        if not isinstance(schema, Mapping):
            return False
    for key, value in schema.items():
        if key == "type":
            if type(value) is str:
                if value not in _SIMPLE_TYPES:
                    return False
                continue
            types = value if isinstance(value, list) else [value]
            if not types or len(set(map(str, types))) != len(types):
                return False
            if not all(isinstance(t, str) and t in _SIMPLE_TYPES for t in types):
                return False
        elif key in _STRING_KEYS:
            if not isinstance(value, str):
                return False
        elif key in _SCHEMA_MAP_KEYS:
            if type(value) is not dict and not isinstance(value, Mapping):
                return False
            if not all(map(plainly_valid, value.values())):
                return False
        elif key == "pattern":  # the meta-schema asserts format "regex" here
            try:
                re.compile(value)
            except (re.error, TypeError):
                return False
        elif key in _NUMBER_KEYS:
            if not isinstance(value, int | float) or isinstance(value, bool):
                return False
        elif key in _COUNT_KEYS:
            if not isinstance(value, int) or isinstance(value, bool) or value < 0:
                return False
        elif key == "required":
            if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
                return False
            if len(set(value)) != len(value):
                return False
        elif key == "enum":
            if not isinstance(value, list):
                return False
        elif key in _SCHEMA_KEYS:
            if not plainly_valid(value):
                return False
        elif key in _SCHEMA_LIST_KEYS:
            if not isinstance(value, list) or not value or not all(map(plainly_valid, value)):
                return False
        elif key not in _ANY_KEYS:
            return False
    return True


def ref_problems(schema: Mapping[str, Any]) -> Iterator[tuple[str, str]]:
    """Unresolvable local ``$ref``s, and ``$ref`` cycles that never reach into a value (in
    ``schema``, at paths relative to it). A recursive type (a tree whose nodes hold nodes)
    is a cycle through ``properties`` or ``items``, and valid; a cycle of references to the
    same value (``A`` is ``allOf: [B]``, ``B`` is ``A``; a property that is ``$ref`` to
    itself) would never end being checked.

    Each node a reference names owns the references it makes to the same value, as do the
    schema and the ``$defs`` entries; a node named by a reference, reached from its owner
    through the same value, is a reference of that owner's too."""
    named = {_ref_key(ref) for ref in _local_refs(schema)}
    edges: dict[str, set[str]] = {}  # owner -> the owners its value is checked against

    def walk(
        node: Any, path: str, key: tuple[str, ...], owner: str, same: bool
    ) -> Iterator[tuple[str, str]]:
        if isinstance(node, Mapping):
            if key in named and _label(key) != owner:
                if same:
                    edges.setdefault(owner, set()).add(_label(key))
                owner, same = _label(key), True
            ref = node.get("$ref")
            if isinstance(ref, str):
                if not ref.startswith("#"):
                    yield path, f"$ref {ref!r} is not local; only '#/...' references are supported"
                elif resolve_pointer(schema, ref) is None:
                    yield path, f"$ref {ref!r} does not resolve"
                elif same:
                    edges.setdefault(owner, set()).add(_label(_ref_key(ref)))
            for name, value in node.items():
                child = f"{path}.{name}" if _plain(name) else f"{path}[{json.dumps(str(name))}]"
                at = (*key, str(name))
                # A node directly under $defs/definitions owns the references inside it.
                if path in (".$defs", ".definitions"):
                    yield from walk(value, child, at, _label(at), True)
                else:
                    yield from walk(value, child, at, owner, same and name in _SAME_VALUE)
        elif isinstance(node, list):
            for i, value in enumerate(node):
                yield from walk(value, f"{path}[{i}]", (*key, str(i)), owner, same)

    yield from walk(schema, "", (), "#", True)
    cycle = _find_cycle(edges)
    if cycle:
        yield (
            "",
            (
                "$ref cycle: " + " -> ".join(cycle) + " (each refers to the same value as the "
                "next, so checking a value against it would never end)"
            ),
        )


def _local_refs(node: Any) -> Iterator[str]:
    """Every local ``$ref`` string in ``node``, at any depth."""
    if isinstance(node, Mapping):
        ref = node.get("$ref")
        if isinstance(ref, str) and ref.startswith("#"):
            yield ref
        for value in node.values():
            yield from _local_refs(value)
    elif isinstance(node, list):
        for value in node:
            yield from _local_refs(value)


def _ref_key(ref: str) -> tuple[str, ...]:
    """The keys the local pointer ``ref`` names, in order (as ``resolve_pointer`` reads it)."""
    return tuple(pointer_key(raw) for raw in ref.lstrip("#").split("/")[1:])


def _label(key: tuple[str, ...]) -> str:
    """The pointer to the node at ``key``, as a cycle names it (``#/$defs/A``)."""
    return "#" + "".join("/" + k.replace("~", "~0").replace("/", "~1") for k in key)


#: keywords whose sub-schemas apply to the value itself, not to a part of it
_SAME_VALUE = frozenset(
    ("$defs", "definitions", "anyOf", "oneOf", "allOf", "not", "if", "then", "else")
)


def _plain(key: Any) -> bool:
    return isinstance(key, str) and re.fullmatch(r"[A-Za-z_$][A-Za-z0-9_$]*", key) is not None


def _find_cycle(edges: dict[str, set[str]]) -> list[str] | None:
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(edges.get(node, ())):
            if state.get(nxt) == 1:
                return [*stack[stack.index(nxt) :], nxt]
            if nxt not in state:
                found = visit(nxt)
                if found:
                    return found
        stack.pop()
        state[node] = 2
        return None

    for start in sorted(edges):
        if start not in state:
            found = visit(start)
            if found:
                return found
    return None
