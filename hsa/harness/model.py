"""The harness vocabulary: Harness, Tool, Skill, Hook, Prompt, Protocol as frozen value objects.

Every object converts to and from a plain JSON document (``to_dict``/``from_dict``); the
document form is the one validated by ``hsa/harness/schema/harness.schema.json``. Objects are
frozen: derive a changed copy with ``dataclasses.replace`` (or ``Harness.replace``) and never
mutate the JSON Schemas and dicts they hold. Because a harness never changes, what is derived
from it alone (its JSON document, its digest, its system prompt) is computed once per object
and kept on it (``Harness.derived``).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import sys
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence, Set
from dataclasses import dataclass, field
from typing import Any, Literal, TypeVar

from hsa.errors import HarnessError, refuse_kind
from hsa.harness.pickling import by_fields

_T = TypeVar("_T")
_MISSING: Any = object()  # a value not derived yet (``Tool.derived``)

HOOK_EVENTS = ("session_start", "user_prompt_submit", "pre_tool_use", "post_tool_use", "stop")
HOOK_EFFECTS = ("add_context", "deny", "update_input", "update_output")
HOOK_POSITIONS = ("system", "user", "tool_result")
HEADING_STYLES = ("markdown", "xml", "plain")
SECTION_KINDS = ("persona", "policy", "skills", "tools", "output_format", "custom")
CALL_FORMATS = ("hermes", "json", "python", "xml_verbose", "xml_concise")
DOC_FORMATS = ("json", "xml", "python", "markdown", "lines")


def call_format_problem(name: object) -> str | None:
    """Why ``name`` is not a call format a model's replies are read in, or None."""
    if name in CALL_FORMATS:
        return None
    return f"unknown call format {name!r}: {', '.join(CALL_FORMATS)}"


HookEvent = Literal["session_start", "user_prompt_submit", "pre_tool_use", "post_tool_use", "stop"]


@by_fields
@dataclass(frozen=True, slots=True)
class Tool:
    """A callable tool: an API-legal name, a description and a JSON Schema for its arguments.

    ``extra`` keeps source fields a model is never shown, untouched: an MCP tool's ``title``,
    ``outputSchema``, ``annotations`` (``readOnlyHint``, ``destructiveHint``, ...). They are in
    the harness document and ``tools.json``, never in ``to_function``/``to_openai``, whose
    keys the OpenAI API accepts.
    """

    name: str
    description: str = ""
    parameters: Mapping[str, Any] = field(
        default_factory=lambda: {"type": "object", "properties": {}}
    )
    extra: Mapping[str, Any] = field(default_factory=dict)
    # Values derived from this tool alone (``derived``), as on ``Harness``: the variants of a
    # harness share the tools a rewrite left alone, and an importer shares the tools that
    # recur across a corpus, so what is derived per tool is made once per distinct tool.
    _derived: dict[Callable[..., Any], Any] = field(
        default_factory=dict, init=False, repr=False, compare=False
    )

    def derived(self, compute: Callable[[Tool], _T]) -> _T:
        """``compute(self)``, computed on first use and kept on this object (see
        ``Harness.derived``: for pure functions of the tool, passed as module-level
        functions). Most tools of a variant are new, so a miss is the common case here: no
        exception for it."""
        value = self._derived.get(compute, _MISSING)
        if value is _MISSING:
            value = self._derived[compute] = compute(self)
        return value

    def to_dict(self) -> dict[str, Any]:
        out = self.to_function()
        if self.extra:
            out["extra"] = dict(self.extra)
        return out

    def to_json(self) -> str:
        """``to_dict()`` as compact JSON (key order kept), made once per tool object."""
        return self.derived(_tool_json)

    def parameters_json(self) -> str:
        """``parameters`` as compact JSON (key order kept), made once per tool object: part
        of ``to_json``, and what validation looks a schema's problems up by, so planning
        writes each new schema out once."""
        return self.derived(_parameters_json)

    def to_function(self) -> dict[str, Any]:
        """What a model is shown: ``name``, ``description`` and ``parameters``."""
        return {"name": self.name, "description": self.description, "parameters": self.parameters}

    def to_openai(self) -> dict[str, Any]:
        """The tool as one entry of an OpenAI request's ``tools`` list."""
        return {"type": "function", "function": self.to_function()}

    def openai_json(self) -> str:
        """``to_openai()`` as compact JSON (key order kept), made once per tool object, its
        parameters' part taken from ``parameters_json``."""
        return self.derived(_openai_json)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Tool:
        return cls(
            name=data["name"],
            description=data.get("description", ""),
            parameters=data.get("parameters") or {"type": "object", "properties": {}},
            extra=dict(data.get("extra") or {}),
        )


@by_fields
@dataclass(frozen=True, slots=True)
class Skill:
    """An Agent Skill: identifier, display name, one-line description and Markdown content.

    ``extra`` keeps any other front-matter fields (license, allowed-tools, ...) untouched.
    """

    id: str
    name: str
    description: str
    content: str
    extra: Mapping[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "id": self.id,
            "name": self.name,
            "description": self.description,
            "content": self.content,
        }
        if self.extra:
            out["extra"] = dict(self.extra)
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Skill:
        return cls(
            id=data["id"],
            name=data.get("name", data["id"]),
            description=data.get("description", ""),
            content=data.get("content", ""),
            extra=dict(data.get("extra") or {}),
        )


@by_fields
@dataclass(frozen=True, slots=True)
class Matcher:
    """When a hook applies: a tool-name pattern (regex, full match), a turn index, or a period."""

    tool: str | None = None
    turn: int | None = None
    every_n_turns: int | None = None

    def to_dict(self) -> dict[str, Any]:
        return {k: v for k, v in dataclasses.asdict(self).items() if v is not None}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any] | None) -> Matcher:
        data = data or {}
        return cls(
            tool=data.get("tool"), turn=data.get("turn"), every_n_turns=data.get("every_n_turns")
        )


@by_fields
@dataclass(frozen=True, slots=True)
class Hook:
    """A declarative lifecycle hook.

    When ``event`` fires and ``matcher`` matches, the hook applies ``effect`` and shows the model
    ``message`` (a template over the payload, placeholders only) at ``inject`` position, wrapped
    in ``<wrapper>`` tags when set. ``payload_fn`` (``pkg.mod:fn``) may compute the payload; it
    returns ``None`` to keep the hook from firing. ``params`` holds effect arguments, e.g.
    ``{"remove": ["cost"]}`` for ``update_output`` or ``{"set": {"limit": 5}}`` for
    ``update_input``.
    """

    id: str
    event: HookEvent
    effect: str
    message: str
    matcher: Matcher = field(default_factory=Matcher)
    inject: str = "system"
    wrapper: str | None = None
    payload_fn: str | None = None
    params: Mapping[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "id": self.id,
            "event": self.event,
            "effect": self.effect,
            "message": self.message,
            "matcher": self.matcher.to_dict(),
            "inject": self.inject,
        }
        if self.wrapper is not None:
            out["wrapper"] = self.wrapper
        if self.payload_fn is not None:
            out["payload_fn"] = self.payload_fn
        if self.params:
            out["params"] = dict(self.params)
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Hook:
        return cls(
            id=data["id"],
            event=data["event"],
            effect=data["effect"],
            message=data.get("message", ""),
            matcher=Matcher.from_dict(data.get("matcher")),
            inject=data.get("inject", "system"),
            wrapper=data.get("wrapper"),
            payload_fn=data.get("payload_fn"),
            params=dict(data.get("params") or {}),
        )


@by_fields
@dataclass(frozen=True, slots=True)
class Section:
    """One named section of the system prompt; ``body`` is a Jinja2 template.

    Sections of kind ``tools``, ``skills`` and ``output_format`` with an empty body are filled
    with the generated tool docs, skills catalogue and call-format instructions. A rendered
    body is stripped of whitespace at its ends unless ``verbatim`` is set, as importers do for
    text whose every byte is data (a source system message).
    """

    id: str
    title: str
    body: str = ""
    kind: str = "custom"
    verbatim: bool = False

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"id": self.id, "kind": self.kind, "title": self.title}
        out["body"] = self.body
        if self.verbatim:
            out["verbatim"] = True
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Section:
        return cls(
            id=data["id"],
            title=data.get("title", data["id"]),
            body=data.get("body", ""),
            kind=data.get("kind", "custom"),
            verbatim=bool(data.get("verbatim", False)),
        )


@by_fields
@dataclass(frozen=True, slots=True)
class Prompt:
    """The system prompt: ordered sections, their heading style, and where the prompt goes.

    ``placement`` is ``system`` (a system message) or ``user`` (prepended to the first user
    message, for models without a system role). ``template``, when set, is a Jinja2 template
    that receives ``sections`` (formatted strings), ``body`` (them joined) and the harness.
    """

    sections: tuple[Section, ...] = ()
    heading_style: str = "markdown"
    placement: str = "system"
    template: str | None = None

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "heading_style": self.heading_style,
            "placement": self.placement,
            "sections": [s.to_dict() for s in self.sections],
        }
        if self.template is not None:
            out["template"] = self.template
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any] | None) -> Prompt:
        data = data or {}
        return cls(
            sections=tuple(Section.from_dict(s) for s in data.get("sections", ())),
            heading_style=data.get("heading_style", "markdown"),
            placement=data.get("placement", "system"),
            template=data.get("template"),
        )


@by_fields
@dataclass(frozen=True, slots=True)
class Protocol:
    """How tools and calls appear to the model.

    ``api``: tools in the request's ``tools`` field, calls in ``tool_calls``. ``text``: tool
    docs printed in the system prompt in ``doc_format`` and calls emitted as assistant text in
    ``call_format`` (``hermes`` is one ``<tool_call>`` JSON object per call; the others follow
    the BFCL v4 return formats), wrapped in a ``<TOOLCALL>`` tag when ``call_tag`` is set.
    """

    name: str = "api"
    call_format: str = "hermes"
    call_tag: bool = True
    doc_format: str = "json"

    @property
    def is_api(self) -> bool:
        return self.name == "api"

    @property
    def label(self) -> str:
        """A short stable name, e.g. ``api`` or ``text/python+tag/xml-docs``."""
        if self.is_api:
            return "api"
        # hermes always wraps calls in its own <tool_call> tag; call_tag does not apply to it
        tag = "+tag" if self.call_tag and self.call_format != "hermes" else ""
        return f"text/{self.call_format}{tag}/{self.doc_format}-docs"

    def to_dict(self) -> dict[str, Any]:
        if self.is_api:
            return {"name": "api"}
        return {
            "name": self.name,
            "call_format": self.call_format,
            "call_tag": self.call_tag,
            "doc_format": self.doc_format,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any] | None) -> Protocol:
        data = data or {}
        return cls(
            name=data.get("name", "api"),
            call_format=data.get("call_format", "hermes"),
            call_tag=bool(data.get("call_tag", True)),
            doc_format=data.get("doc_format", "json"),
        )


@dataclass(frozen=True, slots=True)
class Harness:
    """Everything around a model that can change without touching its weights.

    ``skill_tool``, when set, is the tool through which the model loads a skill's content on
    demand (its first required string parameter carries the skill id); skills are then listed
    in the prompt by name and description only. Without it, skill contents are printed in full.
    ``metadata`` carries importer lineage such as ``name_map`` (API-legal name -> source name).

    Two harnesses are equal when their JSON documents are (key order included, since order is
    data), and hash by it.
    """

    id: str
    version: str = "1"
    protocol: Protocol = field(default_factory=Protocol)
    prompt: Prompt = field(default_factory=Prompt)
    tools: tuple[Tool, ...] = ()
    skills: tuple[Skill, ...] = ()
    hooks: tuple[Hook, ...] = ()
    skill_tool: Tool | None = None
    metadata: Mapping[str, Any] = field(default_factory=dict)
    # Values derived from this object alone, keyed by the function that derives them; not a
    # field of the value (never compared, printed or pickled), and a changed copy starts empty.
    _derived: dict[Callable[..., Any], Any] = field(
        default_factory=dict, init=False, repr=False, compare=False
    )

    def __post_init__(self) -> None:
        """Refuse a part of the wrong kind (``tools=["get"]``, a tool's name for the tool) where
        the harness is made: everything that reads a harness takes its parts for what they
        are, and would fail far from here, in an ``AttributeError``."""
        self._check_parts(None)

    def _check_parts(self, fields: Set[str] | None) -> None:
        """``__post_init__``'s check of the parts in ``fields`` (None: all)."""
        for where, parts, kind in _parts(self, fields):
            if not all(isinstance(part, kind) for part in parts):
                index = next(i for i, part in enumerate(parts) if not isinstance(part, kind))
                reader = f"hsa.harness.{kind.__name__}(...) makes one"
                refuse_kind(parts[index], kind, where.format(index), reader, HarnessError)

    def derived(self, compute: Callable[[Harness], _T]) -> _T:
        """``compute(self)``, computed on first use and kept on this object.

        For pure functions of the harness only: the harness is immutable, so the value can
        never go stale. ``compute`` is the key, so pass a module-level function, not a lambda
        made per call. An exception is raised again on every call, never kept.
        """
        try:
            return self._derived[compute]
        except KeyError:
            value = self._derived[compute] = compute(self)
            return value

    def replace(self, **changes: Any) -> Harness:
        """A copy with ``changes`` applied (lists are converted to tuples). Only the parts
        changed are checked as ``__post_init__`` checks them: the others were where this
        harness was made (rules make a copy per step, tens of thousands a run)."""
        for key in ("tools", "skills", "hooks"):
            if isinstance(changes.get(key), Iterable):  # (what is not, the copy refuses)
                changes[key] = tuple(changes[key])
        if type(self) is not Harness or not changes.keys() <= _FIELDS:
            return dataclasses.replace(self, **changes)  # (an unknown field: refused there)
        copy = object.__new__(Harness)
        for name in _FIELDS:
            value = changes[name] if name in changes else getattr(self, name)
            object.__setattr__(copy, name, value)
        object.__setattr__(copy, "_derived", {})
        copy._check_parts(changes.keys())
        return copy

    def tool(self, name: str) -> Tool | None:
        """The tool called ``name`` (the skill tool included), or None."""
        if self.skill_tool is not None and self.skill_tool.name == name:
            return self.skill_tool
        return next((t for t in self.tools if t.name == name), None)

    def skill(self, skill_id: str) -> Skill | None:
        return next((s for s in self.skills if s.id == skill_id), None)

    def hook(self, hook_id: str) -> Hook | None:
        return next((h for h in self.hooks if h.id == hook_id), None)

    @property
    def skill_arg(self) -> str | None:
        """The parameter of ``skill_tool`` that names the skill to load."""
        if self.skill_tool is None:
            return None
        params = self.skill_tool.parameters
        required = list(params.get("required") or [])
        props = list((params.get("properties") or {}).keys())
        return (required or props or [None])[0]

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "id": self.id,
            "version": self.version,
            "protocol": self.protocol.to_dict(),
            "prompt": self.prompt.to_dict(),
            "tools": [t.to_dict() for t in self.tools],
            "skills": [s.to_dict() for s in self.skills],
            "hooks": [h.to_dict() for h in self.hooks],
        }
        if self.skill_tool is not None:
            out["skill_tool"] = self.skill_tool.to_dict()
        if self.metadata:
            out["metadata"] = dict(self.metadata)
        return out

    def to_json(self, *, keep: bool = True) -> str:
        """The harness as one compact JSON document; key order is kept, since order is data.

        ``keep=False`` does not keep the text on the harness: for a look at a harness that
        lives on without needing it again (a planned variant, held while its rows render)."""
        if keep:
            return self.derived(_json_document)
        return self._derived.get(_json_document) or _json_document(self)

    @property
    def digest(self) -> str:
        """The SHA-256 of ``to_json()`` (hex): the harness's content address."""
        return self.derived(_digest)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Harness):
            return NotImplemented
        return self is other or self.to_json() == other.to_json()

    def __hash__(self) -> int:
        return hash(self.to_json())

    def __repr__(self) -> str:
        # a harness runs to tens of kilobytes (its schemas, skills, prompt): its parts counted
        parts = ", ".join(
            f"{name}={len(getattr(self, name))}" for name in ("tools", "skills", "hooks")
        )
        return (
            f"Harness(id={self.id!r}, version={self.version!r}, "
            f"protocol={self.protocol.label!r}, {parts})"
        )

    def __reduce__(self) -> tuple[Any, tuple[Any, ...]]:
        # The fields, and the derived values that are text (the JSON document, the system
        # prompt: what a worker process that planned the harness made for the one that renders
        # it); other derived values (compiled validators among them) are rebuilt on demand and
        # need not be picklable.
        values = tuple(getattr(self, f.name) for f in dataclasses.fields(self) if f.init)
        texts = {fn: v for fn, v in self._derived.items() if isinstance(v, str) and _named(fn)}
        if not texts:
            return type(self), values
        return _with_derived, (values, texts)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Harness:
        """Build from a document already checked by ``hsa.harness.validate_document``."""
        skill_tool = data.get("skill_tool")
        return cls(
            id=data["id"],
            version=str(data.get("version", "1")),
            protocol=Protocol.from_dict(data.get("protocol")),
            prompt=Prompt.from_dict(data.get("prompt")),
            tools=tuple(Tool.from_dict(t) for t in data.get("tools", ())),
            skills=tuple(Skill.from_dict(s) for s in data.get("skills", ())),
            hooks=tuple(Hook.from_dict(h) for h in data.get("hooks", ())),
            skill_tool=None if skill_tool is None else Tool.from_dict(skill_tool),
            metadata=dict(data.get("metadata") or {}),
        )


def _parts(
    harness: Harness, fields: Set[str] | None = None
) -> Iterator[tuple[str, Sequence[object], type]]:
    """The parts of ``harness`` that are objects of this module, kind by kind: where they are
    (``{}`` for a part's index), the parts and their kind; those of its ``fields`` alone,
    where given. The parts inside a part are read once the caller has found it of its kind
    (it raises at the first that is not)."""
    if fields is None or "protocol" in fields:
        yield "protocol", (harness.protocol,), Protocol
    if fields is None or "prompt" in fields:
        yield "prompt", (harness.prompt,), Prompt
        yield (
            "prompt.sections[{}]",
            _listed(harness.prompt.sections, "prompt.sections", Section),
            Section,
        )
    if fields is None or "tools" in fields:
        yield "tools[{}]", _listed(harness.tools, "tools", Tool), Tool
    if fields is None or "skills" in fields:
        yield "skills[{}]", _listed(harness.skills, "skills", Skill), Skill
    if fields is None or "hooks" in fields:
        hooks = _listed(harness.hooks, "hooks", Hook)
        yield "hooks[{}]", hooks, Hook
        yield "hooks[{}].matcher", [hook.matcher for hook in hooks], Matcher
    if harness.skill_tool is not None and (fields is None or "skill_tool" in fields):
        yield "skill_tool", (harness.skill_tool,), Tool


def _listed(parts: object, name: str, kind: type) -> tuple[Any, ...] | list[Any]:
    """``parts`` if it is a tuple (or a list), or raise ``HarnessError`` naming it."""
    if not isinstance(parts, tuple | list):
        got = type(parts).__name__
        raise HarnessError(f"{name} must be a tuple of {kind.__name__}s, got {got}")
    return parts


#: the fields a harness is made with (``Harness.replace``)
_FIELDS = frozenset(f.name for f in dataclasses.fields(Harness) if f.init)


def _with_derived(values: tuple[Any, ...], texts: dict[Callable[..., Any], str]) -> Harness:
    """A harness unpickled with the texts derived from it (``Harness.__reduce__``)."""
    harness = Harness(*values)
    harness._derived.update(texts)
    return harness


def _named(fn: Callable[..., Any]) -> bool:
    """Whether pickle finds ``fn`` again by its module and name (a module-level function)."""
    module = sys.modules.get(getattr(fn, "__module__", None) or "")
    return getattr(module, getattr(fn, "__qualname__", ""), None) is fn


#: one encoder for every ``compact_json`` (``json.dumps`` with options makes one a call)
_COMPACT = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"))


def compact_json(value: Any) -> str:
    """``value`` as compact JSON, key order kept: the form of ``Harness.to_json``."""
    return _COMPACT.encode(value)


def _tool_json(tool: Tool) -> str:
    """``compact_json(tool.to_dict())`` (same keys, same order), the parameters' part taken
    from ``Tool.parameters_json``, as ``_json_document`` takes the tools' parts."""
    head = compact_json({"name": tool.name, "description": tool.description})
    text = f'{head[:-1]},"parameters":{tool.parameters_json()}'
    if tool.extra:
        text += f',"extra":{compact_json(dict(tool.extra))}'
    return text + "}"


def _openai_json(tool: Tool) -> str:
    """``compact_json(tool.to_openai())``, as ``_tool_json`` makes its text."""
    head = compact_json({"name": tool.name, "description": tool.description})
    return f'{{"type":"function","function":{head[:-1]},"parameters":{tool.parameters_json()}}}}}'


def _parameters_json(tool: Tool) -> str:
    return compact_json(tool.parameters)


def _json_document(harness: Harness) -> str:
    """``compact_json(harness.to_dict())`` (same keys, same order), the tools' parts taken from
    the tools (``Tool.to_json``): compact JSON of a dict or list is its members' JSON joined,
    so a rewrite's variant dumps only the tools it changed."""
    head = compact_json(
        {
            "id": harness.id,
            "version": harness.version,
            "protocol": harness.protocol.to_dict(),
            "prompt": harness.prompt.to_dict(),
        }
    )
    tools = ",".join(t.to_json() for t in harness.tools)
    tail = compact_json(
        {
            "skills": [s.to_dict() for s in harness.skills],
            "hooks": [h.to_dict() for h in harness.hooks],
        }
    )
    parts = [head[:-1], f'"tools":[{tools}]', tail[1:-1]]
    if harness.skill_tool is not None:
        parts.append(f'"skill_tool":{harness.skill_tool.to_json()}')
    if harness.metadata:
        parts.append(f'"metadata":{compact_json(dict(harness.metadata))}')
    return ",".join(parts) + "}"


def _digest(harness: Harness) -> str:
    return hashlib.sha256(harness.to_json().encode("utf-8")).hexdigest()
