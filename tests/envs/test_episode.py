"""The episode loop: event order, hooks around calls, step limits, replay."""

from __future__ import annotations

import pytest

from hsa.envs.episode import call_tool, final_answers, next_call_id, run_episode, steps_of
from hsa.envs.livestream import LivestreamEnvironment
from hsa.errors import EnvError
from hsa.harness.events import (
    AssistantMessage,
    HookFired,
    SkillLoad,
    ToolCall,
    ToolResult,
    UserMessage,
)


@pytest.fixture(scope="module")
def env():
    return LivestreamEnvironment(n_tasks=16)


def test_call_tool_orders_result_then_hook_firings(env):
    task = env.tasks()[0]
    state = env.reset(task)
    events = call_tool(
        env, state, env.harness(), ToolCall("c", "search_products", {"query": "Serum"}), turn=0
    )
    assert isinstance(events[0], ToolResult) and events[0].call_id == "c"
    assert events[1:] == [HookFired("search-page-size", "pre_tool_use", {"limit": "5"})]
    details = call_tool(
        env,
        state,
        env.harness(),
        ToolCall("d", "get_product_details", {"product_id": "P0001"}),
        turn=0,
    )
    assert [e.hook_id for e in details[1:]] == ["redact-internal"]


def test_episode_order_and_call_ids(env):
    task = next(t for t in env.tasks() if t.metadata["template"] == "compliance_trap")
    events = env.solve(task).events
    assert isinstance(events[0], HookFired) and events[0].event == "session_start"
    assert events[1] == UserMessage(task.turns[0])
    assert isinstance(events[2], SkillLoad)
    calls = [e for e in events if isinstance(e, ToolCall)]
    assert [c.call_id for c in calls] == [f"call_{i + 1}" for i in range(len(calls))]
    assert isinstance(events[-1], AssistantMessage)
    assert next_call_id(events) == f"call_{len(calls) + 1}"


def test_policy_steps_are_checked(env):
    task = env.tasks()[0]

    def bad(_task, _events):
        return [ToolCall("c", "search_products", {"query": "x"}), AssistantMessage("late text")]

    with pytest.raises(EnvError, match="assistant text may only open a step"):
        run_episode(env, task, bad)


def test_step_limit_ends_the_episode(env):
    task = env.tasks()[0]

    def forever(_task, events):
        return [ToolCall(next_call_id(events), "search_faq", {"question": "coupon"})]

    episode = run_episode(env, task, forever, max_steps_per_turn=3)
    assert episode.trajectory.metadata == {"ended": "step_limit"}
    assert sum(isinstance(e, ToolCall) for e in episode.events) == 3
    assert not env.score(task, episode.state, episode.events).success


def test_steps_and_final_answers():
    events = [
        UserMessage("a"),
        AssistantMessage("looking"),
        ToolCall("call_0", "t", {}),
        ToolCall("call_1", "t", {}),
        ToolResult("call_0", "{}"),
        ToolResult("call_1", "{}"),
        AssistantMessage("first answer"),
        HookFired("guard", "stop", {}),
        AssistantMessage("second answer"),
        UserMessage("b"),
        SkillLoad("s"),
        AssistantMessage("third"),
    ]
    assert [len(s) for s in steps_of(events)] == [3, 1, 1, 1, 1]
    answers = final_answers(events)
    assert [(turn, a.text, stops) for turn, a, stops in answers] == [
        (0, "second answer", []),
        (1, "third", []),
    ]
