"""Teachers: run models through harnesses in environments, verify what they do, cache requests.

The public surface: ``TeachConfig`` (the settings of the teach job, which lives in
``hsa.pipelines.teach``); ``rollout`` for one task under one variant; ``verify``;
the backends (``OracleBackend``, and ``OpenAIBackend``/``VLLMBackend`` from
``hsa.teachers.backends``); the ``RequestCache``; and ``ChatServer`` with ``Faults`` behind
``hsa serve oracle``.
"""

from hsa.teachers.backends.base import Backend, BackendStats
from hsa.teachers.cache import CachedBackend, RequestCache
from hsa.teachers.config import TeachConfig
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
    "Usage",
    "Verification",
    "rollout",
    "verify",
]
