"""Adaptive concurrency (AIMD) and retry backoff for remote backends.

A saturated vLLM server queues rather than refusing, so a limiter that reacts only to HTTP 429
would keep the queue full forever. ``AdaptiveLimit`` therefore backs off on two signals: the
share of overload answers (429 or 503, or no answer in time) among recent answers passing a
threshold, and recent latency
rising well above the job's usual latency. It grows the limit by about one request per round
trip while neither signal fires (additive increase) and multiplies it by ``decrease`` when one
does (multiplicative decrease), at most once per round trip so one burst counts once. Reacting
to the share of 429s rather than to each one keeps a few stray refusals (which the retries
absorb) from collapsing the limit the way packet loss collapses a TCP window.

Latency is judged as a gradient (as Netflix's concurrency-limits judge it): a short average
against a long one, not against the fastest answer seen. A model's latency follows the length
of its reply (a short tool call, a long answer: ten times apart, on an idle server), so the
fastest answer is no baseline; a server that starts queueing, though, slows every answer
within a round trip, which moves the short average well before the long one. Both average
the logarithm of latency (a geometric mean), so a few very long replies cannot drag either
up by themselves.
"""

from __future__ import annotations

import asyncio
import math
import random
import time
from collections import deque
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass

from hsa.config import bounded, refuse, same_as, setting
from hsa.errors import TeacherError
from hsa.teachers.config import TeachConfig

#: latencies below this are taken as this: under a millisecond, differences are noise
LATENCY_FLOOR_S = 0.001
#: how much slower the baseline follows latency while the limit is below its maximum
BELOW_MAX_DRIFT = 0.1
#: how many of its slowest round trips a job runs before its latency is judged
WARMUP_ROUNDS = 3


@dataclass(frozen=True, slots=True)
class ThrottleConfig:
    """How the limiter adapts.

    ``latency_tolerance``: back off when recent latency (smoothed over about 1/``smoothing``
    answers, and at least the answers of one round trip) exceeds this many times the baseline,
    the usual latency (a plain mean of the first few round trips, then smoothed over about
    1/``baseline_smoothing`` answers, ten times more while the limit is below its maximum).
    The baseline follows a server that became permanently slower, so it is not throttled for
    ever, but not the queueing the limit's own growth causes after a back-off.
    ``overload_share``: back off when more than this share of recent answers (smoothed over
    about 1/``overload_smoothing`` answers) were 429; 0 backs off on every 429.
    """

    min_limit: int = setting(1, help="The fewest requests kept in flight.")
    decrease: float = setting(0.5, help="The factor the limit is multiplied by on a back-off.")
    latency_tolerance: float = setting(
        2.0, help="Back off when smoothed latency exceeds this many times the baseline."
    )
    smoothing: float = setting(0.05, help="Weight of each new latency in the recent latency.")
    baseline_smoothing: float = setting(
        0.002, help="Weight of each new latency in the baseline (the usual latency)."
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
            *("decrease", "smoothing", "baseline_smoothing", "overload_smoothing"),
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
        # natural logarithms of latencies in seconds: the usual and the recent
        self._baseline: float | None = None
        self._smoothed: float | None = None
        self._overload = 0.0  # smoothed share of 429 answers
        self._samples = 0
        self._slowest = 0.0  # the longest latency seen while warming up, seconds
        self._since = 0.0  # when it was seen
        self._counted = 0  # answers seen since
        self._granted = 0  # requests sent
        self._restart_ticket = 0  # requests sent by then ...
        self._early = 0  # ... and still in flight
        self._warm = False
        self._last_decrease = float("-inf")
        self._waiters: deque[asyncio.Future] = deque()

    @asynccontextmanager
    async def slot(self) -> AsyncIterator[None]:
        """Hold one unit of concurrency for the body of an ``async with``."""
        if self.in_flight < max(1, int(self.limit)) and not self._waiters:
            ticket = self._grant()
        else:
            # Waiters are served first-come first-served; ``_dispatch`` counts the slot in.
            future = asyncio.get_running_loop().create_future()
            self._waiters.append(future)
            try:
                ticket = await future
            except asyncio.CancelledError:
                if future.done() and not future.cancelled():
                    self._release(future.result())  # granted, then cancelled before use
                elif future in self._waiters:
                    self._waiters.remove(future)
                raise
        try:
            yield
        finally:
            self._release(ticket)

    def _grant(self) -> int:
        """Count one request in; its ticket (numbered in order) says when it was sent."""
        self.in_flight += 1
        self._granted += 1
        return self._granted

    def _release(self, ticket: int) -> None:
        self.in_flight -= 1
        if ticket <= self._restart_ticket and self._early > 0:
            self._early -= 1
        self._dispatch()

    def _dispatch(self) -> None:
        while self._waiters and self.in_flight < max(1, int(self.limit)):
            future = self._waiters.popleft()
            if not future.done():
                future.set_result(self._grant())

    def on_success(self, latency_s: float) -> None:
        """A request finished in ``latency_s``: grow the limit unless latency is rising."""
        cfg = self.config
        self._overload -= cfg.overload_smoothing * self._overload
        # below a millisecond, latency is noise, not queueing
        sample = math.log(max(latency_s, LATENCY_FLOOR_S))
        self._samples += 1
        now = self._clock()
        if not self._warm and latency_s > self._slowest:
            # Until then, the answers seen came fastest first (a slow reply is still on its
            # way while fast ones arrive, and are asked again): start the mean afresh.
            self._slowest, self._since, self._counted = latency_s, now, 0
            self._restart_ticket, self._early = self._granted, self.in_flight
        self._counted += 1
        if self._smoothed is None or self._baseline is None:
            self._smoothed = self._baseline = sample
        else:
            # Recent latency averages at least a round trip of answers (1/limit of them), or
            # the slow replies that arrive together would read as a slower server.
            self._smoothed += min(cfg.smoothing, 1.0 / self.limit) * (sample - self._smoothed)
            # The baseline: a plain mean until warm, then a long moving average, slower still
            # while the limit is below its maximum after a back-off, since latency rising as
            # the limit grows back is queueing, not a slower server, and must not be learnt.
            weight = cfg.baseline_smoothing if self._warm else 1.0 / self._counted
            if self._warm and self.limit < self.max_limit:
                weight *= BELOW_MAX_DRIFT
            self._baseline += weight * (sample - self._baseline)
        tolerance = math.log(cfg.latency_tolerance)
        if self._baseline - self._smoothed > tolerance:
            # Latency is back to normal after a queue drained: the baseline, dragged up by the
            # queueing, would otherwise let the queue grow back to twice its old depth.
            self._baseline += cfg.smoothing * (self._smoothed - self._baseline)
        # The first answers carry connection set-up and cold caches: judge latency only once
        # the requests sent before the mean started are all answered (a slower one may be
        # among them), and a full window of answers was seen over a few of the slowest round
        # trips.
        self._warm = self._warm or (
            self._early == 0
            and self._counted > self.max_limit
            and now - self._since >= WARMUP_ROUNDS * self._slowest
        )
        if self._warm and self._smoothed - self._baseline > tolerance:
            self._decrease("latency")
        else:
            self._grow()

    def on_overload(self) -> None:
        """The server refused a request as overloaded (HTTP 429, 503) or did not answer it in
        time."""
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
        round_trip = 0.0 if self._smoothed is None else math.exp(self._smoothed)
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
