"""Workers end with the job that started them, even one killed outright."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest

from hsa.datasets.lock import process_alive
from hsa.pipelines.orphans import dead, ending

JOB = """
import os, sys, time
from concurrent.futures import ProcessPoolExecutor
from hsa.pipelines.augment import _worker_start

pool = ProcessPoolExecutor(2, initializer=_worker_start, initargs=(os.getpid(),))
pool.submit(int).result()  # a fork pool starts all its workers at once
print(*{p for p in pool._processes}, flush=True)
time.sleep(120)
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG is Linux's")
def test_planning_workers_end_with_a_job_killed_outright() -> None:
    job = subprocess.Popen([sys.executable, "-c", JOB], stdout=subprocess.PIPE, text=True)
    try:
        workers = [int(p) for p in job.stdout.readline().split()]
        assert workers and all(process_alive(p) for p in workers)
        job.send_signal(signal.SIGKILL)  # as the out-of-memory killer does
        job.wait()
        deadline = time.monotonic() + 30
        while any(process_alive(p) for p in workers):
            assert time.monotonic() < deadline, "workers outlived the job"
            time.sleep(0.1)
    finally:
        job.kill()
        job.wait()


class _Dying:
    """A process the way ``dead`` sees one in the moment its pool found it dead: its sentinel
    (a pipe whose other end the kernel closed) says it ended, and its exit code is not known
    until it is joined (reaped)."""

    def __init__(self) -> None:
        self.sentinel, end = os.pipe()
        os.close(end)
        self.joined = False

    @property
    def exitcode(self) -> int | None:
        return -signal.SIGKILL if self.joined else None

    def join(self, timeout: float | None = None) -> None:
        self.joined = True


def test_a_process_its_sentinel_shows_ended_is_found_dead_before_it_is_reaped() -> None:
    # CI saw "planning worker process died (killed; ...)" without the worker or its signal:
    # the pool had seen the worker's end on its sentinel, and its exit code was not there yet.
    dying = _Dying()
    try:
        found = dead([dying])  # type: ignore[list-item]
        assert found is dying
        assert ending(dying) == "killed by SIGKILL"  # type: ignore[arg-type]
    finally:
        os.close(dying.sentinel)


def test_a_running_process_is_not_found_dead() -> None:
    read, write = os.pipe()
    try:
        running = _Dying()
        os.close(running.sentinel)
        running.sentinel = read
        assert dead([running]) is None and not running.joined  # type: ignore[list-item]
    finally:
        os.close(read)
        os.close(write)
