"""Adaptive concurrency (AIMD) and retry backoff for remote backends.

A saturated vLLM server queues rather than refusing, so a limiter that reacts only to HTTP 429
would keep the queue full forever. ``AdaptiveLimit`` therefore backs off on two signals: the
share of overload answers (429) among recent answers passing a threshold, and latency rising
well above the best recently seen. It grows the limit by about one request per round trip
while neither signal fires (additive increase) and multiplies it by ``decrease`` when one does
(multiplicative decrease), at most once per round trip so one burst counts once. Reacting to
the share of 429s rather than to each one keeps a few stray refusals (which the retries absorb)
from collapsing the limit the way packet loss collapses a TCP window.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections import deque
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass

from hsa.config import bounded, refuse, same_as, setting
from hsa.errors import TeacherError
from hsa.teachers.config import TeachConfig


@dataclass(frozen=True, slots=True)
class ThrottleConfig:
    """How the limiter adapts.

    ``latency_tolerance``: back off when smoothed latency exceeds this many times the baseline
    (the lowest recent latency). ``baseline_drift``: how fast, per success, the baseline may
    creep up towards slower answers, so a server that became permanently slower is not
    throttled for ever. ``overload_share``: back off when more than this share of recent
    answers (smoothed over about 1/``overload_smoothing`` answers) were 429; 0 backs off on
    every 429.
    """

    min_limit: int = setting(1, help="The fewest requests kept in flight.")
    decrease: float = setting(0.5, help="The factor the limit is multiplied by on a back-off.")
    latency_tolerance: float = setting(
        2.0, help="Back off when smoothed latency exceeds this many times the baseline."
    )
    smoothing: float = setting(0.1, help="Weight of each new latency in the smoothed latency.")
    baseline_drift: float = setting(
        0.001, help="How fast, per success, the baseline creeps up towards slower answers."
    )
    overload_share: float = setting(
        0.1, help="Back off when more than this share of recent answers were 429 (0: on every 429)."
    )
    overload_smoothing: float = setting(
        0.02, help="Weight of each new answer in the smoothed share of 429s."
    )

    def __post_init__(self) -> None:
        problems = bounded(self, "min_limit", low=1)
        problems += bounded(
            self,
            *("decrease", "smoothing", "baseline_drift", "overload_smoothing"),
            low=0,
            high=1,
            low_open=True,
        )
        problems += bounded(self, "overload_share", low=0, high=1)
        problems += bounded(self, "latency_tolerance", low=1, low_open=True)
        refuse(problems, TeacherError)


class AdaptiveLimit:
    """An asyncio concurrency limit that moves between ``min_limit`` and ``max_limit``."""

    def __init__(
        self,
        max_limit: int,
        config: ThrottleConfig | None = None,
        *,
        clock=time.monotonic,
    ):
        self.config = config or ThrottleConfig()
        self.max_limit = max(1, int(max_limit))
        self.limit = float(self.max_limit)
        self.in_flight = 0
        self.decreases = {"overload": 0, "latency": 0}
        self._clock = clock
        self._baseline: float | None = None
        self._smoothed: float | None = None
        self._overload = 0.0  # smoothed share of 429 answers
        self._samples = 0
        self._last_decrease = float("-inf")
        self._waiters: deque[asyncio.Future] = deque()

    @asynccontextmanager
    async def slot(self) -> AsyncIterator[None]:
        """Hold one unit of concurrency for the body of an ``async with``."""
        if self.in_flight < max(1, int(self.limit)) and not self._waiters:
            self.in_flight += 1
        else:
            # Waiters are served first-come first-served; ``_dispatch`` counts the slot in.
            future = asyncio.get_running_loop().create_future()
            self._waiters.append(future)
            try:
                await future
            except asyncio.CancelledError:
                if future.done() and not future.cancelled():
                    self.in_flight -= 1  # granted, then cancelled before use
                    self._dispatch()
                elif future in self._waiters:
                    self._waiters.remove(future)
                raise
        try:
            yield
        finally:
            self.in_flight -= 1
            self._dispatch()

    def _dispatch(self) -> None:
        while self._waiters and self.in_flight < max(1, int(self.limit)):
            future = self._waiters.popleft()
            if not future.done():
                self.in_flight += 1
                future.set_result(None)

    def on_success(self, latency_s: float) -> None:
        """A request finished in ``latency_s``: grow the limit unless latency is rising."""
        cfg = self.config
        self._overload -= cfg.overload_smoothing * self._overload
        if self._baseline is None or latency_s < self._baseline:
            self._baseline = latency_s
        else:
            self._baseline *= 1.0 + cfg.baseline_drift
        if self._smoothed is None:
            self._smoothed = latency_s
        else:
            self._smoothed += cfg.smoothing * (latency_s - self._smoothed)
        self._samples += 1
        # The first round of answers carries connection set-up and cold caches: judge latency
        # only once a full window of answers has been seen.
        warm = self._samples > self.max_limit
        floor = 0.001  # below a millisecond, latency is noise, not queueing
        if warm and self._smoothed > cfg.latency_tolerance * max(self._baseline, floor):
            self._decrease("latency")
        else:
            self._grow()

    def on_overload(self) -> None:
        """The server refused a request as overloaded (HTTP 429)."""
        cfg = self.config
        self._overload += cfg.overload_smoothing * (1.0 - self._overload)
        crowded = self._overload > cfg.overload_share or cfg.overload_share <= 0
        if crowded and self._decrease("overload"):
            # Start counting afresh: the 429s that triggered this decrease are spent.
            self._overload = cfg.overload_share / 2

    def _grow(self) -> None:
        self.limit = min(float(self.max_limit), self.limit + 1.0 / max(self.limit, 1.0))
        self._dispatch()

    def _decrease(self, why: str) -> bool:
        now = self._clock()
        round_trip = self._smoothed or 0.0
        if now - self._last_decrease < round_trip:
            return False
        self._last_decrease = now
        self.limit = max(float(self.config.min_limit), self.limit * self.config.decrease)
        self.decreases[why] += 1
        if why == "latency":
            # Forget the congested smoothing so the next round trip is judged afresh.
            self._smoothed = self._baseline
        return True


@dataclass(frozen=True, slots=True)
class Backoff:
    """Exponential backoff with full jitter: attempt ``n`` waits up to ``base * 2**n``."""

    base_s: float = same_as(TeachConfig, "backoff_s")
    max_s: float = setting(30.0, help="The longest wait between retries, seconds.")

    def __post_init__(self) -> None:
        refuse(bounded(self, "base_s", "max_s", low=0), TeacherError)

    def delay(self, attempt: int, rng: random.Random, retry_after: float | None = None) -> float:
        ceiling = min(self.max_s, self.base_s * (2**attempt))
        wait = rng.uniform(0.0, ceiling)
        if retry_after is not None:
            wait = max(wait, min(retry_after, self.max_s))
        return wait
