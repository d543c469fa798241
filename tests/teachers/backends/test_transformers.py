"""The transformers backend: a tiny Qwen2 model built here answers batched chat requests."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path

import pytest

from hsa.config import default_of, help_of, settings_of
from hsa.errors import TeacherError
from hsa.teachers.backends.transformers import (
    SeededSampler,
    TransformersBackend,
    TransformersConfig,
    build_batches,
    template_messages,
)
from hsa.teachers.config import TeachConfig
from hsa.teachers.make import make_backend
from hsa.teachers.request import ChatRequest, Sampling
from tests.tinymodels import save_tiny

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "get_price",
            "description": "The price of a product.",
            "parameters": {"type": "object", "properties": {"product_id": {"type": "string"}}},
        },
    }
]
TEXTS = [
    "What is the price of P1? It is $5.",
    '{"name": "get_price", "arguments": {"product_id": "P1"}}',
    '{"name": "f", "arguments": {"a": 1}}',
    json.dumps(TOOLS),
] * 8
CALL = '<tool_call>{"name": "f", "arguments": {"a": 1}}</tool_call>'


@pytest.fixture(scope="module")
def model_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return save_tiny(tmp_path_factory.mktemp("tiny") / "model", TEXTS)


@pytest.fixture(scope="module")
def tokenizer(model_path: Path):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(model_path)


def request(text: str, tools=(), sampling: Sampling | None = None) -> ChatRequest:
    sampling = sampling or Sampling(max_tokens=8)
    return ChatRequest("tiny", [{"role": "user", "content": text}], tools, sampling)


def answer_all(backend: TransformersBackend, requests: list[ChatRequest]) -> list:
    async def main():
        return await asyncio.gather(*(backend.chat(r) for r in requests), return_exceptions=True)

    return asyncio.run(main())


def test_a_saved_model_answers_concurrent_requests_with_real_usage(model_path, tokenizer):
    backend = TransformersBackend(TransformersConfig(str(model_path), batch_size=8))
    requests = [request(f"What is the price of P{i}?", TOOLS if i % 2 else ()) for i in range(6)]
    first = answer_all(backend, requests)
    for r, response in zip(requests, first, strict=True):
        assert response.message["role"] == "assistant"
        assert isinstance(response.message["content"], str)
        # every token of the rendered prompt, no padding
        prompt = tokenizer.apply_chat_template(
            r.wire_messages(), tools=list(r.tools) or None, add_generation_prompt=True
        )["input_ids"]
        assert response.usage.prompt_tokens == len(prompt)
        assert 1 <= response.usage.completion_tokens <= 8
        assert response.finish_reason in ("stop", "length")
    # the api-protocol prompts carry the tools, so they are longer
    assert first[1].usage.prompt_tokens > first[0].usage.prompt_tokens
    assert backend.stats.requests == backend.stats.succeeded == 6
    again = answer_all(backend, requests)  # greedy: the same answers every time
    assert [r.to_dict() | {"latency_s": 0} for r in again] == [
        r.to_dict() | {"latency_s": 0} for r in first
    ]


def test_sampled_requests_are_drawn_with_their_seed(model_path):
    backend = TransformersBackend(TransformersConfig(str(model_path)))
    hot = [request("Hi", sampling=Sampling(1.5, 1.0, 12, seed)) for seed in (1, 1, 2)]
    one, same, other = answer_all(backend, hot)
    assert one.message == same.message and one.usage == same.usage
    assert (one.message, one.usage) != (other.message, other.usage)


def test_the_checkpoint_s_decoding_settings_do_not_shape_the_answer(tmp_path, model_path):
    import shutil

    plain = TransformersBackend(TransformersConfig(str(model_path)))
    # greedy, the tiny model says one token over and over (its padding, left out of the text)
    [expected] = answer_all(plain, [request("What is the price of P1?")])
    shaped = tmp_path / "shaped"
    shutil.copytree(model_path, shaped)
    config = json.loads((shaped / "generation_config.json").read_text())
    # saved with the checkpoint: no token twice, and never the padding
    config |= {"no_repeat_ngram_size": 1, "suppress_tokens": [config["pad_token_id"]]}
    (shaped / "generation_config.json").write_text(json.dumps(config))
    backend = TransformersBackend(TransformersConfig(str(shaped)))
    [answer] = answer_all(backend, [request("What is the price of P1?")])
    assert answer.message == expected.message and answer.usage == expected.usage
    assert backend._model.generation_config.no_repeat_ngram_size == 1  # the model's, put back


def test_each_row_is_drawn_from_its_own_generator_whatever_its_batch():
    import torch

    scores = torch.randn(3, 50)
    alone = SeededSampler([Sampling(1.0, 1.0, seed=7)], [7])
    batched = SeededSampler([Sampling(), Sampling(1.0), Sampling(1.0)], [0, 99, 7])
    for _ in range(5):
        drawn = alone(None, scores[2:3]).argmax(-1)
        out = batched(None, scores)
        assert out.argmax(-1)[2] == drawn[0]
        assert torch.equal(out[0], scores[0])  # temperature 0: untouched, greedy
    nucleus = SeededSampler([Sampling(1.0, 1e-6)], [3])  # top_p this small: the top token
    assert nucleus(None, scores[:1]).argmax(-1) == scores[:1].argmax(-1)


class CannedModel:
    """Stands in for a model: ``generate`` appends the same tokens to every prompt."""

    device = None

    def __init__(self, answer: list[int], fail_first: bool = False):
        self.answer = answer
        self.fail_first = fail_first
        self.calls = []

    def generate(self, input_ids, attention_mask, generation_config, logits_processor):
        import torch

        self.calls.append((input_ids.shape[0], generation_config, attention_mask))
        if self.fail_first:
            self.fail_first = False
            raise RuntimeError("CUDA out of memory")
        tail = torch.tensor([self.answer] * input_ids.shape[0], dtype=input_ids.dtype)
        return torch.cat([input_ids, tail], dim=1)


def test_tool_call_tags_survive_decoding_and_become_tool_calls(tokenizer):
    ids = tokenizer.encode(CALL, add_special_tokens=False)
    # the end of the answer, then padding: neither reaches the text
    model = CannedModel([*ids, tokenizer.eos_token_id, tokenizer.pad_token_id])
    backend = TransformersBackend(TransformersConfig("unused"), model=model, tokenizer=tokenizer)
    with_tools, plain = answer_all(backend, [request("call f", TOOLS), request("call f")])
    [call] = with_tools.message["tool_calls"]
    assert call["function"]["name"] == "f"
    assert json.loads(call["function"]["arguments"]) == {"a": 1}
    assert with_tools.usage.completion_tokens == len(ids) + 1  # the answer and its end token
    assert with_tools.finish_reason == "stop"
    assert plain.message["content"] == CALL  # a text protocol: the rollout parses it
    # left padding: each row's prompt ends where the answer starts
    assert all(mask[:, -1].all() for _, _, mask in model.calls)
    assert model.calls[0][1].do_sample is False


def test_an_answer_cut_by_the_token_limit_says_length(tokenizer):
    ids = tokenizer.encode("It is five dollars and", add_special_tokens=False)
    model = CannedModel(ids)
    backend = TransformersBackend(TransformersConfig("unused"), model=model, tokenizer=tokenizer)
    [response] = answer_all(backend, [request("price?")])
    assert response.finish_reason == "length"
    assert response.usage.completion_tokens == len(ids)
    assert response.message["content"] == "It is five dollars and"


def test_a_generate_failure_fails_its_batch_and_the_next_batch_runs(tokenizer):
    ids = tokenizer.encode("fine", add_special_tokens=False)
    model = CannedModel([*ids, tokenizer.eos_token_id], fail_first=True)
    backend = TransformersBackend(TransformersConfig("unused"), model=model, tokenizer=tokenizer)
    errors = answer_all(backend, [request("a"), request("b")])
    assert all(isinstance(e, TeacherError) and "CUDA out of memory" in str(e) for e in errors)
    [response] = answer_all(backend, [request("c")])
    assert response.message["content"] == "fine"


def test_prior_tool_calls_reach_the_template_as_objects(tokenizer):
    call = {"id": "c0", "type": "function"}
    messages = [
        {"role": "user", "content": "price?"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {**call, "function": {"name": "get_price", "arguments": '{"product_id": "P1"}'}},
                {**call, "function": {"name": "get_price", "arguments": "{not json"}},
            ],
        },
        {"role": "tool", "tool_call_id": "c0", "content": "5", "is_error": False},
    ]
    r = ChatRequest("tiny", messages, TOOLS)
    converted = template_messages(r)
    assert converted[1]["tool_calls"][0]["function"]["arguments"] == {"product_id": "P1"}
    assert converted[1]["tool_calls"][1]["function"]["arguments"] == "{not json"  # kept as is
    assert "is_error" not in converted[2]
    text = tokenizer.apply_chat_template(converted[:2], tools=TOOLS, tokenize=False)
    assert '"arguments": {"product_id": "P1"}' in text  # not a quoted string


def test_batches_group_requests_by_tools_and_token_limit():
    requests = [
        request("a", TOOLS),
        request("b"),
        request("c", TOOLS),
        request("d", TOOLS, Sampling(max_tokens=None)),
    ]
    batches = build_batches(requests, max_new_tokens=99)
    assert [b.indexes for b in batches] == [[0, 2], [1], [3]]
    assert [b.max_new_tokens for b in batches] == [8, 8, 99]


@pytest.mark.parametrize("folder", ["missing", "empty"])
def test_a_folder_without_a_model_is_named(tmp_path, folder):
    path = tmp_path / folder
    if folder == "empty":
        path.mkdir()
    backend = TransformersBackend(TransformersConfig(str(path)))
    [error] = answer_all(backend, [request("x")])
    assert isinstance(error, TeacherError) and str(path) in str(error)


def test_a_model_whose_weights_are_cut_short_is_one_error_naming_it(tmp_path, model_path):
    import shutil

    cut = tmp_path / "cut"
    shutil.copytree(model_path, cut)
    weights = cut / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[:2000])  # a download stopped part way
    backend = TransformersBackend(TransformersConfig(str(cut)))
    [error] = answer_all(backend, [request("x")])
    assert isinstance(error, TeacherError) and error.file == str(cut)
    assert error.message.startswith("cannot load the model: ")


@pytest.mark.parametrize(
    ("changes", "where"),
    [
        ({"device": "tpu"}, "device"),
        ({"dtype": "int3"}, "dtype"),
        ({"max_new_tokens": 0}, "max_new_tokens"),
        ({"call_format": "smoke-signals"}, "call_format"),
        ({"model": ""}, "model"),
    ],
)
def test_the_config_refuses_what_it_cannot_run(changes, where):
    with pytest.raises(TeacherError) as caught:
        TransformersConfig(**{"model": "m", **changes})
    assert caught.value.where == where
    assert TransformersConfig("m", device="cuda:1").device == "cuda:1"


def test_the_config_follows_the_config_pattern():
    assert TransformersConfig.__dataclass_params__.frozen  # type: ignore[attr-defined]
    assert all(help_of(TransformersConfig, f.name) for f in settings_of(TransformersConfig))
    assert default_of(TransformersConfig, "call_format") == default_of(TeachConfig, "call_format")


def test_make_backend_builds_it_from_a_teach_config(model_path):
    from hsa.envs.registry import get

    config = TeachConfig(backend="transformers", model=str(model_path), concurrency=5)
    backend = make_backend(config, get("livestream"), {})
    assert isinstance(backend, TransformersBackend) and backend.name == "transformers"
    assert backend.config.model == str(model_path)
    assert backend.config.batch_size == 5
    assert backend.config.call_format == config.call_format
    with pytest.raises(TeacherError, match="needs a model"):
        TeachConfig(backend="transformers")


def test_importing_the_backend_loads_no_torch():
    code = (
        "import sys, hsa.teachers.backends.transformers, hsa.teachers.make\n"
        "print(sorted(m for m in ('torch', 'transformers') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
