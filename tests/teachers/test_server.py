"""The OpenAI-compatible server: routes, errors, reproducible faults, the request log."""

from __future__ import annotations

import asyncio
import http.client
import json
import socket

import pytest

from hsa.errors import TeacherError
from hsa.harness.parse import parse
from hsa.teachers.backends.openai import OpenAIBackend, OpenAIConfig
from hsa.teachers.request import ChatRequest, Sampling
from hsa.teachers.server import Faults, malform, request_key
from hsa.teachers.throttle import Backoff


def answer(body):
    return {"role": "assistant", "content": "ok"}, {"prompt_tokens": 1, "completion_tokens": 1}


def call_http(port, method, path, body=None, headers=None):
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    connection.request(method, path, body=body, headers=headers or {})
    response = connection.getresponse()
    data = response.read()
    connection.close()
    return response.status, json.loads(data) if data else None


def test_routes_and_errors(serve):
    port = serve(answer=answer).port
    assert call_http(port, "GET", "/v1/models")[1]["data"][0]["id"] == "hsa-oracle"
    assert call_http(port, "GET", "/health") == (200, {"status": "ok"})
    assert call_http(port, "GET", "/v2/nothing")[0] == 404
    assert call_http(port, "GET", "/v1/chat/completions")[0] == 405
    status, body = call_http(port, "POST", "/v1/chat/completions", body=b"{not json")
    assert status == 400 and "bad request body" in body["error"]["message"]
    body = json.dumps({"model": "m", "messages": [{"role": "user", "content": "hi"}]})
    status, completion = call_http(port, "POST", "/v1/chat/completions", body=body)
    assert status == 200 and completion["choices"][0]["message"] == {
        "role": "assistant",
        "content": "ok",
    }
    assert completion["usage"]["total_tokens"] == 2


def test_a_malformed_http_request_gets_400(serve):
    port = serve(answer=answer).port
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(b"NONSENSE\r\n\r\n")
        reply = sock.recv(4096)
    assert reply.startswith(b"HTTP/1.1 400")


def test_the_server_logs_the_same_key_the_client_caches_under(serve, tmp_path):
    log = tmp_path / "requests.jsonl"
    served = serve(answer=answer, log=log)
    backend = OpenAIBackend(OpenAIConfig(base_url=served.url, model="m"))
    tools = [{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}]
    request = ChatRequest("m", [{"role": "user", "content": "héllo"}], tools, Sampling(seed=5))

    async def main():
        try:
            await backend.chat(request)
        finally:
            await backend.aclose()

    asyncio.run(main())
    [entry] = [json.loads(line) for line in log.read_text().splitlines()]
    assert entry == {"key": request.key(), "status": 200, "malformed": False}


def test_faults_are_reproducible_and_near_their_rates(serve):
    def statuses(seed):
        served = serve(answer=answer, faults=Faults(fail_rate=0.3, seed=seed))
        out = []
        for i in range(200):
            body = json.dumps({"model": "m", "messages": [{"role": "user", "content": str(i)}]})
            out.append(call_http(served.port, "POST", "/v1/chat/completions", body=body)[0])
        return out

    first, again, other = statuses(1), statuses(1), statuses(2)
    assert first == again and first != other
    assert 30 <= sum(s != 200 for s in first) <= 90
    assert {429, 500} <= set(first)


def test_a_retried_request_draws_its_fault_again(serve):
    served = serve(answer=answer, faults=Faults(fail_rate=0.5, seed=3))
    backend = OpenAIBackend(
        OpenAIConfig(base_url=served.url, model="m", max_retries=30, backoff=Backoff(0.001, 0.01))
    )

    async def main():
        try:
            return await asyncio.gather(
                *(
                    backend.chat(ChatRequest("m", [{"role": "user", "content": f"q{i}"}]))
                    for i in range(30)
                )
            )
        finally:
            await backend.aclose()

    assert len(asyncio.run(main())) == 30  # every request got through eventually


def test_malform_breaks_api_and_text_calls(env, canonical, text_variants):
    call = {"id": "c", "type": "function", "function": {"name": "f", "arguments": '{"a": 1}'}}
    broken = malform({"role": "assistant", "content": None, "tool_calls": [call]})
    with pytest.raises(ValueError):
        json.loads(broken["tool_calls"][0]["function"]["arguments"])
    assert call["function"]["arguments"] == '{"a": 1}'  # the original is left alone
    assert malform({"role": "assistant", "content": "no calls here"}) is None
    for variant in text_variants:
        harness = variant.harness
        name = harness.tools[0].name
        fmt_text = _call_text(harness, name)
        events = parse([{"role": "assistant", "content": fmt_text}], _bare(harness))
        assert type(events[-1]).__name__ == "ToolCall"  # well formed before...
        bad = malform({"role": "assistant", "content": fmt_text})["content"]
        events = parse([{"role": "assistant", "content": bad}], _bare(harness))
        assert [type(e).__name__ for e in events] == ["AssistantMessage"]  # ...text after


def _bare(harness):
    from hsa.teachers.rollout import protocol_view

    return protocol_view(harness)


def _call_text(harness, name):
    from hsa.harness.prompt import call_format

    fmt = call_format(harness)
    return fmt.format_calls([(name, {"query": "lamp"})], harness.protocol.call_tag)


def test_fault_rates_are_checked():
    with pytest.raises(TeacherError, match="fail_rate must be between 0 and 1"):
        Faults(fail_rate=1.5)
    with pytest.raises(TeacherError, match="latency_ms must not be negative"):
        Faults(latency_ms=-1)


def test_request_key_defaults_match_an_unspecified_sampling():
    body = {"model": "m", "messages": [{"role": "user", "content": "x"}]}
    expected = ChatRequest(
        "m", body["messages"], sampling=Sampling(temperature=1.0, max_tokens=None)
    ).key()
    assert request_key(body) == expected
