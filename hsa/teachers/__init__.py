"""Teachers: run models through harnesses in environments, verify, write trajectory shards.

The public surface: ``teach`` (the job, as ``hsa teach`` and ``hsa build`` run it) with its
``TeachConfig`` and ``TeachReport``; ``rollout`` for one task under one variant; ``verify``;
the backends (``OracleBackend``, and ``OpenAIBackend``/``VLLMBackend`` from
``hsa.teachers.backends``); the ``RequestCache``; and ``ChatServer`` with ``Faults`` behind
``hsa serve oracle``.
"""

from hsa.teachers.backends.base import Backend, BackendStats
from hsa.teachers.cache import CachedBackend, RequestCache
from hsa.teachers.config import TeachConfig
from hsa.teachers.job import TeachReport, teach, teach_async
from hsa.teachers.oracle import OracleBackend, OracleResponder
from hsa.teachers.request import ChatRequest, ChatResponse, Sampling, Usage
from hsa.teachers.rollout import Rollout, RolloutConfig, RolloutSpec, rollout
from hsa.teachers.server import ChatServer, Faults
from hsa.teachers.verify import Verification, verify

__all__ = [
    "Backend",
    "BackendStats",
    "CachedBackend",
    "ChatRequest",
    "ChatResponse",
    "ChatServer",
    "Faults",
    "OracleBackend",
    "OracleResponder",
    "RequestCache",
    "Rollout",
    "RolloutConfig",
    "RolloutSpec",
    "Sampling",
    "TeachConfig",
    "TeachReport",
    "Usage",
    "Verification",
    "rollout",
    "teach",
    "teach_async",
    "verify",
]
