"""The Environment interface: ``oracle()`` is the one way to an environment's scripted policy,
and ``solve``, ``hsa env check`` and the oracle teacher all go through it."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

import pytest

from hsa.envs.base import Environment, Outcome, Task, ToolOutput
from hsa.envs.reference_check import check
from hsa.errors import EnvError, TeacherError
from hsa.harness.events import AssistantMessage, Event, ToolCall, ToolResult
from hsa.harness.model import Harness, Tool
from hsa.teachers.config import TeachConfig
from hsa.teachers.make import make_backend
from hsa.teachers.oracle import OracleResponder

TASKS = [Task("t1", "echo", ("say hi",)), Task("t2", "echo", ("say bye",))]


def _echo(task: Task, events: Sequence[Event]) -> list[Event]:
    results = [e for e in events if isinstance(e, ToolResult)]
    if not results:
        return [ToolCall("call_0", "echo", {"text": task.turns[0]})]
    return [AssistantMessage(json.loads(results[-1].content)["echo"])]


class Echo(Environment):
    """Echoes its argument back; solved when the answer is the user's message."""

    name = "echo"

    def __init__(self, policy: Any = _echo):
        self.policy = policy
        self.asked = 0

    def harness(self) -> Harness:
        params = {"type": "object", "properties": {"text": {"type": "string"}}}
        return Harness("echo", tools=(Tool("echo", parameters=params),))

    def tasks(self, split: str | None = None) -> list[Task]:
        return list(TASKS)

    def reset(self, task: Task) -> dict:
        return {}

    def execute(self, state: Any, tool: str, args: Mapping[str, Any]) -> ToolOutput:
        return ToolOutput(json.dumps({"echo": args["text"]}))

    def score(self, task: Task, state: Any, events: Sequence[Event]) -> Outcome:
        answers = [e.text for e in events if isinstance(e, AssistantMessage)]
        return Outcome(answers == list(task.turns), () if answers else ("no answer",))

    def oracle(self):
        self.asked += 1
        return self.policy


class NoOracle(Echo):
    oracle = Environment.oracle  # what an environment without a scripted policy inherits


def test_solve_env_check_and_the_oracle_teacher_reach_the_policy_through_oracle():
    env = Echo()
    episode = env.solve(TASKS[0])
    assert env.asked == 1
    assert episode.trajectory.source == "oracle"
    assert [e.text for e in episode.events if isinstance(e, AssistantMessage)] == ["say hi"]
    assert check(env).ok and env.asked == 3
    responder = OracleResponder(env)
    assert env.asked == 4 and responder.policy is _echo
    make_backend(TeachConfig(backend="oracle"), env, {})
    assert env.asked == 5


def test_an_environment_without_an_oracle_says_so_everywhere():
    env = NoOracle()
    with pytest.raises(EnvError, match="environment 'echo' has no oracle"):
        env.oracle()
    with pytest.raises(EnvError, match="has no oracle"):
        env.solve(TASKS[0])
    with pytest.raises(EnvError, match="has no oracle"):
        check(env)
    with pytest.raises(TeacherError, match=r"has no oracle .*; use --backend openai or vllm"):
        make_backend(TeachConfig(backend="oracle"), env, {})


@pytest.mark.parametrize(
    ("data", "said"),
    [
        ({}, "a task needs 'id' and 'env', a non-empty string"),
        ({"id": "x"}, "a task needs 'env'"),
        ({"id": 3, "env": "e"}, "a task needs 'id'"),
        ({"id": "x", "env": "e", "ground_truth": [1]}, "not a task: "),
        (["x"], "a task is an object"),
    ],
)
def test_a_dict_that_is_not_a_task_is_an_env_error(data, said):
    # a raw KeyError escaped the public API
    with pytest.raises(EnvError, match=re.escape(said)):
        Task.from_dict(data)
