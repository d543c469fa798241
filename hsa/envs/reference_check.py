"""Checking an environment: play its reference solution of every task and score it."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

from hsa.envs.base import Environment, Outcome, Task


@dataclass(frozen=True, slots=True)
class Failure:
    """A task the reference solution did not solve, and why."""

    task_id: str
    reasons: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class CheckReport:
    """How many tasks the reference solution solved, and the failures."""

    solved: int
    total: int
    failures: tuple[Failure, ...] = ()

    @property
    def ok(self) -> bool:
        return self.solved == self.total


def check(
    env: Environment,
    tasks: Iterable[Task] | None = None,
    *,
    on_task: Callable[[Task, Outcome], None] | None = None,
) -> CheckReport:
    """Solve and score ``tasks`` (every task of ``env`` when None); ``on_task`` sees each
    outcome as it comes, e.g. to advance a progress bar."""
    todo = list(env.tasks() if tasks is None else tasks)
    failures = []
    for task in todo:
        episode = env.solve(task)
        outcome = env.score(task, episode.state, episode.events)
        if not outcome.success:
            failures.append(Failure(task.id, outcome.reasons))
        if on_task is not None:
            on_task(task, outcome)
    return CheckReport(len(todo) - len(failures), len(todo), tuple(failures))
