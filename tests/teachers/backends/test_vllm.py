"""The vllm backend: request building and output parsing without vllm; the engine on a GPU."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from dataclasses import dataclass, field

import pytest

from hsa.errors import TeacherError
from hsa.teachers.backends.vllm import (
    VLLMBackend,
    VLLMConfig,
    build_batches,
    parse_output,
    response_from_output,
    sampling_params,
)
from hsa.teachers.request import ChatRequest, Sampling

TOOLS_A = [{"type": "function", "function": {"name": "get_price", "parameters": {}}}]
TOOLS_B = [{"type": "function", "function": {"name": "search", "parameters": {}}}]


def request(text: str, tools=(), seed=None) -> ChatRequest:
    messages = [
        {"role": "user", "content": text},
        {"role": "tool", "tool_call_id": "call_0", "content": "{}", "is_error": True},
    ]
    return ChatRequest("m", messages, tools, Sampling(0.5, 0.9, 64, seed))


def test_sampling_params_map_to_vllm_names():
    assert sampling_params(Sampling(0.7, 0.95, 128, 11)) == {
        "temperature": 0.7,
        "top_p": 0.95,
        "max_tokens": 128,
        "seed": 11,
    }
    assert "max_tokens" not in sampling_params(Sampling(max_tokens=None))


def test_batches_group_requests_by_tools_in_first_seen_order():
    requests = [request("a", TOOLS_A), request("b"), request("c", TOOLS_A), request("d", TOOLS_B)]
    batches = build_batches(requests)
    assert [b.indexes for b in batches] == [[0, 2], [1], [3]]
    assert [b.tools for b in batches] == [TOOLS_A, None, TOOLS_B]
    first = batches[0].conversations[0]
    assert first[0] == {"role": "user", "content": "a"}
    assert "is_error" not in first[1]  # only OpenAI message fields reach the chat template
    assert batches[0].sampling[0]["temperature"] == 0.5


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


@dataclass
class FakeCompletion:
    text: str
    token_ids: list[int] = field(default_factory=lambda: [1, 2, 3])
    finish_reason: str = "stop"


@dataclass
class FakeOutput:
    outputs: list[FakeCompletion]
    prompt_token_ids: list[int] = field(default_factory=lambda: [9] * 10)


def test_request_output_becomes_a_response_with_usage():
    output = FakeOutput([FakeCompletion("hello")])
    response = response_from_output(output, request("x"), "hermes", 0.5)
    assert response.message["content"] == "hello"
    assert (response.usage.prompt_tokens, response.usage.completion_tokens) == (10, 3)
    assert response.finish_reason == "stop" and response.latency_s == 0.5


class FakeLLM:
    """Stands in for ``vllm.LLM``: records each ``chat`` call, echoes the last user message."""

    def __init__(self):
        self.calls = []

    def chat(self, conversations, sampling, use_tqdm=True, tools=None, **kwargs):
        self.calls.append((len(conversations), tools, use_tqdm))
        return [FakeOutput([FakeCompletion(f"echo {c[0]['content']}")]) for c in conversations]


def test_concurrent_requests_are_batched_and_answered_in_order():
    llm = FakeLLM()
    backend = VLLMBackend(VLLMConfig("m", batch_size=8), llm=llm, sampling_cls=dict)
    requests = [request(f"q{i}", TOOLS_A if i % 2 else ()) for i in range(12)]

    async def main():
        return await asyncio.gather(*(backend.chat(r) for r in requests))

    responses = asyncio.run(main())
    assert [r.message["content"] for r in responses] == [f"echo q{i}" for i in range(12)]
    assert sum(n for n, _, _ in llm.calls) == 12
    assert max(n for n, _, _ in llm.calls) <= 8  # each batch cut at batch_size...
    assert len(llm.calls) < 12  # ...and requests shared calls
    assert all(use_tqdm is False for _, _, use_tqdm in llm.calls)
    assert backend.stats.requests == 12 and backend.stats.succeeded == 12


def test_an_engine_failure_fails_its_requests_with_a_teacher_error():
    class Broken(FakeLLM):
        def chat(self, *args, **kwargs):
            raise RuntimeError("CUDA out of memory")

    backend = VLLMBackend(VLLMConfig("m"), llm=Broken(), sampling_cls=dict)

    async def main():
        return await asyncio.gather(backend.chat(request("x")), return_exceptions=True)

    [error] = asyncio.run(main())
    assert isinstance(error, TeacherError) and "CUDA out of memory" in str(error)


def test_without_vllm_the_error_says_how_to_get_it(monkeypatch):
    monkeypatch.setitem(sys.modules, "vllm", None)  # import vllm now raises ImportError
    backend = VLLMBackend(VLLMConfig("some/model"))

    async def main():
        return await asyncio.gather(backend.chat(request("x")), return_exceptions=True)

    [error] = asyncio.run(main())
    assert isinstance(error, TeacherError)
    assert "pip install 'hsa[vllm]'" in str(error) and "openai backend" in str(error)


@pytest.mark.gpu
def test_vllm_engine_end_to_end_on_livestream(tmp_path, env):
    """A real engine (HSA_VLLM_MODEL, a local tool-calling model) through the teach job."""
    from hsa.pipelines.teach import TeachConfig, teach

    config = TeachConfig(
        backend="vllm",
        model=os.environ["HSA_VLLM_MODEL"],
        tasks=4,
        variants_per_task=0,
        max_steps_per_turn=4,
        max_tokens=256,
        vllm_args={"max_model_len": 8192, "gpu_memory_utilization": 0.8},
    )
    report = teach(config, tmp_path / "out", env=env)
    assert report.written == 4 and report.requests > 0
    assert (tmp_path / "out" / "manifest.json").exists()
