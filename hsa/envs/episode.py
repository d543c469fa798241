"""Running an episode: a policy proposes steps; hooks fire; tools execute; events are recorded.

A *policy* is ``policy(task, events) -> list[Event]``: given the canonical events so far it
returns the next assistant step, either optional ``AssistantMessage`` text followed by one or
more ``ToolCall``/``SkillLoad`` events, or a lone ``AssistantMessage`` (the final answer of the
current user turn). An empty step ends the episode early.

Recorded order, which ``render``/``parse`` round-trip under every protocol::

    HookFired(session_start)*
    per user turn:  UserMessage, HookFired(user_prompt_submit)*,
                    per step:  [AssistantMessage] ToolCall|SkillLoad ...,
                               per call: ToolResult, HookFired(pre_tool_use)*,
                                         HookFired(post_tool_use)*
                    final:     AssistantMessage, HookFired(stop)*

A hook firing about a call follows the call's result so that a ``tool_result`` injection
attaches to that result. A firing with a message of its own (``inject`` system or user) among
the results of parallel calls is shown after the last of them (``render.shown_order``), so
``parse`` reads it back there. A stop hook that denies the answer makes the policy answer again.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from hsa.envs.base import Environment, Task, ToolOutput
from hsa.envs.hook_runtime import HookContext, run_hooks
from hsa.errors import EnvError
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
from hsa.harness.model import Harness

Policy = Callable[[Task, Sequence[Event]], Sequence[Event]]
MAX_STEPS_PER_TURN = 16


@dataclass(frozen=True, slots=True)
class Episode:
    """A finished episode: its trajectory and the environment state it left."""

    trajectory: Trajectory
    state: Any

    @property
    def events(self) -> tuple[Event, ...]:
        return self.trajectory.events


def next_call_id(events: Sequence[Event]) -> str:
    """The id the next call gets: ``call_<n>``, counting earlier calls and skill loads."""
    return f"call_{sum(isinstance(e, ToolCall | SkillLoad) for e in events)}"


def call_tool(
    env: Environment, state: Any, harness: Harness, call: ToolCall, *, turn: int
) -> list[Event]:
    """Run one call with its hooks: its result, then the pre- and post-tool-use firings."""
    pre = run_hooks(
        harness,
        "pre_tool_use",
        HookContext("pre_tool_use", turn=turn, tool=call.tool, args=call.args, state=state),
    )
    fired = list(pre.fired)
    if pre.denied:
        output = pre.output or ToolOutput(f"denied by hook {pre.denied_by}", is_error=True)
    else:
        args = call.args if pre.args is None else pre.args
        output = env.execute(state, call.tool, args)
        post = run_hooks(
            harness,
            "post_tool_use",
            HookContext(
                "post_tool_use", turn=turn, tool=call.tool, args=args, output=output, state=state
            ),
        )
        output = post.output or output
        fired.extend(post.fired)
    return [ToolResult(call.call_id, output.content, output.is_error), *fired]


def _check_step(step: Sequence[Event], where: str) -> None:
    for i, event in enumerate(step):
        if isinstance(event, AssistantMessage):
            if i != 0:
                raise EnvError("assistant text may only open a step", where=f"{where}[{i}]")
        elif not isinstance(event, ToolCall | SkillLoad):
            raise EnvError(
                f"a policy step holds assistant text and calls, not {event.kind} events",
                where=f"{where}[{i}]",
            )


def run_episode(
    env: Environment,
    task: Task,
    policy: Policy,
    *,
    harness: Harness | None = None,
    trajectory_id: str | None = None,
    source: str = "policy",
    max_steps_per_turn: int = MAX_STEPS_PER_TURN,
) -> Episode:
    """Play ``task`` in ``env`` with ``policy``, recording every event (hook firings included)."""
    harness = harness or env.harness_for(task)
    state = env.reset(task)
    events: list[Event] = list(
        run_hooks(harness, "session_start", HookContext("session_start", state=state)).fired
    )
    ended = None
    over = False  # the task ended at the model's calls (``Environment.ends_at_calls``)
    for turn, text in enumerate(task.turns):
        if over:
            break
        events.append(UserMessage(text))
        submitted = run_hooks(
            harness, "user_prompt_submit", HookContext("user_prompt_submit", turn, state=state)
        )
        events.extend(submitted.fired)
        answered = False
        for step_index in range(max_steps_per_turn):
            step = list(policy(task, tuple(events)))
            if not step:
                ended = "policy_stopped"
                break
            _check_step(step, f"task {task.id}: turn {turn}: step {step_index}")
            events.extend(step)
            calls = [e for e in step if isinstance(e, ToolCall)]
            # _check_step: a one-event step that is not a call is the turn's final answer
            if len(step) > 1 or not isinstance(step[0], AssistantMessage):
                if calls and env.ends_at_calls(task):
                    answered = over = True
                    break
                for call in calls:
                    events.extend(call_tool(env, state, harness, call, turn=turn))
                continue
            stop = run_hooks(
                harness,
                "stop",
                HookContext("stop", turn, final_text=step[0].text, state=state),
            )
            events.extend(stop.fired)
            if not stop.denied:
                answered = True
                break
        if not answered:
            ended = ended or "step_limit"
            break
    metadata = {"ended": ended} if ended else {}
    trajectory = Trajectory(
        id=trajectory_id or f"{task.id}/{source}",
        events=tuple(events),
        task_id=task.id,
        harness_id=harness.id,
        source=source,
        metadata=metadata,
    )
    return Episode(trajectory, state)


def steps_of(events: Sequence[Event]) -> list[list[Event]]:
    """The assistant steps in ``events``: text and calls that one model turn emitted."""
    steps: list[list[Event]] = []
    previous_was_model = False
    for event in events:
        if isinstance(event, AssistantMessage):
            steps.append([event])
            previous_was_model = True
        elif isinstance(event, ToolCall | SkillLoad):
            if previous_was_model:
                steps[-1].append(event)
            else:
                steps.append([event])
            previous_was_model = True
        else:
            previous_was_model = False
    return steps


def replay(
    env: Environment,
    task: Task,
    events: Sequence[Event],
    *,
    harness: Harness | None = None,
) -> Episode:
    """Re-run the assistant steps recorded in ``events``: tool results and hook firings are
    recomputed by the environment, so the result shows what those steps really do."""
    recorded = steps_of(events)

    def scripted(_task: Task, so_far: Sequence[Event]) -> list[Event]:
        done = len(steps_of(so_far))
        return recorded[done] if done < len(recorded) else []

    return run_episode(env, task, scripted, harness=harness, source="replay")


def final_answers(events: Sequence[Event]) -> list[tuple[int, AssistantMessage, list[HookFired]]]:
    """Per user turn, the answer that closed it (text with no call after it) and the stop-hook
    firings that followed it: ``(turn, answer, stop_firings)``."""
    out: list[tuple[int, AssistantMessage, list[HookFired]]] = []
    turn = -1
    last: AssistantMessage | None = None
    stops: list[HookFired] = []

    def close() -> None:
        if last is not None:
            out.append((turn, last, list(stops)))

    for event in events:
        if isinstance(event, UserMessage):
            close()
            turn, last, stops = turn + 1, None, []
        elif isinstance(event, AssistantMessage):
            last, stops = event, []
        elif isinstance(event, ToolCall | SkillLoad):
            last, stops = None, []
        elif isinstance(event, HookFired) and event.event == "stop" and last is not None:
            stops.append(event)
    close()
    return out
