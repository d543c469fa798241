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
  function among several offered, ``parallel`` ones every expected call in any order.

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


def _list_of_dicts_ok(value: Sequence[Any], candidates: Sequence[Any]) -> bool:
    for candidate in candidates:
        if not isinstance(candidate, list) or len(candidate) != len(value):
            continue
        if all(
            isinstance(v, Mapping) and _dict_ok(v, [c])
            for v, c in zip(value, candidate, strict=True)
        ):
            return True
    return False


def _list_ok(value: Sequence[Any], candidates: Sequence[Any]) -> bool:
    mine = [_std(v) for v in value]
    return any(isinstance(c, list) and [_std(x) for x in c] == mine for c in candidates)


def _items_ok(value: Sequence[Any], item_type: type | None, candidates: Sequence[Any]) -> bool:
    """BFCL's one-level nested type check of list items."""
    if item_type is None:
        return True
    for item in value:
        if type(item) is item_type or (item_type is float and type(item) is int):
            continue
        # An item of the possible answers' own item type is a variable, as BFCL allows.
        answer_items = [type(x) for c in candidates if isinstance(c, list) for x in c]
        if type(item) not in answer_items:
            return False
    return True


def check_param(
    name: str, value: Any, schema: Mapping[str, Any], candidates: Sequence[Any]
) -> str | None:
    """Why ``value`` is not an acceptable value of parameter ``name``, or None."""
    expected = _python_type(schema)
    if expected is float and type(value) is int:
        value = float(value)
    answer_type = _answer_type(candidates)
    variable = False
    if expected is not None and type(value) is expected:
        variable = answer_type is not None and answer_type is not expected
        if expected is list and not variable:
            item_type = _python_type(schema.get("items"))
            if not _items_ok(value, item_type, candidates):
                return f"parameter {name!r}: wrong item type in {value!r}"
    elif answer_type is not None and type(value) is answer_type:
        variable = expected is not None
    elif expected is not None:
        return (
            f"parameter {name!r}: expected type {schema.get('type')}, "
            f"got {type(value).__name__} {value!r}"
        )
    if not variable:
        item_type = _python_type(schema.get("items")) if isinstance(value, list) else None
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


def check_call(parameters: Mapping[str, Any], call: Call, answer: Call) -> str | None:
    """Why ``call`` does not match the possible ``answer`` for a tool with ``parameters``."""
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
        problem = check_param(name, value, props[name], possible[name])
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
) -> str | None:
    """BFCL's verdict on ``calls`` against ``answers`` for an entry of ``category``.

    ``tools`` maps each offered function name to its parameter schema.
    """
    if not answers:
        return None if not calls else f"expected no call, got {len(calls)}"
    if len(calls) != len(answers):
        return f"wrong number of calls: expected {len(answers)}, got {len(calls)}"
    if "parallel" not in category:
        (expected_name,) = answers[0]
        return check_call(tools.get(expected_name) or {}, calls[0], answers[0])
    used: set[int] = set()
    for i, answer in enumerate(answers):
        (expected_name,) = answer
        schema = tools.get(expected_name) or {}
        problems = []
        for j, call in enumerate(calls):
            if j in used:
                continue
            problem = check_call(schema, call, answer)
            if problem is None:
                used.add(j)
                break
            problems.append(problem)
        else:
            detail = f" ({problems[0]})" if problems else ""
            return f"no call matches expected call {i + 1}, {expected_name}{detail}"
    return None
