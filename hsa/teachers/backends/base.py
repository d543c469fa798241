"""The backend interface: an async ``chat(request) -> response``, and per-backend statistics."""

from __future__ import annotations

import abc
import asyncio
import concurrent.futures
import contextlib
import contextvars
import re
import signal
import threading
from collections import Counter
from collections.abc import Coroutine, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from hsa.errors import STOPS, TeacherError, record_stop
from hsa.teachers.request import ChatRequest, ChatResponse, Usage


class ContextOverflow(TeacherError):
    """The endpoint refused a request because the conversation no longer fits the model's
    context window: the rollout cannot go on, whatever a rerun sends; it ends as rejected
    (``context``), not as a request to send again."""


#: the ``finish_reason`` values of a reply the server stopped because it failed the request
#: (vLLM's ``abort`` and ``error``): no answer of the model's, but a failed request, retried
#: and never cached, as an error status would be
SERVER_FAILED = ("abort", "error")
#: how servers say a request is past the model's context window (OpenAI's
#: context_length_exceeded, vLLM's "maximum context length", SGLang's "longer than the
#: model's context length", vLLM's engine's "longer than the maximum model length")
CONTEXT_REFUSAL = re.compile(
    r"context[ _]length|maximum context|context window|maximum model length", re.IGNORECASE
)
#: ... and how they say it of a setting instead (vLLM: "'max_tokens' ... is too large: 4096.
#: This model's maximum context length is 2048 tokens"): the job's error, every request's
SETTING_REFUSAL = re.compile(r"max_tokens|max_completion_tokens|max_new_tokens", re.IGNORECASE)
#: the numbers of vLLM's refusal of a reply that does not fit: "'max_tokens' or
#: 'max_completion_tokens' is too large: 1024. This model's maximum context length is 4096
#: tokens and your request has 3100 input tokens (1024 > 4096 - 3100)."
_REPLY_TOKENS = re.compile(r"too large: (\d+)")
_CONTEXT_TOKENS = re.compile(r"maximum context length is (\d+)")
_INPUT_TOKENS = re.compile(r"has (\d+) input tokens")


def outgrew_context(message: str) -> bool:
    """Whether a refusal's ``message`` says the conversation no longer fits the model's
    context window (a ``ContextOverflow``), rather than that a setting does not.

    A refusal naming ``max_tokens`` is the conversation's when the reply's tokens would fit
    beside a shorter conversation, which is most of what is asked (vLLM refuses a request
    whose input and ``max_tokens`` together pass the context, and says so of ``max_tokens``);
    it is the setting's when ``max_tokens`` alone fills the context, or takes more of it than
    the conversation does, or the message gives no numbers to tell."""
    if not CONTEXT_REFUSAL.search(message):
        return False
    if not SETTING_REFUSAL.search(message):
        return True
    reply, context = _REPLY_TOKENS.search(message), _CONTEXT_TOKENS.search(message)
    if reply is None or context is None or int(reply[1]) >= int(context[1]):
        return False
    given = _INPUT_TOKENS.search(message)
    return given is None or int(given[1]) >= int(reply[1])


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


#: a request waiting in a batching backend, and the future its answer goes to
Waiting = tuple[ChatRequest, "asyncio.Future[ChatResponse]"]


class BatchingBackend(Backend):
    """A backend that answers concurrent requests in batches (an in-process engine).

    ``chat`` queues the request; one worker task cuts the queue into batches of at most
    ``batch_size``, after waiting ``batch_wait_s`` for concurrent rollouts to add theirs, and
    hands each to ``run_batch``, which sets every future. A batch that raises fails its own
    requests (``TeacherError`` naming the backend), never the worker.
    """

    def __init__(self, batch_size: int, batch_wait_s: float):
        self.batch_size = batch_size
        self.batch_wait_s = batch_wait_s
        self.stats = BackendStats()
        self._queue: list[Waiting] = []
        self._worker: asyncio.Task | None = None

    async def chat(self, request: ChatRequest) -> ChatResponse:
        loop = asyncio.get_running_loop()
        future: asyncio.Future[ChatResponse] = loop.create_future()
        self._queue.append((request, future))
        if self._worker is None or self._worker.done():
            self._worker = loop.create_task(self._run())
        return await future

    @abc.abstractmethod
    async def run_batch(self, taken: list[Waiting]) -> None:
        """Answer the requests of ``taken``, setting each future."""

    async def _run(self) -> None:
        while self._queue:
            # Let concurrent rollouts add their requests before the batch is cut.
            await asyncio.sleep(self.batch_wait_s)
            taken = self._queue[: self.batch_size]
            del self._queue[: len(taken)]
            try:
                await self.run_batch(taken)
            except Exception as exc:  # one failed batch fails its requests, not the loop
                error = teacher_error(self.name, exc)
                for _, future in taken:
                    if not future.done():
                        future.set_exception(error)


_T = TypeVar("_T")


def run_async(main: Coroutine[Any, Any, _T]) -> _T:
    """``asyncio.run(main)``, where a stop (Ctrl-C, or SIGTERM as ``Terminated``) that ends
    the run is said once, by the command, and not again by asyncio as a traceback of each task
    it cut short ("Task exception was never retrieved").

    While the loop runs, the CLI's signal handlers (``hsa.errors.STOPS``) give way to one that
    stops the run as ``asyncio.Runner`` stops it on Ctrl-C: the first stop cancels ``main``
    and wakes the loop, and is raised once ``main`` has unwound (or has returned anyway); a
    second stop is raised at once, wherever the main thread is (work that never yields back
    to the loop). Raised by the first signal at whatever line the loop was on, a stop could
    cut a task's step short inside the loop itself, and the run then waited forever for that
    task to finish cancelling.

    Called where an event loop runs already (a notebook's cell, under ipykernel's loop), where
    ``asyncio.run`` refuses to start another, it runs ``main`` on a thread of its own and
    waits for it (``_run_beside``): a job's progress callbacks are then called on that thread."""
    if _loop_running():
        return _run_beside(main)
    taken = {}
    if threading.current_thread() is threading.main_thread():
        for number in (signal.SIGTERM, signal.SIGINT):
            handler = signal.getsignal(number)
            if handler in STOPS:
                taken[number] = handler
    asked: list[type[KeyboardInterrupt]] = []
    running: dict[str, Any] = {}  # the loop and main's task, once they run

    def stop(number: int, frame: object) -> None:
        kind = STOPS[taken[signal.Signals(number)]]
        record_stop(kind)
        asked.append(kind)
        if len(asked) > 1:
            raise kind()
        task = running.get("task")
        if task is not None and not task.done():
            task.cancel()
            running["loop"].call_soon_threadsafe(lambda: None)  # a loop waiting in select

    async def quiet() -> _T:
        loop = asyncio.get_running_loop()
        loop.set_exception_handler(_quiet_stops)
        running.update(loop=loop, task=asyncio.current_task())
        if asked:  # asked before the loop ran
            main.close()
            raise asked[0]()
        try:
            return await main
        except asyncio.CancelledError:
            if asked:
                raise asked[0]() from None
            raise

    try:
        for number in taken:
            signal.signal(number, stop)
        result = asyncio.run(quiet())
    except asyncio.CancelledError:
        # a stop after main's last await: the task was cancelled as it returned
        if asked:
            raise asked[0]() from None
        raise
    except BaseException:
        main.close()  # never awaited when the stop came before the loop ran
        raise
    finally:
        for number, handler in taken.items():
            signal.signal(number, handler)
    if asked:  # main returned all the same, or the stop came as the loop closed
        raise asked[0]()
    return result


def _loop_running() -> bool:
    """Whether an event loop runs in this thread."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True


def _run_beside(main: Coroutine[Any, Any, _T]) -> _T:
    """``run_async(main)`` on a new thread, for a caller whose thread runs an event loop: the
    caller waits for it, with the caller's context variables, as ``asyncio.run``'s task would
    have them, and is given its result or its exception. A stop raised in the caller while it
    waits (Ctrl-C, which ipykernel raises in a cell as ``KeyboardInterrupt``) cancels ``main``
    and is raised once ``main`` has unwound (or has returned anyway); a second stop is raised
    at once, leaving the thread to finish unwinding."""
    done: concurrent.futures.Future[_T] = concurrent.futures.Future()
    running: dict[str, Any] = {}  # the loop and main's task, once they run
    stopped = threading.Event()

    async def watched() -> _T:
        running.update(loop=asyncio.get_running_loop(), task=asyncio.current_task())
        if stopped.is_set():  # stopped before the loop ran
            main.close()
            raise asyncio.CancelledError
        return await main

    def run() -> None:
        try:
            done.set_result(run_async(watched()))
        except BaseException as exc:  # the caller's to raise
            done.set_exception(exc)

    worker = threading.Thread(
        target=contextvars.copy_context().run, args=(run,), name="hsa run_async", daemon=True
    )
    worker.start()
    try:
        _wait(done)
    except BaseException:
        stopped.set()
        if "loop" in running:
            with contextlib.suppress(RuntimeError):  # the loop closed meanwhile
                running["loop"].call_soon_threadsafe(running["task"].cancel)
        _wait(done)
        raise
    return done.result()


def _wait(done: concurrent.futures.Future[Any]) -> None:
    # in short waits, so that Ctrl-C reaches the caller on every platform (on Windows, a
    # wait on a lock without a timeout is not interrupted by it)
    while not done.done():
        concurrent.futures.wait([done], timeout=0.25)


def _quiet_stops(loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
    if not isinstance(context.get("exception"), KeyboardInterrupt):
        loop.default_exception_handler(context)


def teacher_error(backend: str, exc: Exception) -> Exception:
    """``exc`` as the error of a request to ``backend``: a ``TeacherError`` as it is, any
    other exception (the engine's own) as a ``TeacherError`` naming the backend."""
    return exc if isinstance(exc, TeacherError) else TeacherError(f"{backend}: {exc}")
