"""The scripted oracle: solves every task, from events alone, in trajectories that round-trip."""

from __future__ import annotations

import json
import random

import pytest

from hsa.envs.episode import replay
from hsa.envs.livestream.oracle import next_actions
from hsa.harness import Protocol, parse, render
from hsa.harness.events import AssistantMessage, SkillLoad, ToolCall, ToolResult, UserMessage


def test_oracle_solves_every_task(env, episodes):
    failed = {}
    for task in env.tasks():
        episode = episodes[task.id]
        outcome = env.score(task, episode.state, episode.events)
        if not outcome.success:
            failed[task.id] = outcome.reasons
    assert failed == {}
    assert len(episodes) >= 2000


def test_every_hook_kind_fires_in_oracle_trajectories(episodes):
    fired = {e.hook_id for ep in episodes.values() for e in ep.events if e.kind == "hook"}
    assert {"stream-clock", "promotion-reminder", "search-page-size", "redact-internal"} <= fired


def test_internal_fields_never_reach_the_model(episodes):
    for episode in episodes.values():
        for event in episode.events:
            if isinstance(event, ToolResult):
                assert "internal_cost" not in event.content
                assert "supplier_code" not in event.content


@pytest.mark.parametrize(
    "protocol",
    [Protocol(), Protocol(name="text", call_format="hermes")],
    ids=lambda p: p.label,
)
def test_render_parse_round_trip(env, episodes, protocol):
    harness = env.harness().replace(protocol=protocol)
    sample = random.Random(0).sample(sorted(episodes), 300)
    for task_id in sample:
        events = list(episodes[task_id].events)
        assert parse(render(events, harness), harness) == events, task_id


def test_trajectories_are_deterministic(env, episodes):
    task = env.tasks()[123]
    again = env.solve(task).trajectory
    first = episodes[task.id].trajectory
    assert json.dumps(again.to_row()) == json.dumps(first.to_row())


def test_replay_reproduces_oracle_events(env, episodes):
    for task in env.tasks()[::97]:
        events = episodes[task.id].events
        assert replay(env, task, events).events == events


def test_policy_reads_values_from_tool_results(env, by_template):
    task = by_template["price"]
    events = list(env.solve(task).events)
    # Forge the search result: the oracle must state what the tool said, not the catalogue.
    i = next(i for i, e in enumerate(events) if isinstance(e, ToolResult))
    data = json.loads(events[i].content)
    data["results"][0]["price"] = 1234.5
    events[i] = ToolResult(events[i].call_id, json.dumps(data))
    cut = next(i for i, e in enumerate(events) if isinstance(e, AssistantMessage))
    step = next_actions(task, events[:cut])
    assert len(step) == 1 and "$1234.50" in step[0].text


def test_policy_steps(env, by_template):
    task = by_template["after_sales"]
    opening = [UserMessage(task.turns[0])]
    first = next_actions(task, opening)
    assert first == [SkillLoad("after-sales")]
    second = next_actions(task, [*opening, *first])
    assert len(second) == 1 and isinstance(second[0], ToolCall)
    assert second[0].call_id == "call_1" and second[0].tool == "get_order_status"
    assert next_actions(task, []) == []


def test_pin_request_loads_promotion_push_first(env, by_template):
    task = by_template["pin_or_alternative"]
    assert next_actions(task, [UserMessage(task.turns[0])]) == [SkillLoad("promotion-push")]


@pytest.mark.parametrize("call_format", ["json", "python", "xml_verbose", "xml_concise"])
@pytest.mark.parametrize("tag", [True, False])
def test_round_trip_under_other_call_formats(env, episodes, call_format, tag):
    protocol = Protocol(name="text", call_format=call_format, call_tag=tag, doc_format="python")
    harness = env.harness().replace(protocol=protocol)
    for task_id in random.Random(1).sample(sorted(episodes), 40):
        events = list(episodes[task_id].events)
        assert parse(render(events, harness), harness) == events, task_id


def test_pin_requests_follow_the_promotion_push_skill(env, episodes):
    # the skill's steps: the deal of what is pinned (get_promotions), a caption, the name and
    # price announced; stock is in the search results, so checking it is not required
    pins = [t for t in env.tasks() if t.metadata["template"] == "pin_or_alternative"]
    assert {t.ground_truth["facts"][0] != t.metadata["plan"][0]["product"] for t in pins} == {
        True,
        False,
    }  # in stock and sold out
    for task in pins:
        truth = task.ground_truth
        assert "check_stock_and_shipping" not in {c["tool"] for c in truth["required_calls"]}
        events = episodes[task.id].events
        calls = [e for e in events if isinstance(e, ToolCall)]
        promos = [c.args["product_id"] for c in calls if c.tool == "get_promotions"]
        (pin,) = [c for c in calls if c.tool == "pin_product"]
        assert promos == [pin.args["product_id"]] and pin.args["caption"], task.id
        answer = [e for e in events if isinstance(e, AssistantMessage)][-1].text
        assert all(str(fact) in answer for fact in truth["facts"]), task.id
