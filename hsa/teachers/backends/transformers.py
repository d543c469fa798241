"""The ``transformers`` backend: a local Hugging Face model answering chat requests in process.

Like the ``vllm`` backend, requests from many rollouts are gathered into batches -- one
``model.generate`` call per group of requests sharing a tools list (the chat template takes
one) and a token limit -- rendered with the model's chat template, padded on the left and run
in a worker thread, so the event loop keeps gathering the next batch. The answer text is
parsed as the vllm backend parses it (``output.parse_output``).

Only the request decides how tokens are chosen: greedy at temperature 0, otherwise each
request is sampled with its own generator, seeded by its ``seed`` (or, unset, by its key),
so an answer does not depend on which requests shared its batch. The checkpoint's own
decoding settings (a ``generation_config.json`` with ``repetition_penalty``,
``no_repeat_ngram_size``, ``num_beams``, ``bad_words_ids``...) are not applied; only its
end-of-sequence tokens are. torch and transformers are imported when the model loads. This
backend is for small models, CPUs and checkpoints vLLM cannot run; for throughput on a GPU
use ``vllm``.
"""

from __future__ import annotations

import asyncio
import json
import re
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hsa.config import bounded, refuse, same_as, setting
from hsa.errors import TeacherError, first_line
from hsa.harness.model import call_format_problem
from hsa.harness.tokenizers import chat_template_problem, load_failure, tokenizer_problem
from hsa.teachers.backends.base import BatchingBackend, Waiting
from hsa.teachers.backends.output import parse_output
from hsa.teachers.config import TeachConfig
from hsa.teachers.request import ChatRequest, ChatResponse, Sampling, Usage

#: the version of how this backend turns a request into answer text, part of the cache key
#: of its requests (``make.request_model``): another version answers the same request
#: otherwise, so a cache never serves one version's replies to another
#: (2: the checkpoint's generation_config.json no longer shapes the answer; 3: a hermes reply
#: read with ``CallFormat.parse_reply``, its last block's closing tag optional as in vLLM's
#: parser)
DECODE_VERSION = 3
DTYPES = ("auto", "float32", "bfloat16", "float16")
_DEVICE = re.compile(r"auto|cpu|cuda(:\d+)?")


@dataclass(frozen=True, slots=True)
class TransformersConfig:
    """A local model run with ``transformers``' ``generate``.

    ``call_format`` names the hsa call format the model writes API tool calls in (``hermes``
    for Qwen, Hermes and most tool-tuned open models).
    """

    model: str = setting(
        help="A local model folder (config, weights and tokenizer, as save_pretrained writes them)."
    )
    batch_size: int = setting(32, help="Most requests in one generate call.")
    batch_wait_s: float = setting(0.01, help="How long a batch waits for more requests, seconds.")
    call_format: str = same_as(TeachConfig, "call_format")
    max_new_tokens: int = setting(512, help="Tokens per answer when a request sets no max_tokens.")
    device: str = setting(
        "auto",
        help="Where the model runs: auto (a CUDA GPU if torch sees one), cpu, cuda or cuda:N.",
    )
    dtype: str = setting(
        "auto", help="Weights' dtype: auto (as saved), float32, bfloat16 or float16."
    )
    chat_template_kwargs: Mapping[str, Any] = setting(
        default_factory=dict, help="Extra arguments of the model's chat template."
    )

    def __post_init__(self) -> None:
        problems = [] if self.model else [("model", "the transformers backend needs a model")]
        problems += bounded(self, "batch_size", "max_new_tokens", low=1)
        problems += bounded(self, "batch_wait_s", low=0)
        if (why := call_format_problem(self.call_format)) is not None:
            problems.append(("call_format", why))
        if not _DEVICE.fullmatch(self.device):
            problems.append(("device", f"unknown device {self.device!r}: auto, cpu, cuda, cuda:N"))
        if self.dtype not in DTYPES:
            problems.append(("dtype", f"unknown dtype {self.dtype!r}: {', '.join(DTYPES)}"))
        refuse(problems, TeacherError)


@dataclass(frozen=True, slots=True)
class Batch:
    """One ``generate`` call: conversations sharing a tools list and a token limit."""

    conversations: list[list[dict[str, Any]]]
    sampling: list[Sampling]
    seeds: list[int]
    tools: list[dict[str, Any]] | None
    max_new_tokens: int
    indexes: list[int]  # positions of these requests in the gathered list


@dataclass(frozen=True, slots=True)
class Completion:
    """One row of a ``generate`` call: the answer text, its usage and why it ended."""

    text: str
    usage: Usage
    finish_reason: str


def template_messages(request: ChatRequest) -> list[dict[str, Any]]:
    """The request's messages as chat templates read them: tool-call arguments as objects.

    The wire format carries arguments as JSON text, which a template's ``tojson`` would
    quote a second time. Arguments that are not a JSON object stay text.
    """
    out = request.wire_messages()
    for message in out:
        calls = message.get("tool_calls")
        if not calls:
            continue
        message["tool_calls"] = [
            {**call, "function": {**call["function"], "arguments": _arguments(call["function"])}}
            for call in calls
        ]
    return out


def _arguments(function: Mapping[str, Any]) -> Any:
    arguments = function.get("arguments")
    if not isinstance(arguments, str):
        return arguments
    try:
        value = json.loads(arguments or "{}")
    except ValueError:
        return arguments
    return value if isinstance(value, dict) else arguments


def request_seed(request: ChatRequest) -> int:
    """The seed a sampled request is drawn with: its own, else one derived from its key."""
    seed = request.sampling.seed
    return (int(request.key()[:16], 16) if seed is None else seed) % (1 << 63)


def build_batches(requests: Sequence[ChatRequest], max_new_tokens: int) -> list[Batch]:
    """Group requests by tools list and token limit (``max_new_tokens`` when a request sets
    none), keeping first-seen order."""
    groups: dict[str, Batch] = {}
    for index, request in enumerate(requests):
        tools = [dict(t) for t in request.tools] or None
        limit = request.sampling.max_tokens or max_new_tokens
        key = json.dumps([limit, tools], ensure_ascii=False, separators=(",", ":"))
        batch = groups.get(key)
        if batch is None:
            batch = groups[key] = Batch([], [], [], tools, limit, [])
        batch.conversations.append(template_messages(request))
        batch.sampling.append(request.sampling)
        batch.seeds.append(request_seed(request))
        batch.indexes.append(index)
    return list(groups.values())


class SeededSampler:
    """A logits processor that samples the rows with a temperature, each from its own generator.

    ``generate`` runs greedy; for a sampled row this leaves only the drawn token possible,
    so the argmax is the draw. Rows at temperature 0 pass through untouched.
    """

    def __init__(self, sampling: Sequence[Sampling], seeds: Sequence[int]):
        self.rows = [
            (row, s.temperature, s.top_p, seed)
            for row, (s, seed) in enumerate(zip(sampling, seeds, strict=True))
            if s.temperature > 0
        ]
        self.generators: list[Any] = []

    def __call__(self, input_ids: Any, scores: Any) -> Any:
        import torch

        if not self.generators:
            self.generators = [
                torch.Generator(device=scores.device).manual_seed(seed)
                for _, _, _, seed in self.rows
            ]
        out = scores.clone()
        for (row, temperature, top_p, _), generator in zip(self.rows, self.generators, strict=True):
            probs = torch.softmax(scores[row].float() / temperature, dim=-1)
            if top_p < 1:
                ordered, order = torch.sort(probs, descending=True)
                # keep the smallest head of the distribution whose mass reaches top_p
                drop = torch.cumsum(ordered, dim=-1) - ordered >= top_p
                probs = probs.scatter(0, order[drop], 0.0)
            token = torch.multinomial(probs, 1, generator=generator)
            out[row] = float("-inf")
            out[row, token] = 0.0
        return out


def eos_ids(model: Any, tokenizer: Any) -> list[int]:
    """Tokens that end an answer: the model's generation config's and the tokenizer's."""
    found = getattr(getattr(model, "generation_config", None), "eos_token_id", None)
    ids = [found] if isinstance(found, int) else list(found or ())
    if tokenizer.eos_token_id is not None and tokenizer.eos_token_id not in ids:
        ids.append(tokenizer.eos_token_id)
    return ids


@contextmanager
def _without_checkpoint_settings(model: Any) -> Iterator[None]:
    """The model with a blank generation config, but for its special tokens, while the
    block runs.

    ``generate`` fills every setting its ``generation_config`` leaves unset from the model's
    own (the checkpoint's ``generation_config.json``), and a setting whose neutral value is
    None (``bad_words_ids``, ``suppress_tokens``, ``min_new_tokens``) cannot be set in it to
    keep the checkpoint's out: so the model's is swapped for a blank one, and put back after.
    Batches of one backend run one at a time, so no other call sees the swap.
    """
    from transformers import GenerationConfig

    saved = getattr(model, "generation_config", None)
    if saved is None:
        yield
        return
    model.generation_config = GenerationConfig(
        bos_token_id=saved.bos_token_id,
        eos_token_id=saved.eos_token_id,
        pad_token_id=saved.pad_token_id,
    )
    try:
        yield
    finally:
        model.generation_config = saved


def generate(
    model: Any, tokenizer: Any, batch: Batch, chat_template_kwargs: Mapping[str, Any]
) -> list[Completion]:
    """Run one batch through ``model.generate`` (blocking): one ``Completion`` per row."""
    import torch
    from transformers import GenerationConfig, LogitsProcessorList

    encoded = tokenizer.apply_chat_template(
        batch.conversations,
        tools=batch.tools,
        add_generation_prompt=True,
        tokenize=True,
        padding=True,
        return_dict=True,
        return_tensors="pt",
        tokenizer_kwargs={"padding_side": "left"},
        **dict(chat_template_kwargs),
    )
    input_ids, attention_mask = encoded["input_ids"], encoded["attention_mask"]
    device = getattr(model, "device", None)
    if device is not None:
        input_ids, attention_mask = input_ids.to(device), attention_mask.to(device)
    stops = eos_ids(model, tokenizer)
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else stops[0]
    config = GenerationConfig(
        max_new_tokens=batch.max_new_tokens,
        do_sample=False,  # sampled rows are drawn by SeededSampler
        eos_token_id=stops,
        pad_token_id=pad,
    )
    processors = LogitsProcessorList()
    if any(s.temperature > 0 for s in batch.sampling):
        processors.append(SeededSampler(batch.sampling, batch.seeds))
    with torch.inference_mode(), _without_checkpoint_settings(model):
        output = model.generate(
            input_ids=input_ids,
            attention_mask=attention_mask,
            generation_config=config,
            logits_processor=processors,
        )
    new_tokens = output[:, input_ids.shape[1] :].tolist()
    prompt_tokens = attention_mask.sum(dim=1).tolist()
    if len(new_tokens) != len(batch.indexes):
        raise TeacherError(
            f"generate returned {len(new_tokens)} rows for {len(batch.indexes)} requests"
        )
    stop_set, skip = set(stops), {*stops, pad}
    out = []
    for tokens, prompt in zip(new_tokens, prompt_tokens, strict=True):
        end = next((i for i, t in enumerate(tokens) if t in stop_set), None)
        answer = tokens if end is None else tokens[:end]
        # the stop and pad tokens go; every other token is kept, special or not, since some
        # models mark their tool-call tags special
        text = tokenizer.decode(
            [t for t in answer if t not in skip],
            skip_special_tokens=False,
            clean_up_tokenization_spaces=False,
        )
        out.append(
            Completion(
                text=text,
                usage=Usage(int(prompt), len(tokens) if end is None else end + 1),
                finish_reason="length" if end is None else "stop",
            )
        )
    return out


def load_model(config: TransformersConfig) -> tuple[Any, Any]:
    """The model and tokenizer in ``config.model``, a local folder (nothing is downloaded)."""
    folder = Path(config.model)
    if not folder.is_dir():
        raise TeacherError(
            "no model folder here; the transformers backend loads a local folder "
            "(download a model first, e.g. with `hf download`)",
            file=str(folder),
        )
    if not (folder / "config.json").is_file():
        raise TeacherError(
            "not a model folder: it has no config.json (save_pretrained writes one)",
            file=str(folder),
        )
    try:
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer
    except ImportError:
        raise TeacherError(
            "the transformers backend needs torch and transformers: pip install 'hsa[train]'"
        ) from None
    device = config.device
    if device == "auto":
        device = "cuda" if torch.cuda.is_available() else "cpu"
    elif device.startswith("cuda") and not torch.cuda.is_available():
        raise TeacherError(f"device {device!r}, but torch sees no CUDA GPU; use device cpu")
    try:
        tokenizer = AutoTokenizer.from_pretrained(folder, local_files_only=True)
    except Exception as exc:
        said = f"cannot load the model: {first_line(exc)}"
        raise TeacherError(load_failure(folder, said), file=str(folder)) from None
    # the tokenizer is checked before the weights load: a base model's are refused at once
    problem = tokenizer_problem(tokenizer, folder) or chat_template_problem(
        tokenizer, "model, --model"
    )
    if problem is not None:
        raise TeacherError(problem, file=str(folder))
    try:
        model = AutoModelForCausalLM.from_pretrained(
            folder, dtype=config.dtype, device_map=device, local_files_only=True
        )
    except Exception as exc:  # a truncated download raises safetensors' own error
        said = f"cannot load the model: {first_line(exc)}"
        raise TeacherError(load_failure(folder, said), file=str(folder)) from None
    model.eval()
    return model, tokenizer


class TransformersBackend(BatchingBackend):
    """Batches concurrent chat requests into ``model.generate`` calls.

    ``model`` and ``tokenizer`` may be given (already loaded, or stand-ins in tests);
    otherwise they are loaded from ``config.model`` on the first batch. A tokenizer without
    a pad token pads with its end-of-sequence token.
    """

    name = "transformers"

    def __init__(self, config: TransformersConfig, *, model: Any = None, tokenizer: Any = None):
        if (model is None) != (tokenizer is None):
            raise TeacherError("give both a model and its tokenizer, or neither")
        super().__init__(config.batch_size, config.batch_wait_s)
        self.config = config
        self._model = model
        self._tokenizer = tokenizer

    async def start(self) -> None:
        """Load the model before the first request: a missing or broken model folder is a
        setup error of the job, not a failure of every request."""
        if self._model is None:
            self._model, self._tokenizer = await asyncio.to_thread(load_model, self.config)

    async def run_batch(self, taken: list[Waiting]) -> None:
        await self.start()
        if self._tokenizer.pad_token is None:
            self._tokenizer.pad_token = self._tokenizer.eos_token
        requests = [r for r, _ in taken]
        for batch in build_batches(requests, self.config.max_new_tokens):
            started = time.monotonic()
            self.stats.requests += len(batch.indexes)
            completions = await asyncio.to_thread(
                generate, self._model, self._tokenizer, batch, self.config.chat_template_kwargs
            )
            latency = time.monotonic() - started
            for completion, index in zip(completions, batch.indexes, strict=True):
                request, future = taken[index]
                response = ChatResponse(
                    message=parse_output(completion.text, request, self.config.call_format),
                    finish_reason=completion.finish_reason,
                    usage=completion.usage,
                    latency_s=latency,
                )
                self.stats.record(response)
                if not future.done():
                    future.set_result(response)
