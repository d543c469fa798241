"""The request cache: finished chat responses in SQLite (WAL), keyed by the request's hash.

A rerun asks the cache before the backend, so a finished job costs no requests and an
interrupted one repeats none that had finished. Only successful responses are stored (a
malformed tool call is a successful response: the model said it). A response is committed
before the rollout that asked for it goes on, so a killed process loses at most the requests
still in flight.

The async methods run on a thread of the cache's own, which commits every write queued while
it was busy in one transaction: a commit can wait on the disk or on another process holding
the file, and the event loop, with every other rollout on it, must not wait with it.
"""

from __future__ import annotations

import asyncio
import json
import queue
import sqlite3
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hsa.errors import TeacherError
from hsa.teachers.backends.base import Backend
from hsa.teachers.request import ChatRequest, ChatResponse

_SCHEMA = """
CREATE TABLE IF NOT EXISTS responses (
    key TEXT PRIMARY KEY,
    model TEXT NOT NULL,
    response TEXT NOT NULL,
    created REAL NOT NULL
)
"""
_COLUMNS = frozenset(("key", "model", "response", "created"))  # of the responses table
_SQLITE = b"SQLite format 3\x00"  # how every SQLite database file begins
_INSERT = "INSERT OR REPLACE INTO responses (key, model, response, created) VALUES (?, ?, ?, ?)"


@dataclass(slots=True)
class CacheStats:
    hits: int = 0
    misses: int = 0
    writes: int = 0


class RequestCache:
    """A SQLite file of responses by request key; safe to share between processes."""

    def __init__(self, path: str | Path):
        self.path = Path(path)
        self.stats = CacheStats()
        self._lock = threading.Lock()
        self._jobs: queue.SimpleQueue | None = None
        self._thread: threading.Thread | None = None
        self._known: set[str] | None = None  # keys stored, read once, for misses without I/O
        self._refuse_foreign()
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            # autocommit mode: transactions are explicit (BEGIN ... COMMIT) or one statement
            self._db = sqlite3.connect(
                str(self.path), isolation_level=None, timeout=30.0, check_same_thread=False
            )
            tables = {
                name
                for (name,) in self._db.execute("SELECT name FROM sqlite_master WHERE type='table'")
            }
            columns = {row[1] for row in self._db.execute("PRAGMA table_info(responses)")}
            if tables and not columns >= _COLUMNS:  # another program's database: not ours
                self._db.close()
                raise TeacherError(
                    "is an SQLite database of something else (tables: "
                    f"{', '.join(sorted(tables))}), not a request cache; choose another --cache",
                    file=str(self.path),
                )
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA synchronous=NORMAL")
            self._db.execute(_SCHEMA)
        except sqlite3.Error as exc:
            raise TeacherError(
                f"cannot open the request cache: {exc}; delete the file to start afresh",
                file=str(self.path),
            ) from None
        except OSError as exc:
            raise TeacherError(
                f"cannot open the request cache: {exc.strerror or exc}; choose another --cache",
                file=str(self.path),
            ) from None

    def _refuse_foreign(self) -> None:
        """Refuse a folder or a file that is not an SQLite database before opening it: the
        advice for a damaged cache (delete it) would destroy what the path really holds."""
        if self.path.is_dir():
            raise TeacherError(
                "is a folder; the request cache is a file (such as "
                f"{self.path / 'cache.sqlite'}): choose another --cache",
                file=str(self.path),
            )
        try:
            with self.path.open("rb") as stream:
                head = stream.read(len(_SQLITE))
        except OSError:  # not there (a new cache), or reported as the database is opened
            return
        if head and head != _SQLITE:  # (an empty file is a new database)
            raise TeacherError(
                "is not a request cache (not an SQLite file); choose another --cache",
                file=str(self.path),
            )

    # --- synchronous access ---

    def get(self, key: str) -> ChatResponse | None:
        with self._lock:
            row = self._db.execute(
                "SELECT response FROM responses WHERE key = ?", (key,)
            ).fetchone()
        return self._found(row)

    def put(self, key: str, model: str, response: ChatResponse) -> None:
        with self._lock:
            self._db.execute(_INSERT, _record(key, model, response))
        self.stats.writes += 1

    def keys(self) -> set[str]:
        with self._lock:
            return {row[0] for row in self._db.execute("SELECT key FROM responses")}

    def __len__(self) -> int:
        with self._lock:
            return int(self._db.execute("SELECT COUNT(*) FROM responses").fetchone()[0])

    # --- asynchronous access, off the event loop ---

    async def aget(self, key: str) -> ChatResponse | None:
        """The cached response for ``key``; a key never stored is a miss without any I/O.

        The stored keys are read once, on the first call; keys that another process stores
        afterwards are not seen (workers of one job never ask the same request).
        """
        if self._known is None:
            self._known = self.keys()
        if key not in self._known:
            return self._found(None)
        return self._found(await self._submit("get", (key,)))

    async def aput(self, key: str, model: str, response: ChatResponse) -> None:
        """Store a response; returns once it is committed."""
        await self._submit("put", _record(key, model, response))
        if self._known is not None:
            self._known.add(key)
        self.stats.writes += 1

    def _submit(self, op: str, args: tuple) -> asyncio.Future:
        if self._thread is None:
            self._jobs = queue.SimpleQueue()
            self._thread = threading.Thread(target=self._serve, name="hsa-cache", daemon=True)
            self._thread.start()
        loop = asyncio.get_running_loop()
        future = loop.create_future()
        assert self._jobs is not None
        self._jobs.put((op, args, future, loop))
        return future

    def _serve(self) -> None:
        assert self._jobs is not None
        while True:
            batch = [self._jobs.get()]
            while not self._jobs.empty():
                batch.append(self._jobs.get())
            stop = any(job is None for job in batch)
            jobs = [job for job in batch if job is not None]
            results: list[tuple[Any, Any, asyncio.AbstractEventLoop, BaseException | None]] = []
            with self._lock:
                puts = [job for job in jobs if job[0] == "put"]
                error: BaseException | None = None
                if puts:
                    try:
                        self._write([job[1] for job in puts])
                    except Exception as exc:  # the waiting requests get it: a thread that
                        # died here would leave them waiting forever
                        error = TeacherError(
                            f"cannot write the request cache: {exc}", file=str(self.path)
                        )
                for op, args, future, loop in jobs:
                    if op == "put":
                        results.append((future, None, loop, error))
                        continue
                    try:
                        row = self._db.execute(
                            "SELECT response FROM responses WHERE key = ?", args
                        ).fetchone()
                        results.append((future, row, loop, None))
                    except Exception as exc:  # as a write's
                        failure = TeacherError(
                            f"cannot read the request cache: {exc}", file=str(self.path)
                        )
                        results.append((future, None, loop, failure))
            for future, value, loop, error in results:
                loop.call_soon_threadsafe(_settle, future, value, error)
            if stop:
                return

    def _write(self, records: list[tuple]) -> None:
        # One transaction for everything queued meanwhile (a group commit); a busy file held
        # by another process is retried by SQLite for up to the connection's timeout.
        self._db.execute("BEGIN IMMEDIATE")
        try:
            self._db.executemany(_INSERT, records)
            self._db.execute("COMMIT")
        except BaseException:
            if self._db.in_transaction:
                self._db.execute("ROLLBACK")
            raise

    def _found(self, row: Any) -> ChatResponse | None:
        if row is None:
            self.stats.misses += 1
            return None
        self.stats.hits += 1
        return ChatResponse.from_dict(json.loads(row[0]), cached=True)

    def close(self) -> None:
        if self._thread is not None and self._jobs is not None:
            self._jobs.put(None)
            self._thread.join()
            self._thread = None
        with self._lock:
            self._db.close()


def _record(key: str, model: str, response: ChatResponse) -> tuple:
    text = json.dumps(response.to_dict(), ensure_ascii=False, separators=(",", ":"))
    return (key, model, text, time.time())


def _settle(future: asyncio.Future, value: Any, failure: BaseException | None) -> None:
    if future.done():
        return
    if failure is not None:
        future.set_exception(failure)
    else:
        future.set_result(value)


class CachedBackend(Backend):
    """A backend that answers from ``cache`` when it can and stores what ``inner`` answers."""

    def __init__(self, inner: Backend, cache: RequestCache):
        self.inner = inner
        self.cache = cache
        self.name = inner.name
        self.stats = inner.stats  # the same counters: backends update them in place

    async def chat(self, request: ChatRequest) -> ChatResponse:
        key = request.key()
        cached = await self.cache.aget(key)
        if cached is not None:
            return cached
        response = await self.inner.chat(request)
        await self.cache.aput(key, request.model, response)
        return response

    async def start(self) -> None:
        await self.inner.start()

    async def aclose(self) -> None:
        await self.inner.aclose()
