"""Backends and request cache keys built from a ``TeachConfig``."""

from __future__ import annotations

import dataclasses

from hsa.teachers.config import TeachConfig
from hsa.teachers.make import request_model


def test_vllm_engine_arguments_that_pick_the_engine_key_its_replies():
    plain = TeachConfig(backend="vllm", model="Qwen/Qwen3-8B")
    assert request_model(plain) == "Qwen/Qwen3-8B:hermes"  # as before engine arguments counted
    awq = dataclasses.replace(plain, vllm_args={"quantization": "awq"})
    pinned = dataclasses.replace(plain, vllm_args={"revision": "abc123"})
    keys = {request_model(c) for c in (plain, awq, pinned)}
    assert len(keys) == 3 and request_model(awq).endswith(":hermes")
    # arguments that only change how fast or in how much memory it runs are the same engine
    roomy = dataclasses.replace(plain, vllm_args={"gpu_memory_utilization": 0.5})
    assert request_model(roomy) == request_model(plain)
    both = {"revision": "abc123", "gpu_memory_utilization": 0.5, "max_num_seqs": 8}
    assert request_model(dataclasses.replace(plain, vllm_args=both)) == request_model(pinned)
