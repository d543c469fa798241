"""Running a teacher job in several processes, for when the client's CPU is the bottleneck.

Against a fast endpoint, rendering, parsing, HTTP and verification cost a few milliseconds of
Python per request, so one process saturates one core before the endpoint does. The pending
shards are dealt out among ``workers`` spawned processes; each lays the job out again (the
plan is deterministic), runs only its shards with its share of the concurrency, writes them
itself and reports progress to the parent, which writes the manifest. The request cache is
one SQLite file shared by all (WAL mode lets them write in turn). Timing starts when every
worker is ready, as it does after setup in a single process.
"""

from __future__ import annotations

import contextlib
import dataclasses
import multiprocessing
import os
import queue as queues
import threading
import time
from pathlib import Path
from typing import Any

from hsa.errors import HsaError, TeacherError
from hsa.pipelines import orphans
from hsa.pipelines.teach import (
    ProgressFn,
    ShardKey,
    TeachReport,
    done_entry,
    finish,
    plan_job,
    run_plan,
)
from hsa.teachers.backends.base import run_async
from hsa.teachers.config import TeachConfig

#: how long workers may take to load the environment and plan before the job gives up
READY_TIMEOUT_S = 600.0


def teach_in_workers(
    config: TeachConfig, out: str | Path, *, progress: ProgressFn | None = None
) -> TeachReport:
    """``teach`` with the pending shards shared among ``config.workers`` processes."""
    started = time.monotonic()
    plan = plan_job(config, out)
    report = plan.report()
    done, verified = report.skipped, plan.verified
    if progress is not None:
        progress(done, report.total, verified)
    groups = worker_shares([s.key for s in plan.pending], config.workers, config.concurrency)
    if groups:
        context = multiprocessing.get_context("spawn")
        messages = context.Queue()
        ready = context.Barrier(len(groups) + 1)
        processes = [
            context.Process(
                target=_worker,
                args=(
                    dataclasses.replace(config, concurrency=share, workers=1),
                    str(plan.out),
                    keys,
                    messages,
                    ready,
                    os.getpid(),
                ),
                name=f"hsa-teach-{i}",
                daemon=True,
            )
            for i, (keys, share) in enumerate(groups)
        ]
        for process in processes:
            process.start()
        try:
            _wait_ready(ready, messages, processes)
            running_since = time.monotonic()
            finished = 0
            while finished < len(processes):
                kind, payload = _next_message(messages, processes)
                if kind == "progress":
                    done += payload[0]
                    verified += payload[1]
                    if progress is not None:
                        progress(done, report.total, verified)
                elif kind == "report":
                    merge(report, payload)
                    finished += 1
                else:
                    raise TeacherError(f"a teacher worker failed: {payload}")
            report.run_s = time.monotonic() - running_since
        finally:
            for process in processes:
                if process.is_alive():
                    process.terminate()
                process.join(timeout=30)
    for shard in plan.shards:  # what the workers wrote, as their completion marks say
        if shard.key not in plan.entries:
            entry = done_entry(plan.out, shard)
            if entry is not None:
                plan.entries[shard.key] = entry
    finish(plan, report)
    report.wall_s = time.monotonic() - started
    return report


def worker_shares(
    keys: list[ShardKey], workers: int, concurrency: int
) -> list[tuple[list[ShardKey], int]]:
    """The shards ``keys`` dealt to at most ``workers`` workers, each with its share of the
    ``concurrency`` (requests in flight): together never more than that, and no worker
    without one (so no more workers than ``concurrency``) or without a shard."""
    count = min(workers, concurrency, len(keys))
    if count == 0:
        return []
    whole, extra = divmod(concurrency, count)
    return [(keys[i::count], whole + (i < extra)) for i in range(count)]


def _wait_ready(ready: Any, messages: Any, processes: list, *, poll_s: float = 0.2) -> None:
    """Wait at the start barrier; a worker that failed while setting up breaks it, and one
    that died (killed, or unable to start) breaks it too: the others would wait for it until
    the timeout. A worker that failed says why before it ends."""
    deadline = time.monotonic() + READY_TIMEOUT_S
    dead = None
    try:
        # joined only once every worker waits at it: a wait that times out breaks it
        while ready.n_waiting < ready.parties - 1 and not ready.broken:
            dead = orphans.dead(processes)
            if dead is not None or time.monotonic() > deadline:
                ready.abort()
                raise threading.BrokenBarrierError
            time.sleep(poll_s)
        ready.wait(timeout=READY_TIMEOUT_S)
    except threading.BrokenBarrierError:
        try:
            kind, payload = messages.get(timeout=1 if dead is not None else 5)
        except queues.Empty:
            kind, payload = "", None
        if kind == "error":
            raise TeacherError(f"a teacher worker failed: {payload}") from None
        if dead is not None:
            raise TeacherError(
                f"teacher worker {dead.name} died while setting up (exit code {dead.exitcode})"
            ) from None
        if time.monotonic() > deadline:
            raise TeacherError(
                f"the teacher workers were not set up in {READY_TIMEOUT_S:.0f} s"
            ) from None
        raise TeacherError("a teacher worker stopped while setting up") from None


def _next_message(messages: Any, processes: list) -> tuple[str, Any]:
    while True:
        try:
            return messages.get(timeout=1.0)
        except queues.Empty:
            dead = orphans.dead(processes)
            if dead is not None:
                raise TeacherError(
                    f"teacher worker {dead.name} died (exit code {dead.exitcode})"
                ) from None


#: what a worker's run adds to the job's report: counts, and counters by reason; the rest
#: (what the job plans, skips and leaves out, its shards and timing) is the parent's
ADDED = ("written", "held", "requests", "cache_hits", "retries")
COUNTED = ("reasons", "failures", "retry_reasons")


def totals(part: TeachReport) -> dict[str, Any]:
    """What a worker's run added to its report, as it is sent to the parent (``merge``)."""
    found: dict[str, Any] = {name: getattr(part, name) for name in ADDED}
    found |= {name: dict(getattr(part, name)) for name in COUNTED}
    found["latencies_s"] = list(part.latencies_s)
    return found


def merge(report: TeachReport, part: dict[str, Any]) -> None:
    """Add a worker's ``totals`` to the job's ``report``."""
    for name in ADDED:
        setattr(report, name, getattr(report, name) + part[name])
    for name in COUNTED:
        getattr(report, name).update(part[name])
    report.latencies_s.extend(part["latencies_s"])


def _worker(
    config: TeachConfig,
    out: str,
    keys: list[ShardKey],
    messages: Any,
    ready: Any,
    job: int,
) -> None:
    """One worker process: run the shards ``keys`` under ``config`` (its share of the job's
    concurrency); report progress, then totals or an error. It ends with the job's process
    ``job`` (``orphans``)."""
    orphans.end_with(job)
    try:
        plan = plan_job(config, out, only=set(keys), check=False)
        part = plan.report()
        last = [part.skipped, plan.verified]

        def report_progress(done: int, total: int, verified: int) -> None:
            messages.put(("progress", (done - last[0], verified - last[1])))
            last[0], last[1] = done, verified

        run_async(run_plan(plan, part, progress=report_progress, ready=ready.wait))
        messages.put(("report", totals(part)))
    except BaseException as exc:  # reported to the parent, which stops the job
        with contextlib.suppress(Exception):
            ready.abort()
        detail = str(exc) if isinstance(exc, HsaError) else f"{type(exc).__name__}: {exc}"
        messages.put(("error", detail))
        raise SystemExit(1) from None
