"""A small OpenAI-compatible HTTP server (``/v1/chat/completions``) with fault injection.

Built on ``aiohttp.web``'s low-level server (HTTP/1.1, keep-alive), loopback only, imported
when a server starts; routing is a few comparisons, so that every answer to a request that
parses, a 404 included, is JSON (an OpenAI-style error when it is one); a request that is not
HTTP gets aiohttp's plain-text 400.
What answers is a ``Responder``: a function from the request body to an assistant message.
Faults are decided by hashing the request, so a run is reproducible whatever the order of
arrival: ``fail_rate`` of attempts get HTTP 429 or 500 (half each; a retried request draws
again), ``malformed_rate`` of requests whose answer holds a tool call get that call broken (the
same request is always broken the same way, as a model's deterministic output would be; an
answer of text alone is never touched), and every answer leaves
``latency_ms`` after its request was read, as a model that takes that long to answer: the
server's own work on it (parsing, answering) is inside that time, not added to it. An
optional JSONL log records every chat-completions request's key and status once its answer
has gone out whole, or with ``"cut": true`` when it did not (the client left, or the server
closed): with its status when its status line had been written, null when nothing had; the
stats count them so too. With ``api_key`` set, requests without that bearer token are
refused (401).
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import json
import logging
import time
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from hsa.errors import HsaError, TeacherError
from hsa.teachers.request import ChatRequest, Sampling

if TYPE_CHECKING:
    from aiohttp import web

_orjson: Any
try:  # optional: a faster JSON decoder for request bodies (see ``_loads``)
    import orjson as _orjson
except ImportError:
    _orjson = None
# every ASCII digit becomes "0", so that a run of 19 digits is one substring search away
_DIGITS_AS_ZERO = bytes.maketrans(b"123456789", b"000000000")
_LONG_NUMBER = b"0" * 19
#: the most brackets a body may open (so the deepest it may nest) to be read by orjson
_ORJSON_MAX_OPEN = 10_000

LOOPBACK = "127.0.0.1"
MAX_BODY = 64 * 1024 * 1024
MAX_HEADERS = 100
#: seconds a closing server gives the answers in flight before it cuts their connections
SHUTDOWN_GRACE_S = 1.0

#: body -> (assistant message, usage dict); raises HsaError for a request it cannot answer.
#: A responder that may write calls in an answer's text (a text protocol's, which only it can
#: read) has a ``calls_in_text(body, message)`` method saying whether an answer does: the server
#: breaks only answers that hold a call, in ``tool_calls`` or, where that says so, in the text.
Responder = Callable[[Mapping[str, Any]], tuple[dict[str, Any], dict[str, int]]]
#: (body, assistant message) -> whether the message's text holds a call
CallsInText = Callable[[Mapping[str, Any], Mapping[str, Any]], bool]


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
    integers past 64 bits as floats), so the result is always ``json.loads``'s. (That check
    is a translation and a substring search: a regular expression took longer than orjson.)
    So does a body that could nest deeper than ``_ORJSON_MAX_OPEN``: older orjson releases
    overflow the C stack on deep nesting and take the process down; ``json`` raises
    ``RecursionError``."""
    if (
        _orjson is not None
        and raw.count(b"[") + raw.count(b"{") <= _ORJSON_MAX_OPEN
        and _LONG_NUMBER not in raw.translate(_DIGITS_AS_ZERO)
    ):
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
    """The request-cache key of a chat-completions body (the same hash the client computes:
    its token limit under either name, ``max_tokens`` or ``max_completion_tokens``)."""
    limit = body.get("max_tokens")
    return ChatRequest(
        model=str(body.get("model", "")),
        messages=body.get("messages") or [],
        tools=body.get("tools") or (),
        sampling=Sampling(
            temperature=body.get("temperature", 1.0),
            top_p=body.get("top_p", 1.0),
            max_tokens=body.get("max_completion_tokens") if limit is None else limit,
            seed=body.get("seed"),
            chat_template_kwargs=body.get("chat_template_kwargs") or {},
        ),
    ).key()


def malform(message: dict[str, Any]) -> dict[str, Any] | None:
    """``message`` with its first tool call broken, or None when it has no call to break.

    API calls get arguments that are not JSON; a text call loses its last closing bracket or
    tag end (``}``, ``)``, ``]`` or ``>``), which no call format parses. A message without
    ``tool_calls`` is taken for a text call: the caller knows that its text holds one (a plain
    answer would lose a character, and still read as an answer).
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
    """What the server received and answered: ``requests`` counts the chat-completions
    requests read; ``statuses`` their answers sent whole, by status; ``cut`` those of which
    nothing went out (the client left, or the server closed, before their status line was
    written); ``cut_sending`` those cut after it was, before their end; ``malformed`` the
    answers sent whole with their tool call broken on purpose."""

    requests: int = 0
    statuses: Counter = field(default_factory=Counter)
    malformed: int = 0
    cut: int = 0
    cut_sending: int = 0


@dataclass(frozen=True, slots=True, eq=False)
class _Answer:
    """An answer made, and, for a chat-completions answer (``arrived`` set), what its record
    says once it is sent or cut: its request's ``key`` and whether it was ``malformed``."""

    status: int
    payload: dict[str, Any]
    headers: dict[str, str] = field(default_factory=dict)
    arrived: float | None = None  # when its request was read (``time.monotonic``)
    key: str | None = None
    malformed: bool = False


def _not_a_client_error(record: logging.LogRecord) -> bool:
    from aiohttp.http_exceptions import HttpProcessingError

    error = record.exc_info[1] if record.exc_info else None
    return not isinstance(error, HttpProcessingError)


def _server_logger() -> logging.Logger:
    """aiohttp's ``aiohttp.server`` log, less the requests that could not be parsed: those
    were answered 400 and are the client's mistake, not a traceback on the server's stderr;
    an exception of ours still reaches that log. The logger is a private object (not
    registered with ``logging``), so no process-wide logging setting changes."""
    logger = logging.Logger("hsa.teachers.server")
    logger.parent = logging.getLogger("aiohttp.server")
    logger.addFilter(_not_a_client_error)
    return logger


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
        self._runner: web.ServerRunner | None = None
        self._counter = 0
        # chat-completions answers made, not yet recorded -> whether they began to go out
        self._unsent: dict[_Answer, bool] = {}
        self._calls_in_text: CallsInText | None = getattr(responder, "calls_in_text", None)
        self._created = int(time.time())  # /v1/models' ``created``: when this server began

    async def start(self) -> int:
        """Start listening; returns the port (chosen by the system when 0)."""
        from aiohttp import web

        if self._log_path is not None:
            try:
                self._log = self._log_path.open("a", encoding="utf-8")
            except OSError as exc:
                raise TeacherError(
                    f"cannot write the request log: {exc.strerror or exc}",
                    file=str(self._log_path),
                ) from None
        loop = asyncio.get_running_loop()

        def new_request(message, payload, protocol, writer, task) -> web.BaseRequest:
            # the low-level server's default body limit is 1 MiB; tool schemas can be larger
            return web.BaseRequest(
                message, payload, protocol, writer, task, loop, client_max_size=MAX_BODY
            )

        server = web.Server(
            self._handle,
            request_factory=new_request,
            logger=_server_logger(),
            access_log=None,
            max_headers=MAX_HEADERS,
        )
        runner = web.ServerRunner(server, shutdown_timeout=SHUTDOWN_GRACE_S)
        await runner.setup()
        try:
            await web.TCPSite(runner, LOOPBACK, self.port, backlog=2048).start()
        except OSError as exc:
            await runner.cleanup()
            await self.close()
            raise TeacherError(
                f"cannot listen on {LOOPBACK}:{self.port}: {exc.strerror}; pick another --port"
            ) from None
        self._runner = runner
        self.port = runner.addresses[0][1]
        return self.port

    async def serve_forever(self) -> None:
        """Serve until cancelled, then close."""
        if self._runner is None:
            await self.start()
        try:
            await asyncio.get_running_loop().create_future()  # never set: only cancelled
        finally:
            await self.close()

    async def close(self) -> None:
        """Stop listening, give the answers in flight ``SHUTDOWN_GRACE_S`` to go out, close
        the connections and the log. Closing twice is harmless."""
        runner, self._runner = self._runner, None
        if runner is not None:
            await runner.cleanup()
        for answer in list(self._unsent):  # cut with their connections
            self._record(answer, sent=False)
        if self._log is not None:
            self._log.close()
            self._log = None

    async def _handle(self, request: web.BaseRequest) -> web.Response:
        from aiohttp import web

        if self._api_key is not None and not _authorized(request, self._api_key):
            answer = _Answer(401, _error("invalid API key", "unauthorized"))
        else:
            answer = await self._route(request)
        try:
            body = json.dumps(answer.payload, ensure_ascii=False, separators=(",", ":"))
            encoded = body.encode("utf-8")
        except UnicodeEncodeError:  # a lone surrogate the request sent, echoed: escaped
            encoded = json.dumps(answer.payload, separators=(",", ":")).encode("ascii")
        response = web.Response(
            body=encoded,
            status=answer.status,
            headers=answer.headers,
            content_type="application/json",
        )
        if answer.arrived is None:
            return response
        # A chat-completions answer leaves latency_ms after its request was read, and is
        # recorded (counted, logged) once it has gone out whole, or as cut if it does not.
        self._unsent[answer] = False
        sent = False
        try:
            wait = answer.arrived + self.faults.latency_ms / 1000.0 - time.monotonic()
            if wait > 0:
                await asyncio.sleep(wait)
            transport = request.transport
            if transport is None or transport.is_closing():
                raise ConnectionResetError("the client left while its answer waited")
            # nothing below waits before the status line is handed to the connection (before
            # the body or with it, as aiohttp's version does): from here the answer has begun
            # to go out, and a stop while the rest drains to a slow client cuts it sending
            self._unsent[answer] = True
            await response.prepare(request)
            await response.write_eof()
            sent = True
        except ConnectionError:
            pass  # the client left: aiohttp closes the connection
        finally:  # (cancelled too: the server closing cut the connection)
            self._record(answer, sent=sent)
        return response

    async def _route(self, request: web.BaseRequest) -> _Answer:
        method = request.method
        path = request.raw_path.split("?", 1)[0].rstrip("/")
        if path in ("/health", "/v1/health", "/v1/models"):
            if method not in ("GET", "HEAD"):
                return _not_allowed(path, "GET, HEAD")
            if path == "/v1/models":
                model = {
                    "id": self.model,
                    "object": "model",
                    "created": self._created,
                    "owned_by": "hsa",
                }
                return _Answer(200, {"object": "list", "data": [model]})
            return _Answer(200, {"status": "ok"})
        if path != "/v1/chat/completions":
            return _Answer(404, _error(f"no route {path}", "not_found"))
        if method != "POST":
            return _not_allowed(path, "POST")
        from aiohttp import web

        try:
            raw = await request.read()
        except web.HTTPRequestEntityTooLarge:
            self.stats.requests += 1
            reason = f"the body is larger than {MAX_BODY} bytes"
            return _Answer(413, _error(reason, "invalid_request"), arrived=time.monotonic())
        return self._answer(raw)

    def _answer(self, raw: bytes) -> _Answer:
        """The answer to a chat-completions body (``_handle`` sends it ``latency_ms`` after
        it arrived)."""
        arrived = time.monotonic()
        self.stats.requests += 1
        try:
            body = _loads(raw)
        except (ValueError, RecursionError) as exc:
            wrong: Any = "nested too deeply" if isinstance(exc, RecursionError) else exc
        else:
            wrong = _shape_problem(body)
        if wrong is not None:
            refusal = _error(f"bad request body: {wrong}", "invalid_request")
            return _Answer(400, refusal, arrived=arrived)
        unanswered = _pairing_problem(body)
        if unanswered is not None:
            param, reason = unanswered
            refusal = _error(f"{param}: {reason}", "invalid_request", param=param)
            return _Answer(400, refusal, arrived=arrived)
        # Faults are drawn from a hash of the body as sent (the same request always arrives as
        # the same bytes); the request-cache key, dearer to compute, only goes to the log.
        digest = hashlib.blake2b(raw, digest_size=16).hexdigest()
        key = _logged_key(body) if self._log is not None else digest
        faults = self.faults
        self._seen[digest] += 1
        draw = _fraction(faults.seed, digest, self._seen[digest])
        if draw < faults.fail_rate:
            status = 429 if draw < faults.fail_rate / 2 else 500
            reason = "rate limited (injected)" if status == 429 else "server error (injected)"
            headers = {"retry-after": "0"} if status == 429 else {}
            return _Answer(status, _error(reason, "injected_fault"), headers, arrived, key)
        try:
            message, usage = self.responder(body)
        except HsaError as exc:
            return _Answer(400, _error(str(exc), "invalid_request"), {}, arrived, key)
        except Exception as exc:  # the responder's own failure: said in JSON, and counted
            reason = f"the responder failed: {type(exc).__name__}: {exc}"
            return _Answer(500, _error(reason, "server_error"), {}, arrived, key)
        refused = _answer_problem(body, message)
        if refused is not None:
            return _Answer(400, _error(refused, "invalid_request"), {}, arrived, key)
        malformed = False
        rate = faults.malformed_rate
        if (
            rate
            and _fraction(faults.seed, "malformed", digest) < rate
            and self._holds_call(body, message)
        ):
            broken = malform(message)
            if broken is not None:
                message, malformed = broken, True
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
        return _Answer(200, completion, {}, arrived, key, malformed)

    def _holds_call(self, body: Mapping[str, Any], message: Mapping[str, Any]) -> bool:
        """Whether the answer ``message`` holds a call to break: in ``tool_calls``, or in its
        text where the responder says so (a final answer, or an ``api`` answer's text, is
        the user's to read, and stays whole)."""
        if message.get("tool_calls"):
            return True
        content = message.get("content")
        if not isinstance(content, str) or not content or self._calls_in_text is None:
            return False
        return self._calls_in_text(body, message)

    def _record(self, answer: _Answer, *, sent: bool) -> None:
        """Count and log a chat-completions answer once: its status (and whether it was
        malformed) when it was sent whole; as cut when it was not, with its status when its
        status line had gone out (cut while sending), status null when nothing had."""
        if answer not in self._unsent:
            return
        begun = self._unsent.pop(answer)
        entry: dict[str, Any] = {"key": answer.key, "status": answer.status}
        if sent:
            self.stats.statuses[answer.status] += 1
            self.stats.malformed += answer.malformed
            entry["malformed"] = answer.malformed
        elif begun:
            self.stats.cut_sending += 1
            entry["cut"] = True
        else:
            self.stats.cut += 1
            entry.update(status=None, cut=True)
        if self._log is not None:
            self._log.write(json.dumps(entry) + "\n")
            self._log.flush()


def _not_allowed(path: str, allow: str) -> _Answer:
    """The 405 of a route that answers other methods, saying which (``Allow``)."""
    return _Answer(
        405,
        _error(f"{path} answers {allow.replace(', ', ' and ')} only", "method_not_allowed"),
        {"Allow": allow},
    )


def _shape_problem(body: Any) -> str | None:
    """Why ``body`` is not a chat-completions request this server answers, or None: the
    fields a responder reads must have their types, and what it cannot do (stream, several
    choices) is refused rather than answered as something else."""
    if not isinstance(body, dict) or not isinstance(body.get("messages"), list):
        return "the body must be a JSON object with a messages list"
    for index, message in enumerate(body["messages"]):
        if not isinstance(message, dict):
            return f"messages[{index}] must be an object"
    for name, kind, label in (
        ("metadata", dict, "an object"),
        ("tools", list, "a list"),
        ("model", str, "a string"),
    ):
        if body.get(name) is not None and not isinstance(body[name], kind):
            return f"{name} must be {label}"
    if body.get("stream"):
        return "stream: this server does not stream; send the request without it"
    n = body.get("n")
    if n is not None and n != 1:
        return f"n: this server answers with one choice, got n={n!r}"
    for name in ("max_tokens", "max_completion_tokens"):
        value = body.get(name)
        if value is not None and (
            isinstance(value, bool) or not isinstance(value, int) or value < 1
        ):
            return f"{name} must be an integer, 1 or more, got {value!r}"
    choice = body.get("tool_choice")
    if choice is not None and choice not in ("auto", "none", "required") and _named(choice) is None:
        return (
            "tool_choice must be 'auto', 'none', 'required' or "
            f"{{'type': 'function', 'function': {{'name': ...}}}}, got {choice!r}"
        )
    return None


def _pairing_problem(body: Mapping[str, Any]) -> tuple[str, str] | None:
    """Where (``messages[i]``) and why the request's tool messages do not answer its tool
    calls as OpenAI's API requires, or None: every tool message answers a call of the last
    assistant message with ``tool_calls``, once, and each of that message's calls is answered
    right after it, before any message of another role (the end too). Results the oracle
    could not match to a call are ignored by it, and it would make the same call again,
    forever.

    It holds where calls go as ``tool_calls`` (a request with ``tools``, or a conversation
    holding ``tool_calls``). A text protocol's conversation, with the calls in the assistant's
    text and no tools listed, is the responder's to read. A hook's note (a system or user
    message) between the results of one message's calls is refused as OpenAI's API refuses
    it: hsa's render shows it after the last of them.
    """
    messages = body["messages"]
    api = bool(body.get("tools")) or any(
        m.get("role") == "assistant" and m.get("tool_calls") for m in messages
    )
    if not api:
        return None
    calls_at: int | None = None  # the last assistant message with tool_calls
    waiting: dict[str, None] = {}  # its call ids not answered yet, in order
    answered: set[str] = set()
    for index, message in enumerate(messages):
        role = message.get("role")
        if role != "tool" and waiting:
            return _unanswered(calls_at, waiting)
        if role == "assistant":
            calls = message.get("tool_calls") or []
            calls_at, answered = None, set()
            if not isinstance(calls, list):
                continue  # the responder refuses it, saying why
            calls_at = index if calls else None
            for number, call in enumerate(calls):
                call_id = call.get("id") if isinstance(call, Mapping) else None
                if not isinstance(call_id, str) or not call_id:
                    return f"messages[{index}].tool_calls[{number}]", "a tool call needs an id"
                waiting[call_id] = None
        elif role == "tool":
            where = f"messages[{index}]"
            call_id = message.get("tool_call_id")
            if calls_at is None:
                return where, (
                    "messages with role 'tool' must be a response to a preceding message with "
                    "'tool_calls'"
                )
            if not isinstance(call_id, str):
                return where, "a tool message needs a tool_call_id string"
            if call_id in answered:
                return where, f"tool_call_id {call_id!r} of messages[{calls_at}] is answered twice"
            if call_id not in waiting:
                return where, (
                    f"tool_call_id {call_id!r} is not among the tool calls of messages[{calls_at}] "
                    f"({', '.join(sorted(set(answered) | set(waiting)))}): a tool message must "
                    "answer a call of the preceding assistant message with 'tool_calls'"
                )
            del waiting[call_id]
            answered.add(call_id)
    if waiting:
        return _unanswered(calls_at, waiting)
    return None


def _unanswered(at: int | None, waiting: Mapping[str, None]) -> tuple[str, str]:
    return f"messages[{at}]", (
        "an assistant message with 'tool_calls' must be followed by tool messages responding "
        f"to each 'tool_call_id'; not answered: {', '.join(waiting)}"
    )


def _named(choice: Any) -> str | None:
    """The function a ``tool_choice`` of one function names, or None."""
    if not isinstance(choice, dict) or choice.get("type") != "function":
        return None
    function = choice.get("function")
    name = function.get("name") if isinstance(function, dict) else None
    return name if isinstance(name, str) else None


def _answer_problem(body: Mapping[str, Any], message: Mapping[str, Any]) -> str | None:
    """Why the answer ``message`` is not one the request's ``tool_choice`` and ``tools``
    allow, or None: the responder answers as it would anyway, so an answer they rule out is
    refused, never sent as if it were allowed. Without tools ``tool_choice`` is ``none``, as
    OpenAI's API has it, and an answer's ``tool_calls`` call only tools the request lists.
    (A text protocol's calls, in the answer's text, are against tools its prompt lists.)"""
    calls = [c.get("function", {}).get("name") for c in message.get("tool_calls") or ()]
    offered = _tool_names(body.get("tools") or ())
    said = f"calls {', '.join(map(str, calls))}" if calls else "is text, with no call"
    if calls and not offered:
        return (
            f"the request lists no tools (so tool_choice is 'none'): this server's answer here "
            f"{said}, and it does not answer otherwise; send the tools"
        )
    unlisted = [c for c in calls if c not in offered]
    if unlisted:
        return (
            f"this server's answer here {said}, and the request's tools do not list "
            f"{', '.join(map(str, dict.fromkeys(unlisted)))}; it does not answer otherwise"
        )
    choice = body.get("tool_choice")
    named = _named(choice)
    if (
        (choice == "none" and calls)
        or (choice == "required" and not calls)
        or (named is not None and (not calls or any(c != named for c in calls)))
    ):
        return (
            f"tool_choice {choice!r}: this server's answer here {said}, and it does not answer "
            "otherwise"
        )
    return None


def _tool_names(tools: Any) -> set[str]:
    """The function names ``tools`` (a request's, OpenAI-style) lists."""
    names = set()
    for tool in tools:
        function = tool.get("function") if isinstance(tool, Mapping) else None
        name = function.get("name") if isinstance(function, Mapping) else None
        if isinstance(name, str):
            names.add(name)
    return names


def _logged_key(body: Mapping[str, Any]) -> str | None:
    """``request_key(body)`` for the log, or None for sampling settings it cannot read (the
    answer does not depend on them, so the log must not turn them into an error)."""
    try:
        return request_key(body)
    except (HsaError, TypeError, ValueError):
        return None


def _authorized(request: web.BaseRequest, key: str) -> bool:
    scheme, _, token = request.headers.get("Authorization", "").partition(" ")
    return scheme.lower() == "bearer" and hmac.compare_digest(token.strip(), key)


def _error(message: str, kind: str, *, param: str | None = None) -> dict[str, Any]:
    """An OpenAI-style error body; ``param`` names the part of the request at fault."""
    error = {"message": message, "type": kind, "code": kind}
    if param is not None:
        error["param"] = param
    return {"error": error}
