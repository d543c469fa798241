"""The request cache: finished chat responses in SQLite (WAL), keyed by the request's hash.

A rerun asks the cache before the backend, so a finished job costs no requests and an
interrupted one repeats none that had finished. Only successful responses are stored (a
malformed tool call is a successful response: the model said it). Each response is committed
as it arrives, so a killed process loses at most the requests that were still in flight.
"""

from __future__ import annotations

import json
import sqlite3
import time
from dataclasses import dataclass
from pathlib import Path

from hsa.errors import TeacherError
from hsa.teachers.backends.base import Backend, BackendStats
from hsa.teachers.request import ChatRequest, ChatResponse

_SCHEMA = """
CREATE TABLE IF NOT EXISTS responses (
    key TEXT PRIMARY KEY,
    model TEXT NOT NULL,
    response TEXT NOT NULL,
    created REAL NOT NULL
)
"""


@dataclass(slots=True)
class CacheStats:
    hits: int = 0
    misses: int = 0
    writes: int = 0


class RequestCache:
    """A SQLite file of responses by request key; safe to open from several processes."""

    def __init__(self, path: str | Path):
        self.path = Path(path)
        self.stats = CacheStats()
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            # autocommit mode: each put is its own transaction, durable once it returns
            self._db = sqlite3.connect(str(self.path), isolation_level=None, timeout=30.0)
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

    def get(self, key: str) -> ChatResponse | None:
        row = self._db.execute("SELECT response FROM responses WHERE key = ?", (key,)).fetchone()
        if row is None:
            self.stats.misses += 1
            return None
        self.stats.hits += 1
        return ChatResponse.from_dict(json.loads(row[0]), cached=True)

    def put(self, key: str, model: str, response: ChatResponse) -> None:
        text = json.dumps(response.to_dict(), ensure_ascii=False, separators=(",", ":"))
        self._db.execute(
            "INSERT OR REPLACE INTO responses (key, model, response, created) VALUES (?, ?, ?, ?)",
            (key, model, text, time.time()),
        )
        self.stats.writes += 1

    def keys(self) -> set[str]:
        return {row[0] for row in self._db.execute("SELECT key FROM responses")}

    def __len__(self) -> int:
        return int(self._db.execute("SELECT COUNT(*) FROM responses").fetchone()[0])

    def close(self) -> None:
        self._db.close()


class CachedBackend(Backend):
    """A backend that answers from ``cache`` when it can and stores what ``inner`` answers."""

    def __init__(self, inner: Backend, cache: RequestCache):
        self.inner = inner
        self.cache = cache
        self.name = inner.name

    @property
    def stats(self) -> BackendStats:
        return self.inner.stats

    async def chat(self, request: ChatRequest) -> ChatResponse:
        key = request.key()
        cached = self.cache.get(key)
        if cached is not None:
            return cached
        response = await self.inner.chat(request)
        self.cache.put(key, request.model, response)
        return response

    async def start(self) -> None:
        await self.inner.start()

    async def aclose(self) -> None:
        await self.inner.aclose()
