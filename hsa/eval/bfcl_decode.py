"""BFCL's own decoding of a format-sensitivity reply, so the bfcl suite reads replies as BFCL does.

hsa's call formats (``hsa.harness.protocols``) read the formats the way training data is written
and parsed back: the calls alone in an untagged message, the ``<TOOLCALL>`` block at the end of a
tagged one, XML types by their names and a few aliases. BFCL's decoder
(``default_decode_ast_prompting`` and ``ast_parse`` in ``bfcl_eval/model_handler/utils.py``, the
parsers in ``bfcl_eval/model_handler/parser/``, ShishirPatil/gorilla) is lenient elsewhere: text
before or after the calls, parallel calls without brackets, the first ``<TOOLCALL>`` block
wherever it is; and strict elsewhere: an XML type it does not name keeps its value as a string,
positional arguments are dropped. Its scores are BFCL's, so for BFCL's own entries the suite
reads each reply with ``decode`` (a port of that decoder, without its ``eval``) and hands the
rollout the calls it found, written in the configuration's format (``BfclDecoded``): a reply
scores as it scores on BFCL's leaderboard, and the protocols stay as strict as training needs.
"""

from __future__ import annotations

import ast
import dataclasses
import json
import operator
import re
import xml.etree.ElementTree as ET
from collections.abc import Mapping
from typing import Any

from hsa.errors import HsaError
from hsa.harness.model import Protocol
from hsa.harness.protocols import CALL_FORMATS, Call
from hsa.teachers.backends.base import Backend
from hsa.teachers.request import ChatRequest, ChatResponse

#: BFCL's return formats by hsa's call-format names
RETURN_FORMATS = {
    "python": "python",
    "json": "json",
    "xml_verbose": "verbose_xml",
    "xml_concise": "concise_xml",
}
#: what the rollout reads when BFCL's decoder finds no call (never read as a call: no format
#: reads text starting with "(" as one)
NO_CALL = "(BFCL's decoder reads no function call in this reply)"


class Undecodable(Exception):
    """A reply BFCL's decoder fails on (its ``ast_decoder:decoder_failed``)."""


def decode(text: str, return_format: str, tagged: bool) -> list[Call]:
    """The calls BFCL's decoder reads in ``text`` for a return format (``python``, ``json``,
    ``verbose_xml``, ``concise_xml``) and tag; ``Undecodable`` where it fails, or where its
    output is not a list of ``{name: {arguments}}`` (``is_function_calling_format_output``)."""
    try:
        found = _decode(text, return_format, tagged)
    except Exception as exc:  # BFCL's runner takes any exception of its decoder as a failure
        raise Undecodable(f"{type(exc).__name__}: {exc}") from None
    calls: list[Call] = []
    for item in found:
        if not isinstance(item, dict) or len(item) != 1:
            raise Undecodable("not a list of {name: arguments}")
        ((name, args),) = item.items()
        if not isinstance(name, str) or not isinstance(args, dict):
            raise Undecodable("not a list of {name: arguments}")
        if not all(isinstance(key, str) for key in args):  # f(**{...}): BFCL's key None
            raise Undecodable("an argument without a name")
        calls.append((name, {key: _json(value) for key, value in args.items()}))
    return calls


def _decode(text: str, return_format: str, tagged: bool) -> list[Any]:
    # default_decode_ast_prompting: brackets added where missing, then ast_parse
    text = text.strip("`\n ")
    if not text.startswith("["):
        text = "[" + text
    if not text.endswith("]"):
        text = text + "]"
    if tagged:
        match = re.search(r"<TOOLCALL>(.*?)</TOOLCALL>", text, re.DOTALL)
        if match is None:
            raise Undecodable("no <TOOLCALL> tag")
        text = match.group(1).strip()
    if return_format == "python":
        parsed = ast.parse(text.strip().strip("'"), mode="eval")
        if isinstance(parsed.body, ast.Call):
            return [_call(parsed.body)]
        out = []
        for element in parsed.body.elts:  # type: ignore[attr-defined]
            assert isinstance(element, ast.Call)
            out.append(_call(element))
        return out
    if return_format in ("verbose_xml", "concise_xml"):
        match = re.search(r"<functions>(.*?)</functions>", text, re.DOTALL)
        if match is None:
            raise Undecodable("no <functions> tag")
        return _xml(match.group(0), verbose=return_format == "verbose_xml")
    if return_format == "json":
        match = re.search(r"\[.*\]", text, re.DOTALL)
        if match:
            text = match.group(0)
        return _json_calls(text)
    raise Undecodable(f"unknown return format {return_format!r}")


def _json_calls(source: str) -> list[Any]:
    # parse_json_function_call: a JSON that does not load is no call, items not objects skipped
    match = re.search(r"\[\s*{.*?}\s*(?:,\s*{.*?}\s*)*\]", source, re.DOTALL)
    if match:
        source = match.group(0)
    try:
        data = json.loads(source)
    except json.JSONDecodeError:
        return []
    return [{item["function"]: item["parameters"]} for item in data if isinstance(item, dict)]


def _xml(source: str, *, verbose: bool) -> list[Any]:
    # parse_verbose_xml_function_call and parse_concise_xml_function_call
    root = ET.fromstring(source)
    out = []
    for function in root.findall("function"):
        name = function.attrib["name"]
        args: dict[Any, Any] = {}
        if verbose:
            container = function.find("params")
            params = (container if container is not None else function).findall("param")
            for param in params:
                raw = param.attrib.get("value", "")
                args[param.attrib.get("name")] = _typed(raw, param.attrib.get("type", "string"))
        else:
            for param in function.findall("param"):
                raw = (param.text or "").strip()
                args[param.attrib["name"]] = _typed(raw, param.attrib.get("type", "string"))
        out.append({name: args})
    return out


def _typed(raw: str, type_name: str) -> Any:
    # convert_value_by_type: exact type names; any other keeps the raw string
    if type_name == "integer":
        return int(raw)
    if type_name == "float":
        return float(raw)
    if type_name == "boolean":
        return raw.lower() == "true"
    if type_name == "null":
        return None
    if type_name in ("array", "tuple", "object", "dict"):
        return ast.literal_eval(raw)
    return raw


def _call(node: ast.Call) -> dict[str, Any]:
    # resolve_ast_call: a dotted name; keyword arguments only (positional ones are dropped)
    parts = []
    func: ast.expr = node.func
    while isinstance(func, ast.Attribute):
        parts.append(func.attr)
        func = func.value
    if isinstance(func, ast.Name):
        parts.append(func.id)
    return {".".join(reversed(parts)): {kw.arg: _value(kw.value) for kw in node.keywords}}


_ARITHMETIC = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
    ast.Pow: operator.pow,
}


def _value(node: ast.expr) -> Any:
    # resolve_ast_by_type, whose eval of an expression is arithmetic on literals here
    if isinstance(node, ast.Constant):
        return "..." if node.value is Ellipsis else node.value
    if isinstance(node, ast.UnaryOp):  # BFCL negates whatever the operator
        return -node.operand.value  # type: ignore[attr-defined]
    if isinstance(node, ast.List):
        return [_value(v) for v in node.elts]
    if isinstance(node, ast.Dict):
        pairs = zip(node.keys, node.values, strict=True)  # a None key (**spread) fails, as in BFCL
        return {_value(k): _value(v) for k, v in pairs}  # type: ignore[arg-type]
    if isinstance(node, ast.BinOp):
        return _arithmetic(node)
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Call):
        return ast.unparse(node) if not node.keywords else _call(node)
    if isinstance(node, ast.Tuple):
        return tuple(_value(v) for v in node.elts)
    if isinstance(node, ast.Subscript):
        return ast.unparse(node.value) + "[" + ast.unparse(node.slice) + "]"
    raise Undecodable(f"unsupported expression {type(node).__name__}")  # a lambda included


#: the most a value evaluated from an argument's expression may hold (items and characters)
_MAX_SIZE = 1_000_000


def _arithmetic(node: ast.expr) -> Any:
    """What BFCL's ``eval`` makes of an expression of literals and operators (``2 * 3``,
    ``[1] + [2]``, ``(0,) * 3``); a name or a call in it is ``Undecodable``, as ``eval``'s
    ``NameError`` fails the reply, and so is a value past ``_MAX_SIZE``."""
    if isinstance(node, ast.Constant) and (
        node.value is None or isinstance(node.value, int | float | str)
    ):
        return node.value
    if isinstance(node, ast.List):
        return [_arithmetic(item) for item in node.elts]
    if isinstance(node, ast.Tuple):
        return tuple(_arithmetic(item) for item in node.elts)
    if isinstance(node, ast.Dict) and None not in node.keys:
        pairs = zip(node.keys, node.values, strict=True)
        return {_arithmetic(k): _arithmetic(v) for k, v in pairs}  # type: ignore[arg-type]
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub | ast.UAdd):
        value = _arithmetic(node.operand)
        return -value if isinstance(node.op, ast.USub) else +value
    if isinstance(node, ast.BinOp) and type(node.op) in _ARITHMETIC:
        left, right = _arithmetic(node.left), _arithmetic(node.right)
        if isinstance(node.op, ast.Pow) and abs(right) > 64:
            raise Undecodable("an exponent too large to evaluate")
        if isinstance(node.op, ast.Mult) and _repeated(left, right) > _MAX_SIZE:
            raise Undecodable("a repeated sequence too long to evaluate")
        if isinstance(node.op, ast.Add) and _size(left) + _size(right) > _MAX_SIZE:
            raise Undecodable("a concatenation too long to evaluate")
        return _ARITHMETIC[type(node.op)](left, right)
    raise Undecodable("an expression BFCL evaluates with eval")


def _repeated(left: Any, right: Any) -> int:
    """The size of ``left * right`` when it repeats a string, list or tuple (0 for numbers)."""
    seq, times = (left, right) if isinstance(left, str | list | tuple) else (right, left)
    if isinstance(seq, str | list | tuple) and isinstance(times, int):
        return _size(seq) * times
    return 0


def _size(value: Any) -> int:
    """How many items and characters ``value`` holds, nested ones included."""
    if isinstance(value, str):
        return len(value)
    if isinstance(value, list | tuple):
        return len(value) + sum(_size(v) for v in value)
    if isinstance(value, dict):
        return len(value) + sum(_size(k) + _size(v) for k, v in value.items())
    return 1


def _json(value: Any) -> Any:
    """``value`` as JSON holds it: tuples as lists. (BFCL's checker takes a tuple as a list
    only for a parameter it types ``tuple``, and fails it for an ``array`` one; hsa's schemas
    type both ``array``, so here a tuple passes for either.)"""
    if isinstance(value, tuple | list):
        return [_json(v) for v in value]
    if isinstance(value, dict):
        return {k: _json(v) for k, v in value.items()}
    return value


def bfcl_reply(message: Mapping[str, Any], protocol: Protocol, return_format: str) -> dict:
    """``message`` with its text replaced by the calls BFCL's decoder reads in it, written in
    ``protocol``'s call format (which reads them back as they are), or by ``NO_CALL`` where
    the decoder reads none but the protocol would read calls."""
    out = dict(message)
    text = message.get("content")
    if not isinstance(text, str):
        return out
    fmt = CALL_FORMATS[protocol.call_format]
    try:
        calls = decode(text, return_format, protocol.call_tag)
    except Undecodable:
        calls = []
    if calls:
        try:
            out["content"] = fmt.format_calls(calls, protocol.call_tag)
            return out
        except (HsaError, ValueError, TypeError, AttributeError):
            pass  # a name or value the format cannot write: not a call it could have meant
    elif fmt.parse_calls(text, protocol.call_tag) is None:
        return out  # read as BFCL reads it already: no call (and hsa's own failure class)
    out["content"] = NO_CALL
    return out


class BfclDecoded(Backend):
    """``backend``, its replies read as BFCL reads them under ``config`` (a BFCL
    format-sensitivity configuration) and written back in ``protocol``'s format."""

    def __init__(self, backend: Backend, protocol: Protocol, config: str) -> None:
        fields = dict(part.split("=", 1) for part in config.split("&"))
        self.backend = backend
        self.name = backend.name
        self.stats = backend.stats
        self.protocol = protocol
        self.return_format = fields["ret_fmt"]

    async def chat(self, request: ChatRequest) -> ChatResponse:
        response = await self.backend.chat(request)
        message = bfcl_reply(response.message, self.protocol, self.return_format)
        return dataclasses.replace(response, message=message)
