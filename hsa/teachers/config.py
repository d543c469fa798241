"""``TeachConfig``: the settings of a teacher job, with the same names in YAML, Python and flags."""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from hsa.envs.base import SPLITS
from hsa.errors import TeacherError

ORACLE_MODEL = "hsa-oracle"

#: fields that change what a job writes; the others (how fast, where the server is) do not
_OUTPUT_FIELDS = (
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


@dataclass(frozen=True, slots=True)
class TeachConfig:
    """A teacher job. The same names are used in YAML configs and as ``hsa teach`` flags.

    ``backend``: ``oracle`` (the environment's scripted policy, no model), ``openai`` (needs
    ``base_url`` and ``model``) or ``vllm`` (needs ``model``; ``vllm_args`` go to
    ``vllm.LLM``). ``tasks``: the first N tasks of ``split`` (every split when None).
    ``variants_per_task``: harness variants per task drawn from ``recipe`` (a recipe file; the
    default recipe when None); 0 runs the canonical harness only; ``include_canonical`` adds it.
    ``samples``: rollouts per task and variant, each with its own sampling seed.
    ``concurrency``: rollouts (and requests) in flight, shared among ``workers`` processes
    (more than one only pays when the client's CPU is the bottleneck: fast endpoints, many
    short rollouts). ``repair``: give the model one more try after a malformed tool call.
    ``api_key`` is used for requests only: it is never written anywhere and not shown by
    ``repr``. ``ramp_s``: with the ``openai`` backend, the rollouts in flight start spread over
    this many seconds, so their requests do not all arrive, and come back, at once: answers
    that return together wait for each other's processing, every round trip.
    ``send_metadata``: pass the variant id in each request's ``metadata`` (needed by
    ``hsa serve oracle``; api.openai.com refuses metadata unless completions are stored).
    """

    env: str = "livestream"
    env_options: Mapping[str, Any] = field(default_factory=dict)
    backend: str = "oracle"
    model: str | None = None
    base_url: str | None = None
    api_key: str | None = field(default=None, repr=False, compare=False)
    tasks: int | None = None
    split: str | None = None
    variants_per_task: int = 1
    include_canonical: bool = False
    samples: int = 1
    recipe: str | None = None
    seed: int = 0
    concurrency: int = 64
    workers: int = 1
    max_steps_per_turn: int = 16
    repair: bool = False
    temperature: float = 0.0
    top_p: float = 1.0
    max_tokens: int | None = 1024
    timeout_s: float = 120.0
    max_retries: int = 8
    backoff_s: float = 0.5
    ramp_s: float = 0.25
    send_metadata: bool = True
    shard_size: int = 256
    cache: str | None = None
    call_format: str = "hermes"
    vllm_args: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        problems = []
        if self.backend not in ("oracle", "openai", "vllm"):
            problems.append(("backend", f"unknown backend {self.backend!r}: oracle, openai, vllm"))
        if self.backend == "openai" and not self.base_url:
            problems.append(("base_url", "the openai backend needs a base URL"))
        if self.backend in ("openai", "vllm") and not self.model:
            problems.append(("model", f"the {self.backend} backend needs a model name"))
        if self.ramp_s < 0:
            problems.append(("ramp_s", f"must not be negative, got {self.ramp_s}"))
        for name in ("concurrency", "workers", "shard_size", "samples", "max_steps_per_turn"):
            if getattr(self, name) < 1:
                problems.append((name, f"must be at least 1, got {getattr(self, name)}"))
        if self.tasks is not None and self.tasks < 1:
            problems.append(("tasks", f"must be at least 1, got {self.tasks}"))
        if self.variants_per_task < 0:
            problems.append(("variants_per_task", "must be 0 or more"))
        if self.split is not None and self.split not in SPLITS:
            problems.append(("split", f"unknown split {self.split!r}: {', '.join(SPLITS)}"))
        if problems:
            name, message = problems[0]
            raise TeacherError(message, where=name)

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
        out["base_url"] = public_url(self.base_url)
        return out

    def output_dict(self) -> dict[str, Any]:
        """The settings that decide what the job writes (not how fast, nor from where)."""
        public = self.public_dict()
        return {name: public[name] for name in _OUTPUT_FIELDS}

    def output_hash(self) -> str:
        """A hash of ``output_dict`` (with the recipe file's content, not its path)."""
        chosen = self.output_dict()
        if self.recipe is not None:
            # an unreadable recipe is reported when it is loaded
            with contextlib.suppress(OSError):
                chosen["recipe"] = hashlib.sha256(Path(self.recipe).read_bytes()).hexdigest()
        text = json.dumps(chosen, sort_keys=True, separators=(",", ":"), default=str)
        return hashlib.sha256(text.encode("utf-8")).hexdigest()

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], *, file: str | None = None) -> TeachConfig:
        """A config from a mapping (a YAML ``teach:`` section), unknown keys refused."""
        names = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(data) - names)
        if unknown:
            raise TeacherError(
                f"unknown teach setting(s) {', '.join(unknown)}; known: {', '.join(sorted(names))}",
                file=file,
            )
        try:
            return cls(**dict(data))
        except TeacherError as exc:
            raise TeacherError(exc.message, file=file, where=exc.where) from None
        except TypeError as exc:
            raise TeacherError(str(exc), file=file) from None


def public_url(url: str | None) -> str | None:
    """``url`` without user info, query or fragment, where credentials can hide."""
    if url is None:
        return None
    parts = urlsplit(url)
    host = parts.hostname or ""
    if parts.port is not None:
        host = f"{host}:{parts.port}"
    return urlunsplit((parts.scheme, host, parts.path, "", ""))
