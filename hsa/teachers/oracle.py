"""The oracle as a model: chat requests in, the scripted policy's next step out, on the surface.

``OracleResponder`` reads a chat-completions request as a real endpoint would: it parses the
conversation under the surface harness (the environment's canonical harness, or the variant
named in the request's ``metadata``), maps it back to canonical events, finds the task from the
user's messages, asks the environment's policy for the next step and writes that step in the
harness's protocol (``tool_calls`` under ``api``, text in the call format otherwise), with the
variant's names. The in-process ``oracle`` backend and ``hsa serve oracle`` share it, so the
rollout's parser is exercised either way.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import orjson

from hsa.augment.mapping import map_events
from hsa.augment.planner import Variant, canonical_variant
from hsa.envs.base import Environment, Task
from hsa.envs.episode import Policy
from hsa.envs.hook_runtime import HookContext, run_hooks
from hsa.errors import EnvError, HsaError, TeacherError
from hsa.harness.events import AssistantMessage, Event, HookFired, SkillLoad, ToolCall, UserMessage
from hsa.harness.parse import parse, reads_as_calls
from hsa.harness.render import render
from hsa.teachers.backends.base import Backend, BackendStats
from hsa.teachers.request import ChatRequest, ChatResponse, Usage
from hsa.teachers.rollout import REPAIR_PREFIX, TASK_KEY, VARIANT_KEY, protocol_view
from hsa.teachers.surface_hooks import added_hooks
from hsa.teachers.task_variants import VariantPool

#: how many tool lists' token counts a responder keeps (a job sends one per variant)
_TOOLS_KEPT = 1024
#: finds a variant by id (None when unknown)
VariantLookup = Callable[[str], Variant | None]


def _tokens(value: Any) -> int:
    """A rough token count (4 characters a token): the oracle has no tokenizer."""
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    return max(1, len(text) // 4)


def _tools_key(tools: Any) -> bytes | str:
    """A request's tools as a key to their token count: their JSON, through orjson (several
    times faster than ``json``, and a request's tools are most of its body), or ``json``'s for
    what orjson does not write (an integer past 64 bits)."""
    try:
        return orjson.dumps(tools)
    except orjson.JSONEncodeError:
        return json.dumps(tools, ensure_ascii=False)


def _oracle(env: Environment) -> Policy:
    try:
        return env.oracle()
    except EnvError as exc:
        raise TeacherError(f"{exc.message}; use --backend openai or vllm") from None


class OracleResponder:
    """Answers chat-completions bodies with the policy's next step, as a model would.

    The policy is the environment's oracle (``Environment.oracle``; ``policy`` stands another
    scripted policy in for it); an environment without one is refused here, before any
    request, with what to run instead.
    """

    def __init__(
        self,
        env: Environment,
        policy: Policy | None = None,
        *,
        variants: VariantLookup | Mapping[str, Variant] | None = None,
        tasks: Sequence[Task] | None = None,
    ):
        self.env = env
        self.policy = _oracle(env) if policy is None else policy
        self._canonical: Variant | None = None
        self._pool = variants if isinstance(variants, VariantPool) else None
        if variants is None:
            self._lookup: VariantLookup = lambda _id: None
        elif isinstance(variants, Mapping):
            self._lookup = variants.get
        else:
            self._lookup = variants
        self.tasks = list(env.tasks() if tasks is None else tasks)
        self._by_first_turn: dict[str, list[Task]] = {}
        self._by_task_id = {task.id: task for task in self.tasks}
        for task in self.tasks:
            turns = env.turns(task)
            if turns:
                self._by_first_turn.setdefault(turns[0], []).append(task)
        self._session_start: dict[str, tuple[HookFired, ...]] = {}
        self._found: dict[str, Variant] = {}
        self._tools_tokens: dict[bytes | str, int] = {}  # by the tools' JSON (``_tools_key``)
        self._canonicals: dict[str, Variant] = {}  # by harness id: what a fixed oracle writes

    @property
    def canonical(self) -> Variant:
        """The environment's canonical harness as a variant (one harness for every task)."""
        if self._canonical is None:
            self._canonical = canonical_variant(self.env.harness())
        return self._canonical

    def variant(
        self, metadata: Mapping[str, Any], messages: Sequence[Mapping[str, Any]] = ()
    ) -> Variant:
        """The variant named in ``metadata`` (the canonical one when none is). A variant
        planned with a task's context (``hsa eval``'s trajectory-dependent rules) is found
        through the tasks the first user message of ``messages`` may begin."""
        variant_id = metadata.get(VARIANT_KEY)
        if not variant_id:
            return self.canonical
        found = self._found.get(str(variant_id))
        if found is not None:
            return found
        if self._pool is not None:
            found = self._pool.for_tasks(str(variant_id), self._maybe(messages, metadata))
        else:
            found = self._lookup(str(variant_id))
        if found is None and self._has_canonical(str(variant_id)):
            found = self.canonical
        if found is None:
            raise TeacherError(
                f"unknown variant {variant_id!r}: start the oracle with the environment, "
                "recipe and seed of the job that sends it",
                where=f"metadata.{VARIANT_KEY}",
            )
        self._found[str(variant_id)] = found
        return found

    def _maybe(
        self, messages: Sequence[Mapping[str, Any]], metadata: Mapping[str, Any]
    ) -> list[Task]:
        """The tasks a conversation may be of: the one ``metadata`` names (as hsa's rollouts
        do), else those whose first turn is the first user message that begins a task (a
        variant may send hook notes or its system prompt as user messages before it)."""
        named = self._by_task_id.get(str(metadata.get(TASK_KEY)))
        if named is not None:
            return [named]
        for message in messages:
            content = message.get("content") if message.get("role") == "user" else None
            if isinstance(content, list):  # content parts
                content = "".join(p.get("text") or "" for p in content if isinstance(p, Mapping))
            if isinstance(content, str) and content in self._by_first_turn:
                return list(self._by_first_turn[content])
        return []

    def _has_canonical(self, variant_id: str) -> bool:
        try:
            return variant_id == self.canonical.variant_id
        except EnvError:  # an environment with a harness per task has no one canonical
            return False

    def _opening(self, task: Task) -> tuple[HookFired, ...]:
        """The session-start hook firings of ``task``, which tell tasks with equal turns apart."""
        if task.id not in self._session_start:
            state = self.env.reset(task)
            context = HookContext("session_start", state=state)
            fired = run_hooks(self.env.harness_for(task), "session_start", context).fired
            self._session_start[task.id] = tuple(fired)
        return self._session_start[task.id]

    def task(self, events: Sequence[Event], metadata: Mapping[str, Any]) -> Task:
        """The task whose turns the conversation's user messages follow."""
        said = [e.text for e in events if isinstance(e, UserMessage)]
        if not said:
            raise TeacherError("the conversation has no user message to answer")
        candidates = [
            t
            for t in self._by_first_turn.get(said[0], ())
            if list(self.env.turns(t)[: len(said)]) == said
        ]
        if len(candidates) > 1:
            first_user = next(i for i, e in enumerate(events) if isinstance(e, UserMessage))
            opening = [e for e in events[:first_user] if isinstance(e, HookFired)]
            candidates = [
                t
                for t in candidates
                if self._opening(t) == _canonical_firings(opening, t, self.env)
            ] or candidates
        if len(candidates) > 1:
            hinted = [t for t in candidates if t.id == metadata.get(TASK_KEY)]
            candidates = hinted or candidates
        if not candidates:
            raise TeacherError(
                f"no {self.env.name or 'environment'} task starts with the user message "
                f"{said[0][:80]!r}",
                where="messages",
            )
        if len(candidates) > 1:
            raise TeacherError(
                f"{len(candidates)} tasks match this conversation; pass the task id in "
                f"metadata.{TASK_KEY}",
                where="messages",
            )
        return candidates[0]

    def __call__(self, body: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, int]]:
        metadata = body.get("metadata") or {}
        messages = list(body.get("messages") or [])
        variant = self.variant(metadata, messages)
        harness = variant.harness
        # A repair request ends with the unreadable reply and the request to try again: the
        # oracle answers the conversation before them, as a model that got it right would.
        if (
            len(messages) >= 2
            and messages[-1].get("role") == "user"
            and str(messages[-1].get("content") or "").startswith(REPAIR_PREFIX)
            and messages[-2].get("role") == "assistant"
        ):
            messages = messages[:-2]
        surface = parse(messages, harness)
        inverse = variant.mapping.inverse()
        events = map_events(surface, inverse, harness)
        task = self.task(events, metadata)
        added = {h.id for h in added_hooks(self.env.harness_for(task), variant)}
        if added:  # the variant's own hooks: no canonical event, nothing the policy reads
            surface = [e for e in surface if not (isinstance(e, HookFired) and e.hook_id in added)]
            events = map_events(surface, inverse, harness)
        step = list(self.policy(task, events))
        if not step:
            step = [AssistantMessage("")]
        message = self._message(step, surface, self.writes_as(task, variant))
        usage = {
            "prompt_tokens": sum(_tokens(m.get("content") or "") for m in messages)
            + self._count_tools(body.get("tools") or []),
            "completion_tokens": _tokens(message),
        }
        return message, usage

    def _count_tools(self, tools: list[Any]) -> int:
        """The tokens of the tools a request lists (its own: requests of one variant may send
        others), kept by their JSON: counting them anew each request cost more than the rest
        of the answer."""
        if not tools:
            return 0
        key = _tools_key(tools)
        found = self._tools_tokens.get(key)
        if found is None:
            if len(self._tools_tokens) >= _TOOLS_KEPT:  # a server sent ever other tools
                self._tools_tokens.clear()
            found = self._tools_tokens[key] = _tokens(tools)
        return found

    def calls_in_text(self, body: Mapping[str, Any], message: Mapping[str, Any]) -> bool:
        """Whether ``message``, this responder's answer to ``body``, holds calls in its text as
        the client reads it, under the protocol of the variant the request names: only a text
        protocol's can (what ``hsa serve``'s malformed answers may break; an answer to the
        user is left whole)."""
        content = message.get("content")
        if not isinstance(content, str) or not content:
            return False
        metadata = body.get("metadata") or {}
        variant = self.variant(metadata, list(body.get("messages") or []))
        protocol = variant.harness.protocol
        return not protocol.is_api and reads_as_calls(content, protocol)

    def writes_as(self, task: Task, variant: Variant) -> Variant:
        """The variant whose names and call format the reply is written in: the one it read."""
        return variant

    def _message(self, step: list[Event], history: list[Event], variant: Variant) -> dict:
        """The step as the one assistant message a model would send under ``variant``."""
        harness = variant.harness
        counter = sum(isinstance(e, ToolCall | SkillLoad) for e in history)
        numbered: list[Event] = []
        for event in map_events(step, variant.mapping):
            if (
                isinstance(event, SkillLoad)
                and harness.skill_tool is not None
                and harness.skill_arg is not None
            ):
                # As the call it is on the wire: the reply view has no skills to render it with.
                args = {harness.skill_arg: event.skill_id}
                event = ToolCall(f"call_{counter}", harness.skill_tool.name, args)
            elif isinstance(event, ToolCall):
                event = ToolCall(f"call_{counter}", event.tool, event.args)
            if isinstance(event, ToolCall):
                counter += 1
            numbered.append(event)
        rendered = render(numbered, harness.derived(protocol_view)).messages
        replies = [m for m in rendered if m.get("role") == "assistant"]
        # An untagged text format cannot carry text and calls in one message (render splits
        # them); a model's single reply then holds the calls alone.
        reply = dict(replies[-1])
        reply.pop("reasoning_content", None)
        if reply.get("content") is None and not reply.get("tool_calls"):
            reply["content"] = ""
        return reply


def _canonical_firings(
    firings: Sequence[HookFired], task: Task, env: Environment
) -> tuple[HookFired, ...]:
    """``firings`` (canonical ids) of the hooks ``task``'s harness has: not those a variant
    adds (``added_hooks``), which ``OracleResponder._opening`` does not play."""
    harness = env.harness_for(task)
    return tuple(e for e in firings if harness.hook(e.hook_id) is not None)


class FixedOracleResponder(OracleResponder):
    """The oracle as a model trained on one fixed harness would behave: it reads the
    conversation it is sent (it knows what happened), but writes every reply with the
    canonical harness's tool, parameter and skill names in the canonical call protocol,
    whatever the variant's prompt and tools say. Under a variant that renames or re-protocols
    what it relies on its calls fail; under one that rewords, reorders or adds, they do not.
    The reference point that shows an evaluation is sensitive to the harness.
    """

    def writes_as(self, task: Task, variant: Variant) -> Variant:
        harness = self.env.harness_for(task)
        found = self._canonicals.get(harness.id)
        if found is None:
            found = self._canonicals[harness.id] = canonical_variant(harness)
        return found


class OracleBackend(Backend):
    """The ``oracle`` backend: the responder called in process, no network."""

    name = "oracle"

    def __init__(self, responder: OracleResponder):
        self.responder = responder
        self.stats = BackendStats()

    async def chat(self, request: ChatRequest) -> ChatResponse:
        self.stats.requests += 1
        started = time.monotonic()
        body = {
            "model": request.model,
            "messages": request.wire_messages(),
            "tools": list(request.tools),
            "metadata": dict(request.metadata),
        }
        try:
            message, usage = self.responder(body)
        except HsaError as exc:
            raise TeacherError(f"the oracle cannot answer: {exc}") from None
        response = ChatResponse(
            message=message,
            finish_reason="tool_calls" if message.get("tool_calls") else "stop",
            usage=Usage.from_dict(usage),
            latency_s=time.monotonic() - started,
        )
        self.stats.record(response)
        await asyncio.sleep(0)  # let other rollouts run between steps
        return response
