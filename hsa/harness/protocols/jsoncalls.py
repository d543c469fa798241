"""BFCL's ``json`` return format: a fenced JSON list of ``{"function", "parameters"}`` objects.

Written exactly as BFCL's prompt shows it::

    ```json
    [{"function":"func_name1","parameters":{"param1":"value1"}},{"function":"func_name2",...}]
    ```

``<``, ``>`` and ``&`` are escaped inside the JSON (``\\u003c``...), so argument values holding
tags cannot end a ``<TOOLCALL>`` block. Parsing accepts the list with or without the fence, and
a single object for a single call. An item or parameters object that gives a key twice is no
call (``hermes.read_json``).
"""

from __future__ import annotations

from collections.abc import Sequence

from hsa.harness.protocols import Call
from hsa.harness.protocols.bfcl import call_instructions, register_bfcl_format
from hsa.harness.protocols.hermes import json_safe, read_json
from hsa.harness.protocols.literals import strip_fence


def write_body(calls: Sequence[Call], tagged: bool) -> str:
    items = [{"function": name, "parameters": dict(args)} for name, args in calls]
    return f"```json\n{json_safe(items, separators=(',', ':'))}\n```"


def read_body(text: str) -> list[Call] | None:
    source = strip_fence(text)
    if not source.startswith(("[", "{")):
        return None
    try:
        data, repeated = read_json(source)
    except (ValueError, RecursionError):  # an integer past Python's digit limit included
        return None
    items = [data] if isinstance(data, dict) else data
    if not isinstance(items, list) or not items:
        return None
    calls: list[Call] = []
    for item in items:
        if not isinstance(item, dict) or not isinstance(item.get("function"), str):
            return None
        params = item.get("parameters", {})
        if not isinstance(params, dict) or repeated.any_of(item, params):
            return None
        calls.append((item["function"], params))
    return calls


register_bfcl_format(
    "json",
    write_body,
    read_body,
    lambda tag: call_instructions(
        '```json\n[{"function":"func_name1","parameters":{"param1":"value1",'
        '"param2":"value2"}},{"function":"func_name2","parameters":{"param":"value"}}]\n```',
        tag,
    ),
)
