"""BFCL's ``python`` return format: ``[func_name1(param1=value1, ...), func_name2(...)]``.

Values are Python literals (``literals.py``), so every JSON value round-trips, strings with
quotes, newlines and any Unicode included. An argument whose name is not a Python identifier (or
is a keyword, or changes under NFKC normalisation, which Python applies to identifiers) is passed
as ``**{'name': value}``, keeping argument order, so any call (one a harness names this format
for, or a recorded call with an argument its tool does not declare) is written and read back.
But vLLM's ``pythonic`` parser reads a splat as an argument named ``null`` and BFCL's decoder
refuses it, so a tool with such a parameter does not fit this format (``plain_names``): the
protocol rules and BFCL's format-sensitivity suite never choose it for one. Tool names must be
Python identifiers, dotted paths allowed (``math.factorial``); others cannot be written in this
format and render refuses them. Inside a ``<TOOLCALL>`` tag ``<`` is written ``\\x3c`` in string
literals.

Parsing uses ``ast``, never ``eval``: a bare call without the brackets and a Markdown code fence
are accepted; positional arguments, names and expressions are not calls in this format.
"""

from __future__ import annotations

import ast
import keyword
import re
import unicodedata
from collections.abc import Mapping, Sequence
from typing import Any

from hsa.errors import ProtocolError
from hsa.harness.protocols import Call
from hsa.harness.protocols.bfcl import call_instructions, register_bfcl_format
from hsa.harness.protocols.literals import (
    MAX_DEPTH,
    NotLiteral,
    from_node,
    parse_expression,
    strip_fence,
)
from hsa.harness.protocols.literals import to_literal as _to_literal


def is_identifier(name: str) -> bool:
    """Whether ``name`` can be written as a Python keyword argument or attribute name
    (``__debug__`` cannot be: Python refuses to assign it)."""
    return (
        name.isidentifier()
        and not keyword.iskeyword(name)
        and name != "__debug__"
        and unicodedata.normalize("NFKC", name) == name
    )


def _is_function(name: str) -> bool:
    return bool(name) and all(is_identifier(part) for part in name.split("."))


def plain_names(tool: str, params: Sequence[str]) -> bool:
    """Whether calls to ``tool`` with arguments named ``params`` are written without a
    ``**{...}`` splat, which BFCL's decoder refuses and vLLM's pythonic parser misreads (its
    names must also start with an ASCII letter, ``[a-zA-Z]``, and be undotted: a name that
    does not is read as no call there, as BFCL's own dotted and ``_from`` names are)."""
    return _is_function(tool) and all(is_identifier(p) for p in params)


def _function(name: str) -> str:
    if _is_function(name):
        return name
    raise ProtocolError(
        f"tool name {name!r} is not a Python identifier, so the python call format cannot "
        "write it; rename the tool or choose another call format"
    )


def _call(name: str, args: Mapping[str, Any]) -> str:
    parts: list[str] = []
    splat: list[str] = []  # consecutive non-identifier arguments, written as one **{...}
    for key, value in args.items():
        literal = _to_literal(value, where=f"{name}.{key}")
        if is_identifier(key):
            if splat:
                parts.append("**{" + ", ".join(splat) + "}")
                splat = []
            parts.append(f"{key}={literal}")
        else:
            splat.append(f"{key!r}: {literal}")
    if splat:
        parts.append("**{" + ", ".join(splat) + "}")
    return f"{_function(name)}({', '.join(parts)})"


def write_body(calls: Sequence[Call], tagged: bool) -> str:
    body = "[" + ", ".join(_call(name, args) for name, args in calls) + "]"
    # Every "<" in the body is inside a string literal, where \x3c denotes the same character.
    return body.replace("<", "\\x3c") if tagged else body


def _name(node: ast.expr) -> str:
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        raise NotLiteral("the called object is not a name")
    parts.append(node.id)
    return ".".join(reversed(parts))


def _read_call(node: ast.expr) -> Call:
    if not isinstance(node, ast.Call) or node.args:
        raise NotLiteral("not a call with keyword arguments only")
    args: dict[str, Any] = {}
    for kw in node.keywords:
        if kw.arg is not None:
            pairs = [(kw.arg, from_node(kw.value))]
        else:
            splat = from_node(kw.value)
            if not isinstance(splat, dict):
                raise NotLiteral("** takes a dict literal")
            pairs = list(splat.items())
        for key, value in pairs:
            if key in args:
                raise NotLiteral(f"argument {key!r} given twice")
            args[key] = value
    return _name(node.func), args


_LOOKS_LIKE_CALLS = re.compile(r"\A(?:\[|[^\W\d][\w.]*\s*\()[\s\S]*[\])]\Z")


def read_body(text: str) -> list[Call] | None:
    source = strip_fence(text)
    if not _LOOKS_LIKE_CALLS.match(source):  # most prose fails here, before the parser runs
        return None
    try:
        node = parse_expression(source)
        items = node.elts if isinstance(node, ast.List) else [node]
        return [_read_call(item) for item in items] or None
    except NotLiteral:
        return None


register_bfcl_format(
    "python",
    write_body,
    read_body,
    lambda tag: call_instructions(
        "[func_name1(param_name1=param_value1, param_name2=param_value2), func_name2(param=value)]",
        tag,
        "Write argument values as Python literals (strings quoted, True, False, None, lists, "
        "dicts).",
    ),
    plain_names,
    max_depth=MAX_DEPTH,
)
