"""The oracle as a model: reads the request like an endpoint, answers on the surface."""

from __future__ import annotations

import asyncio
import collections
import json

import pytest

from hsa.augment.mapping import map_events
from hsa.envs.livestream import next_actions, solve
from hsa.errors import TeacherError
from hsa.harness.events import AssistantMessage
from hsa.harness.render import render
from hsa.teachers.oracle import OracleBackend, OracleResponder, _tokens
from hsa.teachers.request import ChatRequest
from hsa.teachers.rollout import TASK_KEY, VARIANT_KEY, repair_prompt, surface_opening
from tests.teachers.conftest import make_variant


def body_for(events, variant, **metadata):
    conversation = render(map_events(events, variant.mapping), variant.harness)
    return {
        "model": "hsa-oracle",
        "messages": conversation.messages,
        "tools": conversation.tools,
        "metadata": {VARIANT_KEY: variant.variant_id, **metadata},
    }


def opening(env, task):
    """The events up to and including the first user turn's hooks (before the model acts)."""
    events = list(solve(env, task).events)
    first_step = next(
        i for i, e in enumerate(events) if type(e).__name__ in ("AssistantMessage", "ToolCall")
    )
    return events[:first_step]


def test_first_step_is_a_tool_call_in_the_api(env, canonical, responder):
    task = next(t for t in env.tasks() if t.kind == "single_tool")
    message, usage = responder(body_for(opening(env, task), canonical))
    [call] = message["tool_calls"]
    expected = next_actions(task, opening(env, task))[-1]
    assert call["function"]["name"] == expected.tool
    assert json.loads(call["function"]["arguments"]) == dict(expected.args)
    assert call["id"] == "call_0" and usage["prompt_tokens"] > usage["completion_tokens"] > 0


def test_renamed_tools_and_parameters_come_back_renamed(env, renamed, responder):
    task = next(t for t in env.tasks() if t.kind == "single_tool")
    message, _ = responder(body_for(opening(env, task), renamed))
    [call] = message["tool_calls"]
    canonical_call = next_actions(task, opening(env, task))[-1]
    surface = renamed.mapping.tools[canonical_call.tool]
    assert call["function"]["name"] == surface.name != canonical_call.tool
    surface_tool = renamed.harness.tool(surface.name)
    assert set(json.loads(call["function"]["arguments"])) <= set(
        surface_tool.parameters["properties"]
    )


def test_text_protocols_get_calls_as_text(env, text_variants, responder):
    task = next(t for t in env.tasks() if t.kind == "single_tool")
    for variant in text_variants:
        message, _ = responder(body_for(opening(env, task), variant))
        assert "tool_calls" not in message and isinstance(message["content"], str)
        surface_name = variant.mapping.tool_name(next_actions(task, opening(env, task))[-1].tool)
        assert surface_name in message["content"], variant.harness.protocol.label


def test_a_repair_request_is_answered_as_the_original(env, canonical, responder):
    task = next(t for t in env.tasks() if t.kind == "single_tool")
    body = body_for(opening(env, task), canonical)
    answer, _ = responder(body)
    repair = dict(body)
    repair["messages"] = [
        *body["messages"],
        {"role": "assistant", "content": "<tool_call>\n{broken\n</tool_call>"},
        {"role": "user", "content": repair_prompt("holds tool-call markup")},
    ]
    assert responder(repair)[0] == answer


def test_tasks_with_the_same_turns_are_told_apart_by_the_session_start(env, canonical, responder):
    groups = collections.defaultdict(list)
    for task in env.tasks():
        groups[task.turns].append(task)
    twins = next(g for g in groups.values() if len(g) > 1)
    found = [
        responder.task(opening(env, t), {}) for t in twins
    ]  # no metadata hint needed: the stream clock differs
    assert [t.id for t in found] == [t.id for t in twins]


def test_requests_it_cannot_answer_are_refused_with_the_reason(env, canonical, responder):
    task = env.tasks()[0]
    body = body_for(opening(env, task), canonical)
    with pytest.raises(TeacherError, match="unknown variant 'nope'"):
        responder({**body, "metadata": {VARIANT_KEY: "nope"}})
    stranger = body_for(opening(env, task), canonical)
    stranger["messages"] = [*stranger["messages"][:-1], {"role": "user", "content": "Who won?"}]
    with pytest.raises(TeacherError, match="no livestream task starts with"):
        responder(stranger)


def test_the_in_process_backend_wraps_the_responder(env, canonical, responder):
    task = next(t for t in env.tasks() if t.kind == "single_tool")
    body = body_for(opening(env, task), canonical, **{TASK_KEY: task.id})
    backend = OracleBackend(responder)
    request = ChatRequest("hsa-oracle", body["messages"], body["tools"], metadata=body["metadata"])
    response = asyncio.run(backend.chat(request))
    assert response.message == responder(body)[0]
    assert response.finish_reason == "tool_calls" and backend.stats.succeeded == 1
    bad = ChatRequest("hsa-oracle", [{"role": "user", "content": "hello?"}])
    with pytest.raises(TeacherError, match="the oracle cannot answer"):
        asyncio.run(backend.chat(bad))


def test_prompt_tokens_count_the_tools_each_request_sends(env, canonical, variants):
    # kept per variant, the first request's tools were counted for every later one
    responder = OracleResponder(env, next_actions, variants=variants)  # nothing counted yet
    task = next(t for t in env.tasks() if t.kind == "single_tool")
    body = body_for(opening(env, task), canonical)
    [call] = responder(body)[0]["tool_calls"]
    called = next(t for t in body["tools"] if t["function"]["name"] == call["function"]["name"])
    fewer = {**body, "tools": [called]}
    full, few = responder(body)[1]["prompt_tokens"], responder(fewer)[1]["prompt_tokens"]
    messages = full - _tokens(body["tools"])
    assert few == messages + _tokens([called]) < full
    assert responder(body)[1]["prompt_tokens"] == full  # each its own, whichever came first


def test_calls_in_text_are_those_a_text_protocols_reader_finds(
    env, canonical, text_variants, responder
):
    task = next(t for t in env.tasks() if t.kind == "single_tool")
    events = list(solve(env, task).events)
    final = max(i for i, e in enumerate(events) if isinstance(e, AssistantMessage))
    for variant in (canonical, *text_variants):
        call_body, answer_body = (
            body_for(opening(env, task), variant),
            body_for(events[:final], variant),
        )
        call, answer = responder(call_body)[0], responder(answer_body)[0]
        assert not responder.calls_in_text(answer_body, answer)
        assert responder.calls_in_text(call_body, call) is (not variant.harness.protocol.is_api)


def test_the_hooks_a_variant_adds_are_read_past_as_no_canonical_event(env, canonical):
    """Under ``hooks.neutral_extra`` the opening shows the variant's own notes: the oracle
    still tells tasks of the same turns apart by their session start, and answers as it
    answers the canonical conversation."""
    variant = make_variant(env.harness(), [("hooks.neutral_extra", {"count": 5})])
    responder = OracleResponder(env, next_actions, variants={variant.variant_id: variant})
    groups = collections.defaultdict(list)
    for task in env.tasks():
        groups[task.turns].append(task)
    twins = next(g for g in groups.values() if len(g) > 1)
    for task in twins:
        events, shown = surface_opening(env, task, variant)
        assert len(shown) > len(events)
        conversation = render(shown, variant.harness)
        body = {
            "messages": conversation.messages,
            "tools": conversation.tools,
            "metadata": {VARIANT_KEY: variant.variant_id},
        }
        assert responder(body)[0] == responder(body_for(events, canonical))[0], task.id
