"""Parsing a local model's output text into an assistant message (vllm and transformers)."""

from __future__ import annotations

import json

import pytest

from hsa.errors import TeacherError
from hsa.teachers.backends.output import parse_output
from hsa.teachers.request import ChatRequest, Sampling

TOOLS_A = [{"type": "function", "function": {"name": "get_price", "parameters": {}}}]


def request(text: str, tools=()) -> ChatRequest:
    return ChatRequest("m", [{"role": "user", "content": text}], tools, Sampling(0.5, 0.9, 64))


def test_hermes_calls_become_tool_calls_with_stable_ids():
    text = (
        "Let me check.\n<tool_call>\n"
        '{"name": "get_price", "arguments": {"product_id": "P1"}}\n</tool_call>\n'
        '<tool_call>\n{"name": "get_price", "arguments": {"product_id": "P2"}}\n</tool_call>'
    )
    r = request("price?", TOOLS_A)
    message = parse_output(text, r)
    assert message["content"] == "Let me check."
    calls = message["tool_calls"]
    assert [json.loads(c["function"]["arguments"]) for c in calls] == [
        {"product_id": "P1"},
        {"product_id": "P2"},
    ]
    assert calls[0]["id"] != calls[1]["id"]
    assert parse_output(text, r) == message  # the same output parses to the same ids


def test_reasoning_is_split_off_and_plain_text_stays_text():
    message = parse_output("<think>\nthe user wants a price\n</think>\n\nIt is $5.", request("x"))
    assert message == {
        "role": "assistant",
        "content": "It is $5.",
        "reasoning_content": "the user wants a price",
    }


def test_reasoning_whose_opening_tag_the_template_wrote_is_split_off_too():
    # DeepSeek-R1's distills, QwQ and Qwen3's thinking models get <think> in the generation
    # prompt and write only the closing tag
    message = parse_output("the user wants a price\n</think>\n\nIt is $5.", request("x"))
    assert message == {
        "role": "assistant",
        "content": "It is $5.",
        "reasoning_content": "the user wants a price",
    }
    call = '<tool_call>\n{"name": "get_price", "arguments": {"product_id": "P1"}}\n</tool_call>'
    message = parse_output(f"look it up\n</think>\n\n{call}", request("x", TOOLS_A))
    assert message["reasoning_content"] == "look it up" and len(message["tool_calls"]) == 1
    # a closing tag that closes a block opened later in the text is no leading block
    text = "It is $5. <think>aside</think> More."
    assert parse_output(text, request("x")) == {"role": "assistant", "content": text}


def test_a_malformed_call_is_left_as_text_for_the_rollout_to_reject():
    text = '<tool_call>\n{"name": "get_price", "arguments": {"product_id": \n</tool_call>'
    message = parse_output(text, request("x", TOOLS_A))
    assert "tool_calls" not in message and message["content"] == text


def test_text_protocol_requests_keep_the_raw_text():
    text = '[get_price(product_id="P1")]'
    assert parse_output(text, request("x"))["content"] == text


def test_an_unknown_call_format_is_named():
    with pytest.raises(TeacherError, match="unknown call format 'nope'"):
        parse_output("x", request("x", TOOLS_A), "nope")


def test_a_reply_of_many_blank_lines_is_read_in_linear_time():
    import time

    started = time.perf_counter()
    message = parse_output("\n" * 40_000 + "ok", request("q"))
    assert message["content"].strip() == "ok"
    assert time.perf_counter() - started < 10  # a hang guard: quadratic took about 40 s


def test_a_call_holding_an_integer_past_pythons_digit_limit_stays_text():
    text = (
        '<tool_call>\n{"name": "get_price", "arguments": {"n": ' + "9" * 4301 + "}}\n</tool_call>"
    )
    assert parse_output(text, request("price?", TOOLS_A)) == {"role": "assistant", "content": text}


def test_hermes_calls_are_read_leniently_as_replies_no_server_parsed():
    # generation stopped before the last closing tag; arguments written as a JSON string
    tools = [{"type": "function", "function": {"name": "get_weather", "parameters": {}}}]
    r = request("weather?", tools)
    paris = '{"name": "get_weather", "arguments": {"city": "Paris"}}'
    rome = '{"name": "get_weather", "arguments": "{\\"city\\": \\"Rome\\"}"}'
    for text, cities in [
        (f"<tool_call>\n{paris}\n", ["Paris"]),
        (f"<tool_call>\n{paris}\n</tool_call>\n<tool_call>\n{rome}", ["Paris", "Rome"]),
        (f"<tool_call>\n{rome}\n</tool_call>", ["Rome"]),
    ]:
        message = parse_output(text, r)
        assert message["content"] is None, text
        calls = [json.loads(c["function"]["arguments"]) for c in message["tool_calls"]]
        assert calls == [{"city": city} for city in cities]
    cut = '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Pa'
    assert parse_output(cut, r) == {"role": "assistant", "content": cut}
