"""Environments over imported corpora, whose tools replay recorded outputs instead of running.

``CorpusEnvironment`` holds the harnesses, tasks and recorded tool outputs of an imported
source: ``execute`` checks the arguments against the task's harness and returns the output
recorded for an exactly matching canonical call (tool name and arguments, key order aside),
else a structured error. BFCL and tau2 build on it with their own scoring; here it also gives
``RecordedEnvironment``, built from recorded trajectories (OpenAI chat JSONL, canonical
Parquet) and scored by whether an episode makes the recorded calls; its hooks fire where,
and with the payloads, the trajectory recorded.
"""

from __future__ import annotations

import abc
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from hsa.envs.base import Environment, Outcome, Task, ToolOutput, tasks_of_split
from hsa.envs.episode import Episode, Policy, run_episode, steps_of
from hsa.envs.hook_runtime import Firings, HookContext, update_input
from hsa.errors import EnvError
from hsa.harness.arguments import ArgumentChecker
from hsa.harness.events import (
    AssistantMessage,
    Event,
    HookFired,
    SkillLoad,
    ToolCall,
    ToolResult,
    Trajectory,
    UserMessage,
)
from hsa.harness.model import Harness, Hook


def call_key(tool: str, args: Mapping[str, Any]) -> str:
    """A canonical call as one string: equal for equal calls, whatever the key order."""
    return json.dumps([tool, args], sort_keys=True, ensure_ascii=False, separators=(",", ":"))


#: a lifecycle event as a recording and its replay both name it: (event, turn, what) where
#: ``what`` is the call (``call_key``: the model's arguments at ``pre_tool_use``, the arguments
#: it ran with, after ``update_input`` hooks, at ``post_tool_use``), the answer's text
#: (``stop``), or empty (``session_start``, ``user_prompt_submit``)
EventKey = tuple[str, int, str]


def event_key(context: HookContext) -> EventKey:
    """The key of the event ``context`` describes."""
    if context.tool is not None:
        return (context.event, context.turn, call_key(context.tool, context.args or {}))
    if context.event == "stop":
        return ("stop", context.turn, context.final_text or "")
    return (context.event, context.turn, "")


@dataclass(slots=True)
class CorpusState:
    """An episode over a corpus: its task, its harness, how often each call was replayed, what
    its recording shows each hook doing at each event (by event, in order; ``Firings``), and
    how often each event has come."""

    task: Task
    harness: Harness
    replayed: dict[str, int] = field(default_factory=dict)
    firings: Mapping[EventKey, Sequence[Firings]] = field(default_factory=dict)
    seen: dict[EventKey, int] = field(default_factory=dict)

    def recorded_firings(self, context: HookContext) -> Firings | None:
        """What the recording shows at this event (``RecordsFirings``): the n-th occurrence of
        an event gets the recording's n-th; None where the recording holds no such occurrence
        (the hooks then do what they do without a recording)."""
        if not self.firings:
            return None
        key = event_key(context)
        recorded = self.firings.get(key)
        if recorded is None:
            return None
        n = self.seen.get(key, 0)
        self.seen[key] = n + 1
        return recorded[n] if n < len(recorded) else None


def firings_of(
    events: Sequence[Event], hooks: Mapping[str, Hook]
) -> tuple[dict[EventKey, list[Firings]], dict[str, dict[str, Any]]]:
    """What ``events`` show the hooks doing at each event they hold, and the arguments each
    call ran with (by call id: after the ``update_input`` hooks that fired on it; none for a
    call a hook denied, which never ran). ``hooks``: the harness's, by id, for their effects.

    Firings follow what they are about (``hsa.envs.episode``'s recorded order); a
    ``pre_tool_use`` firing written before its call instead is the next call's.
    """
    shown: list[tuple[EventKey, dict[str, Mapping[str, str]]]] = []
    ran: dict[str, dict[str, Any]] = {}
    calls = {e.call_id: e for e in events if isinstance(e, ToolCall)}
    early: list[HookFired] = []  # pre_tool_use firings before their call
    ahead: dict[str, list[HookFired]] = {}
    turn, i = -1, 0

    def follows(kinds: tuple[str, ...]) -> list[HookFired]:
        nonlocal i
        out = []
        while i < len(events):
            event = events[i]
            if not isinstance(event, HookFired) or event.event not in kinds:
                break
            out.append(event)
            i += 1
        return out

    def show(key: EventKey, fired: Iterable[HookFired]) -> None:
        shown.append((key, {f.hook_id: f.payload for f in fired}))

    show(("session_start", 0, ""), follows(("session_start",)))
    while i < len(events):
        event = events[i]
        i += 1
        if isinstance(event, UserMessage):
            turn += 1
            show(("user_prompt_submit", turn, ""), follows(("user_prompt_submit",)))
        elif isinstance(event, AssistantMessage):
            if i == len(events) or not isinstance(events[i], ToolCall | SkillLoad):
                show(("stop", turn, event.text), follows(("stop",)))
        elif isinstance(event, ToolCall):
            ahead[event.call_id], early = early, []
        elif isinstance(event, ToolResult) and event.call_id in calls:
            call = calls[event.call_id]
            fired = ahead.pop(call.call_id, []) + follows(("pre_tool_use", "post_tool_use"))
            pre = [f for f in fired if f.event == "pre_tool_use"]
            show(("pre_tool_use", turn, call_key(call.tool, call.args)), pre)
            effects = [hooks[f.hook_id] for f in pre if f.hook_id in hooks]
            if any(h.effect == "deny" for h in effects):
                continue
            args = dict(call.args)
            for hook in effects:
                if hook.effect == "update_input":
                    args = update_input(hook, args)
            ran[call.call_id] = args
            post = [f for f in fired if f.event == "post_tool_use"]
            show(("post_tool_use", turn, call_key(call.tool, args)), post)
        elif isinstance(event, HookFired) and event.event == "pre_tool_use":
            early.append(event)
    seen_firing = sorted({h for _, payloads in shown for h in payloads})
    firings: dict[EventKey, list[Firings]] = {}
    for key, payloads in shown:
        firings.setdefault(key, []).append({h: payloads.get(h) for h in seen_firing})
    return firings, ran


def _error(message: str) -> ToolOutput:
    return ToolOutput(json.dumps({"error": message}, ensure_ascii=False), is_error=True)


class CorpusEnvironment(Environment):
    """Harnesses, tasks and recorded outputs of an imported corpus; scoring is left to
    subclasses.

    ``outputs`` maps a task id, or a harness id for outputs any task under that harness may
    replay, to ``{call_key: [outputs, in recorded order]}``. A task's own recordings win; the
    n-th identical call in an episode gets the n-th recorded output (the last one repeats).
    A recorded call replays even where the harness's schema would refuse it: the recording
    is what happened.
    """

    def __init__(
        self,
        name: str,
        harnesses: Iterable[Harness],
        tasks: Iterable[Task],
        outputs: Mapping[str, Mapping[str, Sequence[ToolOutput]]] | None = None,
    ):
        self.name = name
        self._harnesses = {h.id: h for h in harnesses}
        self._tasks = list(tasks)
        self._by_id = {t.id: t for t in self._tasks}
        self._outputs = {o: {k: list(v) for k, v in t.items()} for o, t in (outputs or {}).items()}
        self._checkers: dict[str, ArgumentChecker] = {}

    @property
    def runs_tools(self) -> bool:
        return bool(self._outputs)

    def harness(self) -> Harness:
        if len(self._harnesses) == 1:
            return next(iter(self._harnesses.values()))
        raise EnvError(
            f"{self.name} has {len(self._harnesses)} harnesses, one per task "
            "(harness_for(task) gives a task's)"
        )

    def harnesses(self) -> list[Harness]:
        return list(self._harnesses.values())

    def harness_for(self, task: Task) -> Harness:
        harness = self._harnesses.get(task.harness_id or "")
        if harness is None:
            raise EnvError(
                f"task {task.id}: harness {task.harness_id!r} is not in this {self.name} corpus"
            )
        return harness

    def tasks(self, split: str | None = None) -> list[Task]:
        return tasks_of_split(self._tasks, split)

    def task(self, task_id: str) -> Task:
        try:
            return self._by_id[task_id]
        except KeyError:
            raise EnvError(f"no task {task_id!r} in this {self.name} corpus") from None

    def reset(self, task: Task) -> CorpusState:
        return CorpusState(task, self.harness_for(task))

    def _recorded(self, task: Task, harness: Harness, key: str) -> Any:
        """The outputs recorded for the call ``key`` in ``task`` (or in any task of
        ``harness``); empty when none were."""
        return self._outputs.get(task.id, {}).get(key) or self._outputs.get(harness.id, {}).get(key)

    def refusal(
        self, task: Task, harness: Harness, tool: str, args: Mapping[str, Any]
    ) -> str | None:
        """Why ``execute`` refuses the call: no output was recorded for it and its arguments
        are ones ``harness``'s schema refuses (or its tool is unknown); None when it runs."""
        if self._recorded(task, harness, call_key(tool, args)):
            return None
        checker = self._checkers.get(harness.id)
        if checker is None:
            checker = self._checkers[harness.id] = ArgumentChecker(harness.tools)
        return checker.problem(tool, args)

    def execute(self, state: CorpusState, tool: str, args: Mapping[str, Any]) -> ToolOutput:
        harness = state.harness
        key = call_key(tool, args)
        recorded = self._recorded(state.task, harness, key)
        if not recorded:
            problem = self.refusal(state.task, harness, tool, args)
            if problem is not None:
                return _error(problem)
            return _error(
                f"no recorded output for this call to {tool}: the {self.name} corpus has no "
                "implementation of its tools, only recorded results of the calls it contains"
            )
        n = state.replayed.get(key, 0)
        state.replayed[key] = n + 1
        return recorded[min(n, len(recorded) - 1)]

    @abc.abstractmethod
    def reference_steps(self, task: Task) -> list[list[Event]]:
        """The assistant steps of the corpus's reference solution of ``task``."""

    def opening(self, task: Task) -> str:
        """A first user message for tasks the corpus gives without one (simulated users)."""
        return "(the user starts the conversation)"

    def turns(self, task: Task) -> tuple[str, ...]:
        """The task's turns, or its ``opening`` when the corpus gives none (its user is
        simulated, and hsa plays the opening message alone)."""
        return task.turns or (self.opening(task),)

    def oracle(self) -> Policy:
        """The corpus's reference solution as a policy: its next recorded step, then nothing
        (a final answer)."""

        def scripted(task: Task, so_far: Sequence[Event]) -> list[Event]:
            steps = self.reference_steps(task)
            done = len(steps_of(so_far))
            return steps[done] if done < len(steps) else []

        return scripted

    def solve(self, task: Task) -> Episode:
        """Play the reference solution of ``task``: its calls, with replayed or error results."""
        played = replace(task, turns=self.turns(task))
        limit = max(len(self.reference_steps(task)) + 1, 2)
        return run_episode(
            self, played, self.oracle(), source="reference", max_steps_per_turn=limit
        )


def tool_calls(events: Sequence[Event]) -> list[ToolCall]:
    return [e for e in events if isinstance(e, ToolCall)]


class RecordedEnvironment(CorpusEnvironment):
    """Recorded trajectories as an environment: a task is solved when an episode makes the
    recorded calls, in order, with the same canonical arguments. A recorded call's output is
    keyed by the arguments it ran with (after the hooks that updated them).

    A hook the task's recording shows firing does, at an event the recording holds (the same
    call or answer at the same turn, the n-th time for its n-th occurrence), what the
    recording shows: it fires with the recorded payload, or not at all (a harness may leave
    payloads to a function the recording does not carry, or one that needs the original
    environment's state), so a replay is the recording's. At other events, and for hooks the
    recording never shows firing, a hook does what it does without a recording."""

    def __init__(
        self,
        harnesses: Iterable[Harness],
        tasks: Iterable[Task],
        trajectories: Iterable[Trajectory],
        *,
        name: str = "recorded",
        left_out: Iterable[str] = (),
    ):
        """``left_out``: what of the corpus its import left out, and why."""
        tasks = list(tasks)
        harnesses = list(harnesses)
        hooks = {h.id: {hook.id: hook for hook in h.hooks} for h in harnesses}
        references = {t.id: t for t in trajectories}
        outputs: dict[str, dict[str, list[ToolOutput]]] = {}
        firings: dict[str, dict[EventKey, list[Firings]]] = {}
        for task in tasks:
            trajectory = references.get(str(task.ground_truth.get("trajectory")))
            if trajectory is None:
                continue
            shown, ran = firings_of(trajectory.events, hooks.get(task.harness_id or "", {}))
            firings[task.id] = shown
            by_call = {e.call_id: e for e in trajectory.events if isinstance(e, ToolResult)}
            for table in (
                outputs.setdefault(task.id, {}),
                outputs.setdefault(trajectory.harness_id or "", {}),
            ):
                for call in tool_calls(trajectory.events):
                    result = by_call.get(call.call_id)
                    # keyed by the arguments it ran with: a call a hook denied never ran
                    args = ran.get(call.call_id)
                    if result is not None and args is not None:
                        table.setdefault(call_key(call.tool, args), []).append(
                            ToolOutput(result.content, result.is_error)
                        )
        super().__init__(name, harnesses, tasks, outputs)
        self._references = references
        self._firings = firings
        self._left_out = tuple(left_out)

    def left_out(self) -> tuple[str, ...]:
        return self._left_out

    def reset(self, task: Task) -> CorpusState:
        return CorpusState(task, self.harness_for(task), firings=self._firings.get(task.id, {}))

    @classmethod
    def from_jsonl(cls, path: str | Path, harness: Harness | None = None) -> RecordedEnvironment:
        """The environment of an OpenAI chat JSONL corpus (one trajectory per line)."""
        from hsa.harness.importers import import_source

        result = import_source(path, format="openai-jsonl", harness=harness)
        tasks = [Task.from_dict(row) for row in result.tasks]
        left = [note for note in result.notes if "left out" in note]
        return cls(result.harnesses, tasks, result.trajectories, left_out=left)

    def reference(self, task: Task) -> Trajectory:
        ref = self._references.get(str(task.ground_truth.get("trajectory")))
        if ref is None:
            raise EnvError(f"task {task.id}: its reference trajectory is not in this corpus")
        return ref

    def reference_steps(self, task: Task) -> list[list[Event]]:
        return steps_of(self.reference(task).events)

    def score(self, task: Task, state: CorpusState, events: Sequence[Event]) -> Outcome:
        expected = [(c.tool, dict(c.args)) for c in tool_calls(self.reference(task).events)]
        made = [(c.tool, dict(c.args)) for c in tool_calls(events)]
        reasons = []
        for i, (want, got) in enumerate(zip(expected, made, strict=False)):
            if call_key(*want) != call_key(*got):
                reasons.append(
                    f"call {i + 1}: expected {want[0]} {json.dumps(want[1], ensure_ascii=False)}, "
                    f"got {got[0]} {json.dumps(got[1], ensure_ascii=False)}"
                )
        if len(made) < len(expected):
            missing = ", ".join(t for t, _ in expected[len(made) :])
            reasons.append(f"{len(expected) - len(made)} recorded call(s) never made: {missing}")
        elif len(made) > len(expected):
            extra = ", ".join(t for t, _ in made[len(expected) :])
            reasons.append(f"{len(made) - len(expected)} call(s) beyond the recording: {extra}")
        return Outcome(success=not reasons, reasons=tuple(reasons))


def solve(env: CorpusEnvironment, task: Task) -> Episode:
    """The reference episode of ``task`` (``env.solve``), as ``hsa.envs.<name>.solve``."""
    return env.solve(task)
