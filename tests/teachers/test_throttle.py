"""AIMD concurrency: backs off on a high share of 429s and on rising latency, grows back."""

from __future__ import annotations

import asyncio
import random
import statistics

from hypothesis import given
from hypothesis import strategies as st

from hsa.teachers.throttle import AdaptiveLimit, Backoff, ThrottleConfig


class Clock:
    def __init__(self):
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_slots_never_exceed_the_limit_and_are_served_in_order():
    limit = AdaptiveLimit(3)
    peak = 0
    order: list[int] = []

    async def work(i: int) -> None:
        nonlocal peak
        async with limit.slot():
            peak = max(peak, limit.in_flight)
            order.append(i)
            await asyncio.sleep(0.001)

    async def main() -> None:
        await asyncio.gather(*(work(i) for i in range(20)))

    asyncio.run(main())
    assert peak == 3 and order == list(range(20)) and limit.in_flight == 0


def test_a_cancelled_waiter_gives_its_place_back():
    limit = AdaptiveLimit(1)

    async def main() -> None:
        async with limit.slot():
            waiter = asyncio.ensure_future(_hold(limit))
            await asyncio.sleep(0)
            waiter.cancel()
            await asyncio.gather(waiter, return_exceptions=True)
        assert limit.in_flight == 0
        await _hold(limit)  # the slot is free again

    asyncio.run(main())


async def _hold(limit: AdaptiveLimit) -> None:
    async with limit.slot():
        await asyncio.sleep(0)


def test_sparse_429s_do_not_collapse_the_limit():
    clock = Clock()
    limit = AdaptiveLimit(64, clock=clock)
    rng = random.Random(0)
    for _ in range(5000):
        clock.now += 0.01
        if rng.random() < 0.025:  # the benchmark's injected 429 share
            limit.on_overload()
        else:
            limit.on_success(0.2)
    assert limit.limit > 48


def test_a_burst_of_429s_halves_the_limit_once_per_round_trip():
    clock = Clock()
    limit = AdaptiveLimit(64, clock=clock)
    for _ in range(100):
        limit.on_success(0.2)
    for _ in range(50):  # all within one round trip
        limit.on_overload()
    assert limit.limit == 32 and limit.decreases["overload"] == 1
    clock.now += 0.3
    for _ in range(50):
        limit.on_overload()
    assert limit.limit == 16 and limit.decreases["overload"] == 2


def test_rising_latency_backs_off_and_steady_latency_grows_back():
    clock = Clock()
    limit = AdaptiveLimit(64, ThrottleConfig(latency_tolerance=2.0), clock=clock)
    for _ in range(100):  # warm up at 200 ms
        clock.now += 0.01
        limit.on_success(0.2)
    assert limit.limit == 64
    for _ in range(200):  # a queueing server: 5x slower
        clock.now += 0.01
        limit.on_success(1.0)
    low = limit.limit
    assert low < 32 and limit.decreases["latency"] >= 1
    for _ in range(3000):
        clock.now += 0.01
        limit.on_success(0.2)
    assert limit.limit > low + 10


def test_the_limit_never_drops_below_the_minimum():
    clock = Clock()
    limit = AdaptiveLimit(8, ThrottleConfig(min_limit=2), clock=clock)
    for _ in range(100):
        clock.now += 10
        for _ in range(20):
            limit.on_overload()
    assert limit.limit == 2


@given(
    attempt=st.integers(0, 30),
    base=st.floats(0.001, 5),
    cap=st.floats(0.01, 60),
    retry_after=st.one_of(st.none(), st.floats(0, 120)),
    seed=st.integers(0, 2**32),
)
def test_backoff_is_jittered_below_its_ceiling_and_honours_retry_after(
    attempt, base, cap, retry_after, seed
):
    backoff = Backoff(base_s=base, max_s=cap)
    delay = backoff.delay(attempt, random.Random(seed), retry_after)
    ceiling = min(cap, base * 2**attempt)
    floor = 0.0 if retry_after is None else min(retry_after, cap)
    assert floor <= delay <= max(ceiling, floor)
    assert delay == backoff.delay(attempt, random.Random(seed), retry_after)


def _run_lanes(limit: AdaptiveLimit, latency, requests: int) -> list[float]:
    """Requests kept in flight by 64 lanes through ``limit``, each taking ``latency(rng,
    in_flight)`` seconds (really slept); the limit after each answer."""
    rng = random.Random(1)
    seen: list[float] = []

    async def lane() -> None:
        while len(seen) < requests:
            async with limit.slot():
                took = latency(rng, limit.in_flight)
                await asyncio.sleep(took)
                limit.on_success(took)
                seen.append(limit.limit)

    async def main() -> None:
        await asyncio.gather(*(lane() for _ in range(64)))

    asyncio.run(main())
    return seen


def test_latency_that_varies_by_reply_but_not_by_load_keeps_the_limit():
    # 30% of replies ten times slower (long answers against short tool calls), and none
    # slower for the load: an idle server, which the limiter should keep busy
    limit = AdaptiveLimit(64)
    seen = _run_lanes(limit, lambda rng, _: 0.03 if rng.random() < 0.3 else 0.003, 2000)
    assert statistics.median(seen) == 64 and min(seen[: len(seen) * 9 // 10]) >= 32


def test_latency_that_grows_with_load_backs_off():
    # a server that takes every request at once, until another job takes most of it: then it
    # serves 8 at a time and queues the rest, and latency grows with the requests in flight,
    # on top of each reply's own length
    limit = AdaptiveLimit(64)
    answered = 0

    def latency(rng: random.Random, in_flight: int) -> float:
        nonlocal answered
        answered += 1
        capacity = 64 if answered < 1000 else 8
        return rng.uniform(0.002, 0.006) * max(1.0, in_flight / capacity)

    seen = _run_lanes(limit, latency, 3000)
    assert min(seen[:900]) == 64
    assert limit.decreases["latency"] >= 1 and statistics.median(seen[2000:]) < 32
