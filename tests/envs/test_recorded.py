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
    # them what the trajectory recorded, the n-th firing the n-th payload, the last repeating
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
    state = env.reset(task)
    audit = [p for h, p in fired if h == "audit"]
    assert [state.recorded_payload("audit") for _ in range(len(audit) + 1)] == [
        *audit,
        audit[-1],
    ]
    assert state.recorded_payload("no-such-hook") is None
