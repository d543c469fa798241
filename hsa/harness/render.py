"""render: canonical events + harness -> the OpenAI-format conversation a model sees."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from hsa.errors import HarnessError, ProtocolError, TemplateError, refuse_kind
from hsa.harness.events import (
    AssistantMessage,
    Event,
    HookFired,
    SkillLoad,
    ToolCall,
    ToolResult,
    UserMessage,
)
from hsa.harness.jsonvalues import may_be_unwritable, unwritable
from hsa.harness.model import Harness, Hook, Skill
from hsa.harness.prompt import call_format, surface_tools, system_prompt
from hsa.harness.protocols import join_prefix
from hsa.harness.sandbox import render_message

#: the version of what ``render`` (and the engine, which equals it) shows for given events
#: under a given harness; the jobs whose output it shapes (augment, teach, eval) record it, so
#: a rerun into output written under another refuses instead of mixing or reusing its rows
#: (2: a hook's note fired among the results of one message's calls shows after the last)
RENDER_VERSION = 2


@dataclass(frozen=True, slots=True)
class Conversation:
    """OpenAI chat ``messages`` (tool-call arguments as JSON strings) plus the ``tools`` list."""

    messages: list[dict[str, Any]]
    tools: list[dict[str, Any]] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {"messages": self.messages, "tools": self.tools}


def wrap(hook: Hook, text: str) -> str:
    """``text`` inside the hook's wrapper tags, each on its own line (as is without a wrapper)."""
    return f"<{hook.wrapper}>\n{text}\n</{hook.wrapper}>" if hook.wrapper else text


def hook_text(harness: Harness, event: HookFired, where: str | None = None) -> tuple[Hook, str]:
    """The hook that fired and the text it shows (its message, in its wrapper tags)."""
    hook = harness.hook(event.hook_id)
    if hook is None:
        raise ProtocolError(f"hook {event.hook_id!r} is not in harness {harness.id!r}", where=where)
    try:
        message = render_message(hook.message, event.payload)
    except TemplateError as exc:
        raise ProtocolError(f"hook {hook.id!r}: {exc.message}", where=where) from None
    return hook, wrap(hook, message)


def render(events: Sequence[Event], harness: Harness) -> Conversation:
    """The surface conversation for ``events`` under ``harness``.

    Assistant text and the calls right after it form one assistant message (two messages under
    an untagged text format, which cannot hold both); a skill load is a call to the harness's
    skill tool answered with the skill's content; a hook firing shows its message at the hook's
    injection position: a system message, a user message, or appended to the tool result just
    before it (a system message when there is none). Under a text protocol call ids are not
    shown, so ``parse`` numbers calls ``call_0``, ``call_1``, ...; events whose ids are in that
    normal form (``normalize_call_ids``) round-trip under every protocol, but for assistant
    text that reads as calls under a text protocol (``parse.reads_as_calls``: ``print(x=1)``
    under an untagged python format, which has no escape). Such text is written as it is and
    parses back as calls (or fails to parse); callers that need the round trip pass over it,
    as the augment picker passes over such a variant for the trajectory.

    A hook that shows a message of its own (``inject`` system or user, or tool_result with no
    tool message to join) while results of the calls before it are still to come waits until
    after the last of them (and the hooks joining it), in firing order: the results of one
    assistant message's calls come together, as OpenAI's API and chat templates require.
    ``shown_order`` gives the order of the events as shown, which ``parse`` reads back.
    """
    refuse_kind(harness, Harness, "harness", "hsa.load_harness(path) reads one", HarnessError)
    reads = "pass a list of events (hsa.parse(conversation, harness) reads one)"
    refuse_kind(events, Sequence, "events", reads, ProtocolError)
    api = harness.protocol.is_api
    fmt = None if api else call_format(harness)
    tag = harness.protocol.call_tag
    messages: list[dict[str, Any]] = []
    prompt = system_prompt(harness)
    prompt_in_user = harness.prompt.placement == "user" and bool(prompt)
    if prompt and not prompt_in_user:
        messages.append({"role": "system", "content": prompt})
    taken_ids = {e.call_id for e in events if isinstance(e, ToolCall | ToolResult)}

    pending: dict[str, Any] | None = None  # the assistant message that calls may still join
    pending_at = ""  # where the pending message's first event is, for errors
    # (call_id, tool, args, their JSON text under api when a call wrote it already)
    pending_calls: list[tuple[str, str, dict[str, Any], str | None]] = []
    skill_results: list[dict[str, Any]] = []
    counter = 0

    def flush() -> None:
        nonlocal pending, pending_calls, skill_results
        if pending is None:
            return
        text = pending.pop("_text")
        reasoning = pending.pop("_reasoning", None)
        if pending_calls and api:
            if text == "":  # (a turn with reasoning only: null beside calls, as without it)
                pending["content"] = None
            pending["tool_calls"] = [
                {
                    "id": call_id,
                    "type": "function",
                    "function": {
                        "name": tool,
                        "arguments": json.dumps(args, ensure_ascii=False)
                        if written is None
                        else written,
                    },
                }
                for call_id, tool, args, written in pending_calls
            ]
        elif pending_calls and fmt is not None:  # fmt is None only under the api protocol
            try:
                block = fmt.format_calls([(tool, args) for _, tool, args, _ in pending_calls], tag)
            except ProtocolError as exc:
                raise ProtocolError(exc.message, file=exc.file, where=pending_at) from None
            if text == "":  # "" before calls is no text, as chat templates read it
                text = None
            if text is not None and not fmt.allows_prefix(tag):
                messages.append(_assistant_message(text, reasoning))
                text = reasoning = None
            pending["content"] = join_prefix(text, block)
        if reasoning is not None:
            pending["reasoning_content"] = reasoning
        messages.append(pending)
        messages.extend(skill_results)
        pending, pending_calls, skill_results = None, [], []

    for index in shown_order(events, harness):
        event = events[index]
        where = f"events[{index}]"
        if isinstance(event, ToolCall | SkillLoad):
            if pending is None:
                pending, pending_at = {"role": "assistant", "content": None, "_text": None}, where
            if isinstance(event, ToolCall):
                args = dict(event.args)
                written = _json_text(args, ensure_ascii=False) if api else None
                refuse_unwritable(event.tool, args, where, written=written)
                pending_calls.append((event.call_id, event.tool, args, written))
            else:
                call_id = _fresh_id(f"call_{counter}", taken_ids)
                tool, args, skill = _skill_call(harness, event, where)
                pending_calls.append((call_id, tool, args, None))
                skill_results.append(
                    {"role": "tool", "tool_call_id": call_id, "content": skill.content}
                )
            counter += 1
            continue
        flush()
        if isinstance(event, AssistantMessage):
            pending = {"role": "assistant", "content": event.text, "_text": event.text}
            pending_at = where
            if event.reasoning is not None:
                pending["_reasoning"] = event.reasoning
        elif isinstance(event, UserMessage):
            text = event.text
            if prompt_in_user:
                text, prompt_in_user = f"{prompt}\n\n{text}", False
            messages.append({"role": "user", "content": text})
        elif isinstance(event, ToolResult):
            message: dict[str, Any] = {
                "role": "tool",
                "tool_call_id": event.call_id,
                "content": event.content,
            }
            if event.is_error:
                message["is_error"] = True
            messages.append(message)
        elif isinstance(event, HookFired):
            _place_hook(messages, harness, event, where)
        else:
            raise ProtocolError(f"unknown event {event!r}", where=where)
    flush()
    if prompt_in_user:  # no user message to carry the prompt
        messages.insert(0, {"role": "user", "content": prompt})
    return Conversation(messages, api_tools(harness) if api else [])


def shown_order(events: Sequence[Event], harness: Harness) -> list[int]:
    """The indices of ``events`` in the order ``render`` shows them under ``harness``.

    Events keep their order but in a run of tool results and hook firings: there a firing
    that shows a message of its own (``inject`` system or user, or tool_result where the
    message before it, as fired, is no tool message) before the run's last result moves to
    after that result and the firings joining it, the moved ones in firing order. A note
    between the results of one message's calls is a conversation OpenAI's API refuses (and
    chat templates that group the results split). Placed there, a moved note shows as it
    would have been shown had it fired there: a tool_result hook's joins the last result (a
    tool message now precedes it), the others' are messages of their own. An unknown hook
    stays where it is (render refuses it there). ``parse(render(events))`` reads the events
    back in this order.
    """
    if not harness.hooks:  # nothing moves: every firing is unknown and stays where it is
        return list(range(len(events)))
    order: list[int] = []
    last_tool = False  # whether the last message, as fired, is a tool message
    group_skill = False  # the current run of calls loads a skill (its result ends it)
    index, n = 0, len(events)
    while index < n:
        event = events[index]
        if not isinstance(event, ToolResult | HookFired):
            group_skill = isinstance(event, ToolCall | SkillLoad) and (
                group_skill or isinstance(event, SkillLoad)
            )
            last_tool = group_skill
            order.append(index)
            index += 1
            continue
        end = index
        while end < n and isinstance(events[end], ToolResult | HookFired):
            end += 1
        last = max((i for i in range(index, end) if isinstance(events[i], ToolResult)), default=-1)
        held: list[int] = []
        for i in range(index, end):
            fired = events[i]
            if not isinstance(fired, HookFired):  # a tool result
                last_tool = True
                order.append(i)
                continue
            hook = harness.hook(fired.hook_id)
            if hook is None or (hook.inject == "tool_result" and last_tool):
                order.append(i)  # it joins the tool message before it (or render refuses it)
                continue
            last_tool = False
            if i < last:
                held.append(i)
            else:
                order.extend(held)
                held = []
                order.append(i)
        order.extend(held)
        group_skill = False
        index = end
    return order


def as_shown(events: Sequence[Event], harness: Harness) -> list[Event]:
    """``events`` in the order ``render`` shows them under ``harness`` (``shown_order``):
    what ``parse`` reads back from the conversation."""
    return [events[i] for i in shown_order(events, harness)]


def api_tools(harness: Harness) -> list[dict[str, Any]]:
    """The tools a request under ``harness`` sends to an API, OpenAI-style (the skill tool
    last, when the harness has one)."""
    return [t.to_openai() for t in surface_tools(harness)]


def tools_json(harness: Harness) -> str:
    """The tools a request under ``harness`` sends to the API, as compact JSON (``[]`` for a
    text protocol, which lists them in the prompt): ``Conversation.tools`` as JSON, the same
    for every conversation under ``harness``, so worth keeping (``harness.derived``). Made of
    each tool's own text (``Tool.openai_json``): the variants of a harness share most tools."""
    if not harness.protocol.is_api:
        return "[]"
    return "[" + ",".join([t.openai_json() for t in surface_tools(harness)]) + "]"


def _fresh_id(candidate: str, taken: set[str]) -> str:
    """``candidate``, or a suffixed variant when a tool call of the trajectory already uses it.

    Skill loads have no call id of their own; under ``api`` their generated id must not capture
    another call's result. With normalised ids there is never a clash.
    """
    fresh, n = candidate, 0
    while fresh in taken:
        n += 1
        fresh = f"{candidate}_skill{n}"
    taken.add(fresh)
    return fresh


def refuse_unwritable(
    tool: str, args: Mapping[str, Any], where: str, *, written: str | None = None
) -> None:
    """Raise ``ProtocolError`` when the arguments of a call to ``tool`` hold a value no dataset
    row can hold (``hsa.harness.jsonvalues.unwritable``: NaN, an integer beyond 64 bits, ...).

    ``render`` refuses to write such a call and ``parse`` to read one, so what one writes the
    other reads back. ``written``: ``args`` as ``json.dumps`` wrote them already (the api's
    arguments text), looked at instead of writing them again.
    """
    # a quick look first: the walk that finds the path costs several times a render
    text = written if written is not None else _json_text(args, ensure_ascii=True)  # (faster)
    if text is not None and not may_be_unwritable(text):
        return
    bad = unwritable(args, "$")
    if bad is not None:
        raise ProtocolError(
            f"tool-call arguments of {tool!r} hold a value JSON cannot write: {bad[0]}: {bad[1]}",
            where=where,
        )


def _json_text(args: Mapping[str, Any], *, ensure_ascii: bool) -> str | None:
    """``json.dumps(args)``; None when no JSON holds them (no JSON value, or an integer past
    Python's digit limit: raised again where they are written, if nothing refuses them)."""
    try:
        return json.dumps(args, ensure_ascii=ensure_ascii)
    except (TypeError, ValueError):
        return None


def _assistant_message(text: str, reasoning: str | None) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": text}
    if reasoning is not None:
        message["reasoning_content"] = reasoning
    return message


def _skill_call(
    harness: Harness, event: SkillLoad, where: str
) -> tuple[str, dict[str, Any], Skill]:
    """The skill tool's name and arguments that load ``event``'s skill, and the skill."""
    if harness.skill_tool is None:
        raise ProtocolError(
            f"harness {harness.id!r} has no skill tool to load skill {event.skill_id!r} with",
            where=where,
        )
    if harness.skill_arg is None:
        raise ProtocolError(
            f"skill tool {harness.skill_tool.name!r} of harness {harness.id!r} has no "
            "parameter naming the skill",
            where=where,
        )
    skill = harness.skill(event.skill_id)
    if skill is None:
        raise ProtocolError(
            f"skill {event.skill_id!r} is not in harness {harness.id!r}", where=where
        )
    return harness.skill_tool.name, {harness.skill_arg: event.skill_id}, skill


def _place_hook(
    messages: list[dict[str, Any]], harness: Harness, event: HookFired, where: str
) -> None:
    hook, text = hook_text(harness, event, where)
    last = messages[-1] if messages else None
    if hook.inject == "tool_result" and last is not None and last["role"] == "tool":
        last["content"] = f"{last['content']}\n{text}"
    elif hook.inject == "user":
        messages.append({"role": "user", "content": text})
    else:  # system, or tool_result with no tool result to attach to
        messages.append({"role": "system", "content": text})
