"""Fixtures for the pipeline tests: the dataset tests' inputs, and the livestream environment."""

from __future__ import annotations

import pytest

from hsa.envs.registry import get
from tests.datasets.conftest import livestream_table, shards

__all__ = ["livestream_table", "shards"]


@pytest.fixture(scope="session")
def env():
    return get("livestream")
