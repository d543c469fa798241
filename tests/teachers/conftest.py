"""Fixtures for the teacher tests: the livestream environment, variants, a served oracle."""

from __future__ import annotations

import asyncio
import importlib.util
import os
import threading
from collections.abc import Iterator

import pytest

from hsa.augment import get_rule
from hsa.augment.planner import Variant, apply_chain, canonical_variant, variant_id
from hsa.augment.rules.protocol import with_protocol
from hsa.envs.livestream import next_actions
from hsa.envs.registry import get
from hsa.harness.model import Protocol
from hsa.teachers.oracle import OracleResponder
from hsa.teachers.server import ChatServer, Faults


def pytest_collection_modifyitems(config, items):
    """Leave out the GPU tests where vllm, a CUDA GPU or a local model is missing.

    They are deselected, not skipped: they run (and must pass) on a machine that has all
    three, with HSA_VLLM_MODEL naming a local model directory.
    """
    if _gpu_ready():
        return
    keep = [item for item in items if "gpu" not in item.keywords]
    if len(keep) != len(items):
        config.hook.pytest_deselected(items=[i for i in items if "gpu" in i.keywords])
        items[:] = keep


def _gpu_ready() -> bool:
    if importlib.util.find_spec("vllm") is None or not os.environ.get("HSA_VLLM_MODEL"):
        return False
    try:
        import torch
    except ImportError:
        return False
    return bool(torch.cuda.is_available())


@pytest.fixture(scope="session")
def env():
    return get("livestream")


@pytest.fixture(scope="session")
def canonical(env) -> Variant:
    return canonical_variant(env.harness())


def make_variant(harness, chain, *, seed=0, protocol: Protocol | None = None) -> Variant:
    """A variant from named rules (``[(rule, params), ...]``), optionally under ``protocol``."""
    rewrite, applied = apply_chain(harness, [(get_rule(n), p) for n, p in chain], seed=seed)
    surface = rewrite.harness
    if protocol is not None:
        surface = with_protocol(surface, protocol)
        applied = (*applied, ("test.protocol", "1", protocol.to_dict()))
    return Variant(
        variant_id(harness, applied, seed, None), harness.id, applied, surface, rewrite.mapping
    )


@pytest.fixture(scope="session")
def renamed(env) -> Variant:
    """Tools and parameters renamed, under the api protocol: every tool (camel case changes
    each of livestream's names; synonyms leave those with no word in the bank as they are)."""
    return make_variant(
        env.harness(),
        [("tools.rename", {"style": "camel"}), ("tools.rename_params", {"fraction": 1.0})],
    )


TEXT_PROTOCOLS = [
    Protocol("text", "hermes", True, "json"),
    Protocol("text", "json", False, "xml"),
    Protocol("text", "python", True, "python"),
    Protocol("text", "xml_verbose", True, "markdown"),
    Protocol("text", "xml_concise", False, "json"),
]


@pytest.fixture(scope="session")
def text_variants(env) -> list[Variant]:
    """Tools renamed (to identifiers every call format can write), skills renamed, under
    each kind of text protocol."""
    chain = [("tools.rename", {"style": "camel"}), ("skill_ids.rename", {})]
    harness = env.harness()
    return [make_variant(harness, chain, seed=i, protocol=p) for i, p in enumerate(TEXT_PROTOCOLS)]


@pytest.fixture(scope="session")
def variants(canonical, renamed, text_variants) -> dict[str, Variant]:
    return {v.variant_id: v for v in [canonical, renamed, *text_variants]}


@pytest.fixture(scope="session")
def responder(env, variants) -> OracleResponder:
    return OracleResponder(env, next_actions, variants=variants)


class ServedOracle:
    """A ``ChatServer`` running in a background thread's event loop."""

    def __init__(self, responder, faults: Faults, log=None, api_key=None):
        self.server = ChatServer(responder, faults=faults, log=log, api_key=api_key)
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        self.port = asyncio.run_coroutine_threadsafe(self.server.start(), self.loop).result(10)
        self.url = f"http://127.0.0.1:{self.port}/v1"

    def settle(self) -> None:
        """Wait for the loop to finish what it was doing: a client can read an answer before
        the handler that sent it has recorded it (counted, logged)."""
        asyncio.run_coroutine_threadsafe(asyncio.sleep(0), self.loop).result(10)

    @property
    def stats(self):
        """The server's stats, settled."""
        self.settle()
        return self.server.stats

    def close(self) -> None:
        asyncio.run_coroutine_threadsafe(self.server.close(), self.loop).result(10)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)
        self.loop.close()


@pytest.fixture
def serve(responder) -> Iterator:
    """``serve(faults=, log=, answer=, api_key=)`` starts a server (the oracle unless ``answer``
    is given); all are closed after the test."""
    started: list[ServedOracle] = []

    def start(faults: Faults | None = None, log=None, answer=None, api_key=None) -> ServedOracle:
        served = ServedOracle(answer or responder, faults or Faults(), log, api_key)
        started.append(served)
        return served

    yield start
    for served in started:
        served.close()
