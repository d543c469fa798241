"""BFCL's two XML return formats, ``xml_verbose`` and ``xml_concise``.

Verbose puts each value in an attribute, concise in the element's text::

    <functions><function name="f"><params><param name="city" value="Paris" type="string"/>
    </params></function></functions>
    <functions><function name="f"><param name="city" type="string">Paris</param></function>
    </functions>

(written on one line, without the breaks shown here). Value encoding, exact for every JSON
value:

- ``type`` is ``string``, ``integer``, ``float``, ``boolean`` (``true``/``false``), ``null``
  (text ``null``), ``array`` or ``dict``; BFCL's prompt lists the same names except ``null``,
  which its parser accepts. Floats are written as Python writes them (infinities as ``1e999``;
  NaN is refused). Arrays and dicts are Python literals, as BFCL decodes them with
  ``ast.literal_eval``.
- Text is XML-escaped: ``&``, ``<``, ``>`` (and ``"`` in attributes) as entities; in attributes
  also tab, newline and carriage return (``&#9;`` ...) because XML parsers normalise them to
  spaces; carriage returns in element text (normalised to newlines) and characters XML 1.0
  cannot hold raw (control characters, surrogates, U+FFFE/U+FFFF) as numeric references. Output
  without such characters is well-formed XML that ``xml.etree`` reads to the same strings.
- String values are never stripped: leading and trailing whitespace is part of the value.

The reader is a small tokenizer for exactly this vocabulary, not a general XML parser: it
accepts either format (a param's ``value`` attribute, else its text), an optional ``<params>``
wrapper, whitespace between elements, single-quoted attributes, type aliases (``str``, ``int``,
``number``, ``bool``, ``list``, ``tuple``, ``object``) and JSON for arrays and dicts.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from hsa.harness.protocols import Call
from hsa.harness.protocols.bfcl import call_instructions, register_bfcl_format
from hsa.harness.protocols.literals import (
    MAX_DEPTH,
    NotLiteral,
    from_literal,
    int_text,
    to_literal,
)

# --- escaping ------------------------------------------------------------------------------

_NAMED = {"&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;"}
_RAW_UNSAFE = "\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff"
_ATTR_SPECIALS = re.compile(f'[&<>"\t\n\r{_RAW_UNSAFE}]')
_TEXT_SPECIALS = re.compile(f"[&<>\r{_RAW_UNSAFE}]")


def _reference(match: re.Match[str]) -> str:
    char = match.group(0)
    return _NAMED.get(char) or f"&#{ord(char)};"


def escape_attr(text: str) -> str:
    return _ATTR_SPECIALS.sub(_reference, text)


def escape_text(text: str) -> str:
    return _TEXT_SPECIALS.sub(_reference, text)


_ENTITY = re.compile(r"&(?:#([0-9]{1,7})|#[xX]([0-9a-fA-F]{1,6})|(lt|gt|amp|quot|apos));")
_ENTITIES = {"lt": "<", "gt": ">", "amp": "&", "quot": '"', "apos": "'"}


def _resolve(match: re.Match[str]) -> str:
    dec, hexa, name = match.groups()
    if name:
        return _ENTITIES[name]
    code = int(dec) if dec else int(hexa, 16)
    return chr(code) if code <= 0x10FFFF else match.group(0)


def unescape(text: str) -> str:
    """Resolve entity and character references; anything else stays as written."""
    return _ENTITY.sub(_resolve, text) if "&" in text else text


# --- values --------------------------------------------------------------------------------


def _typed(value: Any, where: str) -> tuple[str, str]:
    """(type name, text) of a JSON value."""
    if isinstance(value, str):
        return "string", value
    if value is None:
        return "null", "null"
    if isinstance(value, bool):
        return "boolean", "true" if value else "false"
    if isinstance(value, int):
        return "integer", int_text(value, where)
    if isinstance(value, float):
        return "float", to_literal(value, where=where)  # NaN refused, infinities as 1e999
    if isinstance(value, list | tuple):
        return "array", to_literal(value, where=where)
    return "dict", to_literal(value, where=where)


def _container(raw: str) -> Any:
    try:
        return from_literal(raw)
    except NotLiteral:
        try:
            # models often write JSON (true, null) instead of Python; no NaN or Infinity,
            # which no format writes
            return json.loads(raw, parse_constant=_no_constant)
        except (ValueError, RecursionError):
            raise NotLiteral(f"not a Python or JSON literal: {raw[:40]!r}") from None


def _to_int(raw: str) -> int:
    if not re.fullmatch(r"\s*[-+]?[0-9]+\s*", raw):
        raise NotLiteral(f"not an integer: {raw[:40]!r}")
    return int(raw)


def _no_constant(name: str) -> Any:
    raise NotLiteral(f"{name} is not a JSON number")


def _to_float(raw: str) -> float:
    # ASCII digits only, as integers: float() also takes "1_0", other scripts' digits and NaN
    if not re.fullmatch(r"\s*[-+]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][-+]?[0-9]+)?\s*", raw):
        raise NotLiteral(f"not a number: {raw[:40]!r}")
    return float(raw)


def _to_bool(raw: str) -> bool:
    word = raw.strip().lower()
    if word not in ("true", "false"):
        raise NotLiteral(f"not a boolean: {raw[:40]!r}")
    return word == "true"


def _of(kind: type) -> Callable[[str], Any]:
    def convert(raw: str) -> Any:
        value = _container(raw)
        if not isinstance(value, kind):
            raise NotLiteral(f"not a {kind.__name__}")
        return value

    return convert


_READERS: dict[str, Callable[[str], Any]] = {
    "string": lambda raw: raw,
    "integer": _to_int,
    "float": _to_float,
    "boolean": _to_bool,
    "null": lambda raw: None,
    "array": _of(list),
    "dict": _of(dict),
}
_ALIASES = {
    "str": "string",
    "int": "integer",
    "number": "float",
    "double": "float",
    "bool": "boolean",
    "none": "null",
    "list": "array",
    "tuple": "array",
    "object": "dict",
}


def _value(type_name: str, raw: str) -> Any:
    kind = type_name.strip().lower()
    reader = _READERS.get(_ALIASES.get(kind, kind), _READERS["string"])  # unknown: BFCL's raw
    try:
        return reader(raw)
    except ValueError as exc:  # NotLiteral included
        raise NotLiteral(str(exc)) from None


# --- writing -------------------------------------------------------------------------------


def _write(calls: Sequence[Call], verbose: bool) -> str:
    out = ["<functions>"]
    for name, args in calls:
        out.append(f'<function name="{escape_attr(name)}">')
        if verbose:
            out.append("<params>")
        for key, value in args.items():
            kind, text = _typed(value, f"{name}.{key}")
            if verbose:
                out.append(
                    f'<param name="{escape_attr(key)}" value="{escape_attr(text)}" type="{kind}"/>'
                )
            else:
                out.append(
                    f'<param name="{escape_attr(key)}" type="{kind}">{escape_text(text)}</param>'
                )
        if verbose:
            out.append("</params>")
        out.append("</function>")
    out.append("</functions>")
    return "".join(out)


# --- reading -------------------------------------------------------------------------------


@dataclass(slots=True)
class _Element:
    name: str
    attrs: dict[str, str]
    children: list[_Element] = field(default_factory=list)
    text: list[str] = field(default_factory=list)


_NAME = r"[A-Za-z_][\w.:-]*"
_TOKEN = re.compile(
    rf"<(/?)({_NAME})((?:\s+{_NAME}\s*=\s*(?:\"[^\"<]*\"|'[^'<]*'))*)\s*(/?)>|([^<]+)"
)
_ATTR = re.compile(rf"({_NAME})\s*=\s*(?:\"([^\"<]*)\"|'([^'<]*)')")


def _tree(text: str) -> _Element:
    """The single root element of ``text``; ``NotLiteral`` if it is not well formed."""
    top = _Element("", {})
    stack = [top]
    pos = 0
    while pos < len(text):
        match = _TOKEN.match(text, pos)
        if match is None:
            raise NotLiteral(f"unexpected '<' at offset {pos}")
        pos = match.end()
        closing, name, attr_text, empty, chars = match.groups()
        if chars is not None:
            stack[-1].text.append(chars)
        elif closing:
            if empty or attr_text or len(stack) == 1 or stack[-1].name != name:
                raise NotLiteral(f"unexpected </{name}>")
            stack.pop()
        else:
            attrs: dict[str, str] = {}
            for attr in _ATTR.finditer(attr_text):
                if attr.group(1) in attrs:
                    raise NotLiteral(f"attribute {attr.group(1)!r} given twice")
                raw = attr.group(2) if attr.group(2) is not None else attr.group(3)
                attrs[attr.group(1)] = unescape(raw)
            element = _Element(name, attrs)
            stack[-1].children.append(element)
            if not empty:
                stack.append(element)
    if len(stack) != 1 or len(top.children) != 1 or "".join(top.text).strip():
        raise NotLiteral("not a single XML element")
    return top.children[0]


def _only_elements(element: _Element) -> list[_Element]:
    if "".join(element.text).strip():
        raise NotLiteral(f"<{element.name}> holds text")
    return element.children


def _read_function(element: _Element) -> Call:
    if element.name != "function" or "name" not in element.attrs:
        raise NotLiteral("expected <function name=...>")
    params: list[_Element] = []
    for child in _only_elements(element):
        params.extend(_only_elements(child) if child.name == "params" else [child])
    args: dict[str, Any] = {}
    for param in params:
        if param.name != "param" or "name" not in param.attrs or param.children:
            raise NotLiteral("expected <param name=...>")
        key = param.attrs["name"]
        if key in args:
            raise NotLiteral(f"parameter {key!r} given twice")
        raw = param.attrs.get("value")
        raw = unescape("".join(param.text)) if raw is None else raw
        args[key] = _value(param.attrs.get("type", "string"), raw)
    return element.attrs["name"], args


def read_body(text: str) -> list[Call] | None:
    source = text.strip()
    if not (source.startswith("<functions") and source.endswith(">")):
        return None
    try:
        root = _tree(source)
        if root.name != "functions":
            return None
        return [_read_function(f) for f in _only_elements(root)] or None
    except NotLiteral:
        return None


_TYPES_NOTE = (
    "The type of each parameter must be one of: string, integer, float, boolean, null, array "
    "or dict; write arrays and dicts as Python literals and escape &, < and > in values as "
    "&amp;, &lt; and &gt;."
)

register_bfcl_format(
    "xml_verbose",
    lambda calls, tagged: _write(calls, verbose=True),
    read_body,
    lambda tag: call_instructions(
        '<functions><function name="func_name1"><params><param name="param1" value="value1" '
        'type="type1"/><param name="param2" value="value2" type="type2"/></params></function>'
        '<function name="func_name2"><params><param name="param3" value="value3" '
        'type="type3"/></params></function></functions>',
        tag,
        _TYPES_NOTE,
    ),
    max_depth=MAX_DEPTH,
)
register_bfcl_format(
    "xml_concise",
    lambda calls, tagged: _write(calls, verbose=False),
    read_body,
    lambda tag: call_instructions(
        '<functions><function name="func_name1"><param name="param1" type="type1">value1'
        '</param><param name="param2" type="type2">value2</param></function>'
        '<function name="func_name2"><param name="param3" type="type3">value3</param>'
        "</function></functions>",
        tag,
        _TYPES_NOTE,
    ),
    max_depth=MAX_DEPTH,
)
