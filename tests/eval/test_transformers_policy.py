"""A local transformers model under evaluation: a tiny untrained model, end to end on CPU."""

from __future__ import annotations

import pyarrow.parquet as pq

from hsa.envs.registry import get
from hsa.eval.config import EvalConfig
from hsa.eval.metrics import FAILURES
from hsa.eval.runner import EPISODES, evaluate
from tests.tinymodels import save_tiny


def test_a_tiny_model_fails_the_tasks_and_every_failure_is_classified(tmp_path):
    env = get("livestream")
    texts = [*(t.turns[0] for t in env.tasks("test")[:50]), "<tool_call>", '{"name": "x"}']
    model = save_tiny(tmp_path / "tiny", texts)
    config = EvalConfig(
        policy="transformers",
        model=str(model),
        tasks=3,
        variants=1,
        max_tokens=12,
        max_steps_per_turn=2,
    )
    report = evaluate(config, tmp_path / "run", env=env)
    rows = pq.read_table(tmp_path / "run" / EPISODES).to_pylist()
    assert len(rows) == 6 and report.requests >= 6
    assert all(r["failure"] in FAILURES for r in rows if not r["success"])
    assert all(r["tokens_in"] > 0 and r["tokens_out"] > 0 for r in rows)
    assert report.summary["suites"]["canonical"]["success"] == 0.0
    assert report.summary["model"] == f"transformers/{model}"


def test_a_local_model_retrained_in_place_is_asked_again(tmp_path):
    import dataclasses
    import os

    from hsa.teachers.make import request_model

    model = save_tiny(tmp_path / "tiny", ["hello world", "<tool_call>"])
    config = EvalConfig(policy="transformers", model=str(model)).teach_config()
    first = request_model(config)
    assert first.startswith(f"{model}@") and request_model(config) == first
    # the weights, and the chat template transformers 5 writes beside them, are the model
    for name in ("model.safetensors", "chat_template.jinja"):
        changed = model / name
        stamp = changed.stat()
        os.utime(changed, ns=(stamp.st_atime_ns, stamp.st_mtime_ns + 1))
        assert request_model(config) != first
        first = request_model(config)
    # replies are cached as read in the call format: another format is another request
    other = dataclasses.replace(config, call_format="json")
    assert request_model(other) != first
    openai = EvalConfig(policy="openai", base_url="http://x/v1", model="m").teach_config()
    assert request_model(openai) == "m"  # what the server is asked for, as it is
    # a hub name vLLM loads: the call format still keys the replies read in it
    hub = EvalConfig(policy="vllm", model="Qwen/Qwen3-8B").teach_config()
    assert request_model(hub) != request_model(dataclasses.replace(hub, call_format="json"))
    # the oracles answer differently: one cache never gives one the other's replies
    oracles = [EvalConfig(policy=p).teach_config() for p in ("oracle", "fixed-oracle")]
    assert [request_model(c) for c in oracles] == ["hsa-oracle", "hsa-fixed-oracle"]
