"""parse: an OpenAI-format conversation + harness -> canonical events (the inverse of render)."""

from __future__ import annotations

import itertools
import json
import re
from collections.abc import Mapping, Sequence
from functools import lru_cache
from typing import Any

from hsa.errors import ProtocolError, TemplateError, first_line, refuse_kind, unreadable
from hsa.harness.arguments import checker_of
from hsa.harness.events import (
    AssistantMessage,
    Event,
    HookFired,
    SkillLoad,
    ToolCall,
    ToolResult,
    UserMessage,
)
from hsa.harness.jsonvalues import unwritable
from hsa.harness.model import Harness, Hook, Protocol
from hsa.harness.prompt import call_format, system_prompt
from hsa.harness.protocols import CALL_FORMATS
from hsa.harness.protocols.hermes import RepeatedKeys, read_json
from hsa.harness.render import Conversation, refuse_unwritable, wrap
from hsa.harness.sandbox import (
    match_message,
    message_fields,
    message_pattern,
    parse_message,
    render_message,
)


def _unwrap(hook: Hook, text: str) -> str | None:
    if not hook.wrapper:
        return text
    head, tail = f"<{hook.wrapper}>\n", f"\n</{hook.wrapper}>"
    if text.startswith(head) and text.endswith(tail) and len(text) >= len(head) + len(tail):
        return text[len(head) : len(text) - len(tail)]
    return None


#: the injection positions of the hooks ``parse`` reads a message shown as each kind as: a
#: system message, a user message, a note appended to a tool message (a system message may
#: be any hook's: a tool_result hook's with no tool message to join, or a user hook's as
#: imported chats show some)
READ_AS: dict[str, tuple[str, ...]] = {
    "system": ("system", "tool_result", "user"),
    "user": ("user",),
    "tool_result": ("tool_result",),
}
#: the kinds of message (``READ_AS``'s keys) a hook injected at each position shows as: a
#: tool_result hook's joins the tool message before it (as an episode's firings about a call
#: do), or is a system message where there is none
_SHOWN_AS = {"system": ("system",), "user": ("user",), "tool_result": ("tool_result", "system")}


def match_hook(
    harness: Harness, text: str, positions: Sequence[str], *, where: str | None = None
) -> HookFired | None:
    """The hook firing whose rendered message is exactly ``text``, if any.

    Raises ``ProtocolError`` (at ``where``) when ``text`` reads as the messages of two hooks
    injected at ``positions``: which of them fired cannot be told, and neither is a guess
    (validation refuses hooks whose every message reads alike, ``alike_hooks``; this is a
    payload that makes one hook's message read as another's).
    """
    found: HookFired | None = None
    for hook in harness.hooks:
        if hook.inject not in positions:
            continue
        inner = _unwrap(hook, text)
        if inner is None:
            continue
        try:
            payload = parse_message(hook.message, inner)
        except TemplateError as exc:  # (a placeholder used twice, and a text built against it)
            raise ProtocolError(f"hook {hook.id!r}: {exc.message}", where=where) from None
        if payload is None:
            continue
        if found is not None:
            raise ProtocolError(
                f"the message reads as a firing of hook {found.hook_id!r} and as one of hook "
                f"{hook.id!r}: which fired cannot be told",
                where=where,
            )
        found = HookFired(hook.id, hook.event, payload)
    return found


def alike_hooks(hooks: Sequence[Hook]) -> tuple[int, int] | None:
    """The positions ``(i, j)`` of two hooks where every message hook ``j`` can show reads as
    a message of hook ``i`` too (the same message in the same wrapper, say, or one inside the
    other's bare placeholder), so ``parse`` could never tell its firings from hook ``i``'s;
    None when there are none. Hooks whose message is no hook message are passed over.

    Every message, wherever it is shown (``_SHOWN_AS``, read as ``READ_AS``): a tool_result
    hook's joined to a tool message reads as no system or user hook's, so no tool_result
    hook's every message reads as one of theirs (a message it shows as a system message, with
    no tool message to join, may: ``match_hook`` refuses that one); a system message reads as
    any hook's, so a system hook's every message may read as a user or tool_result hook's.

    Exact and cheap: hook ``j``'s message is rendered with a character no message holds in
    each field; hook ``i`` reads that text only where its placeholders take those characters,
    and then they take any payload of ``j`` in their place. What the hooks show is looked at
    once (the variants of a harness share most of their hooks).
    """
    kept = [
        (j, hook)
        for j, hook in enumerate(hooks)
        if isinstance(hook.message, str) and isinstance(hook.wrapper, str | None)
    ]
    found = _alike_shown(tuple((str(h.inject), h.wrapper, h.message) for _, h in kept))
    return None if found is None else (kept[found[0]][0], kept[found[1]][0])


@lru_cache(maxsize=1024)
def _alike_shown(hooks: tuple[tuple[str, str | None, str], ...]) -> tuple[int, int] | None:
    """``alike_hooks`` of hooks given as ``(inject, wrapper, message)``."""
    used = {c for _, _, message in hooks for c in message}
    shown: list[tuple[int, Hook, str, Any]] = []
    for j, (inject, wrapper, message) in enumerate(hooks):
        try:
            fields = message_fields(message)
        except TemplateError:
            continue
        marks = (chr(k) for k in itertools.count(0xE000) if chr(k) not in used)  # (private use)
        hook = Hook("", "stop", "add_context", message, inject=inject, wrapper=wrapper)
        payload = dict(zip(fields, marks, strict=False))
        text = wrap(hook, render_message(message, payload))
        shown.append((j, hook, text, message_pattern(message)))
    # each message parsed once, above: more distinct messages than the sandbox's caches hold
    # made each pair of the loop below parse two again. Grouped by wrapper, then by the text
    # the message starts with, so that each text is matched only by the hooks that can read it
    # (one dictionary look-up per length of that text, not one match per hook)
    readers: dict[str | None, dict[str, list[tuple[int, Hook, Any]]]] = {}
    for position, (_, hook, _, pattern) in enumerate(shown):
        by_head = readers.setdefault(hook.wrapper, {})
        by_head.setdefault(pattern[0], []).append((position, hook, pattern))
    lengths = {wrapper: {len(head) for head in by_head} for wrapper, by_head in readers.items()}
    for j, hook, text, _ in reversed(shown):  # (two hooks alike: named at the later)
        kinds = _SHOWN_AS.get(hook.inject, ())
        if not kinds:
            continue
        candidates: list[tuple[int, Hook, Any]] = []
        for wrapper, by_head in readers.items():
            inner = _unwrap(next(iter(by_head.values()))[0][1], text)
            if inner is None:
                continue
            for length in lengths[wrapper]:
                candidates += by_head.get(inner[:length], ())
        for position, other, pattern in sorted(candidates, key=lambda c: c[0]):
            i = shown[position][0]
            if i == j or not all(other.inject in READ_AS[k] for k in kinds):
                continue
            inner = _unwrap(other, text)
            if inner is not None and match_message(pattern, inner) is not None:
                return i, j
    return None


def split_tool_hooks(
    harness: Harness, content: str, *, where: str | None = None
) -> tuple[str, list[HookFired]]:
    """A tool message's content without the hook messages render appended to it, and those hooks.

    Hooks injected at ``tool_result`` are appended as ``"\n<wrapper>\n...\n</wrapper>"``. They
    are taken off the end one at a time: each time the shortest tail that starts with a
    wrapper line and reads as a ``tool_result`` hook, whichever hook it is.
    """
    wrappers = {h.wrapper for h in harness.hooks if h.inject == "tool_result" and h.wrapper}
    found: list[HookFired] = []
    while True:
        starts = [
            m.start()
            for w in wrappers
            if content.endswith(f"\n</{w}>")
            for m in re.finditer(re.escape(f"\n<{w}>\n"), content)
        ]
        for start in sorted(starts, reverse=True):
            fired = match_hook(harness, content[start + 1 :], READ_AS["tool_result"], where=where)
            if fired is not None:
                found.append(fired)
                content = content[:start]
                break
        else:
            return content, found[::-1]


def _arguments(raw: Any, where: str) -> dict[str, Any]:
    if isinstance(raw, Mapping):
        return dict(raw)
    try:
        args, repeated = read_json(raw) if raw not in (None, "") else ({}, RepeatedKeys())
    except (TypeError, json.JSONDecodeError) as exc:
        raise ProtocolError(f"tool-call arguments are not JSON: {exc}", where=where) from None
    except (RecursionError, ValueError) as exc:  # valid JSON past what Python's reader takes
        why = unreadable(exc) or first_line(exc)  # (bytes that are no UTF-8 text, say)
        raise ProtocolError(f"tool-call arguments cannot be read: {why}", where=where) from None
    if not isinstance(args, dict):
        raise ProtocolError("tool-call arguments must be a JSON object", where=where)
    twice = repeated.of(args)
    if twice is not None:  # which value was meant cannot be told (the text formats agree)
        raise ProtocolError(f"tool-call arguments give {twice!r} twice", where=where)
    return args


def _api_calls(message: Mapping[str, Any], where: str) -> list[tuple[Any, str, dict[str, Any]]]:
    calls = message.get("tool_calls") or []
    if not isinstance(calls, list):
        raise ProtocolError("tool_calls must be a list", where=f"{where}.tool_calls")
    out = []
    for i, call in enumerate(calls):
        at = f"{where}.tool_calls[{i}]"
        function = call.get("function") if isinstance(call, Mapping) else None
        if not isinstance(function, Mapping) or not isinstance(function.get("name"), str):
            raise ProtocolError("a tool call needs function.name", where=at)
        out.append((call.get("id"), function["name"], _arguments(function.get("arguments"), at)))
    return out


def loaded_skill(harness: Harness, name: str, args: Mapping[str, Any]) -> str | None:
    """The skill id a call to ``name`` with ``args`` loads, or None when it loads none.

    A call to the harness's skill tool loads the skill its skill argument names (a string)
    when the tool's schema accepts the call. One the schema refuses -- no skill id (a renamed
    argument, say), an argument the schema does not allow -- is a call like any other tool's,
    refused where calls are judged, not a load with the rest of its arguments dropped. The call
    ``render`` writes for a load, the skill argument alone, is always a load, whatever the
    skill id: whether the harness has that skill is judged where the load is, so a recorded
    trajectory parses back as it was.
    """
    tool, arg = harness.skill_tool, harness.skill_arg
    if tool is None or name != tool.name or arg is None:
        return None
    skill_id = args.get(arg)
    if not isinstance(skill_id, str):
        return None
    if len(args) == 1 or checker_of(harness).problem(name, args) is None:
        return skill_id
    return None


def _messages(conversation: Any) -> Sequence[Mapping[str, Any]]:
    messages: Sequence[Mapping[str, Any]]
    if isinstance(conversation, Conversation):
        messages = conversation.messages
    elif isinstance(conversation, Mapping):
        found = conversation.get("messages")
        if not isinstance(found, list):
            raise ProtocolError("a conversation needs a list of messages", where="messages")
        messages = found
    else:
        reads = "pass a Conversation, a {'messages': [...]} record or a list of messages"
        refuse_kind(conversation, Sequence, "conversation", reads, ProtocolError)
        messages = list(conversation)
    for index, message in enumerate(messages):
        if not isinstance(message, Mapping):
            raise ProtocolError("a message must be an object", where=f"messages[{index}]")
    return messages


def parse(
    conversation: Conversation | Mapping[str, Any] | Sequence[Mapping[str, Any]], harness: Harness
) -> list[Event]:
    """The canonical events of a conversation rendered under ``harness``.

    Raises ``ProtocolError`` naming the message when the conversation does not follow the
    harness's protocol (a malformed call, a system message that is no hook, ...). Under a text
    protocol, an assistant message that is not a well-formed call message is assistant text.
    """
    messages = _messages(conversation)
    api = harness.protocol.is_api
    fmt = None if api else call_format(harness)
    tag = harness.protocol.call_tag
    prompt = system_prompt(harness)
    prompt_in_user = harness.prompt.placement == "user" and bool(prompt)
    skill_tool = harness.skill_tool.name if harness.skill_tool else None

    events: list[Event] = []
    text: str | None
    skill_calls: set[str] = set()
    counter = 0
    start = 0
    if prompt and not prompt_in_user:
        if (
            not messages
            or messages[0].get("role") != "system"
            or messages[0].get("content") != prompt
        ):
            raise ProtocolError(
                "the conversation does not start with the harness's system prompt",
                where="messages[0]",
            )
        start = 1

    for index in range(start, len(messages)):
        message = messages[index]
        where = f"messages[{index}]"
        role = message.get("role")
        content = message.get("content")
        if role == "system":
            fired = match_hook(harness, _text_of(content, where), READ_AS["system"], where=where)
            if fired is None:
                raise ProtocolError(
                    "a system message that is not a hook of this harness", where=where
                )
            events.append(fired)
        elif role == "user":
            text = _text_of(content, where)
            if prompt_in_user:
                if text == prompt and index == 0:
                    prompt_in_user = False
                    continue
                if text.startswith(prompt + "\n\n"):
                    prompt_in_user = False
                    events.append(UserMessage(text[len(prompt) + 2 :]))
                    continue
            fired = match_hook(harness, text, READ_AS["user"], where=where)
            events.append(fired if fired is not None else UserMessage(text))
        elif role == "assistant":
            reasoning = message.get("reasoning_content")
            if fmt is None:  # the api protocol
                raw_calls = _api_calls(message, where)
                text = None if content is None else _text_of(content, where)
            else:
                if message.get("tool_calls"):
                    raise ProtocolError(
                        f"tool_calls in a conversation of text protocol "
                        f"{harness.protocol.label!r}; calls must be written in the message text",
                        where=where,
                    )
                text, raw_calls = _text_of(content, where), []
                parsed = fmt.parse_calls(text, tag)
                if parsed is not None:
                    text, found = parsed
                    raw_calls = [(None, name, dict(args)) for name, args in found]
            for said in (text, reasoning):
                bad = unwritable(said, "$") if isinstance(said, str) else None
                if bad is not None:  # a lone surrogate ("\ud83d") a lenient reader took
                    raise ProtocolError(f"the assistant's text: {bad[1]}", where=where)
            # "" before calls is no text (a model's empty content beside its calls)
            if reasoning is not None or text or (text is not None and not raw_calls):
                events.append(AssistantMessage(text or "", reasoning))
            for call_id, name, args in raw_calls:
                refuse_unwritable(name, args, where)  # NaN, 1e400: lenient readers take them
                call_id = call_id if call_id is not None else f"call_{counter}"
                counter += 1
                skill_id = loaded_skill(harness, name, args) if name == skill_tool else None
                if skill_id is not None:
                    skill_calls.add(call_id)
                    events.append(SkillLoad(skill_id))
                else:
                    events.append(ToolCall(call_id, name, args))
        elif role == "tool":
            call_id = message.get("tool_call_id")
            if not isinstance(call_id, str):
                raise ProtocolError("a tool message needs a tool_call_id string", where=where)
            body, hooks = split_tool_hooks(harness, _text_of(content, where), where=where)
            if call_id not in skill_calls:  # a skill's content is the skill, not an event
                events.append(ToolResult(call_id, body, bool(message.get("is_error", False))))
            events.extend(hooks)
        else:
            raise ProtocolError(f"unknown message role {role!r}", where=where)
    return events


#: assistant text a call format may read as calls (tags, a body at the start, a bare call);
#: also a pattern for PyArrow's regex kernels
CALL_LIKE = r"<tool_call>|<TOOLCALL>|^\s*(?:[\[{<`]|[A-Za-z_][\w.]*\s*\()"
_CALL_LIKE = re.compile(CALL_LIKE)


def call_like(text: str) -> bool:
    """Whether some text protocol may read ``text`` as calls (``reads_as_calls`` tells)."""
    return _CALL_LIKE.search(text) is not None


def reads_as_calls(text: str, protocol: Protocol) -> bool:
    """Whether assistant ``text`` of no call, written under the text ``protocol``, would read
    as calls (or fail to read) when the message is parsed: the format has no escape, so the
    text cannot be written there as what it is (``Format: <tool_call>{...}</tool_call>``)."""
    if protocol.is_api or not call_like(text):
        return False
    return _reads_as_calls(text, protocol.call_format, protocol.call_tag)


@lru_cache(maxsize=1 << 14)
def _reads_as_calls(text: str, name: str, tag: bool) -> bool:
    fmt = CALL_FORMATS.get(name)
    if fmt is None:
        return False
    try:
        return fmt.parse_calls(text, tag) is not None
    except ProtocolError:
        return True


def _text_of(content: Any, where: str) -> str:
    """Text of a message's content: a string, None, or OpenAI content parts. A part's
    ``text`` is a string where it has one (the API requires it of a text part): a part whose
    text is null, a number or missing from a ``text`` part is refused, naming the part."""
    if isinstance(content, str):
        return content
    if content is None:
        return ""
    if isinstance(content, list):
        texts: list[str] = []
        for index, part in enumerate(content):
            if not isinstance(part, Mapping):
                continue
            if "text" not in part and part.get("type") != "text":
                texts.append("")  # a part of another kind (an image): no text of its own
                continue
            text = part.get("text")
            if not isinstance(text, str):
                got = _json_type(text) if "text" in part else "none (a text part needs one)"
                raise ProtocolError(
                    f"a content part's text must be a string, got {got}",
                    where=f"{where}.content[{index}].text",
                )
            texts.append(text)
        return "\n".join(texts)  # one part per line, as the chat importer (and vLLM) join them
    raise ProtocolError(f"unsupported message content {type(content).__name__}", where=where)


def _json_type(value: Any) -> str:
    """The JSON name of ``value``'s type, as a request body spells it."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    return "an object" if isinstance(value, Mapping) else f"a {type(value).__name__}"
