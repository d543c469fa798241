"""``run_async``: a stop asked for by a signal while the loop runs cancels the run, then is
raised as the CLI's handler would raise it; called where a loop runs already (a notebook's
cell), it runs on a thread of its own, and a stop while it waits does the same."""

from __future__ import annotations

import asyncio
import contextvars
import os
import signal
import threading
import time

import pytest

from hsa.errors import (
    STOPS,
    TeacherError,
    Terminated,
    clear_stop,
    on_sigint,
    on_sigterm,
    stop_requested,
)
from hsa.teachers.backends.base import run_async


@pytest.fixture
def cli_handlers():
    saved = {n: signal.getsignal(n) for n in (signal.SIGTERM, signal.SIGINT)}
    signal.signal(signal.SIGTERM, on_sigterm)
    signal.signal(signal.SIGINT, on_sigint)
    yield
    for number, handler in saved.items():
        signal.signal(number, handler)
    clear_stop()


async def _busy(number: int, cleaned: list[str]) -> None:
    async def worker(name: str) -> None:
        try:
            while True:
                await asyncio.sleep(0)  # the loop stays busy: the signal lands inside it
        except BaseException as exc:
            cleaned.append(f"{name}: {type(exc).__name__}")
            raise

    # no handler that raises is left to run inside the loop's own code (where a stop raised
    # between its steps could lose a task's next step, and the run wait for it forever)
    assert signal.getsignal(number) not in STOPS
    tasks = [asyncio.ensure_future(worker(f"w{i}")) for i in range(4)]
    # from another thread: the handler then runs wherever the main thread is, mostly inside
    # a worker's step or the loop's own code
    threading.Timer(0.05, os.kill, (os.getpid(), number)).start()
    await asyncio.gather(*tasks)


@pytest.mark.parametrize(
    ("number", "kind"), [(signal.SIGTERM, Terminated), (signal.SIGINT, KeyboardInterrupt)]
)
def test_a_signal_cancels_every_task_and_raises_its_stop_after(cli_handlers, number, kind):
    # raised by the handler at whatever line the loop was on, a stop could cut a task's step
    # short inside the loop, and the run then waited forever for it to finish cancelling
    cleaned: list[str] = []
    with pytest.raises(kind) as stopped:
        run_async(_busy(number, cleaned))
    assert type(stopped.value) is kind and stop_requested() is kind
    # each unwound by cancelling it, none cut short by the stop raised inside its step
    assert sorted(cleaned) == [f"w{i}: CancelledError" for i in range(4)]
    # the CLI's handlers are back once the loop is closed
    assert signal.getsignal(signal.SIGTERM) is on_sigterm
    assert signal.getsignal(signal.SIGINT) is on_sigint


def test_a_run_without_the_clis_handlers_keeps_its_own(cli_handlers):
    signal.signal(signal.SIGTERM, signal.SIG_DFL)

    async def answer() -> int:
        assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL  # not taken over
        return 42

    assert run_async(answer()) == 42
    assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL


def test_a_second_stop_ends_work_that_never_yields_and_a_swallowed_stop_is_still_raised(
    cli_handlers,
):
    # a tool that hangs inside the loop: the first stop waits for the loop, the second does not
    async def hung() -> str:
        os.kill(os.getpid(), signal.SIGINT)
        os.kill(os.getpid(), signal.SIGINT)
        started = time.monotonic()
        while time.monotonic() - started < 30:  # never yields
            pass
        return "ran to the end"

    started = time.monotonic()
    with pytest.raises(KeyboardInterrupt):
        run_async(hung())
    assert time.monotonic() - started < 20

    # main that catches its cancellation and returns: the stop is raised all the same
    async def swallows() -> str:
        try:
            os.kill(os.getpid(), signal.SIGTERM)
            await asyncio.sleep(30)
        except asyncio.CancelledError:
            pass
        return "returned"

    with pytest.raises(Terminated):
        run_async(swallows())


def test_a_stop_after_mains_last_await_is_the_stop_not_a_cancellation(cli_handlers):
    # the task, cancelled as it returned, made asyncio.run raise CancelledError
    async def ends() -> str:
        await asyncio.sleep(0)
        os.kill(os.getpid(), signal.SIGTERM)
        return "done"

    with pytest.raises(Terminated):
        run_async(ends())
    assert signal.getsignal(signal.SIGTERM) is on_sigterm


_SEEN = contextvars.ContextVar("seen", default="nothing")


def test_called_where_a_loop_runs_it_gives_the_result_or_the_error():
    # a notebook's cell runs under ipykernel's loop: asyncio.run refused to start one there
    async def answer() -> tuple[str, bool]:
        return _SEEN.get(), threading.current_thread() is threading.main_thread()

    async def fails() -> None:
        raise TeacherError("the endpoint said no")

    async def cell() -> tuple[str, bool]:
        _SEEN.set("the caller's")
        with pytest.raises(TeacherError, match="the endpoint said no"):
            run_async(fails())
        return run_async(answer())

    assert asyncio.run(cell()) == ("the caller's", False)


def test_a_stop_while_called_where_a_loop_runs_cancels_the_run_and_is_raised_after(cli_handlers):
    cleaned: list[str] = []
    release = threading.Event()

    async def work(stubborn: bool) -> str:
        try:
            await asyncio.sleep(30)
        except asyncio.CancelledError:
            cleaned.append("cancelled")
            while stubborn and not release.is_set():  # cleaning up for long
                await asyncio.sleep(0.01)
            raise
        return "ran to the end"

    async def cell(stops: int, stubborn: bool) -> str:
        # as ipykernel has it while a cell runs: Ctrl-C raises where the main thread is
        signal.signal(signal.SIGINT, signal.default_int_handler)
        for number in range(stops):
            threading.Timer(0.3 * (number + 1), os.kill, (os.getpid(), signal.SIGINT)).start()
        return run_async(work(stubborn))

    started = time.monotonic()
    with pytest.raises(KeyboardInterrupt):
        asyncio.run(cell(1, stubborn=False))
    assert cleaned == ["cancelled"] and time.monotonic() - started < 20  # unwound before
    # a second stop does not wait for a run that takes long to unwind
    cleaned.clear()
    started = time.monotonic()
    with pytest.raises(KeyboardInterrupt):
        asyncio.run(cell(2, stubborn=True))
    assert cleaned == ["cancelled"] and time.monotonic() - started < 20
    release.set()
