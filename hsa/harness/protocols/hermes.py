"""The Hermes/Qwen call format: one ``<tool_call>`` block holding a JSON object per call.

A message is ``text + "\\n" + block + "\\n" + block ...``, each block
``<tool_call>\\n{"name": ..., "arguments": {...}}\\n</tool_call>``. The format has its own tag, so
``call_tag`` does not change it. ``<``, ``>`` and ``&`` are escaped inside the JSON
(``\\u003c``...), so a tag inside an argument value cannot end a block early; a block read
back may hold any ``<`` but a tag, as models write them unescaped.

Parsing reads blocks back from the end of the message (whitespace between and after blocks is
allowed); everything before the first well-formed block is the assistant's text. A message
whose last block is not a JSON call object (with its ``"arguments"`` object) is not a call
message.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
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


# Anchored at the end of the (right-stripped) text. The body may hold any text but a tag, as
# vLLM's Hermes parser reads it (``<tool_call>(.*?)</tool_call>``, across lines): a model's
# JSON is not escaped as ours is, and ``{"q": "price < 50"}`` is a call there.
_BLOCK = re.compile(r"<tool_call>\s*((?:(?!</?tool_call>).)*?)\s*</tool_call>\Z", re.DOTALL)


def _format(calls: Sequence[Call], tag: bool) -> str:
    return "\n".join(
        f"<tool_call>\n{json_safe({'name': name, 'arguments': dict(args)})}\n</tool_call>"
        for name, args in calls
    )


def _call(body: str) -> Call | None:
    try:
        obj = json.loads(body)
    except (ValueError, RecursionError):  # an integer past Python's digit limit included
        return None
    # "arguments" is required, as the chat templates write it and vLLM's parser reads it: a
    # block without it ("parameters", say) would be a call with its arguments dropped
    if not isinstance(obj, dict) or not isinstance(obj.get("name"), str):
        return None
    args = obj.get("arguments")
    return (obj["name"], args) if isinstance(args, dict) else None


def _parse(text: str, tag: bool) -> tuple[str | None, list[Call]] | None:
    calls: list[Call] = []
    rest = text
    while (match := _BLOCK.search(rest.rstrip())) is not None:
        call = _call(match.group(1))
        if call is None:
            if not calls:
                return None
            break  # a malformed block before well-formed ones is the assistant's text
        calls.append(call)
        rest = rest[: match.start()]
    return split_prefix(rest, calls[::-1])


register_call_format(
    CallFormat(
        name="hermes",
        format_calls=_format,
        parse_calls=_parse,
        instructions=lambda tag: (
            "To call a tool, end your reply with one <tool_call></tool_call> block per call, "
            'each holding a JSON object {"name": <tool name>, "arguments": <arguments object>}.'
        ),
        allows_prefix=lambda tag: True,
    )
)
