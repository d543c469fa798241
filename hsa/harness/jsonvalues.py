"""JSON values as hsa reads them: paths into them, and what no dataset row can hold.

Python's JSON reader accepts more than JSON: NaN and Infinity, numbers past a double's range
(read as infinities), escapes of lone UTF-16 surrogates (text UTF-8 cannot encode). And the
JSON reader of ``datasets`` refuses integers outside 64 bits. ``unwritable`` finds the first
such value, with its path, so an importer can refuse it naming where it is. And local JSON
pointers (``#/$defs/Item``), as a schema's ``$ref`` writes them, are resolved here.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping
from typing import Any
from urllib.parse import unquote

#: a path part written after a dot (``$.tools``); others are written quoted (``$["a b"]``)
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def json_path(parts: Any) -> str:
    """Render a jsonschema-style path (``deque(['tools', 0, 'name'])``) as ``$.tools[0].name``."""
    out = "$"
    for part in parts:
        if isinstance(part, int):
            out += f"[{part}]"
        elif _NAME.fullmatch(str(part)):
            out += f".{part}"
        else:
            out += f"[{json.dumps(str(part), ensure_ascii=False)}]"
    return out


#: the integers the JSON reader of ``datasets`` (ujson) reads: signed or unsigned 64-bit
_INT_RANGE = (-(1 << 63), (1 << 64) - 1)
WIDE_INTEGER = (
    "an integer beyond 64 bits, which the datasets library's JSON reader refuses (a dataset "
    "holding it would not load for training): write it as a string"
)
NOT_FINITE = (
    "NaN or Infinity (or a number past a double's range), which JSON has no way to write: "
    "rows holding it would not be JSON; write it as a string or null"
)
LONE_SURROGATE = (
    "a lone surrogate (a \\ud800-\\udfff escape without its pair), which UTF-8 text, so no "
    "dataset row, can hold"
)
#: what JSON text holds before it can hold any of those: 19 digits in a row (2**63 has 19),
#: Python's NaN and Infinity, an exponent of three digits, a surrogate escape
#: (``UNWRITABLE_TEXT`` leaves wide integers out, ``WIDE_TEXT`` finds them: patterns for
#: PyArrow's regex kernels too)
UNWRITABLE_TEXT = r"NaN|Infinity|\d[eE][+-]?\d{3}|\\u[dD][89a-fA-F]"
WIDE_TEXT = r"\d{19}"
#: ``WIDE_TEXT|UNWRITABLE_TEXT`` (``\d`` an ASCII digit, as in PyArrow's kernels: a JSON
#: number has no other), or a surrogate itself, as ``json.dumps(ensure_ascii=False)`` writes
#: one. Led by one class of their first characters, which Python's regex engine scans for in
#: C; led by the alternatives, it tried each at every character (3 to 8 times slower). The
#: lookbehinds keep each alternative to its own first character.
_SUSPECT = re.compile(
    r"[0-9NI\\\ud800-\udfff]"
    r"(?:(?<=[0-9])(?:[0-9]{18}|[eE][+-]?[0-9]{3})"
    r"|(?<=N)aN|(?<=I)nfinity|(?<=\\)u[dD][89a-fA-F]|(?<=[\ud800-\udfff]))"
)


def may_be_unwritable(text: str) -> bool:
    """Whether the JSON ``text`` may hold a value ``unwritable`` finds (a quick look), as read
    or as ``json.dumps`` writes it (surrogates escaped or not)."""
    return _SUSPECT.search(text) is not None


def unwritable(value: Any, where: str, *, wide: bool = True) -> tuple[str, str] | None:
    """``(path, reason)`` of the first value in the JSON value ``value`` (at ``where``) that
    no dataset row can hold as it is: NaN or Infinity, a string or key with a lone surrogate,
    and with ``wide`` an integer outside 64 bits. None when there is none."""
    found = _unwritable_at(value, wide)
    if found is None:
        return None
    parts, reason = found
    return where + json_path(reversed(parts))[1:], reason


def _unwritable_at(value: Any, wide: bool) -> tuple[list[Any], str] | None:
    """``unwritable``'s find with the parts of its path (keys, indexes), innermost first:
    planning looks at every variant's metadata, and the path is written only for a find."""
    # (the JSON types by their exact type first: the abstract Mapping test is the slow one)
    kind = type(value)
    if kind is str:
        return ([], LONE_SURROGATE) if _lone_surrogate(value) else None
    if kind is not dict and kind is not list:
        if isinstance(value, str):
            return ([], LONE_SURROGATE) if _lone_surrogate(value) else None
        if isinstance(value, float):
            return None if math.isfinite(value) else ([], NOT_FINITE)
        if isinstance(value, int) and not isinstance(value, bool):
            inside = _INT_RANGE[0] <= value <= _INT_RANGE[1]
            return ([], WIDE_INTEGER) if wide and not inside else None
    if kind is dict or (kind is not list and isinstance(value, Mapping)):
        for key, item in value.items():
            if isinstance(key, str) and _lone_surrogate(key):
                return [key], LONE_SURROGATE
            found = _unwritable_at(item, wide)
            if found is not None:
                found[0].append(key)
                return found
    elif isinstance(value, list):
        for i, item in enumerate(value):
            found = _unwritable_at(item, wide)
            if found is not None:
                found[0].append(i)
                return found
    return None


def _lone_surrogate(text: str) -> bool:
    if text.isascii():
        return False
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


def resolve_pointer(schema: Mapping[str, Any], ref: str) -> Any:
    """The node a local JSON pointer (``#/$defs/Item``, ``#/$defs/My%20Type``) names, or
    None."""
    node: Any = schema
    for raw in ref.lstrip("#").split("/")[1:]:
        node = child(node, pointer_key(raw))
        if node is None:
            return None
    return node


def pointer_key(raw: str) -> str:
    """One segment of a pointer in a URI fragment, as the key it names: percent-decoded (RFC
    3986, as the fragment of a ``$ref`` is written), then ``~1`` and ``~0`` unescaped (RFC
    6901)."""
    if "%" in raw:
        raw = unquote(raw)
    return raw.replace("~1", "/").replace("~0", "~")


def child(node: Any, key: str) -> Any:
    """The member ``key`` of an object or the item at index ``key`` of an array, or None."""
    if isinstance(node, Mapping):
        return node.get(key)
    if isinstance(node, list) and key.isdigit() and int(key) < len(node):
        return node[int(key)]
    return None
