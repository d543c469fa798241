"""The default livestream environment and its oracle episodes, built once per test session."""

from __future__ import annotations

import pytest

from hsa.envs.livestream import LivestreamEnvironment


@pytest.fixture(scope="session")
def env() -> LivestreamEnvironment:
    return LivestreamEnvironment()


@pytest.fixture(scope="session")
def episodes(env):
    """Every task's oracle episode, by task id."""
    return {task.id: env.solve(task) for task in env.tasks()}


@pytest.fixture(scope="session")
def by_template(env):
    """The first task of each template."""
    first = {}
    for task in env.tasks():
        first.setdefault(task.metadata["template"], task)
    return first
