"""The Hermes/Qwen call format: one ``<tool_call>`` block holding a JSON object per call.

A message is ``text + "\\n" + block + "\\n" + block ...``, each block
``<tool_call>\\n{"name": ..., "arguments": {...}}\\n</tool_call>``. The format has its own tag, so
``call_tag`` does not change it. ``<``, ``>`` and ``&`` are escaped inside the JSON
(``\\u003c``...), so a tag inside an argument value cannot end a block early; a block read
back may hold any ``<`` but a tag, as models write them unescaped.

Parsing reads the run of blocks at the end of the message (whitespace between and after
blocks is allowed); everything before it is the assistant's text, a block followed by other
text included: render writes calls only at the end, so text quoting a block reads back as
written (a model's reply holding such a block is a format failure in a rollout,
``hsa.teachers.rollout.read_step``, not a call left unrun). A message
whose last block is not a JSON call object (with its ``"arguments"`` object) is not a call
message, nor is one that gives a key of that object or of its arguments twice
(``{"amount": 5, "amount": 500}``): which was meant cannot be told, and the Python and XML
formats refuse an argument given twice too (``read_json``).

A model's reply that no server parsed (the ``vllm`` and ``transformers`` backends' under the
``api`` protocol, ``hsa train rl``'s policy's) is read with ``parse_reply``, a little more
leniently: its last block may lack the closing tag (generation stopped right after the JSON),
as vLLM's hermes parser reads it too, and ``"arguments"`` may be the object written as a JSON
string, the call the model plainly meant. That is not how ``vllm serve --tool-call-parser
hermes`` reads the same reply (vLLM 0.34's ``tool_parsers/hermes_tool_parser.py``), which

- does not decode string arguments: its call carries them on as a JSON string
  (``json.dumps`` of the string), which the ``openai`` backend reads as a format failure
  ("tool-call arguments must be a JSON object"), as a client reading arguments as an object
  would fail on it;
- reads every block wherever it is, keeping the text before the first as the reply's text
  and dropping what follows: a block followed by text is a call there, and a format failure
  here (the text after it would be lost without a word);
- keeps the last value of a key given twice: a call there, none here.

So one reply can be a call in process and a format failure against the server, or the other
way round; docs/vllm.md says so to users.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from hsa.errors import ProtocolError
from hsa.harness.protocols import Call, CallFormat, register_call_format, split_prefix
from hsa.harness.protocols.literals import LONG_INTEGER


def json_safe(value: object, **dumps_options: Any) -> str:
    """JSON text of ``value`` with ``<``, ``>`` and ``&`` escaped, so no tag can appear in it."""
    try:
        text = json.dumps(value, ensure_ascii=False, **dumps_options)
    except ValueError:
        raise ProtocolError(f"arguments hold {LONG_INTEGER}; write it as a string") from None
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


@dataclass(frozen=True, slots=True)
class RepeatedKeys:
    """The objects of one ``read_json`` value that give a key twice, each with the first key it
    repeats. It holds the objects (a value that a later one of its key replaced included), so
    while it is kept no other object can take the ``id`` of one of them."""

    _found: dict[int, tuple[dict[str, Any], str]] = field(default_factory=dict)

    def of(self, obj: object) -> str | None:
        """The first key that ``obj`` gives twice; None when it gives none."""
        found = self._found.get(id(obj))
        return found[1] if found is not None and found[0] is obj else None

    def any_of(self, *objs: object) -> bool:
        """Whether one of ``objs`` gives a key twice."""
        return any(self.of(obj) is not None for obj in objs)


def read_json(text: str, **loads_options: Any) -> tuple[Any, RepeatedKeys]:
    """``json.loads(text, **loads_options)``, and the objects in it that give a key twice (each
    keeps the key's last value, as ``json.loads`` does).

    A call format refuses a call whose own object or arguments object repeats a key: an
    argument given twice, as Python refuses ``f(a=1, a=2)`` and the XML formats a repeated
    ``<param>``. A key repeated inside an argument's value keeps its last value, as Python's
    ``{"k": 1, "k": 2}`` does. Raises what ``json.loads`` raises.
    """
    repeated = RepeatedKeys()

    def hook(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        obj = dict(pairs)
        if len(obj) < len(pairs):
            seen: set[str] = set()
            for key, _ in pairs:
                if key in seen:
                    repeated._found[id(obj)] = (obj, key)
                    break
                seen.add(key)
        return obj

    return json.loads(text, object_pairs_hook=hook, **loads_options), repeated


_OPEN, _CLOSE = "<tool_call>", "</tool_call>"


def _format(calls: Sequence[Call], tag: bool) -> str:
    return "\n".join(
        f"<tool_call>\n{json_safe({'name': name, 'arguments': dict(args)})}\n</tool_call>"
        for name, args in calls
    )


def _call(body: str, lenient: bool = False) -> Call | None:
    try:
        obj, repeated = read_json(body)
    except (ValueError, RecursionError):  # an integer past Python's digit limit included
        return None
    # "arguments" is required, as the chat templates write it and vLLM's parser reads it: a
    # block without it ("parameters", say) would be a call with its arguments dropped
    if not isinstance(obj, dict) or not isinstance(obj.get("name"), str):
        return None
    args = obj.get("arguments")
    if lenient and isinstance(args, str):
        # a model's arguments as a JSON string: the object it meant (vLLM's server parser
        # passes the string on undecoded, a format failure through the openai backend)
        try:
            args, inner = read_json(args)
        except (ValueError, RecursionError):
            return None
        if inner.any_of(args):
            return None
    if not isinstance(args, dict) or repeated.any_of(obj, args):
        return None
    return obj["name"], args


def _end_of_text(text: str, end: int) -> int:
    """Where ``text[:end].rstrip()`` ends, found without copying the text."""
    while end and text[end - 1].isspace():
        end -= 1
    return end


def _blocks(text: str, lenient: bool) -> tuple[str | None, list[Call]] | None:
    """The run of blocks at the end of ``text``, read from the last one back in one pass.

    A block's body may hold any text but a tag, as vLLM's Hermes parser reads it
    (``<tool_call>(.*?)</tool_call>``, across lines): a model's JSON is not escaped as ours is,
    and ``{"q": "price < 50"}`` is a call there. So a block ends at the last closing tag and
    starts at the last opening tag before it. ``lenient``: the last block may also lack its
    closing tag (vLLM's ``<tool_call>(.*)``), and ``"arguments"`` may be a JSON string (which
    vLLM does not decode).
    """
    calls: list[Call] = []
    first = end = _end_of_text(text, len(text))
    if lenient and not text.endswith(_CLOSE, 0, end):
        start = text.rfind(_OPEN, 0, end)
        if start != -1 and text.find(_CLOSE, start, end) == -1:
            call = _call(text[start + len(_OPEN) : end].strip(), lenient)
            if call is None:
                return None
            calls.append(call)
            first, end = start, _end_of_text(text, start)
    while text.endswith(_CLOSE, 0, end):
        close = end - len(_CLOSE)
        start = text.rfind(_OPEN, 0, close)
        if start == -1 or text.find(_CLOSE, start, close) != -1:
            break
        call = _call(text[start + len(_OPEN) : close].strip(), lenient)
        if call is None:
            break  # a malformed block before well-formed ones is the assistant's text
        calls.append(call)
        first, end = start, _end_of_text(text, start)
    return split_prefix(text[:first], calls[::-1])


def _parse(text: str, tag: bool) -> tuple[str | None, list[Call]] | None:
    return _blocks(text, lenient=False)


def parse_reply(text: str, tag: bool) -> tuple[str | None, list[Call]] | None:
    """``parse_calls`` for a model's reply that no server parsed: its last block may lack the
    closing tag (generation stopped right after the JSON), as vLLM's Hermes parser reads it,
    and ``"arguments"`` may be the arguments object written as a JSON string, which vLLM's
    parser does not decode (the module's docstring says where the two readings differ)."""
    return _blocks(text, lenient=True)


register_call_format(
    CallFormat(
        name="hermes",
        format_calls=_format,
        parse_calls=_parse,
        parse_reply=parse_reply,
        instructions=lambda tag: (
            "To call a tool, end your reply with one <tool_call></tool_call> block per call, "
            'each holding a JSON object {"name": <tool name>, "arguments": <arguments object>}.'
        ),
        allows_prefix=lambda tag: True,
    )
)
