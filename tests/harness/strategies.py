"""Hypothesis strategies for harnesses, canonical events and trajectories, for property tests.

Import them as ``from tests.harness.strategies import harnesses, events, ...``: the files
``tests/__init__.py`` and ``tests/harness/__init__.py`` make ``tests`` a package, and pytest's
default ("prepend") import mode puts the repository root on ``sys.path`` for it.

The strategies are adversarial on purpose: texts, argument values and payloads are drawn partly
from ``TRICKY_TEXTS`` (JSON, tool calls written in every call format, the tags protocols and
hooks use, quotes, newlines, control characters, Unicode), argument names include keywords and
non-identifiers, values nest objects and arrays with floats, negative and large ints, booleans
and null. Every harness drawn is valid (its JSON document passes validation).

Main entry points:

- ``harnesses(protocol=...)``: a valid ``Harness`` (a ``Protocol``, a strategy of them, or None
  for any);
- ``events(harness)``: a canonical event list valid for ``harness`` (normal-form call ids unless
  ``normalized=False``); ``events()`` without a harness draws free-form events;
- ``trajectories(harness=None)``: a ``Trajectory``;
- ``harness_and_events(protocol=...)``: both at once;
- ``ambiguity(events, harness)``: why ``events`` cannot round-trip under ``harness`` because two
  different event lists render to the same conversation, or None; property tests ``assume`` it
  is None;
- ``same_events(a, b)``: equality that also tells ``1`` from ``1.0`` and ``True`` and sees key
  order (compares the stored JSON form too).
"""

from __future__ import annotations

import keyword
import operator
import string
from collections.abc import Sequence
from functools import cache
from typing import Any

from hypothesis import strategies as st

from hsa.errors import ProtocolError
from hsa.harness import (
    AssistantMessage,
    Event,
    Harness,
    Hook,
    HookFired,
    Prompt,
    Protocol,
    Section,
    Skill,
    SkillLoad,
    Tool,
    ToolCall,
    ToolResult,
    Trajectory,
    UserMessage,
)
from hsa.harness.events import events_to_rows
from hsa.harness.model import CALL_FORMATS, DOC_FORMATS, HOOK_EFFECTS, HOOK_EVENTS
from hsa.harness.parse import alike_hooks, match_hook, split_tool_hooks
from hsa.harness.prompt import call_format, system_prompt
from hsa.harness.protocols import CALL_FORMATS as FORMATS
from hsa.harness.protocols import join_prefix
from hsa.harness.render import hook_text
from hsa.harness.sandbox import message_fields

# --- texts --------------------------------------------------------------------------------

_SAMPLE_CALLS = [
    ("get_weather", {"city": "Paris", "days": 3}),
    ("search", {"query": 'say "hi"\n', "filters": {"a": [1, None, True]}}),
]


def _calls_in_every_format() -> list[str]:
    out = []
    for fmt in FORMATS.values():
        for tag in (False, True):
            out.append(fmt.format_calls(_SAMPLE_CALLS[:1], tag))
            out.append(fmt.format_calls(_SAMPLE_CALLS, tag))
    return out


TRICKY_TEXTS: tuple[str, ...] = (
    "",
    " ",
    "\n",
    "\n\n",
    "\r\n",
    "\t",
    '"',
    "'",
    "\\",
    '\\"',
    "\\n",
    "{}",
    "[]",
    '{"a": 1}',
    '[{"function": "f", "parameters": {}}]',
    '{"name": "f", "arguments": {}}',
    "null",
    "true",
    "None",
    "1e999",
    "<tool_call>",
    "</tool_call>",
    "<tool_call>\n{}\n</tool_call>",
    "<tool_call>\nnot json\n</tool_call>",
    "<TOOLCALL>",
    "</TOOLCALL>",
    "<TOOLCALL>[]</TOOLCALL>",
    "<functions>",
    "</functions>",
    '<param name="x" type="string">',
    "<system-reminder>",
    "</system-reminder>",
    "<system-reminder>\nnote\n</system-reminder>",
    "<note>\n",
    "\n</note>",
    "```json",
    "```",
    "[f(a=1)]",
    "f(a=1)",
    "print('hi')",
    "{{ x }}",
    "{% if %}",
    "&amp;",
    "&lt;",
    "&#10;",
    "&",
    "\x00",
    "\x1f",
    "\x7f",
    "\u2028",
    "\ufeff",
    "\ufffe",
    "é",
    "e\u0301",
    "ﬁ",
    "שלום",
    "日本語",
    "🦍",
    "\U0010ffff",
    *_calls_in_every_format(),
)


@cache
def texts(max_size: int = 24) -> st.SearchStrategy[str]:
    """Strings: random Unicode, tricky pieces, and a tricky piece glued to random text."""
    plain = st.text(max_size=max_size)
    tricky = st.sampled_from(TRICKY_TEXTS)
    return st.one_of(
        plain,
        tricky,
        st.builds(operator.add, tricky, plain),
        st.builds(operator.add, plain, tricky),
    )


_IDENTIFIERS = ("city", "query", "a", "x_1", "_private", "limit", "match", "type")
_NON_IDENTIFIERS = (
    "class",
    "from",
    "None",
    "True",
    "lambda",
    "a-b",
    "1x",
    "",
    "with space",
    "ünïcode",
    "ﬁ",
    "x.y",
    '"quoted"',
    "<tag>",
    "&amp;",
    "{{ x }}",
    "\n",
)


@cache
def arg_names() -> st.SearchStrategy[str]:
    """Argument names: identifiers, Python keywords, and names no identifier can spell."""
    return st.one_of(
        st.sampled_from(_IDENTIFIERS), st.sampled_from(_NON_IDENTIFIERS), st.text(max_size=8)
    )


@cache
def json_scalars(wide: bool = True) -> st.SearchStrategy[Any]:
    """JSON scalars; ``wide=False`` keeps integers within 64 bits, as a row's arguments."""
    bound = 2**80 if wide else 2**63 - 1
    return st.one_of(
        st.none(),
        st.booleans(),
        st.integers(-(2**63), 2**64 - 1) if not wide else st.integers(),
        st.integers(min_value=-bound, max_value=bound),
        st.floats(allow_nan=False, allow_infinity=False),
        texts(),
    )


@cache
def json_values(max_leaves: int = 6, wide: bool = True) -> st.SearchStrategy[Any]:
    """JSON values: scalars, and arrays and objects nesting them."""
    return st.recursive(
        json_scalars(wide),
        lambda inner: st.one_of(
            st.lists(inner, max_size=3),
            st.dictionaries(arg_names(), inner, max_size=3),
        ),
        max_leaves=max_leaves,
    )


@cache
def arguments() -> st.SearchStrategy[dict[str, Any]]:
    """A tool call's arguments object, as a row can hold it (integers within 64 bits)."""
    return st.dictionaries(arg_names(), json_values(wide=False), max_size=3)


# --- harnesses ----------------------------------------------------------------------------


def _python_safe(name: str) -> bool:
    return name.isidentifier() and not keyword.iskeyword(name)


@cache
def tool_names(*, python: bool = False) -> st.SearchStrategy[str]:
    """Tool names the harness schema accepts; Python identifiers when ``python``."""
    if python:
        return st.from_regex(r"[A-Za-z_][A-Za-z0-9_]{0,15}", fullmatch=True).filter(_python_safe)
    return st.from_regex(r"[A-Za-z0-9_-]{1,16}", fullmatch=True)


_PARAM_SCHEMAS = (
    {"type": "string", "description": "A name, e.g. 'Paris'."},
    {"type": "integer", "description": "How many.", "default": 3},
    {"type": "number"},
    {"type": "boolean", "description": "Whether to."},
    {"type": "null"},
    {"type": "string", "enum": ["celsius", "fahrenheit"]},
    {"type": ["string", "null"]},
    {"type": "array", "items": {"type": "integer"}},
    {"type": "array", "items": {"$ref": "#/$defs/Item"}},
    {"anyOf": [{"type": "string"}, {"type": "integer"}]},
    {
        "type": "object",
        "description": "Nested <b>&</b> things.",
        "properties": {"x": {"type": "string"}, "y": {"type": "array", "items": {}}},
        "required": ["x"],
    },
    {"type": "object", "additionalProperties": {"type": "number"}},
    {"$ref": "#/$defs/Item"},
    {},
)
_ITEM = {"type": "object", "properties": {"sku": {"type": "string"}, "qty": {"type": "integer"}}}


@st.composite
def tool_schemas(draw: st.DrawFn) -> dict[str, Any]:
    """A JSON Schema for a tool's arguments, with nested objects, arrays, enums and $refs."""
    names = draw(st.lists(arg_names(), max_size=4, unique=True))
    properties = {name: draw(st.sampled_from(_PARAM_SCHEMAS)) for name in names}
    schema: dict[str, Any] = {"type": "object", "properties": properties}
    required = [n for n in names if draw(st.booleans())]
    if required:
        schema["required"] = required
    if "$ref" in repr(properties):
        schema["$defs"] = {"Item": _ITEM}
    return schema


@st.composite
def tools(draw: st.DrawFn, *, python: bool = False, taken: Sequence[str] = ()) -> list[Tool]:
    """One to four tools with distinct names."""
    names = draw(
        st.lists(
            tool_names(python=python).filter(lambda n: n not in taken),
            min_size=1,
            max_size=4,
            unique=True,
        )
    )
    return [Tool(name, draw(texts()), draw(tool_schemas())) for name in names]


def protocols(
    name: str | None = None,
    call_format: str | None = None,
    call_tag: bool | None = None,
    doc_format: str | None = None,
) -> st.SearchStrategy[Protocol]:
    """Protocols; fixed arguments pin that axis, the others vary."""
    if name == "api":
        return st.just(Protocol("api"))
    text = st.builds(
        Protocol,
        name=st.just("text"),
        call_format=st.just(call_format) if call_format else st.sampled_from(CALL_FORMATS),
        call_tag=st.just(call_tag) if call_tag is not None else st.booleans(),
        doc_format=st.just(doc_format) if doc_format else st.sampled_from(DOC_FORMATS),
    )
    return text if name == "text" or call_format else st.one_of(st.just(Protocol("api")), text)


# Literal text a template may hold: no Jinja delimiters (no braces), but tags, quotes, newlines.
_LITERAL = st.text(
    alphabet=st.sampled_from(string.ascii_letters + string.digits + " .,:;!?'\"\n\t<>/&-_é日🦍"),
    min_size=1,
    max_size=12,
)
_FIELDS = ("tool", "reason", "detail", "count")
_WRAPPERS = ("system-reminder", "hook", "note", "context", "tool_call", "TOOLCALL", "functions")


@st.composite
def hook_messages(draw: st.DrawFn, prefix: str) -> str:
    """A placeholder-only message template: ``prefix``, then fields with literal text between."""
    parts = [prefix] if prefix else []
    after_field = False
    for field in draw(st.lists(st.sampled_from(_FIELDS), max_size=3)):
        if after_field:  # literal text must separate two placeholders
            parts.append(draw(_LITERAL))
        parts.append("{{ " + field + " }}")
        after_field = not draw(st.booleans())
        if not after_field:
            parts.append(draw(_LITERAL))
    return "".join(parts) or draw(_LITERAL)


@st.composite
def hooks(draw: st.DrawFn) -> list[Hook]:
    """Zero to four hooks at every injection position, with and without wrappers where allowed.

    Most messages start with a distinct literal, as real hooks do; some are bare placeholders,
    which can make firings indistinguishable (``ambiguity`` reports those), or every message of
    one hook read as another's (``harnesses`` draws no such hooks: validation refuses them).
    """
    count = draw(st.integers(0, 4))
    wrappers = draw(st.lists(st.sampled_from(_WRAPPERS), min_size=count, max_size=count))
    out = []
    for i, wrapper in enumerate(wrappers):
        inject = draw(st.sampled_from(("system", "user", "tool_result")))
        if inject == "system" and draw(st.booleans()):
            wrapper = None
        prefix = draw(st.sampled_from((f"Hook {i}: ", f"[h{i}]\n", "")))
        out.append(
            Hook(
                id=f"hook-{i}",
                event=draw(st.sampled_from(HOOK_EVENTS)),
                effect=draw(st.sampled_from(HOOK_EFFECTS)),
                message=draw(hook_messages(prefix)),
                inject=inject,
                wrapper=wrapper,
            )
        )
    return out


_SECTION_BODIES = (
    "",
    "You are a careful assistant.",
    "Harness {{ harness_id }} has {{ tools | length }} tool(s).",
    "{% for t in tools %}- {{ t.name }}\n{% endfor %}",
    "Policy: never <TOOLCALL> twice.",
)
_KINDS = ("persona", "policy", "skills", "tools", "output_format", "custom")
_TEMPLATES = (
    None,
    None,
    "{{ body }}",
    "{{ body }}\n\n(harness {{ harness_id }})",
    "{% for s in sections %}{{ s }}\n---\n{% endfor %}",
)


@st.composite
def prompts(draw: st.DrawFn) -> Prompt:
    """Prompts in every heading style and placement, with auto and custom sections."""
    kinds = draw(st.lists(st.sampled_from(_KINDS), max_size=4))
    sections = tuple(
        Section(
            id=f"{kind}-{i}",
            kind=kind,
            title=draw(st.sampled_from((kind.title(), "", "Tool Call Format"))),
            body=draw(st.sampled_from(_SECTION_BODIES)),
        )
        for i, kind in enumerate(kinds)
    )
    return Prompt(
        sections=sections,
        heading_style=draw(st.sampled_from(("markdown", "xml", "plain"))),
        placement=draw(st.sampled_from(("system", "user"))),
        template=draw(st.sampled_from(_TEMPLATES)),
    )


_IDS = st.from_regex(r"[A-Za-z0-9][A-Za-z0-9_.:-]{0,12}", fullmatch=True)

# Ready-made components. Drawing a harness from them costs a handful of choices instead of
# hundreds, which is what lets each protocol run 500 examples quickly; ``rich=True`` draws
# every component at random instead.


def _tool_pool() -> tuple[Tool, ...]:
    descriptions = ("Weather for a city.", "", 'Say "hi" <b>&</b>\n{{ not a template }}')
    pool = []
    for i, schema in enumerate(_PARAM_SCHEMAS):
        names = (_IDENTIFIERS + _NON_IDENTIFIERS)[i % 9 :: 9][:3]
        params: dict[str, Any] = {
            "type": "object",
            "properties": {name: schema for name in names},
            "required": list(names[:1]),
        }
        if "$ref" in repr(schema):
            params["$defs"] = {"Item": _ITEM}
        pool.append(Tool(f"tool_{i}", descriptions[i % 3], params))
    return tuple(pool)


TOOL_POOL = _tool_pool()
#: Tools whose names the python call format cannot write.
NON_PYTHON_TOOLS = (Tool("get-weather"), Tool("3d_print"), Tool("class"))

HOOK_POOL: tuple[Hook, ...] = (
    Hook(
        "remind",
        "post_tool_use",
        "add_context",
        "Checked {{ tool }}.",
        inject="tool_result",
        wrapper="system-reminder",
    ),
    Hook(
        "detail",
        "post_tool_use",
        "update_output",
        "A: {{ detail }}",
        inject="tool_result",
        wrapper="system-reminder",
    ),
    Hook(
        "bare-result",
        "post_tool_use",
        "add_context",
        "{{ detail }}",
        inject="tool_result",
        wrapper="TOOLCALL",
    ),
    Hook(
        "session",
        "session_start",
        "add_context",
        "Session {{ reason }} for {{ tool }}.",
        inject="system",
    ),
    Hook(
        "wrapped-system",
        "stop",
        "add_context",
        "[stop]\n{{ reason }}\n",
        inject="system",
        wrapper="tool_call",
    ),
    Hook("bare-system", "stop", "add_context", "{{ detail }}", inject="system"),
    Hook(
        "prompt-note",
        "user_prompt_submit",
        "add_context",
        "Note: {{ detail }} (from {{ tool }})",
        inject="user",
        wrapper="note",
    ),
    Hook(
        "repeat",
        "pre_tool_use",
        "deny",
        "{{ tool }} denied; {{ tool }} is off <{{ reason }}>",
        inject="user",
        wrapper="functions",
    ),
    Hook("fixed", "stop", "add_context", "Stop now.", inject="user", wrapper="system-reminder"),
)

SKILL_POOL: tuple[Skill, ...] = (
    Skill("travel", "travel", "Plan trips.", "# Travel\n\nPack light. <TOOLCALL>"),
    Skill("pdf.tools", "PDF", "Read PDFs.", ""),
    Skill("x-1", "X", "Odd one.", '[load(name="x")]\n```json\n{}\n```'),
)

#: The parameter naming the skill: a plain name, a keyword, a non-identifier, the empty string.
SKILL_ARGS = ("name", "class", "skill-id", "")


def _prompt_pool() -> tuple[Prompt, ...]:
    section_sets = (
        (),
        (Section("persona", "", "You are an expert in composing functions.", "persona"),),
        (
            Section("persona", "", "You help <users> & {{ harness_id }}.", "persona"),
            Section("task", "Task", "Solve the task. Never write </TOOLCALL> twice.", "policy"),
            Section("format", "Tool Call Format", "", "output_format"),
            Section("tools", "Available Tools", "", "tools"),
            Section("skills", "Skills", "", "skills"),
        ),
        (
            Section("tools", "Tools", "", "tools"),
            Section("count", "Count", "{{ tools | length }} tool(s)", "custom"),
        ),
    )
    out = []
    for sections in section_sets:
        for style in ("markdown", "xml", "plain"):
            for placement in ("system", "user"):
                for template in _TEMPLATES[1:]:
                    out.append(Prompt(sections, style, placement, template))
    return tuple(out)


PROMPT_POOL = _prompt_pool()


def _name(tool: Tool) -> str:
    return tool.name


def _id(item: Hook | Skill) -> str:
    return item.id


_POOL_TOOLS = {
    python: st.lists(
        st.sampled_from(TOOL_POOL if python else TOOL_POOL + NON_PYTHON_TOOLS),
        min_size=1,
        max_size=3,
        unique_by=_name,
    )
    for python in (False, True)
}


def _told_apart(hook_list: Sequence[Hook]) -> bool:
    """Whether no hook's every message reads as another's (``alike_hooks``: validation refuses
    such hooks; a bare placeholder in the system position reads every system message)."""
    return alike_hooks(hook_list) is None


_POOL_HOOKS = st.lists(st.sampled_from(HOOK_POOL), max_size=4, unique_by=_id).filter(_told_apart)
_POOL_SKILLS = st.lists(st.sampled_from(SKILL_POOL), max_size=3, unique_by=_id)
_POOL_PROMPT = st.sampled_from(PROMPT_POOL)
_POOL_ID = st.sampled_from(("demo", "bfcl.simple", "h-1"))
_SKILL_ARG = st.sampled_from(SKILL_ARGS)


@st.composite
def harnesses(
    draw: st.DrawFn,
    protocol: Protocol | st.SearchStrategy[Protocol] | None = None,
    *,
    rich: bool = False,
) -> Harness:
    """A valid harness: tools, maybe skills and a skill tool, hooks, a prompt, ``protocol``.

    By default tools, hooks, skills and prompts come from the pools above (cheap to draw, and
    covering every injection position, shared and tag-like wrappers, bare-placeholder and
    repeated-field messages, untitled sections, every heading style and placement, custom
    templates). ``rich=True`` draws them at random with ``tools``, ``hooks`` and ``prompts``.
    """
    if protocol is None:
        protocol = protocols()
    if isinstance(protocol, st.SearchStrategy):
        protocol = draw(protocol)
    python = not protocol.is_api and protocol.call_format == "python"
    if rich:
        tool_list = draw(tools(python=python))
        hook_list = draw(hooks().filter(_told_apart))
        prompt = draw(prompts())
        skill_ids = draw(st.lists(_IDS, max_size=3, unique=True))
        skills = [Skill(sid, sid, "About " + draw(texts()), draw(texts(48))) for sid in skill_ids]
    else:
        tool_list = draw(_POOL_TOOLS[python])
        hook_list = draw(_POOL_HOOKS)
        prompt = draw(_POOL_PROMPT)
        skills = draw(_POOL_SKILLS)
    skill_tool = None
    if skills and draw(st.booleans()):
        taken = [t.name for t in tool_list]
        name = (
            "load_skill"
            if not rich
            else draw(tool_names(python=python).filter(lambda n: n not in taken))
        )
        arg = draw(_SKILL_ARG if not rich else arg_names())
        params = {"type": "object", "properties": {arg: {"type": "string"}}, "required": [arg]}
        skill_tool = Tool(name, "Load a skill's instructions by id.", params)
    return Harness(
        id=draw(_POOL_ID if not rich else _IDS),
        protocol=protocol,
        prompt=prompt,
        tools=tuple(tool_list),
        skills=tuple(skills),
        hooks=tuple(hook_list),
        skill_tool=skill_tool,
    )


# --- events -------------------------------------------------------------------------------


_FIELD_NAMES = st.lists(arg_names(), max_size=3)


def _payload(draw: st.DrawFn, hook: Hook | None) -> dict[str, str]:
    fields = message_fields(hook.message) if hook is not None else draw(_FIELD_NAMES)
    return {field: draw(texts()) for field in fields}


_REASONING = st.none() | texts()
_CALL_IDS = st.text(min_size=1, max_size=6)


@cache
def _below(n: int) -> st.SearchStrategy[int]:
    """An index into a sequence of ``n`` items (strategies are cached: building them is slow)."""
    return st.integers(0, n - 1)


def _pick(draw: st.DrawFn, items: Sequence[Any]) -> Any:
    return items[draw(_below(len(items)))]


@st.composite
def events(
    draw: st.DrawFn, harness: Harness | None = None, *, normalized: bool = True, max_steps: int = 10
) -> list[Event]:
    """A canonical event list: turns of user and assistant text, calls (parallel calls and skill
    loads included), results in any order, and hook firings anywhere.

    With a harness, calls use its tools, skill loads its skills (when it has a skill tool) and
    firings its hooks; without one, names are free. Call ids are ``call_0``, ``call_1``, ... in
    call order (skill loads count), or arbitrary distinct strings when ``normalized`` is False.
    """
    out: list[Event] = []
    pending: list[str] = []  # calls still waiting for their result
    used_ids: set[str] = set()
    counter = 0
    can_load = harness is None or (harness.skill_tool is not None and bool(harness.skills))
    hook_list = list(harness.hooks) if harness else []

    def fire() -> HookFired:
        if harness is None:
            return HookFired(draw(texts(8)), _pick(draw, HOOK_EVENTS), _payload(draw, None))
        hook = _pick(draw, hook_list)
        return HookFired(hook.id, hook.event, _payload(draw, hook))

    kinds = ("user", "assistant", "calls", "results", "hook")
    kinds = kinds if hook_list or harness is None else kinds[:-1]
    for _ in range(draw(_below(max_steps + 1))):
        kind = _pick(draw, kinds)
        if kind == "user":
            out.append(UserMessage(draw(texts())))
        elif kind == "assistant":
            out.append(AssistantMessage(draw(texts()), draw(_REASONING)))
        elif kind == "calls":
            while out and out[-1] == AssistantMessage(""):
                out.pop()  # "" before calls is no text (an event list never holds it)
            if draw(st.booleans()):
                said = AssistantMessage(draw(texts()), draw(_REASONING))
                if said.text or said.reasoning is not None:
                    out.append(said)
            for _ in range(1 + draw(_below(3))):
                if can_load and draw(_below(4)) == 0:
                    skill = _pick(draw, harness.skills).id if harness else draw(texts(8))
                    out.append(SkillLoad(skill))
                else:
                    call_id = f"call_{counter}"
                    if not normalized:
                        call_id = draw(_CALL_IDS)
                        while call_id in used_ids:
                            call_id += "'"
                    used_ids.add(call_id)
                    tool = _pick(draw, harness.tools).name if harness else draw(tool_names())
                    out.append(ToolCall(call_id, tool, draw(arguments())))
                    pending.append(call_id)
                counter += 1
        elif kind == "results" and pending:
            for _ in range(1 + draw(_below(len(pending)))):
                call_id = pending.pop(draw(_below(len(pending))))
                out.append(ToolResult(call_id, draw(texts(48)), draw(st.booleans())))
                while hook_list and draw(_below(4)) == 0:
                    out.append(fire())
        elif kind == "hook":
            out.append(fire())
    return out


_OPTIONAL_TEXT = st.none() | texts(12)
_METADATA = st.dictionaries(arg_names(), json_values(4), max_size=3)


@st.composite
def trajectories(draw: st.DrawFn, harness: Harness | None = None) -> Trajectory:
    """A trajectory with ``events(harness)`` and optional task, harness, source and metadata."""
    return Trajectory(
        id=draw(_CALL_IDS),
        events=tuple(draw(events(harness))),
        task_id=draw(_OPTIONAL_TEXT),
        harness_id=harness.id if harness is not None else draw(_OPTIONAL_TEXT),
        source=draw(_OPTIONAL_TEXT),
        metadata=draw(_METADATA),
    )


@st.composite
def harness_and_events(
    draw: st.DrawFn,
    protocol: Protocol | st.SearchStrategy[Protocol] | None = None,
    *,
    normalized: bool = True,
) -> tuple[Harness, list[Event]]:
    harness = draw(harnesses(protocol=protocol))
    return harness, draw(events(harness, normalized=normalized))


# --- checking -----------------------------------------------------------------------------


def same_events(a: Sequence[Event], b: Sequence[Event]) -> bool:
    """Equal events, with value types (``1`` vs ``1.0`` vs ``True``) and key order checked too."""
    return list(a) == list(b) and events_to_rows(a) == events_to_rows(b)


_PROBE = ("probe", {})


def ambiguity(events: Sequence[Event], harness: Harness) -> str | None:
    """Why ``events`` render to a conversation that another event list renders to as well.

    Parsing picks one reading, so such events cannot round-trip; each case below is an inherent
    ambiguity of the surface form, not of the parser:

    - assistant text that, where it ends up, reads as calls: under a text protocol, a text that
      is a whole message and is itself a call message in the harness's call format (always so
      for an untagged format's calls alone), or that precedes calls and ends in what reads as a
      call block (Hermes blocks are not enclosed, so ``...</tool_call>`` text joins them);
    - a user message that reads as a user-position hook firing of the harness;
    - a tool result (or loaded skill content) that ends in what reads as an appended hook;
    - a hook firing whose text reads back as another firing (two hooks whose messages overlap,
      or a payload value that contains the message's own literal text, so the fields split
      differently, or a later hook's wrapper line);
    - under ``placement: user``, a user-position hook before the first user message whose text
      starts with the system prompt.

    A text that reads as two hooks' firings (``match_hook`` refuses it) is one of these too.
    """
    try:
        return _ambiguity(events, harness)
    except ProtocolError as exc:
        return exc.message


def _ambiguity(events: Sequence[Event], harness: Harness) -> str | None:
    api = harness.protocol.is_api
    fmt = None if api else call_format(harness)
    tag = harness.protocol.call_tag
    prompt = system_prompt(harness)
    carrier_pending = harness.prompt.placement == "user" and bool(prompt)
    last_tool = False  # whether a tool_result hook here would attach to a tool message
    group_loads_skill = False  # the current run of calls includes a skill load
    for i, event in enumerate(events):
        nxt = events[i + 1] if i + 1 < len(events) else None
        if isinstance(event, AssistantMessage) and fmt is not None:
            followed = isinstance(nxt, ToolCall | SkillLoad)
            if not followed or not fmt.allows_prefix(tag):
                if fmt.parse_calls(event.text, tag) is not None:
                    return f"events[{i}]: assistant text reads as a call message"
            else:
                probe = join_prefix(event.text, fmt.format_calls([_PROBE], tag))
                if fmt.parse_calls(probe, tag) != (event.text, [_PROBE]):
                    return f"events[{i}]: assistant text ends in what reads as a call block"
        if isinstance(event, UserMessage):
            if carrier_pending:
                carrier_pending = False
            elif match_hook(harness, event.text, ("user",)) is not None:
                return f"events[{i}]: user text reads as a hook firing"
        if isinstance(event, ToolResult) and split_tool_hooks(harness, event.content)[1]:
            return f"events[{i}]: tool result ends in what reads as a hook"
        if isinstance(event, SkillLoad):
            skill = harness.skill(event.skill_id)
            if skill is not None and split_tool_hooks(harness, skill.content)[1]:
                return f"events[{i}]: skill content ends in what reads as a hook"
        if isinstance(event, HookFired):
            hook, text = hook_text(harness, event)
            appended = hook.inject == "tool_result" and last_tool
            if appended:
                read = split_tool_hooks(harness, "\n" + text)
                same = read[0] == "" and read[1] == [event]
            elif hook.inject == "user":
                same = match_hook(harness, text, ("user",)) == event
                if carrier_pending and (text == prompt or text.startswith(prompt + "\n\n")):
                    same = False
            else:
                same = match_hook(harness, text, ("system", "tool_result", "user")) == event
            if not same:
                return f"events[{i}]: hook text reads as a different firing"
            last_tool = appended
            group_loads_skill = False
            continue
        # A run of calls ends with the results of its skill loads, if it has any.
        if isinstance(event, ToolCall | SkillLoad):
            group_loads_skill = group_loads_skill or isinstance(event, SkillLoad)
            last_tool = group_loads_skill
        else:
            group_loads_skill = False
            last_tool = isinstance(event, ToolResult)
    return None
