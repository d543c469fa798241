"""The OpenAI-compatible server: routes, errors, reproducible faults, the request log."""

from __future__ import annotations

import asyncio
import http.client
import json
import logging
import socket
import time

import pytest
from hypothesis import given
from hypothesis import strategies as st

import hsa.teachers.server as server_module
from hsa.augment.mapping import map_events
from hsa.envs.livestream import solve
from hsa.errors import TeacherError
from hsa.harness.parse import parse
from hsa.harness.render import render
from hsa.teachers.backends.openai import OpenAIBackend, OpenAIConfig
from hsa.teachers.request import ChatRequest, Sampling
from hsa.teachers.rollout import VARIANT_KEY
from hsa.teachers.server import Faults, malform, request_key
from hsa.teachers.throttle import Backoff


def answer(body):
    return {"role": "assistant", "content": "ok"}, {"prompt_tokens": 1, "completion_tokens": 1}


def call_tool(body):
    call = {"id": "c0", "type": "function", "function": {"name": "f", "arguments": '{"a": 1}'}}
    message = {"role": "assistant", "content": None, "tool_calls": [call]}
    return message, {"prompt_tokens": 1, "completion_tokens": 1}


#: the tool ``call_tool`` calls, which a request must list for its answer to call it
TOOLS = [{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}]


def call_http(port, method, path, body=None, headers=None, *, response_headers=False):
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    connection.request(method, path, body=body, headers=headers or {})
    response = connection.getresponse()
    data = response.read()
    connection.close()
    answer = response.status, json.loads(data) if data else None
    return (*answer, response.headers) if response_headers else answer


def chat_body(text="hi", **extra) -> str:
    return json.dumps({"model": "m", "messages": [{"role": "user", "content": text}], **extra})


def test_routes_and_errors(serve):
    port = serve(answer=answer).port
    assert call_http(port, "GET", "/v1/models")[1]["data"][0]["id"] == "hsa-oracle"
    assert call_http(port, "GET", "/health") == (200, {"status": "ok"})
    assert call_http(port, "GET", "/v2/nothing")[0] == 404
    assert call_http(port, "HEAD", "/health")[:2] == (200, None)  # as GET, without the body
    # a route that answers other methods says which (it was a 404 "no route" for POST)
    for method, path, allow in (
        ("GET", "/v1/chat/completions", "POST"),
        ("POST", "/v1/models", "GET, HEAD"),
        ("POST", "/health", "GET, HEAD"),
        ("DELETE", "/v1/health", "GET, HEAD"),
    ):
        status, error, headers = call_http(port, method, path, response_headers=True)
        assert (status, headers["Allow"]) == (405, allow)
        assert error["error"]["type"] == "method_not_allowed"
    status, body = call_http(port, "POST", "/v1/chat/completions", body=b"{not json")
    assert status == 400 and "bad request body" in body["error"]["message"]
    body = json.dumps({"model": "m", "messages": [{"role": "user", "content": "hi"}]})
    status, completion = call_http(port, "POST", "/v1/chat/completions", body=body)
    assert status == 200 and completion["choices"][0]["message"] == {
        "role": "assistant",
        "content": "ok",
    }
    assert completion["usage"]["total_tokens"] == 2


@pytest.mark.parametrize(
    "request_bytes",
    [
        b"NONSENSE\r\n\r\n",
        b"POST /v1/chat/completions HTTP/1.1\r\nno colon here\r\n\r\n",
        b"POST /v1/chat/completions HTTP/1.1\r\nContent-Length: many\r\n\r\n",
    ],
)
def test_a_malformed_http_request_gets_400_and_no_traceback(serve, caplog, request_bytes):
    port = serve(answer=answer).port
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(request_bytes)
        reply = sock.recv(4096)
    # HTTP/1.0 when not even the request line could be read
    assert reply.startswith((b"HTTP/1.1 400 ", b"HTTP/1.0 400 "))
    # the client's mistake is not logged as the server's error
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]


@pytest.mark.parametrize(
    "body, reason",
    [
        (b"{not json", "Expecting property name"),
        (b"[1, 2]", "the body must be a JSON object with a messages list"),
        (b'{"model": "m"}', "the body must be a JSON object with a messages list"),
        (b'{"messages": "hi"}', "the body must be a JSON object with a messages list"),
        (b"\xff\xfe{}", "bad request body"),
        (b"", "Expecting value"),
        # these reached the responder and came back as 500s in plain text, with a traceback
        (b'{"messages": ["a", "b"]}', "messages[0] must be an object"),
        (b'{"messages": [], "metadata": "abc"}', "metadata must be an object"),
        (b'{"messages": [], "model": 3}', "model must be a string"),
        (b"[" * 200_000 + b"]" * 200_000, "nested too deeply"),  # orjson 3.8 crashed on it
        # what it cannot do is refused, not answered as something else
        (b'{"messages": [], "stream": true}', "this server does not stream"),
        (b'{"messages": [], "n": 3}', "one choice, got n=3"),
        (b'{"messages": [], "max_tokens": -5}', "max_tokens must be an integer, 1 or more"),
        (b'{"messages": [], "max_completion_tokens": 0}', "1 or more, got 0"),
        (b'{"messages": [], "tool_choice": "bogus"}', "tool_choice must be 'auto', 'none'"),
        (b'{"messages": [], "tool_choice": {"type": "function"}}', "tool_choice must be"),
    ],
)
def test_a_malformed_request_body_gets_a_json_400_and_no_traceback(serve, caplog, body, reason):
    served = serve(answer=answer)
    status, error, headers = call_http(
        served.port, "POST", "/v1/chat/completions", body=body, response_headers=True
    )
    assert status == 400 and headers["Content-Type"] == "application/json"
    assert error["error"]["type"] == "invalid_request"
    assert error["error"]["message"].startswith("bad request body: ") and reason in str(error)
    assert served.stats.statuses == {400: 1}
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]


@pytest.mark.parametrize(
    "responder, choice, kept",
    [
        (call_tool, "none", False),  # it answered with the call all the same
        (call_tool, "auto", True),
        (call_tool, "required", True),
        (call_tool, {"type": "function", "function": {"name": "f"}}, True),
        (call_tool, {"type": "function", "function": {"name": "g"}}, False),
        (answer, "required", False),
        (answer, "none", True),
        (answer, {"type": "function", "function": {"name": "f"}}, False),
    ],
)
def test_an_answer_its_tool_choice_rules_out_is_a_400(serve, responder, choice, kept):
    served = serve(answer=responder)
    body = chat_body(tool_choice=choice, tools=TOOLS)
    status, payload = call_http(served.port, "POST", "/v1/chat/completions", body=body)
    if kept:
        assert status == 200 and payload["choices"][0]["message"]
    else:
        assert status == 400 and "does not answer otherwise" in payload["error"]["message"]


def test_a_responder_that_fails_gets_a_json_500_counted(serve, caplog):
    def broken(body):
        return body["messages"][0]["nothing"], {}

    served = serve(answer=broken)
    status, error = call_http(served.port, "POST", "/v1/chat/completions", body=chat_body())
    assert status == 500 and error["error"]["type"] == "server_error"
    assert "the responder failed: KeyError" in error["error"]["message"]
    assert served.stats.statuses == {500: 1}


def test_a_model_name_with_a_lone_surrogate_is_echoed_escaped(serve):
    port = serve(answer=answer).port
    body = chat_body().replace('"model": "m"', '"model": "\\ud800"')
    status, completion = call_http(port, "POST", "/v1/chat/completions", body=body)
    assert status == 200 and completion["model"] == "\ud800"


def test_the_log_does_not_change_an_answer(serve, tmp_path):
    # request_key validates sampling the answer does not read: with --log, 500s
    log = tmp_path / "requests.jsonl"
    served = serve(answer=answer, log=log)
    for extra in ({"top_p": "wide"}, {"temperature": "hot"}):
        body = chat_body(**extra)
        assert call_http(served.port, "POST", "/v1/chat/completions", body=body)[0] == 200
    served.settle()
    entries = [json.loads(line) for line in log.read_text().splitlines()]
    assert [(e["key"], e["status"]) for e in entries] == [(None, 200), (None, 200)]


def test_a_body_over_the_limit_gets_413(serve, monkeypatch):
    monkeypatch.setattr(server_module, "MAX_BODY", 1000)
    port = serve(answer=answer).port
    status, error = call_http(port, "POST", "/v1/chat/completions", body=chat_body("x" * 1000))
    assert status == 413 and "larger than 1000 bytes" in error["error"]["message"]
    assert call_http(port, "POST", "/v1/chat/completions", body=chat_body())[0] == 200


def test_a_body_over_the_limit_waits_the_latency_as_every_answer_does(serve, monkeypatch):
    monkeypatch.setattr(server_module, "MAX_BODY", 1000)
    port = serve(answer=answer, faults=Faults(latency_ms=150)).port
    started = time.monotonic()
    assert call_http(port, "POST", "/v1/chat/completions", body=chat_body("x" * 1000))[0] == 413
    assert time.monotonic() - started >= 0.15  # it was answered at once


def raw_chat(port: int, body: bytes) -> socket.socket:
    """A connection that has sent a chat-completions request and reads no answer yet."""
    client = socket.create_connection(("127.0.0.1", port))
    head = f"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Length: {len(body)}"
    client.sendall(head.encode() + b"\r\n\r\n" + body)
    return client


def test_an_answer_the_client_left_before_is_logged_cut_not_sent(serve, tmp_path):
    log = tmp_path / "requests.jsonl"
    served = serve(answer=answer, faults=Faults(latency_ms=100), log=log)
    body = chat_body().encode()
    with raw_chat(served.port, body):  # read by the server, which waits its latency
        deadline = time.monotonic() + 5
        while not served.stats.requests and time.monotonic() < deadline:
            time.sleep(0.01)
    # the client gave up before its answer went out
    assert call_http(served.port, "POST", "/v1/chat/completions", body=body)[0] == 200
    deadline = time.monotonic() + 5
    while served.stats.cut + served.stats.statuses[200] < 2 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert (served.stats.requests, served.stats.cut, served.stats.statuses) == (2, 1, {200: 1})
    entries = [json.loads(line) for line in log.read_text().splitlines()]
    assert [(e["status"], e.get("cut")) for e in entries] == [(None, True), (200, None)]


def test_an_answer_still_waiting_when_the_server_closes_is_logged_cut(serve, tmp_path, monkeypatch):
    monkeypatch.setattr(server_module, "SHUTDOWN_GRACE_S", 0.05)
    log = tmp_path / "requests.jsonl"
    served = serve(answer=answer, faults=Faults(latency_ms=10_000), log=log)
    with raw_chat(served.port, chat_body().encode()) as client:
        deadline = time.monotonic() + 5
        while not served.stats.requests and time.monotonic() < deadline:
            time.sleep(0.01)
        asyncio.run_coroutine_threadsafe(served.server.close(), served.loop).result(10)
        assert client.recv(100) == b""  # cut: no answer went out
    assert (served.server.stats.cut, served.server.stats.statuses) == (1, {})
    [entry] = [json.loads(line) for line in log.read_text().splitlines()]
    assert entry == {"key": entry["key"], "status": None, "cut": True}


def long_answer(body):
    # more than the client's socket and the server's buffers hold: the rest waits to drain
    return {"role": "assistant", "content": "x" * (8 << 20) + "<end>"}, {"prompt_tokens": 1}


def long_call(body):
    # as long, a call (what a malformed answer breaks)
    message, usage = call_tool(body)
    arguments = json.dumps({"a": "x" * (8 << 20)})
    call = dict(message["tool_calls"][0], function={"name": "f", "arguments": arguments})
    return dict(message, tool_calls=[call]), usage


@pytest.mark.parametrize("who", ["client", "server"])
def test_an_answer_cut_while_it_was_being_sent_is_logged_with_its_status(
    serve, tmp_path, monkeypatch, who
):
    # its status line reached the client, the rest did not: it was logged status null and
    # summed as cut before sent, as one of which nothing went out
    monkeypatch.setattr(server_module, "SHUTDOWN_GRACE_S", 0.05)
    log = tmp_path / "requests.jsonl"
    served = serve(answer=long_call, faults=Faults(malformed_rate=1.0), log=log)
    body = chat_body(tools=TOOLS).encode()
    client = socket.socket()
    client.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)  # (set before it connects)
    client.connect(("127.0.0.1", served.port))
    head = f"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Length: {len(body)}"
    client.sendall(head.encode() + b"\r\n\r\n" + body)
    with client:
        assert client.recv(12) == b"HTTP/1.1 200"  # and no more is read
        if who == "server":
            asyncio.run_coroutine_threadsafe(served.server.close(), served.loop).result(10)
    deadline = time.monotonic() + 5
    while not served.stats.cut_sending and time.monotonic() < deadline:
        time.sleep(0.01)
    stats = served.server.stats
    assert (stats.requests, stats.cut_sending, stats.cut, stats.statuses) == (1, 1, 0, {})
    assert stats.malformed == 0  # counted among answers sent whole (the log said true)
    [entry] = [json.loads(line) for line in log.read_text().splitlines()]
    assert entry == {"key": entry["key"], "status": 200, "cut": True}


def test_a_request_without_the_key_gets_401(serve):
    port = serve(answer=answer, api_key="sk-right").port
    assert call_http(port, "GET", "/v1/models")[0] == 401
    wrong = {"Authorization": "Bearer sk-wrong"}
    assert call_http(port, "POST", "/v1/chat/completions", chat_body(), wrong)[0] == 401
    right = {"Authorization": "Bearer sk-right"}
    assert call_http(port, "POST", "/v1/chat/completions", chat_body(), right)[0] == 200


def test_the_variant_in_the_metadata_chooses_the_harness(serve, env, canonical, renamed):
    port = serve().port  # the oracle
    task = next(t for t in env.tasks() if t.kind == "single_tool")
    events = list(solve(env, task).events)
    first_step = next(
        i for i, e in enumerate(events) if type(e).__name__ in ("AssistantMessage", "ToolCall")
    )
    names = {}
    for variant in (canonical, renamed):
        conversation = render(map_events(events[:first_step], variant.mapping), variant.harness)
        body = {
            "model": "hsa-oracle",
            "messages": conversation.messages,
            "tools": conversation.tools,
            "metadata": {VARIANT_KEY: variant.variant_id},
        }
        status, completion = call_http(port, "POST", "/v1/chat/completions", json.dumps(body))
        assert status == 200, completion
        [call] = completion["choices"][0]["message"]["tool_calls"]
        assert completion["choices"][0]["finish_reason"] == "tool_calls"
        names[variant.variant_id] = call["function"]["name"]
    surface = renamed.mapping.tools[names[canonical.variant_id]].name
    assert names[renamed.variant_id] == surface != names[canonical.variant_id]
    unknown = chat_body(metadata={VARIANT_KEY: "nope"})
    status, error = call_http(port, "POST", "/v1/chat/completions", unknown)
    assert status == 400 and "unknown variant 'nope'" in error["error"]["message"]


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
    served.settle()
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


def test_injected_429_and_500_are_openai_errors(serve):
    served = serve(answer=answer, faults=Faults(fail_rate=1.0, seed=4))
    seen = {}
    for i in range(40):
        body = chat_body(str(i))
        status, error, headers = call_http(
            served.port, "POST", "/v1/chat/completions", body, response_headers=True
        )
        seen[status] = (error, headers.get("Retry-After"))
    assert set(seen) == {429, 500}
    assert seen[429] == ({"error": _injected("rate limited (injected)")}, "0")
    assert seen[500] == ({"error": _injected("server error (injected)")}, None)


def _injected(message):
    return {"message": message, "type": "injected_fault", "code": "injected_fault"}


def test_latency_delays_every_answer(serve):
    port = serve(answer=answer, faults=Faults(latency_ms=150)).port
    for _ in range(3):
        started = time.monotonic()
        assert call_http(port, "POST", "/v1/chat/completions", body=chat_body())[0] == 200
        assert time.monotonic() - started >= 0.15
    started = time.monotonic()
    assert call_http(port, "GET", "/v1/models")[0] == 200  # only answers wait
    assert time.monotonic() - started < 0.15
    # refusals and injected faults are answers too
    failing = serve(answer=answer, faults=Faults(latency_ms=150, fail_rate=1.0)).port
    for where, body in ((port, b"{not json"), (failing, chat_body().encode())):
        started = time.monotonic()
        assert call_http(where, "POST", "/v1/chat/completions", body=body)[0] in (400, 429, 500)
        assert time.monotonic() - started >= 0.15


def test_latency_counts_the_servers_own_work_on_the_answer(serve):
    # a model that takes latency_ms to answer: the time the responder spends is inside it
    def slow(body):
        time.sleep(0.2)
        return answer(body)

    port = serve(answer=slow, faults=Faults(latency_ms=300)).port
    call_http(port, "POST", "/v1/chat/completions", body=chat_body())  # connection warm
    started = time.monotonic()
    assert call_http(port, "POST", "/v1/chat/completions", body=chat_body())[0] == 200
    assert 0.3 <= time.monotonic() - started < 0.45  # added to the latency, it took 0.5 s


def test_malformed_answers_are_drawn_per_request_and_logged(serve, tmp_path):
    log = tmp_path / "requests.jsonl"
    served = serve(answer=call_tool, faults=Faults(malformed_rate=0.5, seed=2), log=log)

    def broken(i):
        body = chat_body(i, tools=TOOLS)
        status, completion = call_http(served.port, "POST", "/v1/chat/completions", body)
        assert status == 200 and completion["choices"][0]["finish_reason"] == "tool_calls"
        arguments = completion["choices"][0]["message"]["tool_calls"][0]["function"]["arguments"]
        try:
            return json.loads(arguments) != {"a": 1}
        except ValueError:
            return True

    first = [broken(str(i)) for i in range(40)]
    assert 8 <= sum(first) <= 32
    assert [broken(str(i)) for i in range(40)] == first  # the same request, broken the same way
    assert served.stats.malformed == 2 * sum(first)
    logged = [json.loads(line)["malformed"] for line in log.read_text().splitlines()]
    assert logged == first + first


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


_scalars = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.integers(min_value=2**63 - 2, max_value=2**64 + 2).flatmap(
        lambda n: st.sampled_from([n, -n])
    )
    | st.floats()
    | st.text()
)
_json_values = st.recursive(
    _scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=20,
)


@given(_json_values, st.booleans())
def test_the_fast_body_decoder_reads_what_json_reads(value, ascii_only):
    """``_loads`` (orjson where it agrees) against ``json.loads``, types included: integers
    past 64 bits, NaN and infinities, escaped and raw non-ASCII text, lone surrogates."""
    text = json.dumps({"messages": [], "value": value}, ensure_ascii=ascii_only)
    raw = text.encode("utf-8", "surrogatepass")
    try:
        expected = repr(json.loads(raw))
    except ValueError as exc:
        with pytest.raises(type(exc)):
            server_module._loads(raw)
    else:
        assert repr(server_module._loads(raw)) == expected


@pytest.mark.parametrize("content", ["", None, "not json", "[]", "{}", "42", '"text"'])
def test_a_tool_result_the_oracle_cannot_read_is_the_clients_400(serve, env, canonical, content):
    port = serve().port  # the oracle
    task = next(t for t in env.tasks() if t.kind == "single_tool")
    events = list(solve(env, task).events)
    result = next(i for i, e in enumerate(events) if type(e).__name__ == "ToolResult")
    conversation = render(events[: result + 1], canonical.harness)
    messages = [dict(m) for m in conversation.messages]
    assert messages[-1]["role"] == "tool"
    messages[-1]["content"] = content
    body = {"model": "hsa-oracle", "messages": messages, "tools": conversation.tools}
    status, error = call_http(port, "POST", "/v1/chat/completions", json.dumps(body))
    assert status == 400, error  # 500 says "retry": the same request fails the same way
    assert "a tool result the oracle cannot read" in error["error"]["message"]


@pytest.mark.parametrize("text", [None, 5])
def test_a_content_part_whose_text_is_no_string_is_the_clients_400(serve, env, canonical, text):
    port = serve().port  # the oracle
    task = next(t for t in env.tasks() if t.kind == "single_tool")
    events = list(solve(env, task).events)
    result = next(i for i, e in enumerate(events) if type(e).__name__ == "ToolResult")
    conversation = render(events[: result + 1], canonical.harness)
    messages = [dict(m) for m in conversation.messages]
    messages[-1]["content"] = [{"type": "text", "text": text}]
    body = {"model": "hsa-oracle", "messages": messages, "tools": conversation.tools}
    status, error = call_http(port, "POST", "/v1/chat/completions", json.dumps(body))
    assert status == 400, error  # it was a 500 (a TypeError), which clients retry
    where = f"messages[{len(messages) - 1}].content[0].text"
    assert f"{where}: a content part's text must be a string" in error["error"]["message"]


def oracle_body(events, variant):
    conversation = render(map_events(events, variant.mapping), variant.harness)
    return {
        "model": "hsa-oracle",
        "messages": conversation.messages,
        "tools": conversation.tools,
        "metadata": {VARIANT_KEY: variant.variant_id},
    }


def test_a_malformed_rate_breaks_calls_and_never_an_answers_text(
    serve, env, canonical, text_variants, tmp_path
):
    # a final answer with a closing bracket lost it, and was kept as a verified answer
    log = tmp_path / "requests.jsonl"
    served = serve(faults=Faults(malformed_rate=1.0), log=log)
    task, events, final = next(
        (t, events, i)
        for t in env.tasks()
        for events in [list(solve(env, t).events)]
        for i, e in enumerate(events)
        if type(e).__name__ == "AssistantMessage" and any(c in e.text for c in "})]>")
    )
    first_call = next(i for i, e in enumerate(events) if type(e).__name__ == "ToolCall")
    for variant in (canonical, text_variants[0]):
        said = map_events([events[final]], variant.mapping)[0].text
        body = oracle_body(events[:final], variant)
        status, completion = call_http(
            served.port, "POST", "/v1/chat/completions", json.dumps(body)
        )
        assert status == 200 and completion["choices"][0]["message"]["content"] == said, task.id
        body = oracle_body(events[:first_call], variant)
        status, completion = call_http(
            served.port, "POST", "/v1/chat/completions", json.dumps(body)
        )
        message = completion["choices"][0]["message"]
        if variant is canonical:
            with pytest.raises(ValueError):
                json.loads(message["tool_calls"][0]["function"]["arguments"])
        else:
            read = parse(
                [{"role": "assistant", "content": message["content"]}], _bare(variant.harness)
            )
            assert [type(e).__name__ for e in read] == ["AssistantMessage"]
    assert served.stats.malformed == 2  # (settled: the last answer is logged)
    logged = [json.loads(line)["malformed"] for line in log.read_text().splitlines()]
    assert logged == [False, True, False, True]
    # a responder that cannot say which text holds a call has its text left alone
    plain = serve(answer=long_answer, faults=Faults(malformed_rate=1.0))
    status, completion = call_http(plain.port, "POST", "/v1/chat/completions", chat_body())
    assert completion["choices"][0]["message"]["content"].endswith("<end>")
    assert plain.stats.malformed == 0


def calls_of(*ids, name="f"):
    calls = [
        {"id": i, "type": "function", "function": {"name": name, "arguments": "{}"}} for i in ids
    ]
    return {"role": "assistant", "content": None, "tool_calls": calls}


def result(call_id):
    return {"role": "tool", "tool_call_id": call_id, "content": "{}"}


USER = {"role": "user", "content": "hi"}


@pytest.mark.parametrize(
    "messages, param, said",
    [
        # a result under an id no call has: the oracle ignored it, and called again forever
        (
            [USER, calls_of("a"), result("WRONG")],
            "messages[2]",
            "'WRONG' is not among the tool calls of messages[1] (a)",
        ),
        (
            [USER, calls_of("a", "b"), result("a"), USER],
            "messages[1]",
            "responding to each 'tool_call_id'; not answered: b",
        ),
        ([USER, calls_of("a"), calls_of("b"), result("b")], "messages[1]", "not answered: a"),
        # a hook's note between the results of one message's calls, as OpenAI's API refuses
        # it (hsa's render shows it after the last result)
        (
            [
                USER,
                calls_of("a", "b"),
                result("a"),
                {"role": "system", "content": "x"},
                result("b"),
            ],
            "messages[1]",
            "responding to each 'tool_call_id'; not answered: b",
        ),
        (
            [USER, calls_of("a", "b"), result("a"), {"role": "user", "content": "x"}, result("b")],
            "messages[1]",
            "not answered: b",
        ),
        (
            [USER, calls_of("a"), {"role": "system", "content": "x"}, result("a")],
            "messages[1]",
            "not answered: a",
        ),
        ([USER, calls_of("a")], "messages[1]", "not answered: a"),
        (
            [USER, result("a")],
            "messages[1]",
            "must be a response to a preceding message with 'tool_calls'",
        ),
        (
            [USER, calls_of("a"), result("a"), {"role": "assistant", "content": "x"}, result("a")],
            "messages[4]",
            "preceding message with 'tool_calls'",
        ),
        (
            [USER, calls_of("a"), result("a"), result("a")],
            "messages[3]",
            "'a' of messages[1] is answered twice",
        ),
        (
            [USER, calls_of("a"), {"role": "tool", "content": "{}"}],
            "messages[2]",
            "needs a tool_call_id string",
        ),
        (
            [
                USER,
                {**calls_of("a"), "tool_calls": [{"type": "function", "function": {"name": "f"}}]},
            ],
            "messages[1].tool_calls[0]",
            "needs an id",
        ),
    ],
)
def test_tool_messages_must_answer_the_calls_before_them(serve, messages, param, said):
    served = serve(answer=answer)
    body = json.dumps({"model": "m", "messages": messages, "tools": TOOLS})
    status, error = call_http(served.port, "POST", "/v1/chat/completions", body)
    assert status == 400 and error["error"]["param"] == param, error
    assert error["error"]["message"].startswith(f"{param}: ") and said in error["error"]["message"]
    assert error["error"]["type"] == "invalid_request"


@pytest.mark.parametrize(
    "messages, tools",
    [
        ([USER, calls_of("a", "b"), result("b"), result("a"), USER], TOOLS),
        # a hook's note after the last result, where hsa's render shows it
        (
            [
                USER,
                calls_of("a", "b"),
                result("a"),
                result("b"),
                {"role": "system", "content": "<note>x</note>"},
            ],
            TOOLS,
        ),
        # a text protocol: the calls are in the text, its results tool messages, no tools sent
        (
            [
                USER,
                {
                    "role": "assistant",
                    "content": '<tool_call>{"name": "f", "arguments": {}}</tool_call>',
                },
                result("call_0"),
            ],
            None,
        ),
    ],
)
def test_tool_messages_that_answer_their_calls_are_taken(serve, messages, tools):
    served = serve(answer=answer)
    body = {"model": "m", "messages": messages, **({"tools": tools} if tools else {})}
    assert call_http(served.port, "POST", "/v1/chat/completions", json.dumps(body))[0] == 200


@pytest.mark.parametrize("tools", [None, [], [{"type": "function", "function": {"name": "g"}}]])
def test_an_answer_calling_a_tool_the_request_does_not_list_is_a_400(serve, tools):
    # OpenAI's API never answers with a call to a tool the request does not list; without
    # tools tool_choice is "none"
    served = serve(answer=call_tool)
    body = chat_body(**({} if tools is None else {"tools": tools}))
    status, error = call_http(served.port, "POST", "/v1/chat/completions", body)
    assert status == 400 and "does not answer otherwise" in error["error"]["message"]
    assert ("lists no tools" in error["error"]["message"]) is (not tools)
    assert call_http(served.port, "POST", "/v1/chat/completions", chat_body(tools=TOOLS))[0] == 200


def test_the_oracle_answers_a_text_protocol_without_tools_but_not_the_api(
    serve, env, canonical, text_variants
):
    port = serve().port
    task = next(t for t in env.tasks() if t.kind == "single_tool")
    events = list(solve(env, task).events)
    first_call = next(i for i, e in enumerate(events) if type(e).__name__ == "ToolCall")
    body = oracle_body(events[:first_call], canonical)
    assert call_http(port, "POST", "/v1/chat/completions", json.dumps(body))[0] == 200
    for tools in (
        [],
        [t for t in body["tools"] if t["function"]["name"] != events[first_call].tool],
    ):
        status, _ = call_http(
            port, "POST", "/v1/chat/completions", json.dumps({**body, "tools": tools})
        )
        assert status == 400
    for variant in text_variants:  # their tools are in the prompt: the request lists none
        body = oracle_body(events[:first_call], variant)
        assert "tools" not in body or not body["tools"]
        body.pop("tools")
        status, completion = call_http(port, "POST", "/v1/chat/completions", json.dumps(body))
        assert status == 200 and completion["choices"][0]["message"]["content"]


def test_models_lists_the_model_with_its_creation_time(serve):
    # openai.types.Model requires created: the official client's models.list() failed
    port = serve(answer=answer).port
    started = int(time.time())
    [model] = call_http(port, "GET", "/v1/models")[1]["data"]
    assert set(model) == {"id", "object", "created", "owned_by"}
    assert isinstance(model["created"], int) and abs(model["created"] - started) < 60
    assert call_http(port, "GET", "/v1/models")[1]["data"] == [model]  # the same each time
