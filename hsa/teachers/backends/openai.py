"""The ``openai`` backend: any OpenAI-compatible endpoint, over HTTP with aiohttp.

A chat completion is one POST of a JSON body to ``{base_url}/chat/completions`` (the base URL's
query string kept at the end) with a bearer key, or the key in a header of another name
(``api_key_header``: ``api-key`` for Azure OpenAI), answered with one JSON body. hsa sends
it with aiohttp directly rather than through the official ``openai`` client, which wraps the
same request in three more layers (its request options, an httpx client, a transport adapter):
those cost about 0.7 ms more CPU a request, and half a second to import, which at a few hundred
requests a second is more than the rest of a rollout costs.

Retries are hsa's, so that every attempt passes through the adaptive limiter (429, 503 and
timeouts count as overload answers there, which a high share of backs off on): 429, 408, 409,
5xx, timeouts and connection errors are retried with exponential backoff and full jitter,
honouring ``Retry-After``, and so is an answer the server stopped as failed (finish_reason
``abort`` or ``error``); other errors (bad request, authentication, unknown model) are not
worth retrying and fail the request at once. Each failed attempt is named by ``failure_kind``
from the whole chain of causes, not from the outer exception's class alone. Two waits are cut
short: an endpoint nothing answers at when the job starts fails ``start`` within seconds, and
once one request has run out of retries on a connection that could not be made (refused, no
such host), the others give up at their first such failure (until an answer comes), rather
than each waiting out its own retries. A connection the server made and then broke off
(closed mid-answer) says nothing of the others: each such request retries to its own end.
"""

from __future__ import annotations

import asyncio
import datetime
import email.utils
import errno
import json
import os
import random
import re
import socket
import ssl
import time
import urllib.parse
import urllib.request
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import orjson

from hsa.config import bounded, refuse, same_as, setting
from hsa.errors import TeacherError
from hsa.teachers.backends.base import (
    SERVER_FAILED,
    SETTING_REFUSAL,
    Backend,
    BackendStats,
    ContextOverflow,
    outgrew_context,
)
from hsa.teachers.config import (
    MAX_TOKENS_FIELDS,
    TeachConfig,
    endpoint_problems,
    max_tokens_field_problems,
    public_url,
)
from hsa.teachers.request import ChatRequest, ChatResponse, Usage, assistant_message, dumps
from hsa.teachers.throttle import AdaptiveLimit, Backoff, ThrottleConfig

#: what is sent as the key when none is configured: local servers ignore it
NO_KEY = "sk-no-key"
#: error statuses below 500 worth another attempt: timeout, conflict, rate limit
RETRIED = (408, 409, 429)
#: statuses that say the server has more than it can take (rate limited, unavailable): the
#: limiter backs off on a high share of them, and of timeouts
OVERLOADED = (429, 503)
#: how vLLM refuses a request with ``tools`` when it was started without tool-call parsing:
#: '"auto" tool choice requires --enable-auto-tool-choice and --tool-call-parser to be set'
TOOL_FLAGS_REFUSAL = re.compile(r"enable-auto-tool-choice|tool-call-parser")
#: how OpenAI refuses a request field the model does not take: "Unsupported parameter:
#: 'max_tokens' is not supported with this model. Use 'max_completion_tokens' instead."
UNSUPPORTED_FIELD = re.compile(r"unsupported parameter:?\s*'([^']+)'", re.IGNORECASE)
#: failures that say nothing answers at the endpoint any more (not a slow or busy one, nor
#: one that answered and broke the connection off mid-answer)
GONE = ("connection refused", "no connection")
#: how an error of a request the endpoint answered with a refusal (HTTP 4xx) begins
REFUSED = "the endpoint refused the request"
#: the shortest API key hidden from messages (real keys are tens of characters)
SECRET_MIN = 8
#: at start, how many more times to try reaching an endpoint that refuses, and for how long
PROBE_RETRIES = 2
PROBE_S = 10.0


@dataclass(frozen=True, slots=True)
class OpenAIConfig:
    """Where and how to reach an OpenAI-compatible endpoint.

    ``api_key`` is held only in memory: it is never written to a manifest, a log or a shard
    and is hidden from ``repr``. ``send_metadata`` sends the request's metadata (the variant
    id, which ``hsa serve oracle`` needs); api.openai.com refuses metadata unless completions
    are stored, so turn it off there. ``max_tokens_field`` is the field the reply's token
    limit goes in: OpenAI's reasoning models refuse ``max_tokens`` and take
    ``max_completion_tokens``, its newer name, which vLLM's server takes too. ``timeout_s``
    bounds each attempt, from sending the request to the last byte of its answer. A proxy
    named by ``HTTPS_PROXY``/``HTTP_PROXY`` (and not bypassed by ``NO_PROXY``) is used, as the
    official client would.
    """

    base_url: str = setting(help="The endpoint, e.g. http://127.0.0.1:8000/v1.")
    model: str = setting(help="Model name sent with each request.")
    api_key: str | None = setting(None, secret=True, help="Used for requests only.")
    api_key_header: str = same_as(TeachConfig, "api_key_header")
    concurrency: int = same_as(TeachConfig, "concurrency")
    timeout_s: float = same_as(TeachConfig, "timeout_s")
    max_retries: int = same_as(TeachConfig, "max_retries")
    backoff: Backoff = setting(default_factory=Backoff, help="Waits between retries.")
    throttle: ThrottleConfig = setting(
        default_factory=ThrottleConfig, help="How the concurrency limit adapts."
    )
    seed: int = setting(0, help="Seed of the retry jitter.")
    send_metadata: bool = same_as(TeachConfig, "send_metadata")
    max_tokens_field: str = same_as(TeachConfig, "max_tokens_field")

    def __post_init__(self) -> None:
        problems = bounded(self, "concurrency", low=1)
        problems += bounded(self, "timeout_s", low=0, low_open=True)
        problems += bounded(self, "max_retries", low=0)
        problems += endpoint_problems(self.base_url, self.api_key_header, self.api_key)
        problems += max_tokens_field_problems(self.max_tokens_field)
        refuse(problems, TeacherError)

    def key_headers(self) -> dict[str, str]:
        """The header that carries the API key: a bearer key in ``Authorization`` (a
        placeholder when there is no key: local servers ignore it), else the key as it is."""
        if self.api_key_header.lower() == "authorization":
            return {self.api_key_header: f"Bearer {self.api_key or NO_KEY}"}
        return {self.api_key_header: self.api_key} if self.api_key else {}


class StatusError(Exception):
    """An answer with an error status: the status, the server's reason, and how long it
    asked the client to wait (``Retry-After``, in seconds) when it said."""

    def __init__(self, status: int, message: str, retry_after: float | None = None):
        super().__init__(f"HTTP {status}: {message}")
        self.status, self.message, self.retry_after = status, message, retry_after


class NotJson(Exception):
    """An answer with a success status whose body is not JSON (cut off on the way, a proxy's
    page): retried like a failed attempt."""

    def __init__(self, status: int):
        super().__init__(f"HTTP {status} with a body that is not JSON")
        self.status = status


class OpenAIBackend(Backend):
    """Chat completions over HTTP with a concurrency limit, AIMD throttling and retries."""

    name = "openai"

    def __init__(self, config: OpenAIConfig):
        self.config = config
        self.stats = BackendStats()
        self.limit = AdaptiveLimit(config.concurrency, config.throttle)
        self._rng = random.Random(config.seed)
        self._session: Any = None  # an aiohttp.ClientSession, opened in the running loop
        self._url = endpoint(config.base_url, "chat/completions")
        #: the endpoint as errors name it: no user info or query string, where secrets hide
        self._shown = str(public_url(config.base_url))
        self._proxy = env_proxy(self._url)
        #: why the endpoint is taken for gone: a request ran out of retries on a connection
        #: that could not be made, and none has been answered since
        self._gone: str | None = None

    async def start(self) -> None:
        """Open the connection pool now rather than on the first request, and make sure
        something answers at the endpoint: a server that is not up (refused, no such host)
        fails the job here, in a second or two, rather than every request after all its
        retries. Any HTTP answer to ``GET {base_url}/models`` will do (a server without that
        route answers 404), and so will a slow one, but one that refuses the API key (401,
        403): every request would be refused too."""
        import aiohttp

        session = self._open()
        url = endpoint(self.config.base_url, "models")
        attempts = min(self.config.max_retries, PROBE_RETRIES) + 1
        for attempt in range(attempts):
            try:
                async with session.get(
                    url,
                    proxy=self._proxy,
                    timeout=aiohttp.ClientTimeout(total=min(self.config.timeout_s, PROBE_S)),
                ) as answer:
                    await answer.read()
                    status = answer.status
                if status in (401, 403):  # every request would be refused the same way
                    raise TeacherError(
                        f"{self._shown} refuses the API key (HTTP {status} to GET /models): "
                        "check the key (--api-key-env) and the header it goes in "
                        "(api_key_header), then rerun"
                    )
                return
            except (OSError, TimeoutError, client_error()) as exc:
                reason = failure_kind(exc)
                if reason == "timeout":
                    return  # reached, if slowly: the requests' own timeouts decide
                detail = self._describe(reason, exc)
            if attempt + 1 < attempts:
                await asyncio.sleep(self.config.backoff.delay(attempt, self._rng, None))
        raise TeacherError(
            f"{detail}: nothing answers there (tried {attempts} time{'s' * (attempts > 1)}); "
            "start the server or check --base-url, then rerun"
        )

    def _open(self) -> Any:
        if self._session is None:
            import aiohttp

            https = self._url.startswith("https://")
            connector = aiohttp.TCPConnector(
                limit=self.config.concurrency, keepalive_timeout=30, ssl=tls() if https else True
            )
            self._session = aiohttp.ClientSession(
                connector=connector,
                timeout=aiohttp.ClientTimeout(total=self.config.timeout_s),
                headers={
                    **self.config.key_headers(),
                    "Content-Type": "application/json",
                    "Accept": "application/json",
                },
            )
        return self._session

    async def chat(self, request: ChatRequest) -> ChatResponse:
        cfg = self.config
        last = f"no attempt made to reach {self._shown}"
        for attempt in range(cfg.max_retries + 1):
            retry_after: float | None = None
            async with self.limit.slot():
                self.stats.requests += 1
                started = time.monotonic()
                try:
                    completion = await self._create(request)
                except StatusError as exc:
                    if exc.status < 500 and exc.status not in RETRIED:
                        self.stats.failures[f"http {exc.status}"] += 1
                        raise _refusal(exc, self._short(exc.message), self._shown) from None
                    if exc.status in OVERLOADED:
                        self.limit.on_overload()
                    if exc.status == 429:
                        detail = f"HTTP 429 (rate limited) from {self._shown}"
                    else:
                        detail = f"HTTP {exc.status} from {self._shown}: "
                        detail += self._short(exc.message)
                    reason, retry_after = f"http {exc.status}", exc.retry_after
                except TeacherError:  # a streamed answer: the same every time, not retried
                    self.stats.failures["streamed answer"] += 1
                    raise
                except NotJson as exc:
                    reason = "not JSON"
                    detail = f"the endpoint {self._shown} answered {exc}"
                except (OSError, TimeoutError, client_error()) as exc:
                    reason = failure_kind(exc)
                    if reason == "timeout":  # the server has more than it can answer in time
                        self.limit.on_overload()
                    detail = self._describe(reason, exc)
                else:
                    latency = time.monotonic() - started
                    self.limit.on_success(latency)
                    try:
                        response = _response(completion, latency, attempt + 1, self._shown)
                    except TeacherError:
                        self.stats.failures["not a chat completion"] += 1
                        raise
                    self._gone = None
                    finish = response.finish_reason
                    if finish not in SERVER_FAILED:
                        self.stats.record(response)
                        return response
                    reason = f"finish_reason {finish}"
                    detail = (
                        f"the endpoint {self._shown} stopped the reply with finish_reason "
                        f"{finish!r}: it failed the request"
                    )
            self.stats.failures[reason] += 1
            last = detail
            if self._gone is not None and reason in GONE:
                # Another request already retried this endpoint to the end: the server went
                # away, and every request still to come would wait out its own retries too.
                raise TeacherError(f"{detail} (gave up: {self._gone})")
            if attempt < cfg.max_retries:
                self.stats.retries += 1
                await asyncio.sleep(cfg.backoff.delay(attempt, self._rng, retry_after))
        attempts = cfg.max_retries + 1
        if reason in GONE:
            self._gone = f"another request got no answer after {attempts} attempts"
        raise TeacherError(f"{last} (no answer after {attempts} attempt{'s' * (attempts > 1)})")

    def _describe(self, kind: str, exc: BaseException) -> str:
        """One attempt's failure in words, naming the endpoint (never the API key)."""
        url = self._shown
        if kind == "timeout":
            return f"timeout: no answer from {url} within {self.config.timeout_s:g} s"
        if kind in ("connection refused", "connection reset"):
            return f"{kind} to {url}"
        cause = _root(exc)
        said = self._short(str(cause) or type(cause).__name__)
        if kind == "connection lost":
            return f"connection to {url} lost before the whole answer came: {said}"
        return f"connection error to {url}: {said}"

    async def _create(self, request: ChatRequest) -> Any:
        """One attempt: the chat completion as JSON, or ``StatusError`` for an error status.
        Timeouts and connection errors are raised as aiohttp raises them."""
        session = self._open()
        body = _body(request, self.config.send_metadata, self.config.max_tokens_field)
        async with session.post(self._url, data=body, proxy=self._proxy) as answer:
            payload = await answer.read()
            status = answer.status
            if status >= 400:
                raise StatusError(status, error_message(payload), retry_wait(answer.headers))
        try:
            found = orjson.loads(payload)
        except orjson.JSONDecodeError:
            try:  # JSON orjson refuses: a lone surrogate's escape ("\ud83d", half an emoji
                # cut off), which no UTF-8 text holds, read as U+FFFD as a UTF-8 decoder reads
                # what is not a character
                found = _without_lone_surrogates(json.loads(payload))
            except (ValueError, UnicodeDecodeError):
                kind = answer.headers.get("Content-Type", "").lower()
                streamed = kind.startswith("text/event-stream")
                if streamed or _SSE_START.match(payload):
                    raise TeacherError(
                        f"the endpoint {self._shown} answered with server-sent events (a "
                        "streamed answer), though hsa asks with stream off: set the server or "
                        "the gateway in front of it not to stream"
                    ) from None
                raise NotJson(status) from None
        if isinstance(found, dict) and "error" in found and "choices" not in found:
            # an error in a success's clothing, as some gateways send one: its status when it
            # gives one (502 for an upstream that failed), else a server error, retried
            error = found["error"]
            code = error.get("code") if isinstance(error, dict) else None
            if isinstance(code, str) and re.fullmatch(r"[0-9]{3}", code):
                code = int(code)
            message = error_message(payload)
            if isinstance(code, int) and not isinstance(code, bool) and 400 <= code < 600:
                status = code
            elif outgrew_context(message) or code == "context_length_exceeded":
                status = 400  # OpenAI's codes are words: a context overflow is refused
                if not outgrew_context(message):
                    message = f"context_length_exceeded: {message}"
            else:
                status = 500
            raise StatusError(status, message, retry_wait(answer.headers))
        return found

    def _short(self, text: str) -> str:
        return _short(redact(text, self.config.api_key))

    async def aclose(self) -> None:
        session, self._session = self._session, None
        if session is not None:
            await session.close()


def _refusal(exc: StatusError, message: str, shown: str) -> TeacherError:
    """The error of a request the endpoint refused (a 4xx status it is not worth retrying),
    with what to check for that status; a conversation past the model's context window is a
    ``ContextOverflow``, which ends its rollout instead of the job."""
    said = f"HTTP {exc.status}: {message}"
    if exc.status in (400, 413, 422) and outgrew_context(exc.message):
        return ContextOverflow(
            f"the conversation outgrew the model's context window ({said})", where=shown
        )
    if exc.status in (401, 403):
        hint = "check the API key (--api-key-env) and the header it goes in (api_key_header)"
    elif exc.status == 404:
        hint = "check --base-url and --model"
    elif TOOL_FLAGS_REFUSAL.search(exc.message):
        hint = (
            "the server parses no tool calls: start vLLM with --enable-auto-tool-choice and the "
            "model's --tool-call-parser (docs/vllm.md lists them), then rerun"
        )
    elif (unsupported := UNSUPPORTED_FIELD.search(exc.message)) is not None:
        hint = _unsupported_hint(unsupported[1])
    elif SETTING_REFUSAL.search(exc.message):  # (a limit too large for the context window)
        hint = "lower --max-tokens to what the model's context window holds"
    else:
        hint = "check --model and the request settings the endpoint takes"
    return TeacherError(f"{REFUSED}: {said}; {hint}", where=shown)


def _unsupported_hint(field: str) -> str:
    """What to do about a request field ``field`` the endpoint does not take."""
    if field in MAX_TOKENS_FIELDS:
        other = next(f for f in MAX_TOKENS_FIELDS if f != field)
        return (
            f"send the token limit as {other} instead (--max-tokens-field {other}, or "
            f"max_tokens_field: {other} in a config file)"
        )
    if field == "metadata":
        return "turn metadata off (--no-metadata)"
    if field == "chat_template_kwargs":
        return "leave chat_template_kwargs unset for this endpoint"
    return "check --model and the request settings the endpoint takes"


def endpoint(base_url: str, path: str) -> str:
    """``path`` under ``base_url``, whose query string (Azure OpenAI's ``?api-version=``, a
    gateway's parameters) is kept at the end."""
    parts = urllib.parse.urlsplit(base_url)
    return urllib.parse.urlunsplit(parts._replace(path=f"{parts.path.rstrip('/')}/{path}"))


def client_error() -> type[BaseException]:
    """aiohttp's base class of client errors (aiohttp is imported once the client opens)."""
    import aiohttp

    return aiohttp.ClientError


def tls() -> ssl.SSLContext:
    """The TLS context of HTTPS endpoints: the certificates ``SSL_CERT_FILE`` or
    ``SSL_CERT_DIR`` name, else certifi's bundle when it is installed (as the official client
    and most Python HTTP clients verify), else the system's."""
    if os.environ.get("SSL_CERT_FILE") or os.environ.get("SSL_CERT_DIR"):
        return ssl.create_default_context()
    try:
        import certifi
    except ImportError:
        return ssl.create_default_context()
    return ssl.create_default_context(cafile=certifi.where())


def env_proxy(url: str) -> str | None:
    """The proxy the environment names for ``url`` (``HTTPS_PROXY`` or ``HTTP_PROXY``, unless
    ``NO_PROXY`` bypasses its host), looked up once rather than on every request."""
    parts = urllib.parse.urlsplit(url)
    if urllib.request.proxy_bypass(parts.hostname or ""):
        return None
    return urllib.request.getproxies().get(parts.scheme)


def error_message(payload: bytes) -> str:
    """The server's reason in an error answer: OpenAI's ``{"error": {"message": ...}}``,
    ``{"message": ...}`` or ``{"detail": ...}`` (FastAPI's), else the body as text."""
    try:
        found = orjson.loads(payload)
    except orjson.JSONDecodeError:
        return payload.decode("utf-8", "replace").strip() or "(no body)"
    if isinstance(found, dict):
        error = found.get("error", found)
        message = error.get("message") if isinstance(error, dict) else error
        if message is None:
            message = found.get("detail")
        if message is not None:
            return message if isinstance(message, str) else dumps(message)
    return dumps(found)


def retry_wait(headers: Mapping[str, str], now: float | None = None) -> float | None:
    """How long an answer asks the client to wait before trying again, in seconds:
    ``retry-after-ms`` (Azure OpenAI sends it; read first, as Azure's own clients do), else
    ``Retry-After`` in seconds or as an HTTP date (RFC 9110 allows both: the wait is until
    then, from ``now``, the clock's time when None); None when it says neither."""
    milliseconds = seconds(headers.get("retry-after-ms"))
    if milliseconds is not None:
        return milliseconds / 1000
    value = headers.get("Retry-After")
    wait = seconds(value)
    if wait is not None or value is None:
        return wait
    try:
        until = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return None  # neither a number nor a date
    if until.tzinfo is None:  # "-0000": a time in UTC, said without saying where
        until = until.replace(tzinfo=datetime.UTC)
    return max(0.0, until.timestamp() - (time.time() if now is None else now))


def seconds(value: str | None) -> float | None:
    """A number of seconds from a header (None when absent or not a number)."""
    try:
        return None if value is None else max(0.0, float(value))
    except ValueError:
        return None


def _body(request: ChatRequest, send_metadata: bool, max_tokens_field: str = "max_tokens") -> bytes:
    """The JSON body of ``request``: ``model``, ``messages``, the sampling parameters (the
    token limit under the name ``max_tokens_field``), then ``tools`` and ``metadata`` when
    there are any, encoded compactly and put together from the request's parts, which the
    cache key has encoded already (a limit is the same limit under either name: the key
    keeps ``max_tokens``)."""
    parts = [f'"model":{dumps(request.model)}', f'"messages":{request.messages_json()}']
    parts.extend(
        f"{dumps(max_tokens_field if k == 'max_tokens' else k)}:{dumps(v)}"
        for k, v in request.sampling.to_dict().items()
    )
    if request.tools:
        parts.append(f'"tools":{request.encoded_tools()}')
    if request.metadata and send_metadata:
        parts.append(f'"metadata":{dumps(dict(request.metadata))}')
    return ("{" + ",".join(parts) + "}").encode("utf-8")


def _response(completion: Any, latency: float, attempts: int, where: str) -> ChatResponse:
    """The ``ChatResponse`` of a chat-completions JSON body.

    Its calls are the message's ``tool_calls``, else its ``function_call`` (OpenAI's older
    shape) as one call. A reply that says it called tools (finish_reason ``tool_calls`` or
    ``function_call``) but holds no call keeps its finish_reason: reading the step, the
    rollout takes it for the model's format failure (``read_step``), never for a final answer
    of no text."""
    try:
        choice = completion["choices"][0]
        message = choice["message"]
        calls = [
            {
                "id": str(call.get("id") or ""),
                "type": "function",
                "function": {
                    "name": call["function"]["name"],
                    "arguments": call["function"].get("arguments") or "",
                },
            }
            for call in (message.get("tool_calls") or [])
        ]
        legacy = message.get("function_call")
        if not calls and legacy is not None:
            # OpenAI's older shape of one call (``functions``, deprecated; its API and types
            # still have it, and servers and gateways written to it answer so)
            calls = [_function_call(legacy)]
        content, thinking = _content(message.get("content"))
        refusal = message.get("refusal")
        if not content and not calls and isinstance(refusal, str) and refusal:
            content = refusal  # what the model said instead of an answer, as its text
        # vLLM's servers since early 2026 (and others) call it ``reasoning``
        reasoning = message.get("reasoning_content")
        if reasoning is None:
            reasoning = message.get("reasoning")
        if reasoning is None:
            reasoning = thinking
        finish = choice.get("finish_reason")
        if finish is not None and not isinstance(finish, str):
            raise TypeError("finish_reason is not a string")
        usage = Usage.from_dict(completion.get("usage"))
    except (KeyError, IndexError, TypeError, AttributeError, ValueError) as exc:
        if isinstance(exc, KeyError):
            what = f"no {exc.args[0]!r} field"
        elif isinstance(exc, IndexError):
            what = "no choices"
        elif isinstance(exc, AttributeError):  # a part that should be an object is not
            what = f"a part is not an object: {exc}"
        else:
            what = str(exc)
        raise TeacherError(
            f"the endpoint's answer is not a chat completion ({what})", where=where
        ) from None
    out = assistant_message(content, calls)
    # vLLM and DeepSeek-style servers return reasoning in a field of its own.
    if isinstance(reasoning, str):
        out["reasoning_content"] = reasoning
    return ChatResponse(
        message=out,
        finish_reason=finish,
        usage=usage,
        latency_s=latency,
        attempts=attempts,
    )


def _function_call(legacy: Mapping[str, Any]) -> dict[str, Any]:
    """The tool call of a message's ``function_call`` (OpenAI's older shape: a name and JSON
    arguments, no id)."""
    return {
        "id": "",
        "type": "function",
        "function": {"name": legacy["name"], "arguments": legacy.get("arguments") or ""},
    }


#: how a body of server-sent events begins: a field (data, event, id, retry) or a comment
_SSE_START = re.compile(rb"\s*(data|event|id|retry)?:")
_SURROGATE = re.compile("[\ud800-\udfff]")  # left alone by json.loads, which pairs the rest


def _without_lone_surrogates(value: Any) -> Any:
    """``value`` (JSON) with every lone surrogate of its strings and keys replaced by U+FFFD."""
    if isinstance(value, str):
        return _SURROGATE.sub("\ufffd", value)
    if isinstance(value, list):
        return [_without_lone_surrogates(v) for v in value]
    if isinstance(value, dict):
        return {_without_lone_surrogates(k): _without_lone_surrogates(v) for k, v in value.items()}
    return value


def _content(content: Any) -> tuple[str | None, str | None]:
    """A message's text and the reasoning it holds. ``content`` is a string, or a list of
    parts as some servers answer (Mistral's reasoning models: ``text`` parts, and ``thinking``
    parts of text parts): their texts joined."""
    if content is None or isinstance(content, str):
        return content, None
    if not isinstance(content, list):
        raise TypeError("content is neither a string nor a list of parts")
    texts: list[str] = []
    thoughts: list[str] = []
    for part in content:
        kind = part.get("type")
        if kind == "text" and isinstance(part.get("text"), str):
            texts.append(part["text"])
        elif kind == "thinking" and isinstance(part.get("thinking"), list | str):
            inner = part["thinking"]
            inner = [inner] if isinstance(inner, str) else [_content(inner)[0] or ""]
            thoughts.extend(inner)
        else:
            raise TypeError(f"a content part of type {kind!r}, which is not text")
    return "".join(texts), ("".join(thoughts) if thoughts else None)


def _causes(exc: BaseException) -> Iterator[BaseException]:
    """``exc`` and what caused it, outermost first."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        yield current
        current = current.__cause__ or current.__context__


def _root(exc: BaseException) -> BaseException:
    *_, last = _causes(exc)
    return last


def failure_kind(exc: BaseException) -> str:
    """What a request that raised ``exc`` ran into: ``connection refused``, ``connection
    reset``, ``no connection`` (any other failure to connect: no such host, no route, the
    connection or its TLS handshake not made in time), ``timeout`` (the endpoint was reached
    but did not answer in time), ``connection lost`` (connected, then the connection broke off
    before the whole answer came: a server that closed it mid-body) or ``http NNN`` for a
    status error.

    The causes decide, not the outer class: clients wrap the socket's error in their own
    classes, and not always in the right one.
    """
    import aiohttp

    if isinstance(exc, StatusError):
        return f"http {exc.status}"
    chain = list(_causes(exc))
    for cause in chain:
        code = getattr(cause, "errno", None)
        if isinstance(cause, ConnectionRefusedError) or code == errno.ECONNREFUSED:
            return "connection refused"
        if isinstance(cause, ConnectionResetError) or code == errno.ECONNRESET:
            return "connection reset"
    # aiohttp before 3.10 has no class of its own for a connection not made in time
    late: type[BaseException] = getattr(aiohttp, "ConnectionTimeoutError", socket.gaierror)
    unconnected = (aiohttp.ClientConnectorError, socket.gaierror, late)
    if any(isinstance(c, unconnected) for c in chain):
        return "no connection"
    if any(isinstance(c, TimeoutError) for c in chain):
        return "timeout"
    return "connection lost"


def _short(text: str, limit: int = 200) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def redact(text: str, secret: str | None) -> str:
    """``text`` with ``secret`` replaced, for messages that may quote what was sent. A key of
    fewer than ``SECRET_MIN`` characters is a placeholder a local server ignores (``x``, ``sk``),
    not a secret: replacing it would garble the text wherever those letters occur."""
    return text.replace(secret, "***") if secret and len(secret) >= SECRET_MIN else text
