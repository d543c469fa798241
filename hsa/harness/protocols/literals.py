"""JSON values written as Python literals, and read back from Python source without eval.

Used by the ``python`` call format (argument values) and the XML call formats (values of type
``array`` and ``dict``, which BFCL decodes with ``ast.literal_eval``). The mapping is exact for
every JSON value: ``None``/``True``/``False``, ints, floats (``repr``, infinities as ``1e999``),
strings (``repr``), lists and dicts with string keys, in key order.
"""

from __future__ import annotations

import ast
import math
import re
import threading
import warnings
from collections.abc import Mapping
from typing import Any

from hsa.errors import ProtocolError

#: Python's parser refuses deeper nesting ("too many nested parentheses"), so a deeper value
#: could be written but never read back; refuse it when writing instead.
MAX_DEPTH = 100
#: Python writes no integer of more than 4,300 digits as decimal text, nor reads one back
LONG_INTEGER = "an integer of more than 4,300 digits, which Python cannot write as text"


class NotLiteral(ValueError):
    """Source text that is not a JSON-compatible Python literal."""


def to_literal(value: Any, *, where: str = "arguments", depth: int = 0) -> str:
    """``value`` (a JSON value) as Python literal source."""
    if depth > MAX_DEPTH:
        raise ProtocolError(
            f"value nests deeper than {MAX_DEPTH} levels; Python call syntax cannot hold it",
            where=where,
        )
    if value is None or isinstance(value, bool):
        return repr(value)
    if isinstance(value, int):
        return int_text(value, where)
    if isinstance(value, float):
        if math.isnan(value):
            raise ProtocolError(
                "NaN cannot be written in a call; write it as a string or null", where=where
            )
        if math.isinf(value):
            return "1e999" if value > 0 else "-1e999"
        return repr(value)
    if isinstance(value, str):
        return repr(value)
    if isinstance(value, list | tuple):
        items = (to_literal(v, where=f"{where}[{i}]", depth=depth + 1) for i, v in enumerate(value))
        return "[" + ", ".join(items) + "]"
    if isinstance(value, Mapping):
        parts = []
        for key, item in value.items():
            if not isinstance(key, str):
                raise ProtocolError(f"object key {key!r} is not a string", where=where)
            parts.append(f"{key!r}: {to_literal(item, where=f'{where}.{key}', depth=depth + 1)}")
        return "{" + ", ".join(parts) + "}"
    raise ProtocolError(f"{type(value).__name__} is not a JSON value", where=where)


def nesting(value: Any) -> int:
    """How deep ``value`` (a JSON value) nests: 0 for a scalar or an empty list or object, else
    one more than its deepest item. ``to_literal`` writes it where this is ``MAX_DEPTH`` or
    less. Level by level, not recursively: JSON's reader takes deeper values than Python's
    recursion limit."""
    level, depth = [value], 0
    while True:
        level = [
            item
            for v in level
            if isinstance(v, list | tuple | Mapping)
            for item in (v.values() if isinstance(v, Mapping) else v)
        ]
        if not level:
            return depth
        depth += 1


def int_text(value: int, where: str) -> str:
    """``value`` in decimal; ``ProtocolError`` past Python's limit on digits."""
    try:
        return repr(value)
    except ValueError:
        raise ProtocolError(f"{LONG_INTEGER}; write it as a string", where=where) from None


_WARNINGS_HELD = threading.Lock()


def parse_expression(source: str) -> ast.expr:
    """The expression ``source`` holds; ``NotLiteral`` when it does not parse."""
    try:
        # Unknown escapes ("\d") only warn; the text is still a valid literal. The process's
        # warning filters are one list that ``catch_warnings`` saves and puts back: two threads
        # interleaving here would leave a catch-all "ignore" behind, so one parses at a time.
        with _WARNINGS_HELD, warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return ast.parse(source, mode="eval").body
    except (SyntaxError, ValueError, RecursionError, MemoryError) as exc:
        raise NotLiteral(str(exc)) from None


def from_node(node: ast.AST) -> Any:
    """The JSON value a literal expression denotes; ``NotLiteral`` for anything else.

    Tuples read as lists; bytes, sets, complex numbers, names and calls are refused.
    """
    if isinstance(node, ast.Constant):
        value = node.value
        if isinstance(value, int) and not isinstance(value, bool):
            try:
                repr(value)  # a hex literal may exceed the digits a decimal one is refused at
            except ValueError:
                raise NotLiteral(LONG_INTEGER) from None
        if value is None or isinstance(value, bool | int | float | str):
            return value
        raise NotLiteral(f"{type(value).__name__} is not a JSON value")
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub | ast.UAdd):
        number = node.operand.value if isinstance(node.operand, ast.Constant) else None
        if isinstance(number, int | float) and not isinstance(number, bool):
            return -number if isinstance(node.op, ast.USub) else number
        raise NotLiteral("a sign applies only to a number")
    if isinstance(node, ast.List | ast.Tuple):
        return [from_node(e) for e in node.elts]
    if isinstance(node, ast.Dict):
        out: dict[str, Any] = {}
        for key, item in zip(node.keys, node.values, strict=True):
            if key is None:
                raise NotLiteral("** inside a dict literal")
            name = from_node(key)
            if not isinstance(name, str):
                raise NotLiteral("object keys must be strings")
            out[name] = from_node(item)
        return out
    raise NotLiteral(f"{type(node).__name__} is not a literal")


def from_literal(source: str) -> Any:
    """The JSON value of Python literal ``source`` (surrounding whitespace allowed)."""
    return from_node(parse_expression(source.strip()))


_FENCE = re.compile(r"\A```[A-Za-z0-9_-]*[ \t]*\n(.*)\n[ \t]*```\Z", re.DOTALL)


def strip_fence(text: str) -> str:
    """``text`` without surrounding whitespace and one Markdown code fence, if it has one."""
    text = text.strip()
    match = _FENCE.match(text)
    return match.group(1).strip() if match else text
