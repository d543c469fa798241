"""Backends built from a ``TeachConfig``: the one place that maps ``backend:`` names to classes."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from pathlib import Path

from hsa.augment.planner import Variant
from hsa.envs.base import Environment
from hsa.teachers.backends import transformers as transformers_backend
from hsa.teachers.backends import vllm as vllm_backend
from hsa.teachers.backends.base import Backend
from hsa.teachers.config import LOCAL_BACKENDS, TeachConfig
from hsa.teachers.request import Sampling
from hsa.teachers.rollout import RolloutConfig


def rollout_config(config: TeachConfig) -> RolloutConfig:
    """How ``config``'s rollouts run: the model name requests carry (``request_model``), its
    sampling, step limit and repair turn."""
    return RolloutConfig(
        model=request_model(config),
        sampling=Sampling(
            config.temperature,
            config.top_p,
            config.max_tokens,
            chat_template_kwargs=config.chat_template_kwargs,
        ),
        max_steps_per_turn=config.max_steps_per_turn,
        repair=config.repair,
    )


def request_model(config: TeachConfig) -> str:
    """The model name requests carry, which keys the request cache.

    The oracles are keyed by backend (``hsa-oracle``, ``hsa-fixed-oracle``: one's replies
    are not the other's). A local model backend (``transformers``, ``vllm``) adds the call
    format it reads replies in before they are cached, so a cache shared by runs that read
    another format answers none of them; and for a local folder, a fingerprint of the files
    in it (names, sizes, modification times: weights, config, tokenizer, chat template), so a
    folder retrained or edited in place is asked again rather than answered with the old
    one's replies. vLLM's engine arguments that decide which engine answers (another
    revision, quantization or dtype of the model: ``TeachConfig.engine_args``) add a hash of
    them, so one engine's replies are never another's. Last comes the version of how the
    backend decodes (its ``DECODE_VERSION``): a change to how it turns a request into text
    (special tokens kept, the checkpoint's generation config left out) is asked again rather
    than answered with what the old decoding said."""
    if config.backend in ("oracle", "fixed-oracle"):
        return config.model or f"hsa-{config.backend}"
    name = config.model_name
    if config.backend not in LOCAL_BACKENDS:
        return name
    folder = Path(name)
    if folder.is_dir():
        digest = hashlib.sha256()
        for path in sorted(folder.iterdir()):
            if path.is_file():
                stat = path.stat()
                digest.update(f"{path.name}\0{stat.st_size}\0{stat.st_mtime_ns}\n".encode())
        name = f"{name}@{digest.hexdigest()[:16]}"
    if engine := config.engine_args():
        encoded = json.dumps(engine, sort_keys=True, ensure_ascii=False, default=str)
        name = f"{name}+{hashlib.sha256(encoded.encode()).hexdigest()[:16]}"
    return f"{name}:{config.call_format}:decode-{decode_version(config.backend)}"


def decode_version(backend: str) -> int:
    """The ``DECODE_VERSION`` of the local backend ``backend`` (``LOCAL_BACKENDS``)."""
    return {"transformers": transformers_backend, "vllm": vllm_backend}[backend].DECODE_VERSION


def make_backend(config: TeachConfig, env: Environment, variants: Mapping[str, Variant]) -> Backend:
    """The backend ``config`` names, built for ``env`` and the job's variants."""
    if config.backend in ("oracle", "fixed-oracle"):
        from hsa.teachers.oracle import FixedOracleResponder, OracleBackend, OracleResponder

        kind = OracleResponder if config.backend == "oracle" else FixedOracleResponder
        backend = OracleBackend(kind(env, variants=variants))
        backend.name = config.backend
        return backend
    if config.backend == "openai":
        from hsa.teachers.backends.openai import OpenAIBackend, OpenAIConfig
        from hsa.teachers.throttle import Backoff

        return OpenAIBackend(
            OpenAIConfig(
                base_url=str(config.base_url),
                model=config.model_name,
                api_key=config.api_key,
                api_key_header=config.api_key_header,
                concurrency=config.concurrency,
                timeout_s=config.timeout_s,
                max_retries=config.max_retries,
                backoff=Backoff(base_s=config.backoff_s),
                seed=config.seed,
                send_metadata=config.send_metadata,
                max_tokens_field=config.max_tokens_field,
            )
        )
    if config.backend == "transformers":
        from hsa.teachers.backends.transformers import TransformersBackend, TransformersConfig

        return TransformersBackend(
            TransformersConfig(
                model=config.model_name,
                batch_size=config.concurrency,
                call_format=config.call_format,
                chat_template_kwargs=dict(config.chat_template_kwargs),
            )
        )
    from hsa.teachers.backends.vllm import VLLMBackend, VLLMConfig

    return VLLMBackend(
        VLLMConfig(
            model=config.model_name,
            batch_size=config.concurrency,
            call_format=config.call_format,
            engine_args=dict(config.vllm_args),
            chat_template_kwargs=dict(config.chat_template_kwargs),
        )
    )
