"""The hook runtime: which hooks fire at a lifecycle event, with what payload, and their effects.

A rollout calls ``run_hooks(harness, event, context)`` at each lifecycle point and records the
returned ``HookFired`` events; the result also carries what the effects changed:

- ``session_start``: before the first user message; ``user_prompt_submit``: after each user
  message; both may only ``add_context``.
- ``pre_tool_use``: before a call runs. ``update_input`` changes the arguments that are executed
  (``params: {"set": {...}, "remove": [...]}``); ``deny`` stops the call: its result is the
  fixed error ``DENIED`` and the hook's own message, shown next to it, says why (so rewording
  the hook re-renders the reason, and the reason is never shown twice).
- ``post_tool_use``: after a call ran. ``update_output`` changes the result the model sees
  (``params: {"remove": [key, ...]}`` drops those keys at any depth of a JSON result).
- ``stop``: when the agent gives a final answer. ``deny`` refuses the answer: the agent must
  answer again, and the hook's message tells it why.

``turn`` is the 0-based index of the current user message. A matcher matches when every field
it sets matches: ``tool`` is a regular expression that must match the whole tool name (so it
never matches events without a tool), ``turn`` an exact index, and ``every_n_turns: n`` the
turns n, 2n, 3n, ... (after every n complete turns). The payload comes from ``payload_fn``
(``pkg.mod:fn``, called as ``fn(hook, context)``; it returns a dict of strings, or None to keep
the hook from firing) or else from ``params["payload"]`` (default ``{}``); its fields must be
exactly the message's placeholders so that the firing can be parsed back from the text. An
episode state that replays a recording (``RecordsFirings``: a recorded corpus's) says instead,
at an event the recording holds, whether each hook it saw fire fired there and with what
payload, so that the replay shows what was recorded.
"""

from __future__ import annotations

import importlib
import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from functools import lru_cache
from typing import Any, Protocol

from hsa.envs.base import ToolOutput
from hsa.errors import EnvError, TemplateError
from hsa.harness.events import HookFired, dumps_json
from hsa.harness.model import HOOK_EVENTS, Harness, Hook, Matcher
from hsa.harness.sandbox import message_fields

#: the lifecycle events at which each effect means something
EFFECT_EVENTS = {
    "add_context": frozenset(HOOK_EVENTS),
    "deny": frozenset({"pre_tool_use", "stop"}),
    "update_input": frozenset({"pre_tool_use"}),
    "update_output": frozenset({"post_tool_use"}),
}

PayloadFn = Callable[[Hook, "HookContext"], Mapping[str, str] | None]


@dataclass(frozen=True, slots=True)
class HookContext:
    """What is known at a lifecycle event; fields that do not apply stay None.

    ``args`` are canonical tool arguments, ``output`` the tool's result (post_tool_use),
    ``final_text`` the answer being given (stop), ``state`` the environment's episode state.
    """

    event: str
    turn: int = 0
    tool: str | None = None
    args: Mapping[str, Any] | None = None
    output: ToolOutput | None = None
    final_text: str | None = None
    state: Any = None


#: by hook id, the payload a recording shows the hook firing with at an event, or None where
#: the recording shows it not firing there
Firings = Mapping[str, Mapping[str, str] | None]


class RecordsFirings(Protocol):
    """An episode state that replays a recording and knows where its hooks fired."""

    def recorded_firings(self, context: HookContext) -> Firings | None:
        """What the recording shows at the event ``context`` describes, for each hook it shows
        firing anywhere; None when the recording does not hold this event. A hook left out
        does what it does without a recording (its ``payload_fn`` or ``params``)."""


@dataclass(frozen=True, slots=True)
class HookResult:
    """The hooks that fired, in order, and what their effects left.

    ``args``: the tool input to execute (pre_tool_use). ``output``: the result the model sees
    (post_tool_use), or the error result of a denied call (pre_tool_use). ``denied_by``: the id
    of the hook that denied the call or refused the final answer.
    """

    fired: tuple[HookFired, ...] = ()
    args: Mapping[str, Any] | None = None
    output: ToolOutput | None = None
    denied_by: str | None = None

    @property
    def denied(self) -> bool:
        return self.denied_by is not None


def matches(matcher: Matcher, context: HookContext) -> bool:
    """Whether ``matcher`` selects the event described by ``context``."""
    if matcher.tool is not None and (
        context.tool is None or _regex(matcher.tool).fullmatch(context.tool) is None
    ):
        return False
    if matcher.turn is not None and context.turn != matcher.turn:
        return False
    n = matcher.every_n_turns
    return n is None or (context.turn > 0 and context.turn % n == 0)


@lru_cache(maxsize=256)
def _regex(pattern: str) -> re.Pattern[str]:
    try:
        return re.compile(pattern)
    except re.error as exc:
        raise EnvError(
            f"invalid tool pattern {pattern!r}: {exc}", where="hook.matcher.tool"
        ) from None


@lru_cache(maxsize=256)
def load_payload_fn(path: str) -> PayloadFn:
    """The function a hook's ``payload_fn`` (``pkg.mod:fn``) names."""
    module_name, sep, attr = path.partition(":")
    if not sep or not module_name or not attr:
        raise EnvError(f"payload_fn {path!r} must read 'package.module:function'")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise EnvError(f"payload_fn {path!r}: cannot import {module_name!r}: {exc}") from None
    except Exception as exc:  # the module itself raised as it ran (a SyntaxError too)
        raise EnvError(
            f"payload_fn {path!r}: importing {module_name!r} raised {type(exc).__name__}: {exc}"
        ) from None
    fn = getattr(module, attr, None)
    if not callable(fn):
        raise EnvError(f"payload_fn {path!r}: {module_name} has no function {attr!r}")
    return fn


def payload(
    hook: Hook, context: HookContext, recorded: Firings | None = None
) -> dict[str, str] | None:
    """The payload ``hook`` fires with in ``context``, or None when it does not fire;
    ``recorded``: what a recording shows at this event (``RecordsFirings``)."""
    if recorded is not None and hook.id in recorded:
        raw: Any = recorded[hook.id]
        if raw is None:
            return None
        source = "the recorded payload"
    elif hook.payload_fn is not None:
        raw = load_payload_fn(hook.payload_fn)(hook, context)
        if raw is None:
            return None
        source = f"payload_fn {hook.payload_fn}"
    else:
        raw = hook.params.get("payload", {})
        source = "params.payload"
    if not isinstance(raw, Mapping) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in raw.items()
    ):
        raise EnvError(
            f"hook {hook.id!r}: {source} must give a mapping of strings to strings, got {raw!r}",
            where=f"hook {hook.id}",
        )
    try:
        fields = set(message_fields(hook.message))
    except TemplateError as exc:
        raise EnvError(
            f"hook {hook.id!r}: message: {exc.message}", where=f"hook {hook.id}"
        ) from None
    if set(raw) != fields:
        raise EnvError(
            f"hook {hook.id!r}: {source} gives fields {sorted(raw)} but the message has "
            f"placeholders {sorted(fields)}; they must be the same",
            where=f"hook {hook.id}",
        )
    return dict(raw)


#: the tool result of a call a hook denied; the hook's message carries the reason
DENIED = json.dumps({"error": "denied", "detail": "a harness hook blocked this call"})


def run_hooks(harness: Harness, event: str, context: HookContext) -> HookResult:
    """Evaluate ``harness``'s hooks for ``event`` in harness order and apply their effects.

    A deny ends the evaluation: later hooks of the same event do not run. Hooks that update
    the input or output see the changes of the hooks before them.
    """
    if event not in HOOK_EVENTS:
        raise EnvError(f"unknown lifecycle event {event!r}; expected one of {HOOK_EVENTS}")
    context = replace(context, event=event)
    # (an attribute look-up: isinstance of a Protocol costs tens of microseconds an event)
    records = getattr(context.state, "recorded_firings", None)
    recorded = None if records is None else records(context)
    fired: list[HookFired] = []
    args = None if context.args is None else dict(context.args)
    output = context.output
    for hook in harness.hooks:
        if hook.event != event or not matches(hook.matcher, context):
            continue
        _check_effect(hook)
        values = payload(hook, context, recorded)
        if values is None:
            continue
        fired.append(HookFired(hook.id, event, values))
        if hook.effect == "deny":
            denial = ToolOutput(DENIED, is_error=True)
            return HookResult(
                tuple(fired), args, denial if event == "pre_tool_use" else None, hook.id
            )
        if hook.effect == "update_input":
            args = update_input(hook, args or {})
            context = replace(context, args=args)
        elif hook.effect == "update_output" and output is not None:
            output = update_output(hook, output)
            context = replace(context, output=output)
    return HookResult(tuple(fired), args, output)


def _check_effect(hook: Hook) -> None:
    allowed = EFFECT_EVENTS.get(hook.effect)
    if allowed is None:
        raise EnvError(f"hook {hook.id!r}: unknown effect {hook.effect!r}")
    if hook.event not in allowed:
        raise EnvError(
            f"hook {hook.id!r}: effect {hook.effect!r} does not apply at {hook.event!r}; "
            f"use it at {' or '.join(sorted(allowed))}",
            where=f"hook {hook.id}",
        )


def update_input(hook: Hook, args: Mapping[str, Any]) -> dict[str, Any]:
    """``args`` with ``params.set`` applied over them and ``params.remove`` names dropped."""
    out = {k: v for k, v in args.items() if k not in set(hook.params.get("remove") or ())}
    out.update(hook.params.get("set") or {})
    return out


def update_output(hook: Hook, output: ToolOutput) -> ToolOutput:
    """``output`` with the keys in ``params.remove`` dropped at any depth (JSON results only)."""
    remove = set(hook.params.get("remove") or ())
    if not remove:
        return output
    try:
        data = json.loads(output.content)
    except json.JSONDecodeError:
        return output
    return ToolOutput(dumps_json(_without(data, remove)), output.is_error)


def _without(value: Any, keys: set[str]) -> Any:
    if isinstance(value, dict):
        return {k: _without(v, keys) for k, v in value.items() if k not in keys}
    if isinstance(value, list):
        return [_without(v, keys) for v in value]
    return value


def hook_problems(harness: Harness, *, recorded: bool = False) -> list[EnvError]:
    """Problems that would make a hook fail at run time: effect/event mismatches, payload
    functions that cannot be imported, static payloads that do not fit the message. With
    ``recorded``, a hook with neither a payload function nor ``params.payload`` is not one:
    its payloads may come from recordings (a corpus's, which ``hsa augment`` replays)."""
    problems: list[EnvError] = []
    for i, hook in enumerate(harness.hooks):
        where = f"$.hooks[{i}]"
        try:
            _check_effect(hook)
            if hook.payload_fn is not None:
                load_payload_fn(hook.payload_fn)
            elif not recorded or "payload" in hook.params:
                payload(hook, HookContext(event=hook.event))
        except EnvError as exc:
            problems.append(EnvError(exc.message, file=harness.id, where=where))
    return problems
