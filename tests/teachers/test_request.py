"""Chat requests: the cache key is stable and covers exactly model, messages, tools, sampling."""

from __future__ import annotations

import json

from hypothesis import given
from hypothesis import strategies as st

from hsa.teachers.request import ChatRequest, ChatResponse, Sampling, Usage, assistant_message

MESSAGES = [{"role": "system", "content": "be brief"}, {"role": "user", "content": "hi"}]
TOOLS = [
    {"type": "function", "function": {"name": "a", "parameters": {"type": "object"}}},
    {"type": "function", "function": {"name": "b", "parameters": {"type": "object"}}},
]


def request(**changes) -> ChatRequest:
    base = {"model": "m", "messages": MESSAGES, "tools": TOOLS, "sampling": Sampling(seed=3)}
    return ChatRequest(**{**base, **changes})


def test_key_is_stable_and_ignores_metadata():
    assert request().key() == request().key()
    assert request(metadata={"hsa_variant": "v1"}).key() == request().key()
    assert len(request().key()) == 64


def test_key_changes_with_every_part_that_reaches_the_model():
    base = request().key()
    assert request(model="other").key() != base
    assert request(messages=[*MESSAGES, {"role": "user", "content": "more"}]).key() != base
    assert request(tools=TOOLS[::-1]).key() != base  # tool order is what the model sees
    assert request(sampling=Sampling(seed=4)).key() != base
    assert request(sampling=Sampling(seed=3, temperature=0.7)).key() != base
    assert request(sampling=Sampling(seed=3, max_tokens=None)).key() != base


def test_chat_template_arguments_reach_the_key_and_the_body_only_when_given():
    # unset, they leave every other request's key (and so its cache entry) as it was
    assert "chat_template_kwargs" not in Sampling(seed=3).to_dict()
    thinking = Sampling(seed=3, chat_template_kwargs={"enable_thinking": False})
    assert thinking.to_dict()["chat_template_kwargs"] == {"enable_thinking": False}
    assert request(sampling=thinking).key() != request().key()
    from hsa.teachers.backends.openai import _body  # what the openai backend sends
    from hsa.teachers.server import request_key  # what hsa serve's cache reads

    body = json.loads(_body(request(sampling=thinking), send_metadata=False))
    assert body["chat_template_kwargs"] == {"enable_thinking": False}
    assert request_key(body) == request(sampling=thinking).key()


def test_the_token_limit_goes_in_the_field_asked_for_and_keys_the_request_alike():
    from hsa.teachers.backends.openai import _body
    from hsa.teachers.server import request_key

    limited = request(sampling=Sampling(seed=3, max_tokens=64))
    sent = json.loads(_body(limited, False, "max_completion_tokens"))
    assert sent["max_completion_tokens"] == 64 and "max_tokens" not in sent
    assert list(sent) == list(json.loads(_body(limited, False)))[:2] + list(sent)[2:]
    assert request_key(sent) == limited.key()  # one limit under either name: one answer


def test_wire_messages_drop_hsa_only_fields():
    messages = [
        {"role": "tool", "tool_call_id": "call_0", "content": "x", "is_error": True},
        {"role": "assistant", "content": "y", "reasoning_content": "why"},
    ]
    wire = ChatRequest("m", messages).wire_messages()
    assert wire == [
        {"role": "tool", "content": "x", "tool_call_id": "call_0"},
        {"role": "assistant", "content": "y", "reasoning_content": "why"},
    ]
    # is_error never reaches the wire, so it cannot change the key either
    assert ChatRequest("m", messages).key() == ChatRequest("m", wire).key()


@given(
    content=st.one_of(st.none(), st.text(max_size=50)),
    prompt=st.integers(0, 10**6),
    completion=st.integers(0, 10**6),
    latency=st.floats(0, 100, allow_nan=False),
)
def test_response_round_trips_through_a_dict(content, prompt, completion, latency):
    calls = [{"id": "c", "type": "function", "function": {"name": "f", "arguments": "{}"}}]
    response = ChatResponse(
        message=assistant_message(content, calls),
        finish_reason="tool_calls",
        usage=Usage(prompt, completion),
        latency_s=latency,
        attempts=2,
    )
    back = ChatResponse.from_dict(response.to_dict(), cached=True)
    assert back.cached and back.to_dict() == response.to_dict()


def test_usage_adds_up():
    assert Usage(1, 2) + Usage(3, 4) == Usage(4, 6)
    assert Usage.from_dict(None) == Usage()
