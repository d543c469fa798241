"""Recorded trajectories as an environment: exact calls replay, others are errors."""

from __future__ import annotations

from pathlib import Path

import pytest

from hsa.envs.recorded import RecordedEnvironment, call_key
from hsa.harness.events import ToolCall

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "chat" / "support.jsonl"


@pytest.fixture(scope="module")
def env():
    return RecordedEnvironment.from_jsonl(EXAMPLE)


def test_replaying_each_reference_reproduces_it(env):
    assert len(env.tasks()) >= 10
    for task in env.tasks():
        episode = env.solve(task)
        assert list(episode.events) == list(env.reference(task).events), task.id
        assert env.score(task, episode.state, episode.events).success


def test_only_exact_calls_replay(env):
    task = next(
        t for t in env.tasks() if any(isinstance(e, ToolCall) for e in env.reference(t).events)
    )
    call = next(e for e in env.reference(task).events if isinstance(e, ToolCall))
    state = env.reset(task)
    assert not env.execute(state, call.tool, dict(reversed(list(call.args.items())))).is_error
    changed = {k: f"{v}x" if isinstance(v, str) else v for k, v in call.args.items()}
    if changed != dict(call.args):
        out = env.execute(env.reset(task), call.tool, changed)
        assert out.is_error and "error" in out.content
    assert call_key("t", {"a": 1, "b": 2}) == call_key("t", {"b": 2, "a": 1})


def test_a_different_call_fails_scoring(env):
    task = next(
        t for t in env.tasks() if any(isinstance(e, ToolCall) for e in env.reference(t).events)
    )
    events = [
        ToolCall(e.call_id, e.tool + "_other", e.args) if isinstance(e, ToolCall) else e
        for e in env.reference(task).events
    ]
    outcome = env.score(task, env.reset(task), events)
    assert not outcome.success and outcome.reasons[0].startswith("call 1: expected")
    assert "never made" in env.score(task, env.reset(task), []).reasons[0]


def test_hooks_fire_with_the_payloads_the_recording_shows():
    # the demo harness's hooks name placeholders no payload of theirs fills: the replay gives
    # them what the trajectory recorded
    from hsa.augment.synthetic import sample_trajectory
    from hsa.envs.base import Task
    from hsa.envs.episode import replay
    from hsa.harness import HookFired, load_harness

    harness = load_harness(EXAMPLE.parents[1] / "rule-package" / "demo-harness")
    trajectory = sample_trajectory(harness)
    task = Task("t", "recorded", ("hi",), {"trajectory": trajectory.id}, harness_id=harness.id)
    env = RecordedEnvironment([harness], [task], [trajectory])
    fired = [(e.hook_id, dict(e.payload)) for e in trajectory.events if isinstance(e, HookFired)]
    episode = replay(env, task, trajectory.events)
    again = [(e.hook_id, dict(e.payload)) for e in episode.events if isinstance(e, HookFired)]
    assert again == fired


def test_a_hook_fires_only_where_the_recording_shows_it():
    # a livestream episode: pinning a sold-out product is denied, the in-stock one is pinned;
    # replayed from its recording the deny fires at the first pin only (it denied both)
    from hsa.envs.base import Task
    from hsa.envs.episode import replay, run_episode, steps_of
    from hsa.envs.livestream import LivestreamEnvironment
    from hsa.harness import HookFired

    live = LivestreamEnvironment()
    task = next(
        t
        for t in live.tasks()
        if t.metadata["template"] == "pin_or_alternative" and t.ground_truth["forbidden_calls"]
    )
    sold_out = task.ground_truth["forbidden_calls"][0]["args"]["product_id"]
    steps = steps_of(live.solve(task).events)
    pin_at = next(
        i for i, s in enumerate(steps) if any(getattr(e, "tool", "") == "pin_product" for e in s)
    )
    steps.insert(pin_at, [ToolCall("call_x", "pin_product", {"product_id": sold_out})])
    recording = run_episode(
        live,
        task,
        lambda _t, so_far: (
            steps[len(steps_of(so_far))] if len(steps_of(so_far)) < len(steps) else []
        ),
    ).trajectory
    denials = [
        e for e in recording.events if isinstance(e, HookFired) and e.hook_id == "no-sold-out-pin"
    ]
    assert len(denials) == 1
    harness = live.harness_for(task)
    recorded = Task(
        task.id, "recorded", task.turns, {"trajectory": recording.id}, harness_id=harness.id
    )
    env = RecordedEnvironment([harness], [recorded], [recording])
    episode = replay(env, recorded, recording.events)
    # hook firings and results alike, the search_products result under its updated limit too
    assert list(episode.events) == list(recording.events)
    assert env.score(recorded, episode.state, episode.events).success


def test_a_hook_does_what_it_does_without_a_recording_at_events_the_recording_lacks():
    from hsa.envs.base import Task
    from hsa.envs.episode import replay
    from hsa.harness import AssistantMessage, HookFired, ToolResult, Trajectory, UserMessage
    from hsa.harness.model import Harness, Hook, Tool

    hook = Hook(
        "note",
        "pre_tool_use",
        "add_context",
        "Noted: {{ x }}.",
        params={"payload": {"x": "static"}},
    )
    harness = Harness(id="h", tools=(Tool("t", "A tool.", {"type": "object"}),), hooks=(hook,))

    def call(n, a):
        return [
            AssistantMessage(f"call {n}"),
            ToolCall(f"call_{n}", "t", {"a": a}),
            ToolResult(f"call_{n}", f"result {a}"),
        ]

    # recorded: the hook fired at a=1 with its recorded payload, not at a=2
    events = (
        UserMessage("hi"),
        *call(0, 1),
        HookFired("note", "pre_tool_use", {"x": "recorded"}),
        *call(1, 2),
        AssistantMessage("done"),
    )
    trajectory = Trajectory("r", events, task_id="t", harness_id="h")
    task = Task("t", "recorded", ("hi",), {"trajectory": "r"}, harness_id="h")
    env = RecordedEnvironment([harness], [task], [trajectory])
    assert list(replay(env, task, events).events) == list(events)
    # a call the recording lacks (a=3), and a=1 a second time: the hook's own payload
    played = replay(env, task, (UserMessage("hi"), *call(0, 3), *call(1, 1), *call(2, 1)))
    fired = [(e.payload["x"]) for e in played.events if isinstance(e, HookFired)]
    assert fired == ["static", "recorded", "static"]
