"""The ``vllm`` backend: offline ``vllm.LLM.chat`` batches, tool calls parsed from the text.

Requests from many rollouts are gathered into batches (one ``LLM.chat`` call per group of
requests sharing a tools list, since ``tools`` is one argument for the whole call) and run in
a worker thread so the event loop keeps feeding the next batch. The model writes tool calls
as text; under the ``api`` protocol they are parsed with hsa's call-format parsers into
``tool_calls`` (``output.parse_output``), under text protocols the rollout parses them with
the harness's own format; either way the text keeps the model's special tokens, which may be
its tool-call tags (``sampling_params``). vllm is imported only when the first batch runs;
without it the backend says how to get it. For a vLLM *server*, use the ``openai`` backend
(see docs/vllm.md).
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from hsa.config import bounded, refuse, same_as, setting
from hsa.errors import TeacherError
from hsa.harness.model import call_format_problem
from hsa.teachers.backends.base import (
    SERVER_FAILED,
    BatchingBackend,
    ContextOverflow,
    Waiting,
    outgrew_context,
    teacher_error,
)
from hsa.teachers.backends.output import parse_output
from hsa.teachers.config import TeachConfig
from hsa.teachers.request import ChatRequest, ChatResponse, Sampling, Usage

#: the version of how this backend turns a request into answer text, part of the cache key
#: of its requests (``make.request_model``): another version answers the same request
#: otherwise, so a cache never serves one version's replies to another
#: (2: special tokens kept in the text, ``sampling_params``; 3: a hermes reply read with
#: ``CallFormat.parse_reply``, its last block's closing tag optional as in vLLM's parser)
DECODE_VERSION = 3


@dataclass(frozen=True, slots=True)
class VLLMConfig:
    """An in-process vLLM engine.

    ``call_format`` names the hsa call format the model writes API tool calls in (``hermes``
    for Qwen, Hermes and most tool-tuned open models). ``engine_args`` go to ``vllm.LLM``
    (``tensor_parallel_size``, ``max_model_len``, ...).
    """

    model: str = setting(help="A model folder or hub name vLLM loads.")
    batch_size: int = setting(256, help="Most requests in one LLM.chat call.")
    batch_wait_s: float = setting(0.01, help="How long a batch waits for more requests, seconds.")
    call_format: str = same_as(TeachConfig, "call_format")
    engine_args: Mapping[str, Any] = setting(
        default_factory=dict, help="Engine arguments passed to vllm.LLM."
    )
    chat_template_kwargs: Mapping[str, Any] = setting(
        default_factory=dict, help="Extra arguments of the model's chat template."
    )

    def __post_init__(self) -> None:
        problems = bounded(self, "batch_size", low=1) + bounded(self, "batch_wait_s", low=0)
        if (why := call_format_problem(self.call_format)) is not None:
            problems.append(("call_format", why))
        refuse(problems, TeacherError)


@dataclass(frozen=True, slots=True)
class Batch:
    """One ``LLM.chat`` call: conversations sharing one tools list, and their sampling."""

    conversations: list[list[dict[str, Any]]]
    sampling: list[dict[str, Any]]
    tools: list[dict[str, Any]] | None
    indexes: list[int]  # positions of these requests in the gathered list


def sampling_params(sampling: Sampling) -> dict[str, Any]:
    """Keyword arguments for ``vllm.SamplingParams``.

    ``max_tokens`` always, since vLLM's default when it is left out is 16 tokens, and None is
    its "up to the context length". Special tokens are kept in the text (vLLM drops them by
    default): some models mark their tool-call tags (``<tool_call>``) special, and without
    them every call, under the ``api`` protocol or a text one, reads as a format failure.
    vLLM's hermes parser keeps them for the same reason. The stop token that ends an answer
    stays out of the text, as vLLM leaves it out unless ``include_stop_str_in_output``; with
    no spaces put between special tokens, the text is the tokenizer's plain decoding, as the
    ``transformers`` backend's is.
    """
    out: dict[str, Any] = {
        "temperature": sampling.temperature,
        "top_p": sampling.top_p,
        "max_tokens": sampling.max_tokens,
        "skip_special_tokens": False,
        "spaces_between_special_tokens": False,
    }
    if sampling.seed is not None:
        out["seed"] = sampling.seed
    return out


def build_batches(requests: Sequence[ChatRequest]) -> list[Batch]:
    """Group requests by their tools list, keeping first-seen order."""
    groups: dict[str, Batch] = {}
    for index, request in enumerate(requests):
        tools = [dict(t) for t in request.tools] or None
        key = json.dumps(tools, ensure_ascii=False, separators=(",", ":"))
        batch = groups.get(key)
        if batch is None:
            batch = groups[key] = Batch([], [], tools, [])
        batch.conversations.append([_with_reasoning(m) for m in request.wire_messages()])
        batch.sampling.append(sampling_params(request.sampling))
        batch.indexes.append(index)
    return list(groups.values())


def _with_reasoning(message: dict[str, Any]) -> dict[str, Any]:
    """A message with its ``reasoning_content`` also as ``reasoning``: the field ``LLM.chat``
    reads for a chat template (vLLM's server renames the first to the second; ``LLM.chat``
    does not)."""
    if "reasoning_content" not in message or "reasoning" in message:
        return message
    return {**message, "reasoning": message["reasoning_content"]}


def response_from_output(
    output: Any, request: ChatRequest, call_format: str, latency_s: float
) -> ChatResponse:
    """A ``ChatResponse`` from one ``vllm.RequestOutput``."""
    completion = output.outputs[0]
    prompt_tokens = len(getattr(output, "prompt_token_ids", None) or ())
    return ChatResponse(
        message=parse_output(completion.text, request, call_format),
        finish_reason=getattr(completion, "finish_reason", None),
        usage=Usage(prompt_tokens, len(getattr(completion, "token_ids", None) or ())),
        latency_s=latency_s,
    )


def _load_engine(config: VLLMConfig) -> tuple[Any, Any]:
    try:
        import vllm
    except ImportError:
        raise TeacherError(
            "the vllm backend needs vllm and a CUDA GPU: pip install 'hsa[vllm]'; "
            "to use a vLLM server instead, run the openai backend with --base-url"
        ) from None
    try:
        engine = vllm.LLM(model=config.model, **dict(config.engine_args))
    except Exception as exc:  # vLLM's own errors, a bad path or engine argument: one line
        raise TeacherError(
            f"vllm could not load the model: {type(exc).__name__}: {exc}", file=config.model
        ) from None
    return engine, vllm.SamplingParams


class VLLMBackend(BatchingBackend):
    """Batches concurrent chat requests into ``vllm.LLM.chat`` calls.

    ``llm`` and ``sampling_cls`` may be given (an engine already built, or a stand-in in
    tests); otherwise they are built from ``config`` on the first batch.
    """

    name = "vllm"

    def __init__(self, config: VLLMConfig, *, llm: Any = None, sampling_cls: Any = None):
        super().__init__(config.batch_size, config.batch_wait_s)
        self.config = config
        self._llm = llm
        self._sampling_cls = sampling_cls

    async def start(self) -> None:
        """Load the engine before the first request: vLLM missing, or a model it cannot
        load, is a setup error of the job, not a failure of every request."""
        if self._llm is None:
            self._llm, self._sampling_cls = await asyncio.to_thread(_load_engine, self.config)

    async def run_batch(self, taken: list[Waiting]) -> None:
        await self.start()
        requests = [r for r, _ in taken]
        for batch in build_batches(requests):
            params = [self._sampling_cls(**s) for s in batch.sampling]
            kwargs: dict[str, Any] = {"use_tqdm": False, "tools": batch.tools}
            if self.config.chat_template_kwargs:
                kwargs["chat_template_kwargs"] = dict(self.config.chat_template_kwargs)
            self.stats.requests += len(batch.conversations)
            await self._answer_parts(taken, batch.conversations, params, batch.indexes, kwargs)

    async def _answer_parts(
        self,
        taken: list[Waiting],
        conversations: list[list[dict[str, Any]]],
        params: list[Any],
        indexes: list[int],
        kwargs: dict[str, Any],
    ) -> None:
        """``_answer``, or where vLLM refuses the whole call for a request it cannot take (a
        prompt past the model's context), each half asked again: one such request among
        ``n`` costs about ``2 log2 n`` more calls, not ``n``, and fails alone. Another
        refusal (a broken engine, a request it cannot read) is asked again one request at a
        time, so a failing engine costs ``n`` calls, not ``2n - 1``."""
        try:
            await self._answer(taken, conversations, params, indexes, kwargs)
        except Exception as exc:
            if len(indexes) == 1:
                _fail(taken[indexes[0]][1], exc)
                return
            if isinstance(exc, TeacherError) or not outgrew_context(str(exc)):
                parts = [slice(i, i + 1) for i in range(len(indexes))]
            else:
                half = len(indexes) // 2
                parts = [slice(None, half), slice(half, None)]
            for part in parts:
                await self._answer_parts(
                    taken, conversations[part], params[part], indexes[part], kwargs
                )

    async def _answer(
        self,
        taken: list[Waiting],
        conversations: list[list[dict[str, Any]]],
        params: list[Any],
        indexes: list[int],
        kwargs: dict[str, Any],
    ) -> None:
        """One ``LLM.chat`` call, its outputs set on the futures of ``taken[indexes]``."""
        started = time.monotonic()
        outputs = await asyncio.to_thread(self._llm.chat, conversations, params, **kwargs)
        latency = time.monotonic() - started
        if len(outputs) != len(indexes):
            raise TeacherError(f"vllm returned {len(outputs)} outputs for {len(indexes)} requests")
        for output, index in zip(outputs, indexes, strict=True):
            request, future = taken[index]
            response = response_from_output(output, request, self.config.call_format, latency)
            if response.finish_reason in SERVER_FAILED:  # as the openai backend takes it
                self.stats.failures[f"finish_reason {response.finish_reason}"] += 1
                _fail(
                    future,
                    TeacherError(
                        f"vllm stopped the reply with finish_reason "
                        f"{response.finish_reason!r}: it failed the request"
                    ),
                )
                continue
            self.stats.record(response)
            if not future.done():
                future.set_result(response)


def _fail(future: asyncio.Future, exc: Exception) -> None:
    """Fail one request with ``exc`` (as a ``TeacherError``): a prompt past the model's
    context (vLLM's ``ValueError``: "The decoder prompt (length 5000) is longer than the
    maximum model length of 4096") as a ``ContextOverflow``, which ends its rollout, since
    every rerun would send the same prompt."""
    if future.done():
        return
    if not isinstance(exc, TeacherError) and outgrew_context(str(exc)):
        future.set_exception(
            ContextOverflow(f"the conversation outgrew the model's context window (vllm: {exc})")
        )
    else:
        future.set_exception(teacher_error("vllm", exc))
