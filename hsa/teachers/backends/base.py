"""The backend interface: an async ``chat(request) -> response``, and per-backend statistics."""

from __future__ import annotations

import abc
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field

from hsa.teachers.request import ChatRequest, ChatResponse, Usage


@dataclass(slots=True)
class BackendStats:
    """What a backend did: requests sent, retries and why, latencies, tokens."""

    requests: int = 0
    succeeded: int = 0
    retries: int = 0
    failures: Counter = field(default_factory=Counter)  # reason -> count, every attempt
    latencies_s: list[float] = field(default_factory=list)
    usage: Usage = field(default_factory=Usage)

    def record(self, response: ChatResponse) -> None:
        self.succeeded += 1
        self.latencies_s.append(response.latency_s)
        self.usage = self.usage + response.usage

    def latency_percentiles(self) -> dict[str, float]:
        """p50/p90/p99 latency in milliseconds (empty when nothing was sent)."""
        return latency_percentiles(self.latencies_s)


def latency_percentiles(latencies_s: Sequence[float]) -> dict[str, float]:
    """p50/p90/p99 of ``latencies_s`` in milliseconds, rounded to 0.1 (empty when none).

    A percentile is the nearest rank at or above it (``int(q * n)``, the last one at most),
    never interpolated: every figure is a latency some request actually had.
    """
    if not latencies_s:
        return {}
    ordered = sorted(latencies_s)

    def at(q: float) -> float:
        return round(1000 * ordered[min(len(ordered) - 1, int(q * len(ordered)))], 1)

    return {"p50_ms": at(0.5), "p90_ms": at(0.9), "p99_ms": at(0.99)}


class Backend(abc.ABC):
    """Answers chat requests. Implementations are safe to call from many tasks at once.

    ``chat`` raises ``TeacherError`` when it cannot get an answer (after its own retries);
    the rollout records that as the rollout's reason, it never aborts a whole job.
    """

    name: str = ""
    stats: BackendStats

    @abc.abstractmethod
    async def chat(self, request: ChatRequest) -> ChatResponse:
        """The model's next assistant message for ``request``."""

    async def start(self) -> None:  # noqa: B027  (most backends have nothing to set up)
        """Set up connections or engines before the first request (optional)."""

    async def aclose(self) -> None:  # noqa: B027  (most backends hold nothing to close)
        """Release connections or engines the backend holds."""
