"""The ``openai`` backend: any OpenAI-compatible endpoint through the official async client.

Retries are hsa's, not the client's (its own are turned off), so that every attempt passes
through the adaptive limiter: 429, 5xx, timeouts and connection errors are retried with
exponential backoff and full jitter, honouring ``Retry-After``; other errors (bad request,
authentication, unknown model) are not worth retrying and fail the request at once. Each failed
attempt is named by ``failure_kind`` from the whole chain of causes, not from the client's
class alone: the client's aiohttp transport reports a refused connection as a connect timeout.
"""

from __future__ import annotations

import asyncio
import errno
import random
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import openai

from hsa.config import bounded, refuse, same_as, setting
from hsa.errors import TeacherError
from hsa.teachers.backends.base import Backend, BackendStats
from hsa.teachers.config import TeachConfig
from hsa.teachers.request import ChatRequest, ChatResponse, Usage, assistant_message, dumps
from hsa.teachers.throttle import AdaptiveLimit, Backoff, ThrottleConfig

#: what the client sends when no key is configured: local servers ignore it, and the client
#: would otherwise look the key up in the environment itself
NO_KEY = "sk-no-key"
#: connections per client pool (see ``_open_clients``)
CONNECTIONS_PER_CLIENT = 8


@dataclass(frozen=True, slots=True)
class OpenAIConfig:
    """Where and how to reach an OpenAI-compatible endpoint.

    ``api_key`` is held only in memory: it is never written to a manifest, a log or a shard
    and is hidden from ``repr``. ``send_metadata`` sends the request's metadata (the variant
    id, which ``hsa serve oracle`` needs); api.openai.com refuses metadata unless completions
    are stored, so turn it off there. ``transport``: ``aiohttp`` (the client's aiohttp transport,
    ``pip install 'openai[aiohttp]'``), ``httpx`` (its default), or ``auto`` (aiohttp when it
    is installed: it costs about half the CPU per request).
    """

    base_url: str = setting(help="The endpoint, e.g. http://127.0.0.1:8000/v1.")
    model: str = setting(help="Model name sent with each request.")
    api_key: str | None = setting(None, secret=True, help="Used for requests only.")
    concurrency: int = same_as(TeachConfig, "concurrency")
    timeout_s: float = same_as(TeachConfig, "timeout_s")
    max_retries: int = same_as(TeachConfig, "max_retries")
    backoff: Backoff = setting(default_factory=Backoff, help="Waits between retries.")
    throttle: ThrottleConfig = setting(
        default_factory=ThrottleConfig, help="How the concurrency limit adapts."
    )
    seed: int = setting(0, help="Seed of the retry jitter.")
    send_metadata: bool = same_as(TeachConfig, "send_metadata")
    transport: str = setting("auto", help="aiohttp, httpx, or auto (aiohttp when it is installed).")

    def __post_init__(self) -> None:
        problems = bounded(self, "concurrency", low=1)
        problems += bounded(self, "timeout_s", low=0, low_open=True)
        problems += bounded(self, "max_retries", low=0)
        if self.transport not in ("auto", "aiohttp", "httpx"):
            problems.append(("transport", f"unknown transport {self.transport!r}"))
        refuse(problems, TeacherError)


class OpenAIBackend(Backend):
    """Chat completions over HTTP with a concurrency limit, AIMD throttling and retries."""

    name = "openai"

    def __init__(self, config: OpenAIConfig, *, client: Any = None):
        self.config = config
        self.stats = BackendStats()
        self.limit = AdaptiveLimit(config.concurrency, config.throttle)
        self._rng = random.Random(config.seed)
        self._clients: list[Any] = [] if client is None else [client]
        self._busy: list[int] = [0] * len(self._clients)
        self._owns_clients = client is None

    async def start(self) -> None:
        """Open the connection pools now rather than on the first request."""
        if not self._clients:
            self._open_clients()

    def _open_clients(self) -> None:
        import httpx2

        size = max(self.config.concurrency, 1)
        # One TLS context for all pools: loading the CA bundle takes a tenth of a second.
        tls = httpx2.create_ssl_context()
        if _use_aiohttp(self.config.transport):
            limits = httpx2.Limits(
                max_connections=size, max_keepalive_connections=size, keepalive_expiry=30
            )
            http = openai.DefaultAioHttpClient(verify=tls, limits=limits)
            self._clients.append(self._client(http))
            self._busy = [0]
            return
        # httpcore's pool scans every connection on every request, so one pool of 256
        # connections costs more CPU than the rest of a rollout; several small pools do not.
        count = -(-size // CONNECTIONS_PER_CLIENT)
        per_client = -(-size // count)
        for _ in range(count):
            http = openai.DefaultAsyncHttpxClient(
                verify=tls,
                limits=httpx2.Limits(
                    max_connections=per_client,
                    max_keepalive_connections=per_client,
                    keepalive_expiry=30,
                ),
            )
            self._clients.append(self._client(http))
        self._busy = [0] * count

    def _client(self, http: Any) -> Any:
        return openai.AsyncOpenAI(
            base_url=self.config.base_url,
            api_key=self.config.api_key or NO_KEY,
            timeout=self.config.timeout_s,
            max_retries=0,
            http_client=http,
        )

    async def chat(self, request: ChatRequest) -> ChatResponse:
        cfg = self.config
        last = f"no attempt made to reach {cfg.base_url}"
        for attempt in range(cfg.max_retries + 1):
            retry_after: float | None = None
            async with self.limit.slot():
                self.stats.requests += 1
                started = time.monotonic()
                try:
                    completion = await self._create(request)
                except openai.RateLimitError as exc:
                    self.limit.on_overload()
                    reason, retry_after = "http 429", _retry_after(exc)
                    detail = f"HTTP 429 (rate limited) from {cfg.base_url}"
                except openai.APIStatusError as exc:
                    if exc.status_code < 500 and exc.status_code not in (408, 409):
                        raise TeacherError(
                            f"the endpoint refused the request: HTTP {exc.status_code}: "
                            f"{self._short(exc.message)}; check --base-url, --model and the "
                            "API key",
                            where=cfg.base_url,
                        ) from None
                    reason, retry_after = f"http {exc.status_code}", _retry_after(exc)
                    detail = (
                        f"HTTP {exc.status_code} from {cfg.base_url}: {self._short(exc.message)}"
                    )
                except (openai.APITimeoutError, openai.APIConnectionError) as exc:
                    reason = failure_kind(exc)
                    detail = self._describe(reason, exc)
                else:
                    latency = time.monotonic() - started
                    self.limit.on_success(latency)
                    response = _response(completion, latency, attempt + 1, cfg.base_url)
                    self.stats.record(response)
                    return response
            self.stats.failures[reason] += 1
            last = detail
            if attempt < cfg.max_retries:
                self.stats.retries += 1
                await asyncio.sleep(cfg.backoff.delay(attempt, self._rng, retry_after))
        attempts = cfg.max_retries + 1
        raise TeacherError(f"{last} (no answer after {attempts} attempt{'s' * (attempts > 1)})")

    def _describe(self, kind: str, exc: BaseException) -> str:
        """One attempt's failure in words, naming the endpoint (never the API key)."""
        url = self.config.base_url
        if kind == "timeout":
            return f"timeout: no answer from {url} within {self.config.timeout_s:g} s"
        if kind in ("connection refused", "connection reset"):
            return f"{kind} to {url}"
        cause = _root(exc)
        return f"connection error to {url}: {self._short(str(cause) or type(cause).__name__)}"

    async def _create(self, request: ChatRequest) -> Any:
        # ``post`` (the client's documented way to call any endpoint) rather than
        # ``chat.completions.create``: the typed path re-walks every message through its
        # TypedDict transforms and builds pydantic models of the answer, which at a few hundred
        # requests a second costs more CPU than the rest of a rollout. Status errors, timeouts
        # and connection errors are raised exactly as from ``create``. The body goes as ready
        # JSON (``content``), the bytes the client would make of the same dict, put together
        # from the request's parts, which the cache key has encoded already.
        body = _body(request, self.config.send_metadata)
        import httpx2

        if not self._clients:
            self._open_clients()
        index = min(range(len(self._clients)), key=self._busy.__getitem__)
        self._busy[index] += 1
        try:
            raw = await self._clients[index].post(
                "/chat/completions", content=body, cast_to=httpx2.Response
            )
        finally:
            self._busy[index] -= 1
        try:
            return raw.json()
        except ValueError:
            raise TeacherError(
                f"the endpoint answered HTTP {raw.status_code} with a body that is not JSON",
                where=self.config.base_url,
            ) from None

    def _short(self, text: str) -> str:
        return _short(redact(text, self.config.api_key))

    async def aclose(self) -> None:
        clients, self._clients = self._clients, []
        if self._owns_clients:
            for client in clients:
                await client.close()


def _body(request: ChatRequest, send_metadata: bool) -> bytes:
    """The JSON body of ``request``: ``model``, ``messages``, the sampling parameters, then
    ``tools`` and ``metadata`` when there are any, encoded compactly as the client would."""
    parts = [f'"model":{dumps(request.model)}', f'"messages":{request.messages_json()}']
    parts.extend(f"{dumps(k)}:{dumps(v)}" for k, v in request.sampling.to_dict().items())
    if request.tools:
        parts.append(f'"tools":{request.encoded_tools()}')
    if request.metadata and send_metadata:
        parts.append(f'"metadata":{dumps(dict(request.metadata))}')
    return ("{" + ",".join(parts) + "}").encode("utf-8")


def _use_aiohttp(transport: str) -> bool:
    if transport not in ("auto", "aiohttp", "httpx"):
        raise TeacherError(f"unknown transport {transport!r}: auto, aiohttp or httpx")
    if transport == "httpx":
        return False
    try:
        import aiohttp  # noqa: F401
    except ImportError:
        if transport == "aiohttp":
            raise TeacherError(
                "the aiohttp transport needs aiohttp: pip install 'openai[aiohttp]'"
            ) from None
        return False
    return True


def _response(completion: Any, latency: float, attempts: int, where: str) -> ChatResponse:
    """The ``ChatResponse`` of a chat-completions JSON body."""
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
        content = message.get("content")
        if content is not None and not isinstance(content, str):
            raise TypeError("content is not a string")
        reasoning = message.get("reasoning_content")
    except (KeyError, IndexError, TypeError) as exc:
        raise TeacherError(
            f"the endpoint's answer is not a chat completion ({exc!r} missing or wrong)",
            where=where,
        ) from None
    out = assistant_message(content, calls)
    # vLLM and DeepSeek-style servers return reasoning in a field of its own.
    if isinstance(reasoning, str):
        out["reasoning_content"] = reasoning
    return ChatResponse(
        message=out,
        finish_reason=choice.get("finish_reason"),
        usage=Usage.from_dict(completion.get("usage")),
        latency_s=latency,
        attempts=attempts,
    )


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
    reset``, ``connection`` (any other failure to connect or to read the answer), ``timeout``
    (the endpoint was reached but did not answer in time) or ``http NNN`` for a status error.

    The causes decide, not the outer class: transports wrap the socket's error in their own
    classes, and not always in the right one.
    """
    if isinstance(exc, openai.APIStatusError):
        return f"http {exc.status_code}"
    chain = list(_causes(exc))
    for cause in chain:
        code = getattr(cause, "errno", None)
        if isinstance(cause, ConnectionRefusedError) or code == errno.ECONNREFUSED:
            return "connection refused"
        if isinstance(cause, ConnectionResetError) or code == errno.ECONNRESET:
            return "connection reset"
    if any(isinstance(c, TimeoutError | openai.APITimeoutError) for c in chain):
        return "timeout"
    return "connection"


def _retry_after(exc: openai.APIStatusError) -> float | None:
    value = exc.response.headers.get("retry-after") if exc.response is not None else None
    try:
        return None if value is None else max(0.0, float(value))
    except ValueError:
        return None


def _short(text: str, limit: int = 200) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def redact(text: str, secret: str | None) -> str:
    """``text`` with ``secret`` replaced, for messages that may quote what was sent."""
    return text.replace(secret, "***") if secret else text
