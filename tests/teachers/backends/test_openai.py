"""The openai backend over loopback against ChatServer (hsa serve oracle's server)."""

from __future__ import annotations

import asyncio
import email.utils
import errno
import itertools
import json
import re
import socket
import time

import aiohttp
import pytest

from hsa.errors import HsaError, TeacherError
from hsa.teachers.backends.base import ContextOverflow
from hsa.teachers.backends.openai import (
    OpenAIBackend,
    OpenAIConfig,
    StatusError,
    env_proxy,
    error_message,
    failure_kind,
    redact,
    retry_wait,
    seconds,
)
from hsa.teachers.request import ChatRequest, Sampling
from hsa.teachers.server import Faults
from hsa.teachers.throttle import Backoff

CALL = {"id": "c1", "type": "function", "function": {"name": "f", "arguments": '{"a": 1}'}}
#: the tool ``echo`` calls, which a request must list for its answer to call it
TOOLS = [{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}]


def echo(body):
    """Answers with a tool call naming the last user message; refuses 'refuse'."""
    last = body["messages"][-1]["content"]
    if last == "refuse":
        raise HsaError("cannot answer that")
    call = dict(CALL, function={"name": "f", "arguments": json.dumps({"said": last})})
    message = {"role": "assistant", "content": None, "tool_calls": [call]}
    return message, {"prompt_tokens": 7, "completion_tokens": 3}


def backend(url: str, **changes) -> OpenAIBackend:
    settings = {
        "base_url": url,
        "model": "m",
        "api_key": "sk-test-not-a-secret",
        "concurrency": 8,
        "backoff": Backoff(0.001, 0.01),
        **changes,
    }
    return OpenAIBackend(OpenAIConfig(**settings))


def ask_all(b: OpenAIBackend, texts: list[str]):
    async def main():
        try:
            return await asyncio.gather(
                *(
                    b.chat(ChatRequest("m", [{"role": "user", "content": t}], TOOLS, Sampling()))
                    for t in texts
                ),
                return_exceptions=True,
            )
        finally:
            await b.aclose()

    return asyncio.run(main())


def test_answers_usage_and_latency_come_back(serve):
    served = serve(answer=echo, faults=Faults(latency_ms=20))
    b = backend(served.url)
    [response] = ask_all(b, ["hi"])
    assert response.message["tool_calls"][0]["function"] == {
        "name": "f",
        "arguments": '{"said": "hi"}',
    }
    assert response.finish_reason == "tool_calls"
    assert (response.usage.prompt_tokens, response.usage.completion_tokens) == (7, 3)
    assert response.latency_s >= 0.02 and b.stats.latency_percentiles()["p50_ms"] >= 20


def test_429_and_500_are_retried_until_every_request_succeeds(serve):
    served = serve(answer=echo, faults=Faults(fail_rate=0.5, seed=1))
    b = backend(served.url, max_retries=20)
    responses = ask_all(b, [f"q{i}" for i in range(40)])
    assert all(not isinstance(r, Exception) for r in responses)
    assert b.stats.failures["http 429"] > 0 and b.stats.failures["http 500"] > 0
    assert b.stats.retries == sum(b.stats.failures.values())
    assert served.stats.statuses[200] == 40


def test_a_request_the_endpoint_refuses_is_not_retried(serve):
    served = serve(answer=echo)
    b = backend(served.url)
    [error] = ask_all(b, ["refuse"])
    assert isinstance(error, TeacherError)
    assert "HTTP 400" in str(error) and "cannot answer that" in str(error)
    assert b.stats.retries == 0 and served.stats.requests == 1


def test_timeouts_are_retried_then_reported(serve):
    served = serve(answer=echo, faults=Faults(latency_ms=400))
    b = backend(served.url, timeout_s=0.05, max_retries=1)
    [error] = ask_all(b, ["slow"])
    assert isinstance(error, TeacherError)
    assert "2 attempts" in str(error) and "timeout" in str(error)
    assert b.stats.failures["timeout"] == 2


def test_timeouts_back_the_concurrency_limit_off(serve):
    # a server that cannot answer in time has more than it can take, as a 429 would say
    served = serve(answer=echo, faults=Faults(latency_ms=400))
    b = backend(served.url, timeout_s=0.05, max_retries=0, concurrency=8)
    errors = ask_all(b, [f"q{i}" for i in range(10)])
    assert all("timeout" in str(e) for e in errors)
    assert b.limit.decreases["overload"] >= 1 and b.limit.limit <= 4


def test_connection_errors_are_retried_then_reported():
    with socket.socket() as probe:  # a port nobody listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    b = backend(f"http://127.0.0.1:{port}/v1", max_retries=2)
    [error] = ask_all(b, ["anyone?"])
    assert isinstance(error, TeacherError) and "no answer after 3 attempts" in str(error)
    # named for what it is, with the endpoint that refused it
    assert f"connection refused to http://127.0.0.1:{port}/v1" in str(error)
    assert "timeout" not in str(error) and "sk-test" not in str(error)
    assert b.stats.failures == {"connection refused": 3}


def _start(b: OpenAIBackend) -> None:
    async def main():
        try:
            await b.start()
        finally:
            await b.aclose()

    asyncio.run(main())


def test_start_fails_at_once_where_nothing_answers_and_passes_any_http_answer(serve):
    with socket.socket() as probe:  # a port nobody listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    down = backend(f"http://127.0.0.1:{port}/v1", max_retries=8)
    with pytest.raises(TeacherError) as error:
        _start(down)
    assert str(error.value) == (
        f"connection refused to http://127.0.0.1:{port}/v1: nothing answers there (tried 3 "
        "times); start the server or check --base-url, then rerun"
    )
    # a server that answers, whatever it answers /models with, is up
    served = serve(answer=echo)
    _start(backend(served.url))
    _start(backend(served.url + "/no/such/prefix"))  # 404: reached all the same


def chain(*errors: BaseException) -> BaseException:
    """``errors[0]`` raised from ``errors[1]``, raised from ``errors[2]``, ..."""
    for outer, inner in itertools.pairwise(errors):
        outer.__cause__ = inner
    return errors[0]


def test_failures_are_named_by_their_causes():
    refused = aiohttp.ClientConnectorError(
        None, ConnectionRefusedError(errno.ECONNREFUSED, "Connect call failed")
    )
    assert failure_kind(refused) == "connection refused"
    # a client's own class around the socket's error: the cause decides
    assert failure_kind(chain(aiohttp.ClientOSError(), ConnectionRefusedError())) == (
        "connection refused"
    )
    assert failure_kind(chain(aiohttp.ClientOSError(), ConnectionResetError())) == (
        "connection reset"
    )
    assert failure_kind(aiohttp.ServerTimeoutError("slow")) == "timeout"
    assert failure_kind(TimeoutError()) == "timeout"
    # a connection never made: nothing answers there
    unknown = socket.gaierror(socket.EAI_NONAME, "Name or service not known")
    assert failure_kind(chain(aiohttp.ClientOSError(), unknown)) == "no connection"
    assert failure_kind(aiohttp.ClientConnectorError(None, OSError(errno.EHOSTUNREACH, "no"))) == (
        "no connection"
    )
    assert failure_kind(aiohttp.ConnectionTimeoutError("connect")) == "no connection"
    # a connection made, then broken off before the whole answer came: the server answered
    assert failure_kind(aiohttp.ServerDisconnectedError()) == "connection lost"
    assert failure_kind(aiohttp.ClientPayloadError("Response payload is not completed")) == (
        "connection lost"
    )
    assert failure_kind(StatusError(503, "down")) == "http 503"


def test_error_answers_give_the_server_s_reason():
    assert error_message(b'{"error": {"message": "no such model", "code": 404}}') == (
        "no such model"
    )
    assert error_message(b'{"message": "slow down"}') == "slow down"
    assert error_message(b'{"detail": [{"loc": ["body"]}]}') == '[{"loc":["body"]}]'
    assert error_message(b"<html>Bad Gateway</html>\n") == "<html>Bad Gateway</html>"
    assert error_message(b"") == "(no body)"
    assert [seconds(v) for v in (None, "2", "0.5", "-1", "Wed, 21 Oct 2015")] == [
        None,
        2.0,
        0.5,
        0.0,
        None,
    ]


class Answered:
    """What ``session.post`` gives back, with a set status, headers and body."""

    def __init__(self, status: int, body: bytes, headers: dict[str, str] | None = None):
        self.status, self.body, self.headers = status, body, headers or {}

    async def read(self) -> bytes:
        return self.body

    async def __aenter__(self):
        return self

    async def __aexit__(self, *exc) -> bool:
        return False


def answering(*answers: Answered, **changes) -> OpenAIBackend:
    """A backend whose session answers ``answers`` in turn, without a network."""
    b = backend("http://127.0.0.1:9/v1", max_retries=len(answers) - 1, **changes)
    queue = list(answers)

    class Session:
        def post(self, url, **kwargs):
            return queue.pop(0)

        async def close(self):
            pass

    b._session = Session()
    return b


def test_a_body_that_is_not_json_is_retried_then_reported(monkeypatch):
    async def sleep(seconds):
        pass

    monkeypatch.setattr(asyncio, "sleep", sleep)
    completion = {"choices": [{"message": {"role": "assistant", "content": "hi"}}]}
    b = answering(Answered(200, b"<html>ok</html>"), Answered(200, json.dumps(completion).encode()))
    [answer] = ask_all(b, ["x"])  # cut off on the way, say: the next attempt gets through
    assert not isinstance(answer, Exception) and answer.message["content"] == "hi"
    assert b.stats.failures == {"not JSON": 1} and b.stats.retries == 1
    b = answering(Answered(200, b"<html>ok</html>"), Answered(200, b"<html>still</html>"))
    [error] = ask_all(b, ["x"])
    assert isinstance(error, TeacherError)
    assert "answered HTTP 200 with a body that is not JSON (no answer after 2 attempts)" in str(
        error
    )
    # a JSON body that is no chat completion says what it lacks
    [error] = ask_all(answering(Answered(200, b'{"choices": []}')), ["x"])
    assert "the endpoint's answer is not a chat completion (no choices)" in str(error)
    b = answering(Answered(200, b'{"id": "x"}'))
    [error] = ask_all(b, ["x"])
    assert "not a chat completion (no 'choices' field)" in str(error)
    assert b.stats.failures == {"not a chat completion": 1}  # said among failed attempts


@pytest.mark.parametrize("field", ["reasoning_content", "reasoning"])
def test_reasoning_is_read_under_either_name_servers_give_it(field):
    message = {"role": "assistant", "content": "hi", field: "think first"}
    body = {"choices": [{"message": message}]}
    [answer] = ask_all(answering(Answered(200, json.dumps(body).encode())), ["x"])
    assert answer.message["reasoning_content"] == "think first"


def test_answers_in_the_forms_servers_give_them_are_read():
    # content as a list of parts (Mistral's reasoning models), thinking parts as reasoning
    parts = [
        {"type": "thinking", "thinking": [{"type": "text", "text": "think "}]},
        {"type": "text", "text": "Hello, "},
        {"type": "text", "text": "world."},
    ]
    body = {
        "choices": [{"message": {"role": "assistant", "content": parts}}],
        "usage": {"prompt_tokens": 12.0, "completion_tokens": 3.0},  # whole numbers as floats
    }
    [answer] = ask_all(answering(Answered(200, json.dumps(body).encode())), ["x"])
    assert answer.message["content"] == "Hello, world."
    assert answer.message["reasoning_content"] == "think "
    assert (answer.usage.prompt_tokens, answer.usage.completion_tokens) == (12, 3)
    # a lone surrogate's escape (half an emoji cut off): orjson refuses the body; the reply is
    # still the model's, the half read as U+FFFD as a UTF-8 decoder reads it (a row holds it)
    lone = b'{"choices": [{"message": {"role": "assistant", "content": "hi \\ud83d"}}]}'
    [answer] = ask_all(answering(Answered(200, lone)), ["x"])
    assert answer.message["content"] == "hi \ufffd"
    image = {"choices": [{"message": {"content": [{"type": "image_url", "image_url": {}}]}}]}
    [error] = ask_all(answering(Answered(200, json.dumps(image).encode())), ["x"])
    assert "a content part of type 'image_url'" in str(error)


@pytest.mark.parametrize(
    ("choice", "usage", "what"),
    [
        ({"message": None}, None, "a part is not an object"),
        ({"message": "hello"}, None, "a part is not an object"),
        ({"message": {"tool_calls": ["oops"]}}, None, "a part is not an object"),
        ({"message": {"content": "hi"}, "finish_reason": 3}, None, "finish_reason"),
        ({"message": {"content": "hi"}}, "n/a", "usage is not an object"),
        ({"message": {"content": "hi"}}, {"prompt_tokens": "many"}, "not whole numbers"),
        ({"message": {"content": "hi"}}, {"prompt_tokens": 1e19}, "not whole numbers"),
    ],
)
def test_a_completion_of_the_wrong_shape_is_an_error_of_the_endpoint(choice, usage, what):
    body = {"choices": [choice], **({} if usage is None else {"usage": usage})}
    [error] = ask_all(answering(Answered(200, json.dumps(body).encode())), ["x"])
    assert isinstance(error, TeacherError)
    assert "the endpoint's answer is not a chat completion (" in str(error)
    assert what in str(error)


def test_retry_after_is_honoured_and_503_s_reason_is_reported(monkeypatch):
    waits = []

    async def sleep(seconds):
        waits.append(seconds)

    monkeypatch.setattr(asyncio, "sleep", sleep)
    down = b'{"error": {"message": "overloaded"}}'
    b = answering(
        Answered(503, down, {"Retry-After": "7"}),
        Answered(503, down),
        backoff=Backoff(0.001, 60),
    )
    [error] = ask_all(b, ["x"])
    assert isinstance(error, TeacherError)
    assert "HTTP 503 from http://127.0.0.1:9/v1: overloaded (no answer after 2 attempts)" in str(
        error
    )
    assert waits == [7.0] and b.stats.failures == {"http 503": 2}


def test_a_retry_after_given_as_a_date_is_waited_for(monkeypatch):
    # RFC 9110 lets Retry-After be an HTTP date; it was read as no wait at all, so a gateway
    # that sends dates had every retry spent within a second
    at = email.utils.formatdate(1_000_000_000, usegmt=True)
    assert retry_wait({"Retry-After": at}, now=1_000_000_000 - 12.5) == 12.5
    assert retry_wait({"Retry-After": at}, now=1_000_000_000 + 60) == 0.0  # gone by: at once
    assert retry_wait({"Retry-After": at.replace("GMT", "-0000")}, now=999_999_999) == 1.0
    for unreadable in ("Wed, 21 Oct", "soon", ""):
        assert retry_wait({"Retry-After": unreadable}) is None
    waits = []

    async def sleep(seconds):
        waits.append(seconds)

    monkeypatch.setattr(asyncio, "sleep", sleep)
    down = b'{"error": {"message": "slow down"}}'
    ahead = email.utils.formatdate(time.time() + 20, usegmt=True)
    b = answering(
        Answered(429, down, {"Retry-After": ahead}), Answered(429, down), backoff=Backoff(0.001, 60)
    )
    ask_all(b, ["x"])
    assert 18 < waits[0] <= 20


def test_gateways_answers_an_error_in_a_200_streams_and_retry_after_ms(monkeypatch):
    # a 200 whose body is an error lost the server's words and was not retried; a server that
    # streams anyway was retried to the end as "not JSON"; retry-after-ms was not read
    waits = []

    async def sleep(seconds):
        waits.append(seconds)

    monkeypatch.setattr(asyncio, "sleep", sleep)
    completion = {"choices": [{"message": {"role": "assistant", "content": "hi"}}]}
    upstream = b'{"error": {"message": "Upstream provider overloaded", "code": 502}}'
    b = answering(
        Answered(200, upstream),
        Answered(429, b"{}", {"retry-after-ms": "3000", "Retry-After": "9"}),
        Answered(200, json.dumps(completion).encode()),
        backoff=Backoff(0.001, 60),
    )
    [answer] = ask_all(b, ["x"])
    assert not isinstance(answer, Exception) and answer.message["content"] == "hi"
    assert b.stats.failures == {"http 502": 1, "http 429": 1} and waits[1] == 3.0
    [error] = ask_all(answering(Answered(200, upstream)), ["x"])
    assert "HTTP 502 from http://127.0.0.1:9/v1: Upstream provider overloaded" in str(error)
    refused = b'{"error": {"message": "bad model", "code": 404}}'
    [error] = ask_all(answering(Answered(200, refused), Answered(200, refused)), ["x"])
    assert "the endpoint refused the request: HTTP 404: bad model" in str(error)
    for streamed, headers in [
        (b'data: {"choices": []}\n\ndata: [DONE]\n\n', {}),
        (b": keep-alive\n\nevent: chunk\n", {}),
        (b"chunk", {"Content-Type": "Text/Event-Stream; charset=utf-8"}),
    ]:
        b = answering(Answered(200, streamed, headers), Answered(200, streamed, headers))
        [error] = ask_all(b, ["x"])
        assert "answered with server-sent events (a streamed answer)" in str(error)
        assert b.stats.requests == 1  # the same every time: not retried
        assert b.stats.failures == {"streamed answer": 1}  # said among failed attempts
    # OpenAI's codes are words, a gateway's may be a status in a string
    b = answering(
        Answered(200, b'{"error": {"message": "busy", "code": "429"}}'), Answered(200, b"{}")
    )
    ask_all(b, ["x"])
    assert b.stats.failures["http 429"] == 1
    overflow = {
        "message": "This model's maximum context length is 8192 tokens. However, your "
        "messages resulted in 9000 tokens.",
        "code": "context_length_exceeded",
    }
    [error] = ask_all(answering(Answered(200, json.dumps({"error": overflow}).encode())), ["x"])
    assert isinstance(error, ContextOverflow)
    worded = {"message": "Too long.", "code": "context_length_exceeded"}  # the code alone says it
    [error] = ask_all(answering(Answered(200, json.dumps({"error": worded}).encode())), ["x"])
    assert isinstance(error, ContextOverflow)
    odd = '{"error": {"message": "odd", "code": "\u00b2"}}'.encode()  # a digit int() refuses
    b = answering(Answered(200, odd), Answered(200, odd))
    [error] = ask_all(b, ["x"])
    assert isinstance(error, TeacherError) and b.stats.failures == {"http 500": 2}


def test_a_refusal_is_the_models_text():
    # it was thrown away: the row's answer read "" and the reason never said why
    body = {"choices": [{"message": {"role": "assistant", "content": None, "refusal": "No."}}]}
    [answer] = ask_all(answering(Answered(200, json.dumps(body).encode())), ["x"])
    assert answer.message["content"] == "No."


def test_a_call_in_openai_s_older_shape_is_a_call():
    # read as no call, it was a final answer of no text: BFCL's irrelevance verified it as
    # the model's abstention
    legacy = {"name": "f", "arguments": '{"a": 1}'}
    message = {"role": "assistant", "content": None, "function_call": legacy}
    body = {"choices": [{"message": message, "finish_reason": "function_call"}]}
    [answer] = ask_all(answering(Answered(200, json.dumps(body).encode())), ["x"])
    assert answer.message["tool_calls"] == [{"id": "", "type": "function", "function": legacy}]
    assert answer.finish_reason == "function_call"


@pytest.mark.parametrize(
    ("finish", "message"),
    [
        ("tool_calls", {"content": None, "tool_calls": []}),
        ("tool_calls", {"content": "Let me look."}),
        ("function_call", {"content": None}),
    ],
)
def test_a_reply_that_says_it_called_tools_but_holds_none_keeps_its_finish_reason(finish, message):
    # the rollout reads it as the model's format failure (``read_step``), not as a final
    # answer of no text (or of its text)
    body = {"choices": [{"message": {"role": "assistant", **message}, "finish_reason": finish}]}
    [answer] = ask_all(answering(Answered(200, json.dumps(body).encode())), ["x"])
    assert answer.finish_reason == finish and not answer.message.get("tool_calls")


def test_the_environment_s_proxy_is_used_unless_bypassed(monkeypatch):
    for name in ("http_proxy", "https_proxy", "no_proxy", "all_proxy"):
        monkeypatch.delenv(name, raising=False)
        monkeypatch.delenv(name.upper(), raising=False)
    assert env_proxy("https://api.example.com/v1/chat/completions") is None
    monkeypatch.setenv("HTTPS_PROXY", "http://proxy.local:3128")
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")
    assert env_proxy("https://api.example.com/v1/chat/completions") == "http://proxy.local:3128"
    assert env_proxy("http://api.example.com/v1/chat/completions") is None  # no HTTP_PROXY
    assert env_proxy("https://user:pw@localhost:8000/v1/chat/completions") is None
    assert env_proxy("https://127.0.0.1:8000/v1/chat/completions") is None


def test_a_conversation_past_the_context_window_ends_its_rollout_not_the_job(serve):
    def too_long(body):
        raise HsaError("This model's maximum context length is 32768 tokens (max_model_len)")

    served = serve(answer=too_long)
    b = backend(served.url)
    [error] = ask_all(b, ["x"])
    # the rollout ends as truncated (a rerun would send the same): not a failed request
    assert isinstance(error, ContextOverflow) and "outgrew the model's context" in str(error)
    assert b.stats.failures["http 400"] == 1 and b.stats.retries == 0
    # a setting that does not fit is the job's error, however the server words it
    for said, hint in (
        (
            "'max_tokens' or 'max_completion_tokens' is too large: 4096. This model's maximum "
            "context length is 2048 tokens",
            "lower --max-tokens",
        ),
        (
            "'max_tokens' or 'max_completion_tokens' is too large: 3000. This model's maximum "
            "context length is 4096 tokens and your request has 1200 input tokens (3000 > "
            "4096 - 1200).",
            "lower --max-tokens",
        ),
        ("Input validation error: `best_of` must be <= 2. Given: 4", "request settings"),
    ):

        def refuse(body, said=said):
            raise HsaError(said)

        [error] = ask_all(backend(serve(answer=refuse).url), ["x"])
        assert type(error) is TeacherError and hint in str(error)


def test_a_conversation_whose_input_leaves_no_room_for_the_reply_ends_its_rollout(serve):
    # vLLM refuses input plus max_tokens past the context in the words of max_tokens, though
    # max_tokens fits: the conversation outgrew the window, as a rerun would find again
    def no_room(body):
        raise HsaError(
            "'max_tokens' or 'max_completion_tokens' is too large: 1024. This model's maximum "
            "context length is 4096 tokens and your request has 3100 input tokens (1024 > "
            "4096 - 3100)."
        )

    b = backend(serve(answer=no_room).url)
    [error] = ask_all(b, ["x"])
    assert isinstance(error, ContextOverflow) and "outgrew the model's context" in str(error)
    assert b.stats.retries == 0


def test_a_vllm_server_without_tool_parsing_is_named_with_the_flags_it_needs(serve):
    def no_parser(body):
        raise HsaError(
            '"auto" tool choice requires --enable-auto-tool-choice and --tool-call-parser to be set'
        )

    b = backend(serve(answer=no_parser).url)
    [error] = ask_all(b, ["x"])
    assert type(error) is TeacherError and "start vLLM with --enable-auto-tool-choice" in str(error)
    assert b.stats.retries == 0


def test_a_token_limit_field_the_model_does_not_take_is_named_with_the_one_it_takes(serve):
    # OpenAI's reasoning models refuse max_tokens: the advice was to lower it, which the model
    # refuses all the same
    def new_name_only(body):
        if "max_tokens" in body:
            raise HsaError(
                "Unsupported parameter: 'max_tokens' is not supported with this model. Use "
                "'max_completion_tokens' instead."
            )
        assert body["max_completion_tokens"] == 1024
        return echo(body)

    served = serve(answer=new_name_only)
    b = backend(served.url)
    [error] = ask_all(b, ["x"])
    assert type(error) is TeacherError and "lower --max-tokens" not in str(error)
    assert "send the token limit as max_completion_tokens instead (--max-tokens-field" in str(error)
    assert b.stats.retries == 0
    [answer] = ask_all(backend(served.url, max_tokens_field="max_completion_tokens"), ["x"])
    assert answer.message["tool_calls"][0]["function"]["arguments"] == '{"said": "x"}'


def test_a_refused_key_is_found_at_the_start_and_counted_per_request(serve):
    served = serve(answer=echo, api_key="sk-SECRET-123")
    wrong = backend(served.url, api_key="sk-WRONG-456")

    async def start() -> None:
        try:
            await wrong.start()
        finally:
            await wrong.aclose()

    with pytest.raises(TeacherError, match="refuses the API key") as caught:
        asyncio.run(start())
    assert "sk-WRONG" not in str(caught.value)
    [error] = ask_all(wrong, ["x"])
    assert "check the API key" in str(error) and wrong.stats.failures["http 401"] == 1


def test_the_api_key_is_sent_and_never_shown(serve):
    served = serve(answer=echo, api_key="sk-SECRET-123")
    good = backend(served.url, api_key="sk-SECRET-123")
    assert "sk-SECRET-123" not in repr(good.config)
    [response] = ask_all(good, ["x"])
    assert not isinstance(response, Exception)
    wrong = backend(served.url, api_key="sk-WRONG-456")
    [error] = ask_all(wrong, ["x"])
    assert isinstance(error, TeacherError) and "HTTP 401" in str(error)
    assert "sk-WRONG-456" not in str(error)


@pytest.mark.parametrize("concurrency", [1, 5])
def test_concurrency_limit_is_respected(serve, concurrency):
    in_flight = 0
    peak = 0

    served = serve(answer=echo, faults=Faults(latency_ms=30))
    b = backend(served.url, concurrency=concurrency)
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


def test_metadata_is_sent_unless_turned_off(serve):
    seen = []

    def answer(body):
        seen.append(body.get("metadata"))
        return echo(body)

    served = serve(answer=answer)
    request = ChatRequest(
        "m", [{"role": "user", "content": "x"}], TOOLS, metadata={"hsa_variant": "v"}
    )
    for send in (True, False):
        b = backend(served.url, send_metadata=send)

        async def main(b=b):
            try:
                await b.chat(request)
            finally:
                await b.aclose()

        asyncio.run(main())
    assert seen == [{"hsa_variant": "v"}, None]


def test_a_base_url_that_is_not_http_is_refused():
    with pytest.raises(TeacherError, match="not an http"):
        OpenAIConfig(base_url="127.0.0.1:8000/v1", model="m")


def test_https_endpoints_verify_certificates(monkeypatch, tmp_path):
    import ssl

    from hsa.teachers.backends.openai import tls

    monkeypatch.delenv("SSL_CERT_FILE", raising=False)
    monkeypatch.delenv("SSL_CERT_DIR", raising=False)
    bundled = tls()
    assert bundled.verify_mode == ssl.CERT_REQUIRED and bundled.check_hostname
    assert bundled.cert_store_stats()["x509_ca"] > 0  # certifi's bundle, or the system's
    empty = tmp_path / "none.pem"
    empty.write_text("")
    monkeypatch.setenv("SSL_CERT_FILE", str(empty))  # the environment's choice comes first
    assert tls().cert_store_stats()["x509_ca"] == 0

    async def main():
        b = backend("https://api.example.com/v1")
        session = b._open()
        assert session.connector._ssl.verify_mode == ssl.CERT_REQUIRED
        await b.aclose()

    asyncio.run(main())


@pytest.mark.parametrize(
    ("base_url", "url"),
    [
        ("http://127.0.0.1:8000/v1", "http://127.0.0.1:8000/v1/chat/completions"),
        ("http://127.0.0.1:8000/v1/", "http://127.0.0.1:8000/v1/chat/completions"),
        (
            "https://r.openai.azure.com/openai/deployments/d?api-version=2024-10-21",
            "https://r.openai.azure.com/openai/deployments/d/chat/completions"
            "?api-version=2024-10-21",
        ),
    ],
)
def test_requests_go_under_the_base_url_its_query_kept(base_url, url):
    assert backend(base_url)._url == url


def test_the_api_key_goes_in_the_header_asked_for():
    async def headers(**changes):
        b = backend("https://r.openai.azure.com/openai/v1", **changes)
        session = b._open()
        try:
            return {k: v for k, v in session.headers.items() if k.lower() != "accept"}
        finally:
            await b.aclose()

    key = "sk-test-not-a-secret"
    bearer = asyncio.run(headers())
    assert bearer == {"Authorization": f"Bearer {key}", "Content-Type": "application/json"}
    azure = asyncio.run(headers(api_key_header="api-key"))
    assert azure == {"api-key": key, "Content-Type": "application/json"}
    assert "api-key" not in asyncio.run(headers(api_key_header="api-key", api_key=None))
    with pytest.raises(TeacherError, match="not an HTTP header name"):
        OpenAIConfig(base_url="http://x/v1", model="m", api_key_header="api key")


def test_errors_name_the_endpoint_without_what_may_hold_a_secret():
    b = backend("http://127.0.0.1:9/v1?key=sk-in-the-query", max_retries=0)
    assert b._url == "http://127.0.0.1:9/v1/chat/completions?key=sk-in-the-query"
    [error] = ask_all(b, ["x"])
    assert isinstance(error, TeacherError) and "http://127.0.0.1:9/v1" in str(error)
    assert "sk-in-the-query" not in str(error)
    with pytest.raises(TeacherError, match="user name or password in the URL") as refused:
        backend("http://user:pw@127.0.0.1:9/v1")
    assert "pw" not in str(refused.value)


def test_a_key_is_hidden_from_messages_but_a_placeholder_is_not():
    text = "unknown variant 'd32f~text/python+tag/python-docs' (key sk-live-0123456789)"
    assert redact(text, "sk-live-0123456789") == (
        "unknown variant 'd32f~text/python+tag/python-docs' (key ***)"
    )
    assert redact(text, "python") == text and redact(text, "x") == text


def test_once_a_request_ran_out_of_retries_on_a_gone_server_the_next_give_up_at_once():
    with socket.socket() as probe:  # a port nobody listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    b = backend(f"http://127.0.0.1:{port}/v1", max_retries=2)

    async def one_by_one():
        errors = []
        try:
            for text in ("first", "second", "third"):
                request = ChatRequest("m", [{"role": "user", "content": text}])
                try:
                    await b.chat(request)
                except TeacherError as exc:
                    errors.append(str(exc))
        finally:
            await b.aclose()
        return errors

    first, second, third = asyncio.run(one_by_one())
    assert first.endswith("(no answer after 3 attempts)")
    for later in (second, third):
        assert later.endswith("(gave up: another request got no answer after 3 attempts)")
    assert b.stats.failures == {"connection refused": 5}  # 3, then 1 and 1


def test_an_answer_broken_off_mid_body_is_retried_by_every_request_to_its_own_end():
    # one request that ran out of retries on answers the server broke off made every later
    # request give up at its first such failure, as if nothing answered there any more
    completion = json.dumps({"choices": [{"message": {"role": "assistant", "content": "hi"}}]})
    cuts = {"always": 0, "once": 0}

    async def reply(reader, writer):
        head = await reader.readuntil(b"\r\n\r\n")
        length = re.search(rb"(?i)content-length: *([0-9]+)", head)
        body = await reader.readexactly(int(length[1]))
        said = "always" if b"always" in body else "once"
        if said == "always" or cuts["once"] == 0:
            cuts[said] += 1
            writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 5000\r\n\r\n" + b'{"id":')
        else:
            writer.write(
                b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                + f"Content-Length: {len(completion)}\r\n\r\n{completion}".encode()
            )
        await writer.drain()
        writer.close()

    async def main():
        server = await asyncio.start_server(reply, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        b = backend(f"http://127.0.0.1:{port}/v1", max_retries=2)
        outcomes = []
        try:
            for text in ("always", "once"):
                request = ChatRequest("m", [{"role": "user", "content": text}])
                try:
                    outcomes.append(await b.chat(request))
                except TeacherError as exc:
                    outcomes.append(exc)
        finally:
            await b.aclose()
            server.close()
        return b, outcomes

    b, (error, answer) = asyncio.run(main())
    assert not isinstance(answer, Exception) and answer.message["content"] == "hi"
    assert isinstance(error, TeacherError) and str(error).endswith("(no answer after 3 attempts)")
    assert "lost before the whole answer came" in str(error)
    assert answer.attempts == 2 and cuts == {"always": 3, "once": 1}
    assert b.stats.failures == {"connection lost": 4}


@pytest.mark.parametrize("finish", ["abort", "error"])
def test_a_reply_the_server_stopped_as_failed_is_a_failed_attempt_not_an_answer(
    monkeypatch, finish
):
    # vLLM ends a request it failed with finish_reason abort or error and the text so far,
    # which was written and cached as the model's answer
    async def sleep(seconds):
        pass

    monkeypatch.setattr(asyncio, "sleep", sleep)
    stopped = {"choices": [{"message": {"content": "The price of"}, "finish_reason": finish}]}
    whole = {"choices": [{"message": {"content": "The price is 3."}, "finish_reason": "stop"}]}
    b = answering(
        Answered(200, json.dumps(stopped).encode()), Answered(200, json.dumps(whole).encode())
    )
    [answer] = ask_all(b, ["x"])
    assert not isinstance(answer, Exception) and answer.message["content"] == "The price is 3."
    assert answer.attempts == 2 and b.stats.failures == {f"finish_reason {finish}": 1}
    b = answering(*[Answered(200, json.dumps(stopped).encode())] * 2)
    [error] = ask_all(b, ["x"])
    assert isinstance(error, TeacherError) and str(error) == (
        f"the endpoint http://127.0.0.1:9/v1 stopped the reply with finish_reason {finish!r}: "
        "it failed the request (no answer after 2 attempts)"
    )
    assert b.stats.succeeded == 0
