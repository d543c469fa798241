"""The vllm backend: request building and batching without vllm; the engine on a GPU."""

from __future__ import annotations

import asyncio
import os
import sys
from dataclasses import dataclass, field

import pytest

from hsa.errors import TeacherError
from hsa.teachers.backends.base import ContextOverflow
from hsa.teachers.backends.vllm import (
    VLLMBackend,
    VLLMConfig,
    build_batches,
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
        "skip_special_tokens": False,
        "spaces_between_special_tokens": False,
        "seed": 11,
    }
    # left out, vLLM's SamplingParams stops at 16 tokens; None is its "no limit"
    assert sampling_params(Sampling(max_tokens=None))["max_tokens"] is None


def test_past_reasoning_reaches_the_template_under_the_name_llm_chat_reads():
    messages = [
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": "hello", "reasoning_content": "greet back"},
    ]
    [batch] = build_batches([ChatRequest("m", messages, (), Sampling())])
    assert batch.conversations[0][1]["reasoning"] == "greet back"


def test_batches_group_requests_by_tools_in_first_seen_order():
    requests = [request("a", TOOLS_A), request("b"), request("c", TOOLS_A), request("d", TOOLS_B)]
    batches = build_batches(requests)
    assert [b.indexes for b in batches] == [[0, 2], [1], [3]]
    assert [b.tools for b in batches] == [TOOLS_A, None, TOOLS_B]
    first = batches[0].conversations[0]
    assert first[0] == {"role": "user", "content": "a"}
    assert "is_error" not in first[1]  # only OpenAI message fields reach the chat template
    assert batches[0].sampling[0]["temperature"] == 0.5


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


class SpecialTagsLLM:
    """Stands in for ``vllm.LLM`` serving a model whose tool-call tags are special tokens:
    the text is decoded as vLLM decodes it, special tokens dropped unless the sampling
    parameters keep them (vLLM's default drops them), the stop token left out."""

    TOKENS = (
        ("<tool_call>", True),
        ('\n{"name": "get_price", "arguments": {"id": "P1"}}\n', False),
        ("</tool_call>", True),
    )

    def chat(self, conversations, sampling, use_tqdm=True, tools=None, **kwargs):
        outputs = []
        for params in sampling:
            keep = not params.get("skip_special_tokens", True)
            text = "".join(t for t, special in self.TOKENS if keep or not special)
            outputs.append(FakeOutput([FakeCompletion(text, [1, 2, 3, 0])]))
        return outputs


@pytest.mark.parametrize("tools", [TOOLS_A, ()], ids=["api", "text-protocol"])
def test_tool_call_tags_the_model_marks_special_reach_the_parser(tools):
    backend = VLLMBackend(VLLMConfig("m"), llm=SpecialTagsLLM(), sampling_cls=dict)
    response = asyncio.run(backend.chat(request("price?", tools)))
    if tools:  # parsed into tool_calls with the backend's call format
        [call] = response.message["tool_calls"]
        assert call["function"]["name"] == "get_price"
    else:  # left for the harness's own format to parse: the tags must be in the text
        assert response.message["content"].startswith("<tool_call>\n")
        assert response.message["content"].endswith("\n</tool_call>")


def test_an_engine_failure_fails_its_requests_with_a_teacher_error():
    class Broken(FakeLLM):
        def chat(self, *args, **kwargs):
            raise RuntimeError("CUDA out of memory")

    backend = VLLMBackend(VLLMConfig("m"), llm=Broken(), sampling_cls=dict)

    async def main():
        return await asyncio.gather(backend.chat(request("x")), return_exceptions=True)

    [error] = asyncio.run(main())
    assert isinstance(error, TeacherError) and "CUDA out of memory" in str(error)


def test_a_reply_vllm_stopped_as_failed_fails_its_request_alone():
    # vLLM's finish_reason abort or error: the text so far is no answer of the model's
    class Failing(FakeLLM):
        def chat(self, conversations, sampling, **kwargs):
            outputs = super().chat(conversations, sampling, **kwargs)
            for c, output in zip(conversations, outputs, strict=True):
                if c[0]["content"] in ("abort", "error"):
                    output.outputs[0].finish_reason = c[0]["content"]
            return outputs

    backend = VLLMBackend(VLLMConfig("m"), llm=Failing(), sampling_cls=dict)

    async def main():
        asked = (backend.chat(request(t)) for t in ("abort", "fine", "error"))
        return await asyncio.gather(*asked, return_exceptions=True)

    aborted, answer, failed = asyncio.run(main())
    assert answer.message["content"] == "echo fine"
    for error, finish in ((aborted, "abort"), (failed, "error")):
        assert isinstance(error, TeacherError)
        assert f"vllm stopped the reply with finish_reason {finish!r}" in str(error)
    assert backend.stats.succeeded == 1
    assert backend.stats.failures == {"finish_reason abort": 1, "finish_reason error": 1}


def test_a_prompt_past_the_context_ends_its_rollout_alone_not_its_whole_batch():
    class Picky(FakeLLM):
        def chat(self, conversations, sampling, use_tqdm=True, tools=None, **kwargs):
            if any(c[0]["content"] == "too long" for c in conversations):
                self.calls.append((len(conversations), tools, use_tqdm))
                # vLLM V1's words for a prompt past max_model_len
                raise ValueError(
                    "The decoder prompt (length 5000) is longer than the maximum model length "
                    "of 4096. Make sure that `max_model_len` is no smaller than the number of "
                    "text tokens."
                )
            return super().chat(conversations, sampling, use_tqdm, tools, **kwargs)

    llm = Picky()
    backend = VLLMBackend(VLLMConfig("m", batch_size=16), llm=llm, sampling_cls=dict)
    texts = [f"q{i}" for i in range(16)]
    texts[5] = "too long"

    async def main():
        calls = (backend.chat(request(t)) for t in texts)
        return await asyncio.gather(*calls, return_exceptions=True)

    answers = asyncio.run(main())
    assert [a.message["content"] for i, a in enumerate(answers) if i != 5] == [
        f"echo {t}" for i, t in enumerate(texts) if i != 5
    ]
    # the rollout ends as context, which no rerun asks again, and its error says why
    assert isinstance(answers[5], ContextOverflow)
    assert "maximum model length" in str(answers[5])
    # the call is split in halves around the prompt, not asked one request at a time
    assert len(llm.calls) <= 9 and backend.stats.succeeded == 15


def test_another_refusal_of_one_request_fails_it_alone_as_the_backend_s_error():
    class Picky(FakeLLM):
        def chat(self, conversations, sampling, use_tqdm=True, tools=None, **kwargs):
            if any(c[0]["content"] == "bad" for c in conversations):
                raise ValueError("bad image")
            return super().chat(conversations, sampling, use_tqdm, tools, **kwargs)

    backend = VLLMBackend(VLLMConfig("m", batch_size=8), llm=Picky(), sampling_cls=dict)

    async def main():
        calls = (backend.chat(request(t)) for t in ("a", "bad", "b"))
        return await asyncio.gather(*calls, return_exceptions=True)

    a, bad, b = asyncio.run(main())
    assert a.message["content"] == "echo a" and b.message["content"] == "echo b"
    assert type(bad) is TeacherError and str(bad) == "vllm: bad image"


def test_a_broken_engine_is_asked_once_per_request_not_in_halves():
    class Broken(FakeLLM):
        def chat(self, conversations, sampling, use_tqdm=True, tools=None, **kwargs):
            self.calls.append((len(conversations), tools, use_tqdm))
            raise RuntimeError("CUDA error: an illegal memory access was encountered")

    llm = Broken()
    backend = VLLMBackend(VLLMConfig("m", batch_size=16), llm=llm, sampling_cls=dict)

    async def main():
        calls = (backend.chat(request(f"q{i}")) for i in range(16))
        return await asyncio.gather(*calls, return_exceptions=True)

    answers = asyncio.run(main())
    assert all(type(a) is TeacherError and "CUDA error" in str(a) for a in answers)
    assert [n for n, _, _ in llm.calls] == [16, *[1] * 16]  # n + 1 calls, not 2n - 1


def test_without_vllm_the_error_says_how_to_get_it(monkeypatch):
    monkeypatch.setitem(sys.modules, "vllm", None)  # import vllm now raises ImportError
    backend = VLLMBackend(VLLMConfig("some/model"))

    async def main():
        return await asyncio.gather(backend.chat(request("x")), return_exceptions=True)

    [error] = asyncio.run(main())
    assert isinstance(error, TeacherError)
    assert "pip install 'hsa[vllm]'" in str(error) and "openai backend" in str(error)
    with pytest.raises(TeacherError, match="hsa\\[vllm\\]"):  # at start, before any request
        asyncio.run(VLLMBackend(VLLMConfig("some/model")).start())


def test_an_engine_vllm_cannot_build_is_one_error_naming_the_model(monkeypatch):
    class Refusing:
        SamplingParams = object

        @staticmethod
        def LLM(model, **engine_args):
            raise ValueError(f"no config.json in {model}")

    monkeypatch.setitem(sys.modules, "vllm", Refusing)
    with pytest.raises(TeacherError, match=r"ValueError: no config\.json in /models/x") as found:
        asyncio.run(VLLMBackend(VLLMConfig("/models/x")).start())
    assert found.value.file == "/models/x"


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
