"""Backends and request cache keys built from a ``TeachConfig``."""

from __future__ import annotations

import dataclasses

import pytest

from hsa.teachers.backends import transformers, vllm
from hsa.teachers.config import TeachConfig
from hsa.teachers.make import request_model
from hsa.teachers.request import ChatRequest


def test_vllm_engine_arguments_that_pick_the_engine_key_its_replies():
    plain = TeachConfig(backend="vllm", model="Qwen/Qwen3-8B")
    assert request_model(plain) == "Qwen/Qwen3-8B:hermes:decode-3"  # no engine arguments: none
    awq = dataclasses.replace(plain, vllm_args={"quantization": "awq"})
    pinned = dataclasses.replace(plain, vllm_args={"revision": "abc123"})
    keys = {request_model(c) for c in (plain, awq, pinned)}
    assert len(keys) == 3 and request_model(awq).endswith(":hermes:decode-3")
    # arguments that only change how fast or in how much memory it runs are the same engine
    roomy = dataclasses.replace(plain, vllm_args={"gpu_memory_utilization": 0.5})
    assert request_model(roomy) == request_model(plain)
    both = {"revision": "abc123", "gpu_memory_utilization": 0.5, "max_num_seqs": 8}
    assert request_model(dataclasses.replace(plain, vllm_args=both)) == request_model(pinned)


@pytest.mark.parametrize(("backend", "module"), [("vllm", vllm), ("transformers", transformers)])
def test_a_local_backends_decoding_version_keys_its_replies(monkeypatch, backend, module):
    config = TeachConfig(backend=backend, model="tiny")
    request = ChatRequest(request_model(config), [{"role": "user", "content": "hi"}])
    assert request.model == "tiny:hermes:decode-3"
    # a backend that decodes otherwise answers the same request otherwise: it is asked again
    monkeypatch.setattr(module, "DECODE_VERSION", 4)
    again = ChatRequest(request_model(config), request.messages)
    assert again.model == "tiny:hermes:decode-4" and again.key() != request.key()


def test_a_servers_requests_keep_their_keys_whatever_a_local_backend_decodes(monkeypatch):
    config = TeachConfig(backend="openai", base_url="http://x/v1", model="gpt-4o")
    request = ChatRequest(request_model(config), [{"role": "user", "content": "hi"}])
    assert request.model == "gpt-4o"  # the model the server is asked for, as it is
    for module in (vllm, transformers):
        monkeypatch.setattr(module, "DECODE_VERSION", 4)
    assert ChatRequest(request_model(config), request.messages).key() == request.key()
