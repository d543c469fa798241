"""The openai backend, driving the real ``openai`` client over loopback against ChatServer."""

from __future__ import annotations

import asyncio
import itertools
import json
import socket
import sys

import httpx2
import openai
import pytest

from hsa.errors import HsaError, TeacherError
from hsa.teachers.backends.openai import OpenAIBackend, OpenAIConfig, failure_kind
from hsa.teachers.request import ChatRequest, Sampling
from hsa.teachers.server import Faults
from hsa.teachers.throttle import Backoff

CALL = {"id": "c1", "type": "function", "function": {"name": "f", "arguments": '{"a": 1}'}}


def echo(body):
    """Answers with a tool call naming the last user message; refuses 'refuse'."""
    last = body["messages"][-1]["content"]
    if last == "refuse":
        raise HsaError("cannot answer that")
    call = dict(CALL, function={"name": "f", "arguments": json.dumps({"said": last})})
    message = {"role": "assistant", "content": None, "tool_calls": [call]}
    return message, {"prompt_tokens": 7, "completion_tokens": 3}


@pytest.fixture(params=["httpx", "auto"])
def transport(request) -> str:
    """The client's HTTP transport: httpx, and aiohttp where it is installed (``auto``)."""
    return request.param


def backend(transport: str, url: str, **changes) -> OpenAIBackend:
    settings = {
        "base_url": url,
        "model": "m",
        "api_key": "sk-test-not-a-secret",
        "concurrency": 8,
        "backoff": Backoff(0.001, 0.01),
        "transport": transport,
        **changes,
    }
    return OpenAIBackend(OpenAIConfig(**settings))


def ask_all(b: OpenAIBackend, texts: list[str]):
    async def main():
        try:
            return await asyncio.gather(
                *(
                    b.chat(ChatRequest("m", [{"role": "user", "content": t}], sampling=Sampling()))
                    for t in texts
                ),
                return_exceptions=True,
            )
        finally:
            await b.aclose()

    return asyncio.run(main())


def test_answers_usage_and_latency_come_back(serve, transport):
    served = serve(answer=echo, faults=Faults(latency_ms=20))
    b = backend(transport, served.url)
    [response] = ask_all(b, ["hi"])
    assert response.message["tool_calls"][0]["function"] == {
        "name": "f",
        "arguments": '{"said": "hi"}',
    }
    assert response.finish_reason == "tool_calls"
    assert (response.usage.prompt_tokens, response.usage.completion_tokens) == (7, 3)
    assert response.latency_s >= 0.02 and b.stats.latency_percentiles()["p50_ms"] >= 20


def test_429_and_500_are_retried_until_every_request_succeeds(serve, transport):
    served = serve(answer=echo, faults=Faults(fail_rate=0.5, seed=1))
    b = backend(transport, served.url, max_retries=20)
    responses = ask_all(b, [f"q{i}" for i in range(40)])
    assert all(not isinstance(r, Exception) for r in responses)
    assert b.stats.failures["http 429"] > 0 and b.stats.failures["http 500"] > 0
    assert b.stats.retries == sum(b.stats.failures.values())
    assert served.server.stats.statuses[200] == 40


def test_a_request_the_endpoint_refuses_is_not_retried(serve, transport):
    served = serve(answer=echo)
    b = backend(transport, served.url)
    [error] = ask_all(b, ["refuse"])
    assert isinstance(error, TeacherError)
    assert "HTTP 400" in str(error) and "cannot answer that" in str(error)
    assert b.stats.retries == 0 and served.server.stats.requests == 1


def test_timeouts_are_retried_then_reported(serve, transport):
    served = serve(answer=echo, faults=Faults(latency_ms=400))
    b = backend(transport, served.url, timeout_s=0.05, max_retries=1)
    [error] = ask_all(b, ["slow"])
    assert isinstance(error, TeacherError)
    assert "2 attempts" in str(error) and "timeout" in str(error)
    assert b.stats.failures["timeout"] == 2


def test_connection_errors_are_retried_then_reported(transport):
    with socket.socket() as probe:  # a port nobody listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    b = backend(transport, f"http://127.0.0.1:{port}/v1", max_retries=2)
    [error] = ask_all(b, ["anyone?"])
    assert isinstance(error, TeacherError) and "no answer after 3 attempts" in str(error)
    # the aiohttp transport raises a connect timeout for a refused connection: still named
    # for what it is, with the endpoint it was refused by
    assert f"connection refused to http://127.0.0.1:{port}/v1" in str(error)
    assert "timeout" not in str(error) and "sk-test" not in str(error)
    assert b.stats.failures == {"connection refused": 3}


def chain(*errors: BaseException) -> BaseException:
    """``errors[0]`` raised from ``errors[1]``, raised from ``errors[2]``, ..."""
    for outer, inner in itertools.pairwise(errors):
        outer.__cause__ = inner
    return errors[0]


def test_failures_are_named_by_their_causes():
    request = httpx2.Request("POST", "http://127.0.0.1:1/v1/chat/completions")
    response = httpx2.Response(503, request=request)

    def timeout() -> openai.APITimeoutError:
        return openai.APITimeoutError(request=request)

    def connection() -> openai.APIConnectionError:
        return openai.APIConnectionError(request=request)

    # the aiohttp transport's refused connection: a connect timeout caused by the refusal
    refused = chain(timeout(), httpx2.ConnectTimeout("Cannot connect"), ConnectionRefusedError())
    assert failure_kind(refused) == "connection refused"
    assert failure_kind(chain(connection(), OSError("all failed"), ConnectionRefusedError())) == (
        "connection refused"
    )
    assert failure_kind(chain(connection(), httpx2.ReadError("x"), ConnectionResetError())) == (
        "connection reset"
    )
    assert failure_kind(chain(timeout(), httpx2.ReadTimeout("slow"))) == "timeout"
    assert failure_kind(chain(connection(), httpx2.RemoteProtocolError("eof"))) == "connection"
    status = openai.InternalServerError("down", response=response, body=None)
    assert failure_kind(status) == "http 503"


def test_the_api_key_is_sent_and_never_shown(serve, transport):
    served = serve(answer=echo, api_key="sk-SECRET-123")
    good = backend(transport, served.url, api_key="sk-SECRET-123")
    assert "sk-SECRET-123" not in repr(good.config)
    [response] = ask_all(good, ["x"])
    assert not isinstance(response, Exception)
    wrong = backend(transport, served.url, api_key="sk-WRONG-456")
    [error] = ask_all(wrong, ["x"])
    assert isinstance(error, TeacherError) and "HTTP 401" in str(error)
    assert "sk-WRONG-456" not in str(error)


@pytest.mark.parametrize("concurrency", [1, 5])
def test_concurrency_limit_is_respected(serve, concurrency, transport):
    in_flight = 0
    peak = 0

    served = serve(answer=echo, faults=Faults(latency_ms=30))
    b = backend(transport, served.url, concurrency=concurrency)
    original = b._create

    async def counting(request):
        nonlocal in_flight, peak
        in_flight += 1
        peak = max(peak, in_flight)
        try:
            return await original(request)
        finally:
            in_flight -= 1

    b._create = counting
    ask_all(b, [f"q{i}" for i in range(12)])
    assert peak == concurrency


def test_metadata_is_sent_unless_turned_off(serve, transport):
    seen = []

    def answer(body):
        seen.append(body.get("metadata"))
        return echo(body)

    served = serve(answer=answer)
    request = ChatRequest("m", [{"role": "user", "content": "x"}], metadata={"hsa_variant": "v"})
    for send in (True, False):
        b = backend(transport, served.url, send_metadata=send)

        async def main(b=b):
            try:
                await b.chat(request)
            finally:
                await b.aclose()

        asyncio.run(main())
    assert seen == [{"hsa_variant": "v"}, None]


def test_the_aiohttp_transport_without_aiohttp_says_how_to_get_it(monkeypatch):
    monkeypatch.setitem(sys.modules, "aiohttp", None)  # import aiohttp now raises ImportError
    url = "http://127.0.0.1:9/v1"
    b = OpenAIBackend(OpenAIConfig(base_url=url, model="m", transport="aiohttp"))
    with pytest.raises(TeacherError, match=r"pip install 'openai\[aiohttp\]'"):
        asyncio.run(b.start())
    auto = OpenAIBackend(OpenAIConfig(base_url=url, model="m"))
    asyncio.run(auto.start())  # auto falls back to httpx
    assert len(auto._clients) == 8  # 64 connections in pools of 8
    asyncio.run(auto.aclose())
