"""Chat requests and responses as value objects, and the stable hash that keys the cache."""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from hsa.config import bounded, refuse, same_as, setting
from hsa.errors import TeacherError
from hsa.harness.model import compact_json
from hsa.teachers.config import TeachConfig

#: message keys an OpenAI-compatible endpoint accepts; render adds ``is_error`` for hsa's own
#: round trip, which strict endpoints refuse, so it never goes on the wire
_WIRE_KEYS = ("role", "content", "tool_calls", "tool_call_id", "name", "reasoning_content")
#: how many encoded flat messages ``_message_json`` remembers before starting afresh
_MEMO_LIMIT = 4096
_message_memo: dict[tuple, str] = {}


#: compact JSON as the cache key and the wire body use it (UTF-8 kept, no spaces)
dumps = compact_json


def _message_json(message: Mapping[str, Any]) -> str:
    """``dumps`` of one wire message, remembered for messages of plain strings.

    Every request of a rollout repeats the conversation so far, and the system prompt and
    task are the same for many rollouts: JSON of the same messages over and over was the
    largest cost of a request in hsa. JSON of a list is its items' JSON joined by commas,
    so the pieces give the same bytes as encoding the whole list.
    """
    wire = {k: message[k] for k in _WIRE_KEYS if k in message}
    values = wire.values()
    if not all(type(v) is str or v is None for v in values):
        return dumps(wire)
    memo_key = tuple(wire.items())
    text = _message_memo.get(memo_key)
    if text is None:
        if len(_message_memo) >= _MEMO_LIMIT:
            _message_memo.clear()
        text = _message_memo[memo_key] = dumps(wire)
    return text


@dataclass(frozen=True, slots=True)
class Sampling:
    """Sampling parameters sent with every request of a rollout.

    ``seed`` is set per rollout, so two samples of one task under one harness are different
    requests (and different cache entries) even at the same temperature.
    """

    temperature: float = same_as(TeachConfig, "temperature")
    top_p: float = same_as(TeachConfig, "top_p")
    max_tokens: int | None = same_as(TeachConfig, "max_tokens")
    seed: int | None = setting(None, help="Sampling seed (unset: the server's choice).")
    chat_template_kwargs: Mapping[str, Any] = same_as(TeachConfig, "chat_template_kwargs")

    def __post_init__(self) -> None:
        problems = bounded(self, "temperature", low=0)
        problems += bounded(self, "top_p", low=0, high=1, low_open=True)
        problems += bounded(self, "max_tokens", low=1)
        refuse(problems, TeacherError)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"temperature": self.temperature, "top_p": self.top_p}
        if self.max_tokens is not None:
            out["max_tokens"] = self.max_tokens
        if self.seed is not None:
            out["seed"] = self.seed
        if self.chat_template_kwargs:  # (absent when empty: the keys of other requests stay)
            out["chat_template_kwargs"] = dict(self.chat_template_kwargs)
        return out


@dataclass(frozen=True, slots=True)
class ChatRequest:
    """One chat completion request: what is sent to a backend.

    ``metadata`` (string values, e.g. the variant id) travels in the request's ``metadata``
    field; it helps the oracle server and never changes what a real model answers, so it is
    not part of ``key``.
    """

    model: str
    messages: Sequence[Mapping[str, Any]]
    tools: Sequence[Mapping[str, Any]] = ()
    sampling: Sampling = field(default_factory=Sampling)
    metadata: Mapping[str, str] = field(default_factory=dict)
    #: ``dumps(list(tools))`` when the caller has it already (a rollout sends the same tools
    #: with every request); must be exactly that text, since the key and the body use it
    tools_json: str | None = field(default=None, repr=False, compare=False)
    _messages_json: str | None = field(default=None, init=False, repr=False, compare=False)

    def wire_messages(self) -> list[dict[str, Any]]:
        """The messages as an OpenAI-compatible endpoint accepts them."""
        return [{k: m[k] for k in _WIRE_KEYS if k in m} for m in self.messages]

    def messages_json(self) -> str:
        """``dumps(self.wire_messages())``, computed once per request."""
        text = self._messages_json
        if text is None:
            text = "[" + ",".join(_message_json(m) for m in self.messages) + "]"
            object.__setattr__(self, "_messages_json", text)
        return text

    def encoded_tools(self) -> str:
        """``dumps(list(self.tools))``."""
        if self.tools_json is not None:
            return self.tools_json
        return dumps(list(self.tools)) if self.tools else "[]"

    def key(self) -> str:
        """A stable hash of model, messages, tools and sampling parameters.

        Key order is kept rather than sorted: the order of schema properties and of tools is
        part of what the model sees, so two requests that differ only there are different.
        The text hashed is ``dumps`` of ``{"model", "messages", "tools", "sampling"}``, put
        together from the JSON of its parts (the same bytes, without encoding the parts again).
        """
        text = (
            f'{{"model":{dumps(self.model)},"messages":{self.messages_json()},'
            f'"tools":{self.encoded_tools()},"sampling":{dumps(self.sampling.to_dict())}}}'
        )
        return hashlib.sha256(text.encode("utf-8")).hexdigest()


@dataclass(frozen=True, slots=True)
class Usage:
    prompt_tokens: int = 0
    completion_tokens: int = 0

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            self.prompt_tokens + other.prompt_tokens,
            self.completion_tokens + other.completion_tokens,
        )

    def to_dict(self) -> dict[str, int]:
        return {"prompt_tokens": self.prompt_tokens, "completion_tokens": self.completion_tokens}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any] | None) -> Usage:
        """From the API's ``usage`` object (absent: zeros); a count that is not a whole
        number is refused (``ValueError``)."""
        data = data or {}
        if not isinstance(data, Mapping):
            raise ValueError(f"usage is not an object: {data!r}")
        counts = [data.get(k) or 0 for k in ("prompt_tokens", "completion_tokens")]
        # a whole number written as a float (12.0) is one
        counts = [int(c) if isinstance(c, float) and c.is_integer() else c for c in counts]
        if not all(
            isinstance(c, int) and not isinstance(c, bool) and 0 <= c < 2**63 for c in counts
        ):
            raise ValueError(f"usage counts are not whole numbers of tokens: {counts}")
        return cls(*counts)


@dataclass(frozen=True, slots=True)
class ChatResponse:
    """A backend's answer: one OpenAI-format assistant message, usage and latency.

    ``message`` has ``role``, ``content`` and, when the model called tools through the API,
    ``tool_calls`` with JSON-string arguments exactly as received (they may be malformed;
    the rollout finds out). ``cached`` marks an answer served from the request cache, with
    the latency of the original request.
    """

    message: Mapping[str, Any]
    finish_reason: str | None = None
    usage: Usage = field(default_factory=Usage)
    latency_s: float = 0.0
    attempts: int = 1
    cached: bool = False

    def to_dict(self) -> dict[str, Any]:
        return {
            "message": dict(self.message),
            "finish_reason": self.finish_reason,
            "usage": self.usage.to_dict(),
            "latency_s": self.latency_s,
            "attempts": self.attempts,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], *, cached: bool = False) -> ChatResponse:
        return cls(
            message=dict(data["message"]),
            finish_reason=data.get("finish_reason"),
            usage=Usage.from_dict(data.get("usage")),
            latency_s=float(data.get("latency_s") or 0.0),
            attempts=int(data.get("attempts") or 1),
            cached=cached,
        )


def assistant_message(content: str | None, tool_calls: Sequence[Mapping[str, Any]] = ()) -> dict:
    """An OpenAI assistant message; ``tool_calls`` only when there are calls."""
    message: dict[str, Any] = {"role": "assistant", "content": content}
    if tool_calls:
        message["tool_calls"] = [dict(c) for c in tool_calls]
    return message
