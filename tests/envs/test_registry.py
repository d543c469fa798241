"""The environment registry."""

from __future__ import annotations

import pytest

import hsa.envs
from hsa.envs import get, names
from hsa.envs.livestream import LivestreamEnvironment
from hsa.errors import EnvError


def test_names_and_get():
    assert {"livestream", "bfcl", "tau2", "recorded"} <= set(names())
    env = get("livestream", seed=2, n_tasks=10)
    assert isinstance(env, LivestreamEnvironment) and env.seed == 2 and len(env.tasks()) == 10


def test_bad_requests_are_one_clear_error(tmp_path):
    with pytest.raises(EnvError, match="unknown environment 'nope'; registered: bfcl"):
        get("nope")
    with pytest.raises(EnvError, match=r"takes no option\(s\) 'colour'; it accepts: seed, n_tasks"):
        get("livestream", colour="red")
    with pytest.raises(EnvError, match=r"needs option\(s\) path"):
        get("bfcl")
    with pytest.raises(EnvError, match="n_tasks must be a positive integer"):
        get("livestream", n_tasks=0)


def test_register(monkeypatch):
    monkeypatch.setattr(hsa.envs.registry, "_FACTORIES", dict(hsa.envs.registry._FACTORIES))
    hsa.envs.register("mini", "hsa.envs.livestream.env:LivestreamEnvironment")
    assert "mini" in names()
    assert isinstance(get("mini", n_tasks=3), LivestreamEnvironment)
