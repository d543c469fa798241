"""The livestream environment: seeded world, canonical harness, tasks, execution and scoring."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from datetime import datetime
from functools import cached_property
from typing import Any

from hsa.envs.base import Environment, Outcome, Task, ToolOutput, tasks_of_split
from hsa.envs.episode import Policy
from hsa.envs.livestream import harness as harness_module
from hsa.envs.livestream.actions import ACTIONS, ToolFailure
from hsa.envs.livestream.scoring import score
from hsa.envs.livestream.state import LiveState
from hsa.envs.livestream.task_templates import drafts
from hsa.envs.livestream.tasks import make_tasks
from hsa.envs.livestream.tools import defaults
from hsa.envs.livestream.world import World, at_clock, generate
from hsa.errors import EnvError
from hsa.harness.arguments import ArgumentChecker
from hsa.harness.events import Event, dumps_json
from hsa.harness.model import Harness


class LivestreamEnvironment(Environment):
    """Live-stream shopping: a host answers viewers from a seeded catalogue.

    ``seed`` picks the world (catalogue, promotions, schedule, orders); ``n_tasks`` keeps that
    many tasks, every kind represented (all of them when None); ``compact`` serves the compact
    harness (``harness.compact_harness``: a short prompt for small models) instead of the full one.
    """

    name = "livestream"
    #: 2: a task's split is drawn from the intent of its first turn (``tasks.split_group``), not
    #: from its id, so a follow-up and the task it opens with are no longer apart
    task_version = 2

    def __init__(self, seed: int = 0, n_tasks: int | None = None, compact: bool = False):
        if not isinstance(seed, int) or isinstance(seed, bool):
            raise EnvError(f"seed must be an integer, got {seed!r}", where="livestream")
        if n_tasks is not None and (not isinstance(n_tasks, int) or n_tasks < 1):
            raise EnvError(
                f"n_tasks must be a positive integer, got {n_tasks!r}", where="livestream"
            )
        if not isinstance(compact, bool):
            raise EnvError(f"compact must be true or false, got {compact!r}", where="livestream")
        self.seed = seed
        self.n_tasks = n_tasks
        self.compact = compact

    @cached_property
    def world(self) -> World:
        return generate(self.seed)

    @cached_property
    def _harness(self) -> Harness:
        return harness_module.compact_harness() if self.compact else harness_module.harness()

    @cached_property
    def _checker(self) -> ArgumentChecker:
        return ArgumentChecker(self._harness.tools)

    @cached_property
    def _tasks(self) -> list[Task]:
        return make_tasks(self.world, drafts(self.world), self.n_tasks)

    @cached_property
    def _by_id(self) -> dict[str, Task]:
        return {t.id: t for t in self._tasks}

    def harness(self) -> Harness:
        return self._harness

    def tasks(self, split: str | None = None) -> list[Task]:
        return tasks_of_split(self._tasks, split)

    def task(self, task_id: str) -> Task:
        try:
            return self._by_id[task_id]
        except KeyError:
            raise EnvError(f"no task {task_id!r} in livestream (seed {self.seed})") from None

    def reset(self, task: Task) -> LiveState:
        raw = task.metadata.get("now")
        try:
            # A task without a stream time starts at 20:00, in the middle of the stream.
            now = datetime.fromisoformat(raw) if raw else at_clock(20, day=self.world.day)
        except (TypeError, ValueError):
            raise EnvError(f"task {task.id}: metadata.now {raw!r} is not a time") from None
        return LiveState(world=self.world, now=now, task_id=task.id)

    def execute(self, state: LiveState, tool: str, args: Mapping[str, Any]) -> ToolOutput:
        skill_tool = self._harness.skill_tool
        if skill_tool is not None and tool == skill_tool.name:
            arg = self._harness.skill_arg
            requested = None if arg is None else args.get(arg)
            skill = self._harness.skill("" if requested is None else str(requested))
            if skill is None:
                return _error(f"unknown skill {requested!r}")
            return ToolOutput(skill.content)
        problem = self._checker.problem(tool, args)
        if problem is not None:
            return _error(problem)
        declared = self._harness.tool(tool)
        full = dict(args) if declared is None else defaults(declared, dict(args))
        try:
            return ToolOutput(dumps_json(ACTIONS[tool](state, full)))
        except ToolFailure as exc:
            return _error(str(exc))

    def score(self, task: Task, state: LiveState, events: Sequence[Event]) -> Outcome:
        return score(task, state, events, self._harness)

    def oracle(self) -> Policy:
        """The scripted oracle (``hsa.envs.livestream.oracle.next_actions``)."""
        from hsa.envs.livestream.oracle import next_actions

        return next_actions


def _error(message: str) -> ToolOutput:
    return ToolOutput(json.dumps({"error": message}, ensure_ascii=False), is_error=True)
