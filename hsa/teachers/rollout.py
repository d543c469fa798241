"""The rollout loop: one task, under one harness variant, answered by one backend.

Each step renders the canonical events so far under the variant's surface harness, asks the
backend, parses its message under the same harness, maps the calls back to canonical names
with the variant's inverse mapping, runs the hooks and executes the calls in the environment.
Events are recorded in the order ``hsa.envs.episode`` documents (so they round-trip through
render and parse), hooks run on the environment's canonical harness (a variant rewords and
renames them on the surface only; the hooks a variant adds fire on the surface alone, and the
canonical events leave them out: ``hsa.teachers.surface_hooks``), and call ids are
``call_<n>`` under every protocol.

A message that does not parse, or whose text holds a call that did not, is a format failure
(a reply whose text holds a call block before the calls read at its end: that call would be
lost): the rollout ends there, or, with
``repair``, the model is shown its message and the problem once and asked again (the failed
message stays out of the trajectory and is recorded in the rollout's metadata). Every rollout
ends verified or with a reason; none raises for a model's mistake or a backend outage.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field, replace
from typing import Any

from hsa.augment.mapping import ArgumentClash, map_events
from hsa.augment.planner import Variant
from hsa.collect import frozen
from hsa.config import bounded, refuse, same_as, setting
from hsa.envs.base import Environment, Outcome, Task, ToolOutput
from hsa.envs.episode import call_tool
from hsa.envs.hook_runtime import HookContext, run_hooks
from hsa.errors import HsaError, TeacherError
from hsa.harness.arguments import ArgumentChecker, checker_of
from hsa.harness.events import (
    AssistantMessage,
    Event,
    HookFired,
    SkillLoad,
    ToolCall,
    ToolResult,
    UserMessage,
)
from hsa.harness.model import Harness
from hsa.harness.parse import parse
from hsa.harness.render import Conversation, render, tools_json
from hsa.teachers.backends.base import Backend, ContextOverflow
from hsa.teachers.config import TeachConfig
from hsa.teachers.request import ChatRequest, ChatResponse, Sampling, Usage, dumps
from hsa.teachers.surface_hooks import SurfaceHooks
from hsa.teachers.verify import (
    CALLED,
    CUT_OFF,
    Verification,
    call_attempt,
    holds_call_markup,
    verify,
)

#: how a repair request starts; the oracle recognises it to answer the original question
REPAIR_PREFIX = "Your last reply could not be read:"
#: request metadata keys: the variant (an oracle cannot guess renamed tools) and the task
VARIANT_KEY = "hsa_variant"
#: how the detail of a rollout begins when its first request did not fit the model's context
#: window: a setting's error (every attempt gets the same refusal), not the model's failure
OPENING_TOO_LONG = "the task's opening does not fit the model's context window"
TASK_KEY = "hsa_task"


def repair_prompt(problem: str) -> str:
    return (
        f"{REPAIR_PREFIX} {problem}. Reply again to the conversation above, writing any tool "
        "calls exactly in the required format."
    )


def unreadable_reply(message: Mapping[str, Any]) -> dict[str, Any]:
    """An unreadable reply as a repair request shows it: one assistant message of its raw
    text, its content then each tool call as ``{"name": ..., "arguments": ...}`` with the
    arguments exactly as the model wrote them.

    Its tool calls are not sent as calls: OpenAI's API (and Azure's, DeepSeek's) refuses an
    assistant message with calls that no tool messages answer, and vLLM refuses arguments
    that are not JSON, as a cut-off or malformed call's are. As text the model still sees
    what it wrote, which the repair prompt says what was wrong with.
    """
    parts = []
    content = message.get("content")
    if isinstance(content, str) and content:
        parts.append(content)
    for call in message.get("tool_calls") or ():
        function = call.get("function") if isinstance(call, Mapping) else None
        if not isinstance(function, Mapping):
            parts.append(dumps(call))
            continue
        arguments = function.get("arguments")
        raw = arguments if isinstance(arguments, str) else dumps(arguments)
        parts.append(f'{{"name": {dumps(function.get("name"))}, "arguments": {raw}}}')
    return {"role": "assistant", "content": "\n".join(parts)}


def _cut_off(response: ChatResponse) -> str | None:
    """The ``finish_reason`` of a reply the backend cut off (``CUT_OFF``), else None."""
    reason = response.finish_reason
    return reason if reason in CUT_OFF else None


@dataclass(frozen=True, slots=True)
class RolloutSpec:
    """What to run: a task under a variant; ``seed`` goes into every request's sampling."""

    id: str
    task: Task
    variant: Variant
    sample: int = 0
    seed: int = 0


@dataclass(frozen=True, slots=True)
class RolloutConfig:
    """How to run: the model name, sampling, the step limit and the repair turn."""

    model: str = setting("hsa-oracle", help="The model name sent with each request.")
    sampling: Sampling = setting(default_factory=Sampling, help="Sampling of every request.")
    max_steps_per_turn: int = same_as(TeachConfig, "max_steps_per_turn")
    repair: bool = same_as(TeachConfig, "repair")

    def __post_init__(self) -> None:
        refuse(bounded(self, "max_steps_per_turn", low=1), TeacherError)


@dataclass(frozen=True, slots=True)
class FormatFailure:
    """A model message that did not parse: which step, why, and the message itself."""

    step: int
    problem: str
    message: Mapping[str, Any]
    repaired: bool = False

    def to_dict(self) -> dict[str, Any]:
        return {
            "step": self.step,
            "problem": self.problem,
            "message": dict(self.message),
            "repaired": self.repaired,
        }


@dataclass(frozen=True, slots=True)
class Rollout:
    """A finished rollout: canonical events, the surface conversation, and how it went."""

    spec: RolloutSpec
    events: tuple[Event, ...]
    conversation: Conversation
    verification: Verification
    ended: str
    detail: str | None = None
    requests: int = 0
    cache_hits: int = 0
    usage: Usage = field(default_factory=Usage)
    latency_s: float = 0.0
    format_failures: tuple[FormatFailure, ...] = ()
    #: each answer's latency, in order (a cached answer keeps its original request's)
    latencies_s: tuple[float, ...] = ()
    #: whether it ended at a reply that did not parse (``format``) on a task where such a reply
    #: is scored as no call (``Environment.unparsed_is_no_call``): its events hold no call
    #: from that reply, and its score is of them
    unparsed_as_no_call: bool = False


class StepError(Exception):
    """A model message that cannot be read as a step under the harness."""


def protocol_view(harness: Harness) -> Harness:
    """The parts of ``harness`` that reading or writing one assistant message depends on.

    A harness made to read and write replies with: one reply needs only the protocol and the
    skill tool, not the system prompt, tools and skills that rendering the whole harness would
    cost. Pure, so callers keep it on the harness: ``harness.derived(protocol_view)``.
    """
    return Harness(
        id=harness.id,
        version=harness.version,
        protocol=harness.protocol,
        skill_tool=harness.skill_tool,
    )


def read_step(
    message: Mapping[str, Any],
    harness: Harness,
    view: Harness,
    next_call: int,
    finish_reason: str | None = None,
) -> list[Event]:
    """The surface events of one model message, call ids numbered from ``next_call``.

    ``view`` is ``protocol_view(harness)``. Raises ``StepError`` when the message does not
    parse, parses to nothing, or holds text that holds a call the format could not read,
    whether or not calls follow it (every format writes a turn's calls at the end of its
    message, so a call block followed by more text is one the model wrote out of format), or
    when its ``finish_reason`` says it called tools and it holds no call (read as no call, it
    would be a final answer: an abstention, right wherever none was due).
    """
    reply = {k: v for k, v in message.items() if k in ("content", "tool_calls")}
    reply["role"] = "assistant"
    if reply.get("content") is None and not reply.get("tool_calls"):
        # Servers write a reply of no text and no call as ``null`` or as ``""``: both are the
        # same empty answer (no call: right where none was due, as BFCL's irrelevance scores).
        reply["content"] = ""
    if "reasoning_content" in message:
        reply["reasoning_content"] = message["reasoning_content"]
    try:
        step = parse([reply], view)
    except HsaError as exc:
        raise StepError(exc.message) from None
    if not step:
        raise StepError("an empty reply: no text and no tool call")
    text = step[0].text if isinstance(step[0], AssistantMessage) else ""
    called = any(isinstance(e, ToolCall | SkillLoad) for e in step)
    if finish_reason in CALLED and not called:
        raise StepError(
            f"the reply's finish_reason {finish_reason!r} says it called a tool, "
            "but it holds no call"
        )
    if called:
        # a call block in the text (a block, then text, then the calls read at the end)
        # would never run, and nothing would say so; other text beside calls (a reasoning
        # model's thoughts naming a tool) is the model's to write
        if holds_call_markup(text):
            raise StepError(
                "the text before the reply's calls holds tool-call markup that does not "
                "parse as a call (every call goes at the end)"
            )
    else:
        problem = call_attempt(text, harness)
        if problem is not None:
            raise StepError(f"the reply {problem}")
    out: list[Event] = []
    for event in step:
        if isinstance(event, ToolCall):
            event = ToolCall(f"call_{next_call}", event.tool, event.args)
        if isinstance(event, ToolCall | SkillLoad):
            next_call += 1
        out.append(event)
    return out


def opening_events(env: Environment, task: Task) -> list[Event]:
    """The canonical events before the model's first reply to ``task``: the session-start
    hook firings, the first user turn and its prompt-submit firings, as the rollout plays them."""
    return _opening(env, task, SurfaceHooks())


def surface_opening(
    env: Environment, task: Task, variant: Variant
) -> tuple[list[Event], list[Event]]:
    """The canonical events before the model's first reply to ``task`` under ``variant``
    (``opening_events``), and the surface events its first request shows: those under the
    variant's names, with the firings of the hooks the variant adds, as the rollout plays them."""
    added = SurfaceHooks.of(env.harness_for(task), variant)
    events = _opening(env, task, added)
    return events, added.among(map_events(events, variant.mapping))


def _opening(env: Environment, task: Task, added: SurfaceHooks) -> list[Event]:
    canonical = env.harness_for(task)
    state = env.reset(task)
    context = HookContext("session_start", state=state)
    events: list[Event] = list(run_hooks(canonical, "session_start", context).fired)
    added.fire("session_start", context, len(events))
    events.append(UserMessage(env.turns(task)[0]))
    context = HookContext("user_prompt_submit", 0, state=state)
    events.extend(run_hooks(canonical, "user_prompt_submit", context).fired)
    added.fire("user_prompt_submit", context, len(events))
    return events


def _unmatched(call: ToolCall) -> ToolCall:
    """``call``, one the harness refused, as the model wrote it but under a name no tool can
    have (a tool's name is API-legal: ``[a-zA-Z0-9_-]``), so that it counts as a call and
    matches none. Mapped back to canonical names it could match: a model that writes the
    canonical name of a tool its variant renamed names a tool the surface lacks."""
    return ToolCall(call.call_id, f"{call.tool} (refused)", call.args)


def _count_calls(events: Sequence[Event]) -> int:
    return sum(isinstance(e, ToolCall | SkillLoad) for e in events)


class _Run:
    """The mutable state of one rollout while it runs."""

    def __init__(
        self, spec: RolloutSpec, env: Environment, backend: Backend, config: RolloutConfig
    ):
        self.spec = spec
        self.env = env
        self.backend = backend
        self.config = config
        self.canonical = env.harness_for(spec.task)
        self.surface = spec.variant.harness
        self.view = self.surface.derived(protocol_view)
        self.mapping = spec.variant.mapping
        self.inverse = self.mapping.inverse()
        self.sampling = replace(config.sampling, seed=spec.seed)
        self.metadata = {VARIANT_KEY: spec.variant.variant_id, TASK_KEY: spec.task.id}
        self.events: list[Event] = []
        self.surface_calls: list[ToolCall] = []
        self.failures: list[FormatFailure] = []
        #: (step, finish_reason) of the steps whose reply the backend cut off (``CUT_OFF``)
        self.cut: list[tuple[int, str]] = []
        self.requests = 0
        self.cache_hits = 0
        self.usage = Usage()
        self.latency = 0.0
        self.latencies: list[float] = []
        self.steps = 0
        self._checker: ArgumentChecker | None = None
        self.refused: dict[str, ToolCall] = {}  # call id -> the refused call as the model wrote it
        #: the firings of the hooks the variant adds (``play`` finds them)
        self.added = SurfaceHooks()

    async def ask(self, messages: list[dict[str, Any]], tools: list[Any]) -> ChatResponse:
        """Ask the backend for the next message after ``messages``, with ``tools``: the
        surface harness's (``render``), whose JSON, most of a request's, is made once per
        harness and kept on it."""
        encoded = self.surface.derived(tools_json) if tools else "[]"
        request = ChatRequest(
            self.config.model, messages, tools, self.sampling, self.metadata, encoded
        )
        response = await self.backend.chat(request)
        if response.cached:
            self.cache_hits += 1
        else:
            self.requests += 1
        self.usage = self.usage + response.usage
        self.latency += response.latency_s
        self.latencies.append(response.latency_s)
        return response

    async def next_step(self) -> list[Event]:
        """The model's next step in surface form; ``StepError`` if unreadable after repair.

        The step is marked cut (``self.cut``) when the reply it was read from was cut off (the
        token limit, a content filter: ``CUT_OFF``): after a repair, the repaired reply's, not
        the one it replaced.
        """
        conversation = render(self.surface_events(), self.surface)
        response = await self.ask(conversation.messages, conversation.tools)
        self.steps += 1
        cut = _cut_off(response)
        next_call = _count_calls(self.events)
        try:
            step = read_step(
                response.message, self.surface, self.view, next_call, response.finish_reason
            )
        except StepError as exc:
            failure = FormatFailure(self.steps, str(exc), response.message)
            if not self.config.repair:
                self.failures.append(failure)
                self._mark_cut(cut)
                raise
        else:
            self._mark_cut(cut)
            return step
        ask_again = {"role": "user", "content": repair_prompt(failure.problem)}
        messages = [*conversation.messages, unreadable_reply(response.message), ask_again]
        try:
            repaired = await self.ask(messages, conversation.tools)
        except TeacherError:
            self.failures.append(failure)  # the backend failed the repair: keep what it was for
            self._mark_cut(cut)
            raise
        again_cut = _cut_off(repaired)
        try:
            step = read_step(
                repaired.message, self.surface, self.view, next_call, repaired.finish_reason
            )
        except StepError as again:
            self.failures.append(failure)
            again_failure = FormatFailure(self.steps, f"after repair: {again}", repaired.message)
            self.failures.append(again_failure)
            self._mark_cut(cut or again_cut)  # either cut may be why neither reads
            raise StepError(f"{failure.problem}; after one repair turn: {again}") from None
        self.failures.append(replace(failure, repaired=True))
        self._mark_cut(again_cut)
        return step

    def _mark_cut(self, cut: str | None) -> None:
        if cut:
            self.cut.append((self.steps, cut))

    def surface_events(self) -> list[Event]:
        """The events so far as the surface shows them: a refused call as the model wrote it
        (mapping its name back and forth could turn it into another tool's), and the firings
        of the hooks the variant adds among them."""
        events = map_events(self.events, self.mapping, self.canonical)
        if self.refused:
            events = [
                self.refused.get(e.call_id, e) if isinstance(e, ToolCall) else e for e in events
            ]
        return self.added.among(events)

    def scored_events(self) -> list[Event]:
        """The canonical events the environment scores. A refused call never reached it, so
        it is left out, with its error result -- unless the task is scored on the calls as
        made (``Environment.ends_at_calls``): there every call the model made counts, as
        BFCL's checker counts them, and a refused one is kept as ``_unmatched`` (a call too
        many, a call where none was due, never a right one)."""
        if not self.refused:
            return self.events
        kept = self.env.ends_at_calls(self.spec.task)
        out: list[Event] = []
        for event in self.events:
            if not isinstance(event, ToolCall | ToolResult) or event.call_id not in self.refused:
                out.append(event)
            elif kept and isinstance(event, ToolCall):
                out.append(_unmatched(self.refused[event.call_id]))
        return out

    def refusal(self, call: ToolCall, *, values: bool = True) -> ToolResult | None:
        """The error result of a call that does not fit the surface harness (an unknown tool,
        arguments its schema refuses), which a harness runtime would refuse to run; None for a
        call to run. Without it a model that wrote a canonical name the variant renamed would
        reach the environment's canonical tool. Without ``values`` only the names are checked
        (the tool's, the arguments'): a call the environment scores as made, never run, has its
        values judged by the environment's own checker (BFCL's accepts strings in another case
        than a schema's enum, or an int for a float, as its leaderboard does)."""
        if self._checker is None:
            self._checker = checker_of(self.surface)
        problem = self._checker.problem(call.tool, call.args, values=values)
        if problem is None:
            return None
        return ToolResult(call.call_id, dumps({"error": problem}), is_error=True)

    def fire(self, harness_event: str, context: HookContext) -> bool:
        """Run the canonical hooks of ``harness_event``, then, unless one denied, the ones the
        variant adds; whether one denied."""
        result = run_hooks(self.canonical, harness_event, context)
        self.events.extend(result.fired)
        if not result.denied:
            self.added.fire(harness_event, context, len(self.events))
        return result.denied

    def call(self, state: Any, call: ToolCall, surface: ToolCall, turn: int) -> None:
        """Run ``call`` (``surface``: as the model made it) with its hooks (``call_tool``),
        the ones the variant adds after the canonical ones of each event, shown the call as
        the model made it and the result as the model sees it."""
        events = call_tool(self.env, state, self.canonical, call, turn=turn)
        if not self.added:
            self.events.extend(events)
            return
        result, *fired = events
        assert isinstance(result, ToolResult)
        pre = [e for e in fired if isinstance(e, HookFired) and e.event == "pre_tool_use"]
        self.events.append(result)
        self.events.extend(pre)
        last = self.canonical.hook(pre[-1].hook_id) if pre else None
        if last is not None and last.effect == "deny":  # later hooks of the event do not run
            return
        context = HookContext(
            "pre_tool_use", turn, tool=surface.tool, args=surface.args, state=state
        )
        self.added.fire("pre_tool_use", context, len(self.events))
        self.events.extend(fired[len(pre) :])
        output = ToolOutput(result.content, result.is_error)
        context = replace(context, event="post_tool_use", output=output)
        self.added.fire("post_tool_use", context, len(self.events))

    async def play(self) -> tuple[str, str | None, Any]:
        task = self.spec.task
        self.added = SurfaceHooks.of(self.canonical, self.spec.variant)
        state = self.env.reset(task)
        self.fire("session_start", HookContext("session_start", state=state))
        for turn, text in enumerate(self.env.turns(task)):
            self.events.append(UserMessage(text))
            self.fire("user_prompt_submit", HookContext("user_prompt_submit", turn, state=state))
            answered = False
            for _ in range(self.config.max_steps_per_turn):
                try:
                    surface_step = await self.next_step()
                except StepError as exc:
                    return "format", str(exc), state
                except ContextOverflow as exc:
                    if not self.steps:  # the opening alone does not fit: a setting's error,
                        # every task's (a longer context)
                        return "backend", f"{OPENING_TOO_LONG}: {exc}", state
                    # the conversation outgrew the window: the model cannot go on
                    return "context", exc.message, state
                except TeacherError as exc:
                    return "backend", str(exc), state
                self.surface_calls.extend(e for e in surface_step if isinstance(e, ToolCall))
                try:
                    step = map_events(surface_step, self.inverse, self.surface)
                except ArgumentClash as exc:
                    # a surface argument the schema does not declare, where the inverse puts
                    # a parameter: the call reads back as no canonical one
                    return "schema", f"{exc.where}: {exc.message}", state
                # Checked on the surface: a canonical id the variant renamed is unknown there.
                unknown = next(
                    (
                        e.skill_id
                        for e in surface_step
                        if isinstance(e, SkillLoad) and self.surface.skill(e.skill_id) is None
                    ),
                    None,
                )
                if unknown is not None:
                    return "schema", f"loads skill {unknown!r}, which the harness lacks", state
                self.events.extend(step)
                if any(isinstance(e, ToolCall | SkillLoad) for e in step):
                    calls = any(isinstance(e, ToolCall) for e in step)
                    ends = calls and self.env.ends_at_calls(task)
                    surface_calls = {e.call_id: e for e in surface_step if isinstance(e, ToolCall)}
                    for call in (e for e in step if isinstance(e, ToolCall)):
                        refused = self.refusal(surface_calls[call.call_id], values=not ends)
                        if refused is not None:
                            self.refused[call.call_id] = surface_calls[call.call_id]
                            self.events.append(refused)
                            continue
                        if not ends:
                            self.call(state, call, surface_calls[call.call_id], turn)
                    if ends:  # scored as made: no result, no second try
                        return "answered", None, state
                    continue
                final = step[0].text if isinstance(step[0], AssistantMessage) else ""
                if not self.fire("stop", HookContext("stop", turn, final_text=final, state=state)):
                    answered = True
                    break
            if not answered:
                limit = self.config.max_steps_per_turn
                return "step_limit", f"no final answer to turn {turn} in {limit} steps", state
        return "answered", None, state


async def rollout(
    spec: RolloutSpec, env: Environment, backend: Backend, config: RolloutConfig
) -> Rollout:
    """Run ``spec`` to the end and verify it. Never raises for a model's or backend's failure:
    those end the rollout with a reason. Errors of the environment or harness end it too."""
    run = _Run(spec, env, backend, config)
    state = None
    try:
        ended, detail, state = await run.play()
    except HsaError as exc:
        ended, detail = "error", str(exc)
    outcome: Outcome | None = None
    if state is not None:
        try:
            outcome = env.score(spec.task, state, run.scored_events())
        except HsaError as exc:
            if ended == "answered":
                ended, detail = "error", f"scoring failed: {exc}"
    surface_events = run.surface_events()
    try:
        conversation = render(surface_events, run.surface)
    except HsaError as exc:
        conversation = Conversation([], [])
        ended, detail = "error", f"cannot render the trajectory: {exc}"
    verification = verify(
        ended=ended,
        detail=detail,
        surface_events=surface_events,
        surface_calls=run.surface_calls,
        conversation=conversation if conversation.messages else None,
        canonical_events=run.events,
        surface=run.surface,
        canonical=run.canonical,
        outcome=outcome,
        cut=run.cut,
    )
    return Rollout(
        spec=spec,
        events=tuple(run.events),
        conversation=conversation,
        verification=verification,
        ended=ended,
        detail=detail,
        requests=run.requests,
        cache_hits=run.cache_hits,
        usage=run.usage,
        latency_s=run.latency,
        format_failures=tuple(run.failures),
        latencies_s=tuple(run.latencies),
        unparsed_as_no_call=ended == "format" and env.unparsed_is_no_call(spec.task),
    )


def rollout_metadata(result: Rollout) -> dict[str, Any]:
    """What a dataset row records about how its rollout went (no secrets, no timings)."""
    return {
        "ended": result.ended,
        "detail": result.detail,
        "sample": result.spec.sample,
        "seed": result.spec.seed,
        "requests": result.requests + result.cache_hits,
        "usage": result.usage.to_dict(),
        "format_failures": [f.to_dict() for f in result.format_failures],
        "verification": result.verification.to_dict(),
    }


def planned_kept() -> AbstractContextManager[None]:
    """For a block that runs many rollouts: what was built before it (the environment, its
    tasks, the planned variants and episodes) lives as long as the block, so it is frozen
    out of the garbage collector's full passes (``gc.freeze``) until the block ends. Each
    full pass would otherwise walk all of it again while every rollout in flight waits (an
    evaluation of the livestream test split at concurrency 64 spent over a second in six full
    passes on a busy machine; with the planned episodes frozen, 0.04 s in two). Processes
    forked in the block keep what was frozen frozen (the augment job's planning workers).
    Earlier garbage is collected first, and the freeze is the process's: ``hsa.collect``."""
    return frozen()
