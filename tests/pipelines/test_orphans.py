"""Workers end with the job that started them, even one killed outright."""

from __future__ import annotations

import signal
import subprocess
import sys
import time

import pytest

from hsa.datasets.lock import process_alive

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
