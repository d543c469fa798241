"""``TeachConfig``: the settings of a teacher job, with the same names in YAML, Python and flags."""

from __future__ import annotations

import dataclasses
import os
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit, urlunsplit

from hsa.config import bounded, from_mapping, refuse, setting, settings_hash, typed
from hsa.envs.base import SPLITS
from hsa.envs.registry import corpus_hash, score_version, task_version
from hsa.errors import HsaError, TeacherError
from hsa.harness.model import call_format_problem

if TYPE_CHECKING:
    from hsa.augment.recipe import Recipe

ORACLE_MODEL = "hsa-oracle"
#: the backends a job can name (``hsa.teachers.make.make_backend`` builds them)
BACKENDS = ("oracle", "fixed-oracle", "openai", "vllm", "transformers")

#: the request fields an OpenAI-compatible endpoint takes the reply's token limit in
MAX_TOKENS_FIELDS = ("max_tokens", "max_completion_tokens")
#: the longest ramp and request timeout a job takes, seconds (an hour, a day): past them a
#: typo (1e300) would wait forever
RAMP_MAX, TIMEOUT_MAX = 3600.0, 86400.0
#: fields that change what a job writes; the others (how fast, where the server is) do not
OUTPUT_FIELDS = (
    "env",
    "env_options",
    "backend",
    "model",
    "tasks",
    "split",
    "variants_per_task",
    "include_canonical",
    "samples",
    "recipe",
    "seed",
    "max_steps_per_turn",
    "repair",
    "temperature",
    "top_p",
    "max_tokens",
    "shard_size",
    "call_format",
)
#: output settings whose hash counts only when set, so that the hashes of jobs that leave them
#: unset stay what they were before the settings existed
SET_OUTPUT_FIELDS = ("chat_template_kwargs",)
#: ``vllm_args`` that change how fast and in how much memory the engine runs, not which model
#: answers: left out of a job's identity, so a job rerun with less GPU memory resumes
VLLM_SPEED_ARGS = frozenset(
    (
        "gpu_memory_utilization",
        "swap_space",
        "cpu_offload_gb",
        "max_num_seqs",
        "max_num_batched_tokens",
        "enforce_eager",
        "enable_prefix_caching",
        "disable_log_stats",
        # where and on how many devices it runs, where it keeps weights, how it schedules
        "tensor_parallel_size",
        "pipeline_parallel_size",
        "data_parallel_size",
        "distributed_executor_backend",
        "download_dir",
        "enable_chunked_prefill",
        "block_size",
    )
)


#: the arguments hsa gives a chat template call itself (the messages, the tools, the
#: generation prompt, how to tokenize): a ``chat_template_kwargs`` key may not be one of them
_TEMPLATE_CALL = frozenset(
    (
        "conversation",
        "messages",
        "tools",
        "documents",
        "chat_template",
        "add_generation_prompt",
        "continue_final_message",
        "tokenize",
        "padding",
        "truncation",
        "max_length",
        "return_tensors",
        "return_dict",
        "return_assistant_tokens_mask",
        "tokenizer_kwargs",
    )
)


def template_kwargs_problems(kwargs: Mapping[str, Any]) -> list[tuple[str, str]]:
    """A ``chat_template_kwargs`` key that is an argument of the template call itself."""
    taken = sorted(set(kwargs) & _TEMPLATE_CALL)
    if not taken:
        return []
    return [
        (
            "chat_template_kwargs",
            f"{', '.join(map(repr, taken))}: an argument hsa gives the template call itself; "
            "chat_template_kwargs are the template's own variables (enable_thinking, say)",
        )
    ]


#: the backends that run a model in this process from a local folder (or, vLLM, a hub name)
LOCAL_BACKENDS = ("transformers", "vllm")


def local_model(backend: str, model: str | None) -> str | None:
    """``model`` as a config holds it: for a local backend, its folder however spelled
    (``tiny/``, ``./tiny``: one model, one run) as one path."""
    return os.path.normpath(model) if backend in LOCAL_BACKENDS and model else model


@dataclass(frozen=True, slots=True)
class TeachConfig:
    """A teacher job. The same names are used in YAML configs and as ``hsa teach`` flags."""

    env: str = setting("livestream", help="The environment whose tasks are run.")
    env_options: Mapping[str, Any] = setting(
        default_factory=dict, help="Options of the environment (e.g. its seed)."
    )
    backend: str = setting(
        "oracle",
        help="oracle (the environment's scripted policy, no model), fixed-oracle (the oracle "
        "writing canonical names and protocol whatever the harness), openai (an "
        "OpenAI-compatible endpoint: needs base_url and model), vllm (in process: needs model) "
        "or transformers (in process: needs model, a local folder).",
    )
    model: str | None = setting(
        None,
        help="Model name sent to the endpoint, loaded by vLLM, or the local model folder "
        "transformers loads.",
    )
    base_url: str | None = setting(
        None, help="Endpoint of the openai backend, e.g. http://127.0.0.1:8000/v1."
    )
    api_key: str | None = setting(
        None,
        secret=True,
        help="Used for requests only: never written anywhere and not shown by repr.",
    )
    api_key_header: str = setting(
        "Authorization",
        help="The HTTP header the API key goes in: Authorization, as 'Bearer KEY' (OpenAI, vLLM "
        "and most servers), or another name, which gets the key as it is (api-key for Azure "
        "OpenAI).",
    )
    tasks: int | None = setting(None, help="Run the first N tasks (unset: all).")
    split: str | None = setting(None, help="Only tasks of this split (unset: every split).")
    variants_per_task: int = setting(
        1,
        help="Harness variants per task drawn from the recipe (0: the canonical harness only); "
        "a task the recipe has fewer distinct variants for runs under those, counted in the "
        "summary and the manifest.",
    )
    include_canonical: bool = setting(
        False, help="Also run every task under the unchanged harness."
    )
    samples: int = setting(1, help="Rollouts per task and variant, each with its own seed.")
    recipe: str | None = setting(
        None, help="Recipe file the variants are drawn from (unset: the default recipe)."
    )
    seed: int = setting(0, help="Seed of variant drawing and sampling.")
    concurrency: int = setting(
        64, help="Rollouts and requests in flight, shared among the worker processes."
    )
    workers: int = setting(
        1,
        help="Processes sharing the job; more than one pays only when the client's CPU is the "
        "limit (fast endpoints, many short rollouts).",
    )
    max_steps_per_turn: int = setting(
        32,
        help="Model steps allowed per user turn (the longest reference solution of the shipped "
        "corpora takes 20: tau2 airline's task 44, 19 calls and its answer).",
    )
    repair: bool = setting(False, help="Give the model one more try after a malformed tool call.")
    temperature: float = setting(0.0, help="Sampling temperature.")
    top_p: float = setting(1.0, help="Nucleus sampling mass.")
    max_tokens: int | None = setting(
        1024, help="Tokens per model answer (null in a config file: no limit)."
    )
    max_tokens_field: str = setting(
        "max_tokens",
        help="The request field the openai backend sends --max-tokens in: max_tokens (most "
        "servers) or max_completion_tokens, its newer name (OpenAI's reasoning models refuse "
        "max_tokens; vLLM's server takes either).",
    )
    timeout_s: float = setting(120.0, help="Request timeout, seconds.")
    max_retries: int = setting(8, help="Retries of a failed request.")
    backoff_s: float = setting(
        0.5,
        help="First retry's backoff ceiling, seconds (doubles each retry, up to 30 s; a "
        "server's Retry-After is waited for up to 30 s too).",
    )
    ramp_s: float = setting(
        0.25,
        help="With the openai backend, the rollouts in flight start spread over this many "
        "seconds, so their requests do not all arrive, and come back, at once.",
    )
    send_metadata: bool = setting(
        True,
        help="Send the variant id in each request's metadata (hsa serve oracle needs it; "
        "api.openai.com refuses it unless completions are stored).",
    )
    shard_size: int = setting(256, help="Rows per Parquet shard.")
    cache: str | None = setting(None, help="Request cache file (unset: OUT/cache.sqlite).")
    call_format: str = setting(
        "hermes",
        help="How the model of the vllm or transformers backend writes tool calls (an hsa call "
        "format).",
    )
    vllm_args: Mapping[str, Any] = setting(
        default_factory=dict,
        help="Engine arguments of the vllm backend's vllm.LLM (max_model_len, say).",
    )
    chat_template_kwargs: Mapping[str, Any] = setting(
        default_factory=dict,
        help="Extra arguments of the model's chat template ({enable_thinking: false} for "
        "Qwen3, say): the vllm and transformers backends apply the template with them, the "
        "openai backend sends them as the request's chat_template_kwargs (vLLM's and SGLang's "
        "servers read it).",
    )

    def __post_init__(self) -> None:
        refuse(typed(self), TeacherError)
        object.__setattr__(self, "model", local_model(self.backend, self.model))
        problems = []
        if self.backend not in BACKENDS:
            known = ", ".join(BACKENDS)
            problems.append(("backend", f"unknown backend {self.backend!r}: {known}"))
        if self.backend == "openai" and not self.base_url:
            problems.append(("base_url", "the openai backend needs a base URL"))
        if self.backend in ("openai", "vllm", "transformers") and not self.model:
            problems.append(("model", f"the {self.backend} backend needs a model name"))
        if self.backend in ("oracle", "fixed-oracle") and self.model:
            # rows name their teacher backend/model: a model it never ran would be false
            problems.append(("model", f"the {self.backend} backend runs no model; leave it out"))
        problems += bounded(
            self, "temperature", "backoff_s", "max_retries", "variants_per_task", "seed", low=0
        )
        problems += bounded(self, "ramp_s", low=0, high=RAMP_MAX)
        problems += bounded(self, "timeout_s", low=0, high=TIMEOUT_MAX, low_open=True)
        problems += bounded(self, "top_p", low=0, high=1, low_open=True)
        problems += bounded(
            self,
            *("max_tokens", "concurrency", "workers", "shard_size", "samples"),
            *("max_steps_per_turn", "tasks"),
            low=1,
        )
        if self.split is not None and self.split not in SPLITS:
            problems.append(("split", f"unknown split {self.split!r}: {', '.join(SPLITS)}"))
        url = self.base_url if self.backend == "openai" else None
        problems += endpoint_problems(url, self.api_key_header, self.api_key)
        problems += template_kwargs_problems(self.chat_template_kwargs)
        problems += max_tokens_field_problems(self.max_tokens_field)
        if (why := call_format_problem(self.call_format)) is not None:
            problems.append(("call_format", why))
        refuse(problems, TeacherError)

    @property
    def model_name(self) -> str:
        return self.model or ORACLE_MODEL

    @property
    def teacher(self) -> str:
        """How rows name their teacher: ``backend/model``."""
        return f"{self.backend}/{self.model_name}"

    def public_dict(self) -> dict[str, Any]:
        """The config as it may be written down: no API key, no credentials in the URL."""
        out = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        out.pop("api_key")
        out["env_options"] = dict(self.env_options)
        out["vllm_args"] = dict(self.vllm_args)
        out["chat_template_kwargs"] = dict(self.chat_template_kwargs)
        out["base_url"] = public_url(self.base_url)
        return out

    def output_dict(self) -> dict[str, Any]:
        """The settings that decide what the job writes (not how fast, nor from which
        server), files as named (``output_hash`` takes the recipe's and corpus's content)."""
        public = self.public_dict()
        out = {name: public[name] for name in OUTPUT_FIELDS}
        out |= {name: public[name] for name in SET_OUTPUT_FIELDS if public[name]}
        # only when set too, so jobs without them keep their hashes
        if engine := self.engine_args():
            out["vllm_args"] = engine
        return out

    def engine_args(self) -> dict[str, Any]:
        """The ``vllm_args`` that decide which engine answers (a revision, a quantization, a
        dtype, ``max_model_len``...): none but the vllm backend's, and none of those that only
        change how fast it runs (``VLLM_SPEED_ARGS``)."""
        if self.backend != "vllm":
            return {}
        return {k: self.vllm_args[k] for k in sorted(self.vllm_args) if k not in VLLM_SPEED_ARGS}

    def output_hash(self) -> str:
        """A hash of ``output_dict`` (with the content of the recipe file and of the corpus
        ``env_options.path`` names, not their paths: ``corpus_identity``), of the versions of
        hsa's code that decide the episodes (``code_versions``) and, for a local backend, of
        how it decodes (another answers the same request otherwise)."""
        from hsa.teachers.make import decode_version
        from hsa.teachers.task_variants import recipe_from

        recipe = self.recipe
        chosen = {
            **self.output_dict(),
            "env_options": corpus_identity(self.env, self.env_options),
            **code_versions(
                self.env, lambda: recipe_from(recipe or None), variants=bool(self.variants_per_task)
            ),
        }
        if self.backend in LOCAL_BACKENDS:  # (only there: other jobs keep their hashes)
            chosen["decode_version"] = decode_version(self.backend)
        return settings_hash(chosen, files=("recipe",))

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], *, file: str | None = None) -> TeachConfig:
        """A config from a mapping (a YAML ``teach:`` section), unknown keys refused."""
        config: TeachConfig = from_mapping(cls, data, error=TeacherError, file=file)
        return config


def corpus_identity(env: str, options: Mapping[str, Any]) -> dict[str, Any]:
    """Environment ``env``'s ``options`` as an output hash takes them: the corpus ``path`` by
    the content of the files the environment reads of it (``corpus_hash``), so that an edited
    corpus is another job, one corpus named two ways (relative, absolute) is one, and a job
    writing into a folder inside it (its ``--out``) does not change it. A path that cannot
    be read is kept as written (the job says why when it loads the environment); options
    without a path are as they are."""
    path = options.get("path")
    if not isinstance(path, str | os.PathLike):
        return dict(options)
    try:
        return {**options, "path": corpus_hash(env, Path(path))}
    except OSError:
        return dict(options)


#: the rules that add hooks to a variant's harness; episodes fire them on the surface since
#: hook version 2 (``hsa.teachers.surface_hooks``; before, no row or request showed them)
ADDS_HOOKS = frozenset({"hooks.neutral_extra"})


def added_hooks_version(versions: Mapping[str, str] | None) -> dict[str, int]:
    """``{"added_hooks": 2}`` for the output hash of a job whose recipe (its rules'
    ``versions``) draws a rule that adds hooks, so that a job of the code before (which
    showed none of them) is not resumed with rows of this one; empty for every other job,
    which keeps its hash."""
    return {"added_hooks": 2} if versions and ADDS_HOOKS & versions.keys() else {}


def rule_versions(recipe: Callable[[], Recipe]) -> dict[str, str] | None:
    """The versions of the rules of the recipe ``recipe()`` loads (``Recipe.versions``), for
    an output hash; None when it cannot load (its error is reported where it is loaded)."""
    try:
        return recipe().versions
    except HsaError:
        return None


def code_versions(env: str, recipe: Callable[[], Recipe], *, variants: bool) -> dict[str, Any]:
    """The versions of hsa's code that decide what a job makes of its settings, for its output
    hash or a training run's record (``hsa.train.rl.run_versions``): of variant planning
    (another plans other variants from the same recipe), of rendering (another shows the same
    events otherwise), of the rules of the recipe ``recipe()`` loads, with ``added_hooks``
    where the job draws ``variants`` (the canonical harness adds no hook), and of the
    environment ``env``'s tasks and scoring (another gives other tasks, or scores the same
    episode otherwise; past 1 only, so that older hashes are kept)."""
    from hsa.augment.planner import PLAN_VERSION
    from hsa.harness.render import RENDER_VERSION

    rules = rule_versions(recipe)
    found: dict[str, Any] = {"planner": PLAN_VERSION, "render": RENDER_VERSION}
    found["rule_versions"] = rules
    if variants:
        found |= added_hooks_version(rules)
    if (scoring := score_version(env)) != 1:
        found["score_version"] = scoring
    if (tasks := task_version(env)) != 1:
        found["task_version"] = tasks
    return found


def max_tokens_field_problems(field: str) -> list[tuple[str, str]]:
    """A ``max_tokens_field`` that is none of ``MAX_TOKENS_FIELDS``."""
    if field in MAX_TOKENS_FIELDS:
        return []
    return [("max_tokens_field", f"{field!r} is neither max_tokens nor max_completion_tokens")]


def public_url(url: str | None) -> str | None:
    """``url`` without user info, query or fragment, where credentials can hide."""
    if url is None:
        return None
    parts = urlsplit(url)
    host = parts.hostname or ""
    if parts.port is not None:
        host = f"{host}:{parts.port}"
    return urlunsplit((parts.scheme, host, parts.path, "", ""))


#: an HTTP header name (RFC 9110's token)
_HEADER_NAME = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+")


def endpoint_problems(
    base_url: str | None, key_header: str, api_key: str | None = None
) -> list[tuple[str, str]]:
    """What is wrong with an OpenAI-compatible endpoint's base URL (None: none to check), the
    name of the header its key goes in (``api_key_header``) and the key (never shown)."""
    problems = []
    if base_url is not None and any(c.isspace() for c in base_url):
        # urlsplit keeps it, and the request goes to a path no server has ("/v1 /chat/...")
        problems.append(
            (
                "base_url",
                f"{_shown(base_url)!r} holds a space or another whitespace character, which no "
                "URL may (percent-encode one it needs as %20): remove it",
            )
        )
    elif base_url is not None and not base_url.startswith(("http://", "https://")):
        problems.append(("base_url", f"{base_url!r} is not an http:// or https:// URL"))
    elif base_url is not None and (broken := _url_problem(base_url)) is not None:
        problems.append(("base_url", broken))
    elif base_url is not None and urlsplit(base_url).username is not None:
        problems.append(
            (
                "base_url",
                f"{public_url(base_url)}: a user name or password in the URL is not sent (the "
                "key goes in a header); pass the key with --api-key-env",
            )
        )
    if not (isinstance(key_header, str) and _HEADER_NAME.fullmatch(key_header)):
        problems.append(("api_key_header", f"{key_header!r} is not an HTTP header name"))
    if isinstance(api_key, str) and any(ord(c) < 32 or ord(c) == 127 for c in api_key):
        problems.append(
            (
                "api_key",
                "the API key holds a line break or another control character, which no HTTP "
                "header may carry (a key file saved with Windows line endings?)",
            )
        )
    return problems


def _url_problem(url: str) -> str | None:
    """Why ``url`` (an http(s) URL) is not one a request can be sent to, or None."""
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 (it raises for a port that is not a number, or out of range)
    except ValueError as exc:
        return f"{_shown(url)!r} is not a URL: {exc}"
    if not parts.hostname:
        return f"{_shown(url)!r} names no host"
    return None


def _shown(url: str) -> str:
    """``url`` as an error may show it: without user info, query or fragment, where
    credentials can hide (``public_url``, for a URL that does not read as one)."""
    return re.sub(r"//[^/]*@", "//", url).split("?", 1)[0].split("#", 1)[0]
