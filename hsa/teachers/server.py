"""A small OpenAI-compatible HTTP server (``/v1/chat/completions``) with fault injection.

Built on ``asyncio`` streams (HTTP/1.1, keep-alive, ``Content-Length`` bodies), loopback only.
What answers is a ``Responder``: a function from the request body to an assistant message.
Faults are decided by hashing the request, so a run is reproducible whatever the order of
arrival: ``fail_rate`` of attempts get HTTP 429 or 500 (half each; a retried request draws
again), ``malformed_rate`` of requests get their tool call broken (the same request is always
broken the same way, as a model's deterministic output would be), and every answer waits
``latency_ms``. An optional JSONL log records every request's key and status; with
``api_key`` set, requests without that bearer token are refused (401).
"""

from __future__ import annotations

import asyncio
import gc
import hashlib
import hmac
import json
import re
import time
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from hsa.errors import HsaError, TeacherError
from hsa.teachers.request import ChatRequest, Sampling

try:  # optional: a faster JSON decoder for request bodies (see ``_loads``)
    import orjson as _orjson
except ImportError:
    _orjson = None
_LONG_NUMBER = re.compile(rb"[0-9]{19}")

#: allocations between collections of the youngest generation while serving
GC_THRESHOLD = 20_000
LOOPBACK = "127.0.0.1"
MAX_BODY = 64 * 1024 * 1024
MAX_HEADER_LINES = 100

#: body -> (assistant message, usage dict); raises HsaError for a request it cannot answer
Responder = Callable[[Mapping[str, Any]], tuple[dict[str, Any], dict[str, int]]]


@dataclass(frozen=True, slots=True)
class Faults:
    """What goes wrong, and how often (fractions of requests, 0 to 1)."""

    latency_ms: float = 0.0
    fail_rate: float = 0.0
    malformed_rate: float = 0.0
    seed: int = 0

    def __post_init__(self) -> None:
        for name in ("fail_rate", "malformed_rate"):
            value = getattr(self, name)
            if not 0.0 <= value <= 1.0:
                raise TeacherError(f"{name} must be between 0 and 1, got {value}")
        if self.latency_ms < 0:
            raise TeacherError(f"latency_ms must not be negative, got {self.latency_ms}")


def _loads(raw: bytes) -> Any:
    """``json.loads(raw)``; through orjson when it is installed, which reads a request body
    (mostly the tool schemas) several times faster: decoding was a third of the server's CPU.
    Whatever orjson refuses (NaN, lone surrogates) goes to ``json``, which accepts it or raises
    its own ``ValueError``, and so does a body with a run of 19 digits or more (orjson reads
    integers past 64 bits as floats), so the result is always ``json.loads``'s."""
    if _orjson is not None and _LONG_NUMBER.search(raw) is None:
        try:
            return _orjson.loads(raw)
        except _orjson.JSONDecodeError:
            pass
    return json.loads(raw)


def _fraction(*parts: object) -> float:
    digest = hashlib.blake2b(
        "\x1f".join(str(p) for p in parts).encode("utf-8"), digest_size=8
    ).digest()
    return int.from_bytes(digest, "big") / 2**64


def request_key(body: Mapping[str, Any]) -> str:
    """The request-cache key of a chat-completions body (the same hash the client computes)."""
    return ChatRequest(
        model=str(body.get("model", "")),
        messages=body.get("messages") or [],
        tools=body.get("tools") or (),
        sampling=Sampling(
            temperature=body.get("temperature", 1.0),
            top_p=body.get("top_p", 1.0),
            max_tokens=body.get("max_tokens"),
            seed=body.get("seed"),
        ),
    ).key()


def malform(message: dict[str, Any]) -> dict[str, Any] | None:
    """``message`` with its first tool call broken, or None when it has no call to break.

    API calls get arguments that are not JSON; a text call loses its last closing bracket or
    tag end (``}``, ``)``, ``]`` or ``>``), which no call format parses.
    """
    calls = message.get("tool_calls")
    if calls:
        broken = [dict(c, function=dict(c["function"])) for c in calls]
        args = broken[0]["function"]["arguments"]
        broken[0]["function"]["arguments"] = args[:-1] if args.endswith("}") else args + "{"
        return dict(message, tool_calls=broken)
    content = message.get("content")
    if not isinstance(content, str):
        return None
    cut = max(content.rfind(c) for c in "})]>")
    if cut < 0:
        return None
    return dict(message, content=content[:cut] + content[cut + 1 :])


@dataclass(slots=True)
class ServerStats:
    requests: int = 0
    statuses: Counter = field(default_factory=Counter)
    malformed: int = 0


class ChatServer:
    """Serves ``responder`` as an OpenAI-compatible endpoint on 127.0.0.1."""

    def __init__(
        self,
        responder: Responder,
        *,
        port: int = 0,
        faults: Faults | None = None,
        model: str = "hsa-oracle",
        log: Path | None = None,
        api_key: str | None = None,
    ):
        self.responder = responder
        self.port = port
        self.faults = faults or Faults()
        self.model = model
        self.stats = ServerStats()
        self._log_path = log
        self._api_key = api_key
        self._log: TextIO | None = None
        self._seen: Counter = Counter()  # key -> attempts, so a retry draws a new fault
        self._server: asyncio.AbstractServer | None = None
        self._counter = 0
        self._writers: set[asyncio.StreamWriter] = set()

    async def start(self) -> int:
        """Start listening; returns the port (chosen by the system when 0)."""
        if self._log_path is not None:
            self._log = self._log_path.open("a", encoding="utf-8")
        try:
            self._server = await asyncio.start_server(
                self._connection, LOOPBACK, self.port, backlog=2048
            )
        except OSError as exc:
            raise TeacherError(
                f"cannot listen on {LOOPBACK}:{self.port}: {exc.strerror}; pick another --port"
            ) from None
        self.port = self._server.sockets[0].getsockname()[1]
        return self.port

    async def serve_forever(self) -> None:
        if self._server is None:
            await self.start()
        assert self._server is not None
        # As in a teacher job (``hsa.teachers.job``): the responder's environment and plan
        # live as long as the server, and each request allocates thousands of short-lived
        # objects, so the youngest generation is collected less often while serving.
        thresholds = gc.get_threshold()
        gc.freeze()
        gc.set_threshold(GC_THRESHOLD, *thresholds[1:])
        try:
            async with self._server:
                await self._server.serve_forever()
        finally:
            gc.set_threshold(*thresholds)
            gc.unfreeze()

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
            for writer in list(self._writers):
                writer.close()
            await self._server.wait_closed()
        if self._log is not None:
            self._log.close()
            self._log = None

    async def _connection(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter):
        self._writers.add(writer)
        try:
            while True:
                request = await _read_request(reader)
                if request is None:
                    break
                method, path, headers, body = request
                if self._api_key is not None and not _authorized(headers, self._api_key):
                    status, payload, extra = 401, _error("invalid API key", "unauthorized"), {}
                else:
                    status, payload, extra = await self._route(method, path, body)
                keep_alive = headers.get("connection", "").lower() != "close"
                writer.write(_response_bytes(status, payload, extra, keep_alive))
                await writer.drain()
                if not keep_alive:
                    break
        except _BadRequest as exc:
            payload = _error(f"malformed HTTP request: {exc}", "invalid_request")
            writer.write(_response_bytes(400, payload, {}, False))
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        except asyncio.CancelledError:
            # The handler is the top of its own task: ending quietly here keeps a shutdown
            # with open keep-alive connections from logging a traceback per connection.
            pass
        finally:
            self._writers.discard(writer)
            writer.close()

    async def _route(
        self, method: str, path: str, body: bytes
    ) -> tuple[int, dict[str, Any], dict[str, str]]:
        path = path.split("?", 1)[0].rstrip("/")
        if path in ("/health", "/v1/health") and method == "GET":
            return 200, {"status": "ok"}, {}
        if path == "/v1/models" and method == "GET":
            model = {"id": self.model, "object": "model", "owned_by": "hsa"}
            return 200, {"object": "list", "data": [model]}, {}
        if path != "/v1/chat/completions":
            return 404, _error(f"no route {path}", "not_found"), {}
        if method != "POST":
            return 405, _error("use POST", "method_not_allowed"), {}
        return await self._chat(body)

    async def _chat(self, raw: bytes) -> tuple[int, dict[str, Any], dict[str, str]]:
        self.stats.requests += 1
        try:
            body = _loads(raw)
            if not isinstance(body, dict) or not isinstance(body.get("messages"), list):
                raise ValueError("the body must be a JSON object with a messages list")
        except ValueError as exc:
            return self._done(None, 400, _error(f"bad request body: {exc}", "invalid_request"))
        # Faults are drawn from a hash of the body as sent (the same request always arrives as
        # the same bytes); the request-cache key, dearer to compute, only goes to the log.
        digest = hashlib.blake2b(raw, digest_size=16).hexdigest()
        key = request_key(body) if self._log is not None else digest
        faults = self.faults
        self._seen[digest] += 1
        draw = _fraction(faults.seed, digest, self._seen[digest])
        if draw < faults.fail_rate:
            status = 429 if draw < faults.fail_rate / 2 else 500
            message = "rate limited (injected)" if status == 429 else "server error (injected)"
            headers = {"retry-after": "0"} if status == 429 else {}
            return self._done(key, status, _error(message, "injected_fault"), headers)
        if faults.latency_ms:
            await asyncio.sleep(faults.latency_ms / 1000.0)
        try:
            message, usage = self.responder(body)
        except HsaError as exc:
            return self._done(key, 400, _error(str(exc), "invalid_request"))
        malformed = False
        rate = faults.malformed_rate
        if rate and _fraction(faults.seed, "malformed", digest) < rate:
            broken = malform(message)
            if broken is not None:
                message, malformed = broken, True
                self.stats.malformed += 1
        self._counter += 1
        finish = "tool_calls" if message.get("tool_calls") else "stop"
        usage = {**usage, "total_tokens": sum(usage.values())}
        completion = {
            "id": f"chatcmpl-{digest[:16]}-{self._counter}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": str(body.get("model") or self.model),
            "choices": [{"index": 0, "message": message, "finish_reason": finish}],
            "usage": usage,
        }
        return self._done(key, 200, completion, malformed=malformed)

    def _done(
        self,
        key: str | None,
        status: int,
        payload: dict[str, Any],
        headers: dict[str, str] | None = None,
        *,
        malformed: bool = False,
    ) -> tuple[int, dict[str, Any], dict[str, str]]:
        self.stats.statuses[status] += 1
        if self._log is not None:
            entry = {"key": key, "status": status, "malformed": malformed}
            self._log.write(json.dumps(entry) + "\n")
            self._log.flush()
        return status, payload, headers or {}


class _BadRequest(Exception):
    pass


def _authorized(headers: dict[str, str], key: str) -> bool:
    scheme, _, token = headers.get("authorization", "").partition(" ")
    return scheme.lower() == "bearer" and hmac.compare_digest(token.strip(), key)


_REASONS = {
    200: "OK",
    400: "Bad Request",
    401: "Unauthorized",
    404: "Not Found",
    405: "Method Not Allowed",
    411: "Length Required",
    413: "Payload Too Large",
    429: "Too Many Requests",
    500: "Internal Server Error",
}


def _error(message: str, kind: str) -> dict[str, Any]:
    return {"error": {"message": message, "type": kind, "code": kind}}


async def _read_request(
    reader: asyncio.StreamReader,
) -> tuple[str, str, dict[str, str], bytes] | None:
    line = await reader.readline()
    if not line:
        return None
    parts = line.decode("latin-1").split()
    if len(parts) != 3:
        raise _BadRequest("bad request line")
    method, path, _ = parts
    headers: dict[str, str] = {}
    for _ in range(MAX_HEADER_LINES):
        raw = await reader.readline()
        if raw in (b"\r\n", b"\n", b""):
            break
        name, _, value = raw.decode("latin-1").partition(":")
        headers[name.strip().lower()] = value.strip()
    else:
        raise _BadRequest("too many header lines")
    length = int(headers.get("content-length") or 0)
    if length < 0 or length > MAX_BODY or "chunked" in headers.get("transfer-encoding", ""):
        raise _BadRequest("unsupported body")
    body = await reader.readexactly(length) if length else b""
    return method, path, headers, body


def _response_bytes(
    status: int, payload: dict[str, Any], headers: dict[str, str], keep_alive: bool
) -> bytes:
    body = json.dumps(payload, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
    lines = [
        f"HTTP/1.1 {status} {_REASONS.get(status, 'Error')}",
        "Content-Type: application/json",
        f"Content-Length: {len(body)}",
        f"Connection: {'keep-alive' if keep_alive else 'close'}",
        *(f"{k}: {v}" for k, v in headers.items()),
    ]
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + body
