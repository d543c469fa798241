"""The request cache: SQLite in WAL mode, durable per answer, shared by reruns."""

from __future__ import annotations

import asyncio
import sqlite3

import pytest

from hsa.errors import TeacherError
from hsa.teachers.backends.base import Backend, BackendStats
from hsa.teachers.cache import CachedBackend, RequestCache
from hsa.teachers.request import ChatRequest, ChatResponse, Sampling, Usage, assistant_message


class Counting(Backend):
    name = "counting"

    def __init__(self):
        self.stats = BackendStats()
        self.asked: list[str] = []

    async def chat(self, request: ChatRequest) -> ChatResponse:
        self.asked.append(request.key())
        text = request.messages[-1]["content"].upper()
        return ChatResponse(assistant_message(text), "stop", Usage(3, 1), latency_s=0.25)


def ask(backend, text: str, seed: int = 0) -> ChatResponse:
    request = ChatRequest("m", [{"role": "user", "content": text}], sampling=Sampling(seed=seed))
    return asyncio.run(backend.chat(request))


def test_answers_come_from_the_cache_after_the_first_time(tmp_path):
    inner = Counting()
    cache = RequestCache(tmp_path / "cache.sqlite")
    backend = CachedBackend(inner, cache)
    first = ask(backend, "hello")
    again = ask(backend, "hello")
    other = ask(backend, "hello", seed=1)
    assert len(inner.asked) == 2  # "hello" once per seed
    assert not first.cached and again.cached and not other.cached
    assert again.message == first.message and again.usage == Usage(3, 1)
    assert again.latency_s == 0.25  # the original request's latency
    assert (cache.stats.hits, cache.stats.misses, cache.stats.writes) == (1, 2, 2)


def test_cache_survives_reopening_and_uses_wal(tmp_path):
    path = tmp_path / "cache.sqlite"
    backend = CachedBackend(Counting(), RequestCache(path))
    ask(backend, "kept")
    backend.cache.close()  # each answer was committed as it came
    reopened = RequestCache(path)
    assert len(reopened) == 1
    inner = Counting()
    assert ask(CachedBackend(inner, reopened), "kept").cached and inner.asked == []
    mode = sqlite3.connect(path).execute("PRAGMA journal_mode").fetchone()[0]
    assert mode == "wal"


def test_failed_requests_are_not_cached(tmp_path):
    class Failing(Counting):
        async def chat(self, request):
            raise RuntimeError("down")

    cache = RequestCache(tmp_path / "c.sqlite")
    backend = CachedBackend(Failing(), cache)
    with pytest.raises(RuntimeError):
        ask(backend, "x")
    assert len(cache) == 0


def test_a_damaged_cache_file_is_reported(tmp_path):
    path = tmp_path / "cache.sqlite"
    path.write_bytes(b"SQLite format 3\x00" + b"\xff" * 4000)  # an SQLite file, damaged
    with pytest.raises(TeacherError) as caught:
        RequestCache(path)
    assert str(path) in str(caught.value) and "delete the file" in str(caught.value)


def test_what_is_not_a_cache_is_refused_untouched_without_advice_to_delete_it(tmp_path):
    text = tmp_path / "notes.json"
    text.write_text('{"a": 1}\n' * 100)
    other = tmp_path / "app.db"
    with sqlite3.connect(other) as db:
        db.execute("CREATE TABLE users (name TEXT)")
    db.close()
    survey = tmp_path / "survey.db"  # a table of the cache's name, of other columns
    with sqlite3.connect(survey) as db:
        db.execute("CREATE TABLE responses (id INTEGER PRIMARY KEY, answer TEXT)")
    db.close()
    before = other.read_bytes(), survey.read_bytes()
    for path, says in [
        (tmp_path, "is a folder"),
        (text, "not an SQLite file"),
        (other, "something else (tables: users)"),
        (survey, "something else (tables: responses)"),
    ]:
        with pytest.raises(TeacherError) as caught:
            RequestCache(path)
        message = str(caught.value)
        assert str(path) in message and says in message, message
        assert "choose another --cache" in message and "delete" not in message
    assert text.read_text() == '{"a": 1}\n' * 100
    assert (other.read_bytes(), survey.read_bytes()) == before


def test_an_empty_file_is_a_new_cache(tmp_path):
    path = tmp_path / "cache.sqlite"
    path.touch()
    cache = RequestCache(path)
    assert len(cache) == 0
    cache.close()


def test_async_writes_are_committed_together_and_read_back(tmp_path):
    cache = RequestCache(tmp_path / "cache.sqlite")
    responses = {f"k{i}": ChatResponse(assistant_message(f"answer {i}")) for i in range(50)}

    async def main():
        assert await cache.aget("k0") is None  # nothing stored: a miss without I/O
        await asyncio.gather(*(cache.aput(k, "m", r) for k, r in responses.items()))
        return await asyncio.gather(*(cache.aget(k) for k in responses))

    found = asyncio.run(main())
    assert [f.message for f in found] == [r.message for r in responses.values()]
    assert all(f.cached for f in found)
    cache.close()  # the cache's thread finishes its queue and stops
    reopened = RequestCache(tmp_path / "cache.sqlite")
    assert len(reopened) == 50 and reopened.get("k7").message["content"] == "answer 7"


def test_a_write_that_fails_is_an_error_of_its_request_not_a_wait_forever(tmp_path):
    cache = RequestCache(tmp_path / "cache.sqlite")
    unwritable = ChatResponse(assistant_message("half an emoji \ud83d"))  # no UTF-8 holds it

    async def main():
        with pytest.raises(TeacherError, match="cannot write the request cache"):
            await asyncio.wait_for(cache.aput("k", "m", unwritable), timeout=30)
        # the cache's thread lives on: the next request is stored and read back
        await cache.aput("k2", "m", ChatResponse(assistant_message("fine")))
        return await cache.aget("k2")

    assert asyncio.run(main()).message["content"] == "fine"
    cache.close()
