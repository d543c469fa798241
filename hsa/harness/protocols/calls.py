"""Call formats: Hermes/Qwen ``<tool_call>`` JSON, and the BFCL v4 return formats."""

from __future__ import annotations

import json
import re
from collections.abc import Sequence

from hsa.harness.protocols import Call, CallFormat, register_call_format, split_prefix


def _json_safe(value: object) -> str:
    # Escaping <, > and & keeps tags out of the JSON so a tag in an argument value cannot end
    # the call block early; json.loads reads the escapes back to the same characters.
    text = json.dumps(value, ensure_ascii=False)
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


_HERMES_BLOCK = re.compile(r"<tool_call>\n([^<]*)\n</tool_call>\Z")


def _hermes_format(calls: Sequence[Call], tag: bool) -> str:
    return "\n".join(
        f"<tool_call>\n{_json_safe({'name': name, 'arguments': dict(args)})}\n</tool_call>"
        for name, args in calls
    )


def _hermes_parse(text: str, tag: bool) -> tuple[str | None, list[Call]] | None:
    calls: list[Call] = []
    rest = text
    while (match := _HERMES_BLOCK.search(rest)) is not None:
        try:
            obj = json.loads(match.group(1))
        except json.JSONDecodeError:
            return None
        if not isinstance(obj, dict) or not isinstance(obj.get("name"), str):
            return None
        args = obj.get("arguments", {})
        if not isinstance(args, dict):
            return None
        calls.append((obj["name"], args))
        rest = rest[: match.start()]
        if rest.endswith("\n") and _HERMES_BLOCK.search(rest[:-1]):
            rest = rest[:-1]
            continue
        break
    return split_prefix(rest, calls)


register_call_format(
    CallFormat(
        name="hermes",
        format_calls=_hermes_format,
        parse_calls=_hermes_parse,
        instructions=lambda tag: (
            "To call a tool, write one <tool_call></tool_call> block per call, each holding a "
            'JSON object {"name": <tool name>, "arguments": <arguments object>}.'
        ),
        allows_prefix=lambda tag: True,
    )
)
