"""How a teacher job is dealt to its worker processes."""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import queue
import threading
import time
from collections.abc import Iterator

import pytest
from hypothesis import given
from hypothesis import strategies as st

from hsa.errors import HsaError, TeacherError
from hsa.pipelines import teach_workers
from hsa.pipelines.teach import TeachConfig, TeachIncomplete, teach
from hsa.pipelines.teach_workers import worker_shares
from hsa.teachers.server import Faults


@given(st.integers(0, 40), st.integers(1, 8), st.integers(1, 64))
def test_workers_never_put_more_requests_in_flight_than_asked(shards, workers, concurrency):
    keys = [("train", i) for i in range(shards)]
    dealt = worker_shares(keys, workers, concurrency)
    assert sorted(k for share, _ in dealt for k in share) == keys  # every shard, once
    assert sum(c for _, c in dealt) == (concurrency if dealt else 0)
    assert all(share and c >= 1 for share, c in dealt)
    assert len(dealt) <= workers


def test_one_request_in_flight_is_one_worker():
    assert worker_shares([("train", 0), ("train", 1)], 2, 1) == [([("train", 0), ("train", 1)], 1)]
    assert worker_shares([("a", 0), ("a", 1), ("a", 2)], 2, 3) == [
        ([("a", 0), ("a", 2)], 2),
        ([("a", 1)], 1),
    ]


SUMMARY = (
    "total",
    "skipped",
    "written",
    "verified",
    "held",
    "reasons",
    "retry_reasons",
    "requests",
    "shards",
    "restated",
    "left_out",
)


def summary(run) -> dict:
    """What the CLI prints of a job's report (its timing aside), however it ran."""
    try:
        report = run()
    except TeachIncomplete as incomplete:
        report = incomplete.report
    return {name: getattr(report, name) for name in SUMMARY}


def test_the_summary_counts_held_rows_the_same_for_one_worker_and_several(tmp_path):
    # one task refused: the rows that finished in its shard are held, in either case
    from hsa.envs.registry import get
    from hsa.teachers.oracle import OracleResponder
    from hsa.teachers.task_variants import VariantPool, recipe_from
    from tests.teachers.conftest import ServedOracle

    env = get("livestream")
    down = env.turns(env.tasks()[1])[0]
    oracle = OracleResponder(env, variants=VariantPool(env.harness(), recipe_from(None), seed=0))

    def responder(body):
        if any(m.get("content") == down for m in body["messages"]):
            raise HsaError("The model `hsa-oracle` does not exist.")
        return oracle(body)

    served = ServedOracle(responder, Faults())
    try:
        settings = {
            "backend": "openai",
            "base_url": served.url,
            "model": "hsa-oracle",
            "tasks": 4,
            "variants_per_task": 1,
            "include_canonical": True,
            "shard_size": 3,
        }
        one, two = (
            summary(lambda w=w: teach(TeachConfig(workers=w, **settings), tmp_path / str(w)))
            for w in (1, 2)
        )
    finally:
        served.close()
    assert one["held"] > 0 and one["retry_reasons"]
    assert one == two


def test_the_summary_counts_left_out_tasks_the_same_for_one_worker_and_several(tmp_path, external):
    settings = {"env": "bfcl", "env_options": {"path": str(external / "bfcl")}, "tasks": 2}
    one, two = (
        summary(lambda w=w: teach(TeachConfig(workers=w, **settings), tmp_path / str(w)))
        for w in (1, 2)
    )
    assert one["restated"] and one["left_out"]
    assert one == two


class _Process:
    """A worker process as ``_wait_ready`` sees one: a name, an exit code once one is set, and
    a sentinel that shows no end (the read end of a pipe whose other end stays open)."""

    def __init__(self, name: str, pipes: list[int]) -> None:
        self.name, self.exitcode = name, None
        self.sentinel, end = os.pipe()
        pipes.extend((self.sentinel, end))


@pytest.fixture
def pipes() -> Iterator[list[int]]:
    """The file descriptors of the ``_Process`` sentinels a test made, closed after it."""
    made: list[int] = []
    yield made
    for fd in made:
        os.close(fd)


def test_a_worker_that_dies_while_setting_up_ends_the_wait_at_once(pipes):
    # a worker killed (or unable to start) before the barrier: the job waited 600 s for it
    alive, dead = _Process("hsa-teach-1", pipes), _Process("hsa-teach-1", pipes)
    ready = multiprocessing.get_context("spawn").Barrier(3)
    waiting = threading.Thread(target=lambda: _wait_quietly(ready), daemon=True)
    waiting.start()  # one worker set up and waiting
    threading.Timer(0.3, lambda: setattr(dead, "exitcode", -9)).start()
    started = time.monotonic()
    with pytest.raises(TeacherError, match=r"hsa-teach-1 died while setting up \(exit code -9\)"):
        teach_workers._wait_ready(ready, queue.Queue(), [alive, dead], poll_s=0.05)
    assert time.monotonic() - started < 5
    waiting.join(timeout=5)
    assert ready.broken and not waiting.is_alive()  # the waiting worker is let go too


def test_the_start_barrier_opens_once_every_worker_waits(pipes):
    ready = multiprocessing.get_context("spawn").Barrier(3)
    workers = [threading.Thread(target=ready.wait, daemon=True) for _ in range(2)]
    workers[0].start()
    threading.Timer(0.3, workers[1].start).start()
    processes = [_Process("hsa-teach-0", pipes) for _ in range(2)]
    teach_workers._wait_ready(ready, queue.Queue(), processes, poll_s=0.05)
    for worker in workers:
        worker.join(timeout=5)
    assert not any(w.is_alive() for w in workers) and not ready.broken


def _wait_quietly(barrier) -> None:
    with contextlib.suppress(threading.BrokenBarrierError):
        barrier.wait()


def test_a_worker_that_failed_and_ended_is_named_by_its_error():
    # it broke the barrier, said why and ended between two looks: its error, not its exit code
    class Process:
        name, exitcode = "hsa-teach-0", 1

    messages = queue.Queue()
    messages.put(("error", "cannot reach http://teacher:8000: connection refused"))
    ready = multiprocessing.get_context("spawn").Barrier(2)
    with pytest.raises(TeacherError, match="a teacher worker failed: cannot reach http://teacher"):
        teach_workers._wait_ready(ready, messages, [Process()], poll_s=0.05)
