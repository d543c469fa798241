"""BFCL's AST checker: do a model's calls match an entry's possible answers?

Re-implemented from the rules of BFCL's ``bfcl_eval/eval_checker/ast_eval/ast_checker.py``
(Python categories), over the JSON Schema types the importer gives tools:

- a possible answer lists, per parameter, every acceptable value; ``""`` among them means the
  parameter may be left out;
- strings compare after lower-casing and removing spaces and ``,./-_*^`` (``'`` reads as
  ``"``), also inside lists and dicts;
- an int is accepted for a float (``number``) parameter; a value whose type is the type of the
  possible answers rather than the schema's is a "variable" and compares as is;
- dict values follow the possible answer's keys (a missing key needs ``""``); lists of dicts
  compare element by element;
- ``simple`` categories expect exactly one call, ``multiple`` ones one call of the expected
  function among several offered, ``parallel`` ones every expected call in any order;
- Java and JavaScript arguments are strings of source code: each must be a string, is read
  back with the parameter's declared type (``java_value``, ``js_value``, following BFCL's
  ``type_convertor``), and is then checked like a Python value of the matching type. Text
  that does not read as the declared type stays a string, as in BFCL (a number may end in one
  newline, which BFCL's patterns let pass);
- ``web_search`` (and memory) answers are text: an acceptable answer must appear, as whole
  words, in the final message once both are standardized (``check_answer``, BFCL's
  ``agentic_checker``).

Each check returns None when the calls are right, else the reason they are not.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

_PUNCTUATION = re.compile(r"[ ,./\-_*^]")
_TYPES: dict[str, type] = {
    "string": str,
    "integer": int,
    "number": float,
    "boolean": bool,
    "array": list,
    "object": dict,
}

#: BFCL's JAVA_TYPE_CONVERSION / JS_TYPE_CONVERSION: declared type -> Python type of the value
JAVA_TYPES: dict[str, type] = {
    "byte": int,
    "short": int,
    "integer": int,
    "long": int,
    "float": float,
    "double": float,
    "boolean": bool,
    "char": str,
    "String": str,
    "any": str,
    "Array": list,
    "ArrayList": list,
    "Queue": list,
    "Stack": list,
    "Set": set,
    "HashMap": dict,
    "Hashtable": dict,
}
JS_TYPES: dict[str, type] = {
    "String": str,
    "integer": int,
    "float": float,
    "Bigint": int,
    "Boolean": bool,
    "dict": dict,
    "array": list,
    "any": str,
}
LANGUAGE_TYPES = {"java": JAVA_TYPES, "javascript": JS_TYPES}
_ANSWER_PUNCTUATION = re.compile(r"[,./\-_*^()]")
_INT = re.compile(r"-?\d+")
_JAVA_FLOAT = re.compile(r"-?\d+(\.\d+)?([eE][+-]?\d+)?[fF]")
_JAVA_DOUBLE = re.compile(r"-?\d+(\.\d+)?([eE][+-]?\d+)?")
_JAVA_LONG = re.compile(r"-?\d+[lL]")
_JS_FLOAT = re.compile(r"-?\d+(\.\d+)?")

Call = Mapping[str, Mapping[str, Any]]  # {function name: arguments}, as BFCL writes calls


def standardize(text: str) -> str:
    """BFCL's string normal form: no spaces or ``,./-_*^``, lower case, ``'`` as ``"``."""
    return _PUNCTUATION.sub("", text).lower().replace("'", '"')


def _std(value: Any) -> Any:
    return standardize(value) if isinstance(value, str) else value


def _python_type(schema: Mapping[str, Any] | None) -> type | None:
    kind = (schema or {}).get("type")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), None)
    return _TYPES.get(kind) if isinstance(kind, str) else None


def _answer_type(candidates: Sequence[Any]) -> type | None:
    return next((type(c) for c in candidates if c != ""), None)


def _dict_ok(value: Mapping[str, Any], candidates: Sequence[Any]) -> bool:
    for candidate in candidates:
        if candidate == "" or not isinstance(candidate, Mapping):
            continue
        keys_ok = all(
            k in candidate and _std(v) in [_std(c) for c in candidate[k]] for k, v in value.items()
        )
        missing_ok = all(k in value or "" in vs for k, vs in candidate.items())
        if keys_ok and missing_ok:
            return True
    return False


def _as_list(candidate: Any) -> list[Any] | None:
    """An acceptable value as BFCL's list checkers take it: a list, or a string as the list
    of its characters (so the ``""`` of an optional parameter accepts ``[]``)."""
    if isinstance(candidate, list):
        return candidate
    return list(candidate) if isinstance(candidate, str) else None


def _list_of_dicts_ok(value: Sequence[Any], candidates: Sequence[Any]) -> bool:
    for found in candidates:
        candidate = _as_list(found)
        if candidate is None or len(candidate) != len(value):
            continue
        if all(
            isinstance(v, Mapping) and _dict_ok(v, [c])
            for v, c in zip(value, candidate, strict=True)
        ):
            return True
    return False


def _list_ok(value: Sequence[Any], candidates: Sequence[Any]) -> bool:
    mine = [_std(v) for v in value]
    lists = (_as_list(c) for c in candidates)
    return any(c is not None and [_std(x) for x in c] == mine for c in lists)


def _items_ok(value: Sequence[Any], item_type: type | None, candidates: Sequence[Any]) -> bool:
    """BFCL's one-level nested type check of list items (``type_checker``): some acceptable
    value passes it, one that is not a list (the ``""`` of an optional parameter) as it is, a
    list when every item has the declared item type or that list's own (its first item's: a
    variable). No int for a float here: BFCL allows that for a parameter, not for items."""
    if item_type is None:
        return True
    for candidate in candidates:
        if not isinstance(candidate, list):
            return True
        own = _answer_type(candidate)
        if all(type(item) is item_type or type(item) is own for item in value):
            return True
    return False


def _numeral(pattern: re.Pattern[str], text: str) -> str | None:
    """``text`` less one final newline when the rest is all ``pattern``, else None: BFCL's
    type converters test ``re.match(r"^...$", text)``, whose ``$`` also matches before a
    final newline, then read ``"3\\n"`` as 3."""
    body = text.removesuffix("\n")
    return body if pattern.fullmatch(body) else None


def _java_scalar(text: str, kind: str) -> Any:
    if kind in ("byte", "short", "integer"):
        body = _numeral(_INT, text)
        return text if body is None else int(body)
    if kind == "float":
        body = _numeral(_JAVA_FLOAT, text)
        return text if body is None else float(body[:-1])
    if kind == "double":
        body = _numeral(_JAVA_DOUBLE, text)
        return text if body is None else float(body)
    if kind == "long":
        body = _numeral(_JAVA_LONG, text)
        return text if body is None else int(body[:-1])
    if kind == "boolean":
        return text == "true" if text in ("true", "false") else text
    # BFCL's char pattern can never match, so a char stays its source text; so do String/any.
    return text


def _java_literal(text: str) -> Any:
    """A Java literal read without a declared type (collection elements, map values)."""
    if text in ("true", "false"):
        return text == "true"
    if len(text) >= 2 and text[0] == text[-1] == '"':
        return text[1:-1]
    if _JAVA_LONG.fullmatch(text):
        return int(text[:-1])
    if _JAVA_FLOAT.fullmatch(text):
        return float(text[:-1])
    for number in (int, float):
        try:
            return number(text)
        except ValueError:
            pass
    return text


def _java_element(text: str, item: str | None, *, unquote: bool) -> Any:
    text = text.strip()
    if unquote and item in ("char", "String"):
        return text[1:-1]
    return _java_scalar(text, item) if item else _java_literal(text)


def java_value(text: str, kind: str, item: str | None = None) -> Any:
    """A Java argument (source text) read as declared type ``kind`` (array items ``item``)."""
    if kind == "ArrayList":
        found = re.search(r"new\s+ArrayList<\w*>\(Arrays\.asList\((.+?)\)\)", text)
        if found:
            return [_java_element(e, item, unquote=True) for e in found.group(1).split(",")]
        found = re.search(r"new\s+ArrayList<\w*>\(\)\s*\{\{\s*(.+?)\s*\}\}", text, re.DOTALL)
        if found:
            adds = re.findall(r"add\((.+?)\)", found.group(1))
            return [_java_element(e, item, unquote=True) for e in adds]
        return [] if re.search(r"new\s+ArrayList<\w*>\(\)", text) else text
    if kind == "Array":
        found = re.search(r"new\s+\w+\[\]\s*\{(.*?)\}", text)
        if not found:
            return text
        parts = [e for e in found.group(1).split(",") if e.strip()]
        return [_java_element(e, item, unquote=False) for e in parts]
    if kind == "HashMap":
        found = re.search(
            r"new\s+HashMap<.*?>\s*\(\)\s*\{\s*\{?\s*(.*?)\s*\}?\s*\}", text, re.DOTALL
        )
        if found:
            puts = re.findall(r"put\(\"(.*?)\",\s*(.*?)\)", found.group(1))
            return {key: _java_literal(v.strip()) for key, v in puts}
        return {} if re.search(r"new\s+HashMap<.*?>\s*\(\)", text) else text
    # BFCL has no reader for Set, Hashtable, Queue or Stack; their text stays a string.
    return _java_scalar(text, kind)


def _js_literal(text: str) -> Any:
    text = text.strip()
    if text in ("true", "false"):
        return text == "true"
    if len(text) >= 2 and text[0] == text[-1] and text[0] in "\"'":
        return text[1:-1]
    for number in (int, float):
        try:
            return number(text)
        except ValueError:
            pass
    return text


def _js_array(text: str, item: str | None) -> Any:
    nested = re.match(
        r"\[\s*\[.*?\]\s*(,\s*\[.*?\]\s*)*\]|\bnew\s+Array\(\s*\[.*?\]\s*(,\s*\[.*?\]\s*)*\)",
        text,
    )
    if nested:
        rows = []
        for i, row in enumerate(re.findall(r"\[(.*?)\]", nested.group(0))):
            row = row.strip()
            if i == 0 and row.startswith("["):
                row = row[1:]
            rows.append([_js_literal(e) for e in row.split(",")])
        return rows
    flat = re.match(r"\[(.*?)\]|\bnew\s+Array\((.*?)\)", text)
    if not flat:
        return text
    body = (flat.group(1) if flat.group(1) is not None else flat.group(2) or "").strip()
    elements = body.split(",") if body else []
    if item is None:
        return [_js_literal(e) for e in elements]
    return [js_value(e.strip(), item) for e in elements]


def _js_dict(text: str) -> Any:
    if text == "{}":
        return {}
    found = re.match(r"\{(.*?)\}", text)
    if not found:
        return text
    out: dict[str, Any] = {}
    for key, value in re.findall(r"([^:]+):\s*(.*?)(?:,\s*(?=[^,]+:)|$)", found.group(1)):
        key, value = key.strip().strip("'\""), value.strip()
        if value.startswith("[") and value.endswith("]"):
            out[key] = _js_array(value, None)
        elif value.startswith("{") and value.endswith("}"):
            out[key] = _js_dict(value)
        else:
            out[key] = _js_literal(value.strip("'\""))
    return out


def js_value(text: str, kind: str, item: str | None = None) -> Any:
    """A JavaScript argument (source text) read as declared type ``kind``."""
    if kind == "String":
        quoted = len(text) >= 2 and text[0] == text[-1] and text[0] in "\"'"
        return text[1:-1] if quoted else text
    if kind == "integer":
        body = _numeral(_INT, text)
        return text if body is None else int(body)
    if kind == "float":
        body = _numeral(_JS_FLOAT, text)
        return text if body is None else float(body)
    if kind == "Bigint":
        # BFCL's reader matches "3n\n" too, then fails to read it (``int("3n")``): a string
        return int(text[:-1]) if re.fullmatch(r"-?\d+n", text) else text
    if kind == "Boolean":
        return text == "true" if text in ("true", "false") else text
    if kind == "dict":
        return _js_dict(text.strip())
    if kind == "array":
        return _js_array(text.strip(), item)
    return text


def _java_text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return f'"{value}"' if isinstance(value, str) else str(value)


def _js_text(value: Any) -> str:
    if isinstance(value, list):
        return "[" + ", ".join(_js_text(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f'"{k}": {_js_text(v)}' for k, v in value.items()) + "}"
    return _java_text(value)


def source_text(value: Any, language: str, kind: str, item: str | None = None) -> str:
    """``value`` written as a ``language`` argument of declared type ``kind`` that BFCL's
    reader gives back (the inverse of ``java_value`` / ``js_value`` for answer values).

    A string answer for a non-string type is a variable name and is written as is.
    """
    if isinstance(value, str) and not (language == "javascript" and kind == "String"):
        return value
    if language == "javascript":
        if kind == "Bigint" and isinstance(value, int):
            return f"{value}n"
        if kind == "array" and isinstance(value, list) and item == "String":
            return "[" + ", ".join(f'"{v}"' for v in value) + "]"
        return _js_text(value)
    if isinstance(value, bool):
        return "true" if value else "false"
    if kind == "long":
        return f"{value}L"
    if kind == "float":
        return f"{value}f"
    if kind == "Array" and isinstance(value, list):
        scalar = item or "Object"
        parts = [v if isinstance(v, str) else source_text(v, language, scalar) for v in value]
        if item is None:
            parts = [_java_text(v) for v in value]
        return f"new {scalar}[]{{{', '.join(parts)}}}"
    if kind == "ArrayList" and isinstance(value, list):
        if not value:
            return "new ArrayList<>()"
        if item in ("String", "char"):
            parts = [f'"{v}"' for v in value]
        elif item is None:
            parts = [_java_text(v) for v in value]
        else:
            parts = [v if isinstance(v, str) else source_text(v, language, item) for v in value]
        return f"new ArrayList<>(Arrays.asList({', '.join(parts)}))"
    if kind == "HashMap" and isinstance(value, dict):
        puts = " ".join(f'put("{k}", {_java_text(v)});' for k, v in value.items())
        return f"new HashMap<String, Object>() {{{{ {puts} }}}}"
    return str(value)


def check_param(
    name: str,
    value: Any,
    schema: Mapping[str, Any],
    candidates: Sequence[Any],
    source: tuple[str, Mapping[str, str]] | None = None,
) -> str | None:
    """Why ``value`` is not an acceptable value of parameter ``name``, or None.

    ``source`` is ``(language, {"type": T, "items": T})`` for a Java or JavaScript parameter.
    """
    item_type: type | None
    type_name: str | None
    if source is not None:
        language, declared = source
        types = LANGUAGE_TYPES[language]
        kind, item = declared.get("type", "any"), declared.get("items")
        if kind not in types:
            return f"parameter {name!r}: BFCL cannot check {language} type {kind!r}"
        if not isinstance(value, str):
            return (
                f"parameter {name!r}: a {language} argument is source text, "
                f"got {type(value).__name__} {value!r}"
            )
        read = java_value if language == "java" else js_value
        value = read(value, kind, item if kind in ("Array", "ArrayList", "array") else None)
        expected: type | None = types[kind]
        item_type = types.get(item) if item and expected is list else None
        type_name = kind
    else:
        type_name = schema.get("type")
        expected = _python_type(schema)
        item_type = _python_type(schema.get("items")) if expected is list else None
        if expected is float and type(value) is int:
            value = float(value)
    answer_type = _answer_type(candidates)
    variable = False
    if expected is not None and type(value) is expected:
        variable = answer_type is not None and answer_type is not expected
        if (
            expected is list
            and isinstance(value, list)  # as type(value) is list, for the type checker
            and not variable
            and not _items_ok(value, item_type, candidates)
        ):
            return f"parameter {name!r}: wrong item type in {value!r}"
    elif answer_type is not None and type(value) is answer_type:
        variable = expected is not None
    elif expected is not None:
        return (
            f"parameter {name!r}: expected type {type_name}, got {type(value).__name__} {value!r}"
        )
    if not variable:
        if isinstance(value, dict):
            ok = _dict_ok(value, candidates)
        elif isinstance(value, list) and item_type is dict:
            ok = _list_of_dicts_ok(value, candidates)
        elif isinstance(value, str):
            ok = standardize(value) in [standardize(c) for c in candidates if isinstance(c, str)]
        elif isinstance(value, list):
            ok = _list_ok(value, candidates)
        else:
            ok = value in candidates
    else:
        ok = value in candidates
    if not ok:
        shown = [c for c in candidates if c != ""]
        return f"parameter {name!r}: {value!r} is not one of {shown!r}"
    return None


def check_call(
    parameters: Mapping[str, Any],
    call: Call,
    answer: Call,
    source: tuple[str, Mapping[str, Mapping[str, str]]] | None = None,
) -> str | None:
    """Why ``call`` does not match the possible ``answer`` for a tool with ``parameters``.

    ``source`` is ``(language, {parameter: declared type})`` for a Java or JavaScript tool.
    """
    ((expected_name, possible),) = answer.items()
    if expected_name not in call:
        return f"expected a call to {expected_name}, got {', '.join(call) or 'nothing'}"
    args = call[expected_name]
    props = parameters.get("properties") or {}
    for name in parameters.get("required") or ():
        if name not in args:
            return f"{expected_name}: missing required parameter {name!r}"
    for name, value in args.items():
        if name not in props or name not in possible:
            return f"{expected_name}: unexpected parameter {name!r}"
        declared = None
        if source is not None:
            declared = (source[0], source[1].get(name) or {"type": "any"})
        problem = check_param(name, value, props[name], possible[name], declared)
        if problem is not None:
            return f"{expected_name}: {problem}"
    for name, candidates in possible.items():
        if name not in args and "" not in candidates:
            return f"{expected_name}: parameter {name!r} is missing and not optional"
    return None


def check_calls(
    category: str,
    tools: Mapping[str, Mapping[str, Any]],
    calls: Sequence[Call],
    answers: Sequence[Call],
    language: str = "python",
    source_types: Mapping[str, Mapping[str, Mapping[str, str]]] | None = None,
) -> str | None:
    """BFCL's verdict on ``calls`` against ``answers`` for an entry of ``category``.

    ``tools`` maps each offered function name to its parameter schema; for ``java`` and
    ``javascript``, ``source_types`` maps it to its parameters' declared types.
    """

    def source(name: str) -> tuple[str, Mapping[str, Mapping[str, str]]] | None:
        if language not in LANGUAGE_TYPES:
            return None
        return language, (source_types or {}).get(name) or {}

    if not answers:
        return None if not calls else f"expected no call, got {len(calls)}"
    if len(calls) != len(answers):
        return f"wrong number of calls: expected {len(answers)}, got {len(calls)}"
    if "parallel" not in category:
        (expected_name,) = answers[0]
        return check_call(
            tools.get(expected_name) or {}, calls[0], answers[0], source(expected_name)
        )
    used: set[int] = set()
    for i, answer in enumerate(answers):
        (expected_name,) = answer
        schema = tools.get(expected_name) or {}
        problems = []
        for j, call in enumerate(calls):
            if j in used:
                continue
            problem = check_call(schema, call, answer, source(expected_name))
            if problem is None:
                used.add(j)
                break
            problems.append(problem)
        else:
            detail = f" ({problems[0]})" if problems else ""
            return f"no call matches expected call {i + 1}, {expected_name}{detail}"
    return None


def standardize_answer(text: str) -> str:
    """BFCL's agentic normal form: no ``,./-_*^()``, lower case, ``'`` as ``"``."""
    return _ANSWER_PUNCTUATION.sub("", text).lower().replace("'", '"')


def check_answer(response: str, answers: Sequence[str]) -> str | None:
    """Why the final ``response`` does not give one of the acceptable ``answers``, or None.

    Spaces are kept (unlike call arguments), so an answer must match whole words.
    """
    mine = standardize_answer(response)
    for answer in answers:
        if re.search(rf"\b{re.escape(standardize_answer(answer))}\b", mine):
            return None
    return f"none of the acceptable answers {list(answers)!r} is in the final answer"
