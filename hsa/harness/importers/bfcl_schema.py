"""BFCL function docs to JSON Schema, and BFCL's Python-syntax reference calls to arguments."""

from __future__ import annotations

import ast
import copy
import json
from collections.abc import Mapping, Sequence
from typing import Any

from hsa.errors import ImportFormatError

#: BFCL type names (Python-flavoured) -> JSON Schema, as ``GORILLA_TO_OPENAPI``
#: (bfcl_eval/constants/type_mappings.py) maps them for the models that take tools. ``any`` is
#: a string there, and its checker (``PYTHON_TYPE_MAPPING``) takes a string for it. The Python
#: categories use string, dict, integer, boolean, float, array, any and tuple; the Java and
#: JavaScript names are known too, although their top-level parameters reach a harness as
#: strings (``language_functions``).
TYPES: dict[str, str] = {
    "dict": "object",
    "object": "object",
    "float": "number",
    "number": "number",
    "double": "number",
    "integer": "integer",
    "int": "integer",
    "long": "integer",
    "string": "string",
    "str": "string",
    "char": "string",
    "boolean": "boolean",
    "bool": "boolean",
    "array": "array",
    "list": "array",
    "tuple": "array",
    "any": "string",
    "Any": "string",
    "null": "null",
    "byte": "integer",
    "short": "integer",
    "Bigint": "integer",
    "String": "string",
    "Boolean": "boolean",
    "Array": "array",
    "ArrayList": "array",
    "Queue": "array",
    "Stack": "array",
    "Set": "array",
    "HashMap": "object",
    "Hashtable": "object",
}
#: what BFCL appends to every function description it shows a model, by the category's
#: language (``_get_language_specific_hint`` in bfcl_eval/utils.py)
LANGUAGE_HINTS = {
    "java": " Note that the provided function is in Java 8 SDK syntax.",
    "javascript": " Note that the provided function is in JavaScript syntax.",
    "python": " Note that the provided function is in Python 3 syntax.",
}
LANGUAGE_NAMES = {"java": "Java", "javascript": "JavaScript"}
# Keywords whose value is a schema, a list of schemas, or a map of names to schemas.
_SCHEMA_KEYS = ("additionalProperties", "not", "contains", "propertyNames")
_SCHEMA_LIST_KEYS = ("anyOf", "oneOf", "allOf", "prefixItems")
_SCHEMA_MAP_KEYS = ("properties", "patternProperties", "$defs", "definitions")


class SchemaProblem(Exception):
    """A BFCL schema that cannot be normalised; ``where`` is a JSON path inside it."""

    def __init__(self, message: str, where: str):
        super().__init__(message)
        self.message = message
        self.where = where


#: what BFCL adds to a ``float`` parameter it shows a model as a tool (``_cast_to_openai_type``
#: in bfcl_eval/model_handler/utils.py): ``number`` alone would not tell it from a double
FLOAT_HINT = " This is a float type value."


def normalize_schema(node: Any, where: str = "$", *, parameter: bool = False) -> dict[str, Any]:
    """The JSON Schema (2020-12) equivalent of a BFCL parameter schema.

    ``dict`` -> object, ``float`` -> number, ``tuple`` -> array, ``any`` -> string, as BFCL
    casts them for the models that take tools; there a ``float`` ``parameter`` (a value of a
    ``properties`` map) also gets ``"format": "float"`` and ``FLOAT_HINT`` after its
    description, and so it does here. The
    non-standard ``optional`` keyword (``true``/``"yes"`` on a property, a list of names on an
    object) is dropped: BFCL's checker reads only ``required``, and where the two disagree
    (``irrelevance_173`` marks a required parameter optional) ``required`` wins as it does
    there. A list-valued ``items`` (draft-4 tuple form) becomes ``prefixItems``. Everything
    else (descriptions, ``default``, ``format``, bounds) is kept in its place, and so is
    ``enum``, save where BFCL means it otherwise than JSON Schema reads it (its checker never
    reads an ``enum``; ``_enum_as_meant``).
    """
    if not isinstance(node, Mapping):
        raise SchemaProblem(f"a schema must be an object, got {type(node).__name__}", where)
    out: dict[str, Any] = {}
    for key, value in node.items():
        at = f"{where}.{key}"
        if key == "type":
            out["type"] = _type(value, at)
        elif key == "optional":
            continue
        elif key == "items":
            if isinstance(value, list):
                out["prefixItems"] = [
                    normalize_schema(v, f"{at}[{i}]") for i, v in enumerate(value)
                ]
            else:
                out["items"] = normalize_schema(value, at)
        elif key == "properties" and isinstance(value, Mapping):
            out[key] = {
                k: normalize_schema(v, f"{at}.{k}", parameter=True) for k, v in value.items()
            }
        elif key in _SCHEMA_MAP_KEYS and isinstance(value, Mapping):
            out[key] = {k: normalize_schema(v, f"{at}.{k}") for k, v in value.items()}
        elif key in _SCHEMA_LIST_KEYS and isinstance(value, list):
            out[key] = [normalize_schema(v, f"{at}[{i}]") for i, v in enumerate(value)]
        elif key in _SCHEMA_KEYS and isinstance(value, Mapping):
            out[key] = normalize_schema(value, at)
        elif key == "required":
            if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
                raise SchemaProblem("required must be a list of names", at)
            out[key] = list(value)
        else:
            out[key] = value
    if parameter and node.get("type") == "float":
        out["format"] = "float"
        description = out.get("description")
        out["description"] = (
            description + FLOAT_HINT if isinstance(description, str) else FLOAT_HINT.strip()
        )
    return _enum_as_meant(out)


#: JSON Schema's instance types, as Python values of JSON read them
_INSTANCE: dict[str, Any] = {
    "string": lambda v: isinstance(v, str),
    "integer": lambda v: isinstance(v, int) and not isinstance(v, bool),
    "number": lambda v: isinstance(v, int | float) and not isinstance(v, bool),
    "boolean": lambda v: isinstance(v, bool),
    "array": lambda v: isinstance(v, list),
    "object": lambda v: isinstance(v, dict),
    "null": lambda v: v is None,
}


def _fits(value: Any, kind: Any) -> bool:
    """Whether ``value`` is an instance of the JSON Schema ``type`` ``kind`` (any, unless a
    known type name)."""
    test = _INSTANCE.get(kind) if isinstance(kind, str) else None
    return True if test is None else bool(test(value))


def _enum_as_meant(schema: dict[str, Any]) -> dict[str, Any]:
    """``schema`` with its ``enum`` read as BFCL's docs mean it, where JSON Schema would read
    one that no value of the parameter can satisfy:

    - on an ``array`` (``"metrics": {"type": "array", "items": {"type": "string"}, "enum":
      [...]}``, ``live_multiple_146`` and 20 more) the values are the items' values, and the
      ``enum`` moves into ``items`` (BFCL's answers, ``[["view"]]``, are then valid calls);
    - one none of whose values is of the parameter's type (``"type": "boolean", "enum":
      ["True", "False", "dontcare"]``, answered ``True``) is told in the description, as BFCL
      tells an ``enum`` to the models that take none (``Enum values: [...]``).
    """
    enum = schema.get("enum")
    kind = schema.get("type")
    if not isinstance(enum, list) or not enum or any(_fits(v, kind) for v in enum):
        return schema  # a list of whole values, one at least of the parameter's type
    out = {k: v for k, v in schema.items() if k != "enum"}
    items = schema.get("items", {})
    if (
        kind == "array"
        and isinstance(items, dict)
        and "enum" not in items
        and all(_fits(v, items.get("type")) for v in enum)
    ):
        out["items"] = {**items, "enum": enum}
        return out
    told = f"Enum values: {enum}."
    description = out.get("description")
    out["description"] = f"{description} {told}" if isinstance(description, str) else told
    return out


def _type(value: Any, where: str) -> str | list[str]:
    if isinstance(value, list):
        return list(dict.fromkeys(t for v in value for t in _flat(_type(v, where))))
    if not isinstance(value, str) or value not in TYPES:
        known = ", ".join(sorted(TYPES))
        raise SchemaProblem(f"unknown BFCL type {value!r} (known: {known})", where)
    return TYPES[value]


def _flat(kind: str | list[str]) -> list[str]:
    return kind if isinstance(kind, list) else [kind]


def category_language(category: str) -> str:
    """``java``, ``javascript`` or ``python``: the language BFCL reads a category's docs in."""
    if "javascript" in category:
        return "javascript"
    return "java" if "java" in category else "python"


def language_functions(
    functions: Sequence[Any], language: str
) -> tuple[list[Any], dict[str, dict[str, dict[str, str]]]]:
    """Function docs as BFCL shows them to a model, and their source types.

    Every description gets BFCL's language hint. BFCL asks for every top-level argument of a
    Java or JavaScript function as a string of source code (``"true"``, ``"new
    ArrayList<>(Arrays.asList(1, 2))"``) and converts it back with the declared type when it
    checks the call. So each such parameter becomes ``string`` with its Java/JS type told in
    the description (array item types and JS dict properties move there too), and the declared
    types come back as ``{function: {parameter: {"type": T, "items": T}}}`` for the checker.
    Python parameters are shown as they are. Malformed entries come back unchanged
    (``normalize_schema`` reports them).
    """
    if language == "python":
        return [with_hint(fn, language) for fn in functions], {}
    name = LANGUAGE_NAMES[language]
    array = "array" if language == "javascript" else ("Array", "ArrayList")
    out: list[Any] = []
    types: dict[str, dict[str, dict[str, str]]] = {}
    for fn in functions:
        params = fn.get("parameters") if isinstance(fn, Mapping) else None
        props = params.get("properties") if isinstance(params, Mapping) else None
        if not isinstance(props, Mapping) or not all(
            isinstance(v, Mapping) for v in props.values()
        ):
            out.append(fn)
            continue
        fn = copy.deepcopy(with_hint(fn, language))
        declared: dict[str, dict[str, str]] = {}
        for key, prop in fn["parameters"]["properties"].items():
            kind = prop.get("type")
            text = str(prop.get("description") or "")
            if kind == "any":
                text += (
                    f" This parameter can be of any type of {name} object in string representation."
                )
            else:
                text += f" This is {name} {kind} type parameter in string representation."
            source = {"type": str(kind)}
            items = prop.pop("items", None) if kind in array else None
            if isinstance(items, Mapping) and "type" in items:
                source["items"] = str(items["type"])
                text += (
                    f" The list elements are of type {items['type']}; they are not in string "
                    "representation."
                )
            if language == "javascript" and kind == "dict" and "properties" in prop:
                text += (
                    " The dictionary entries have the following schema; they are not in string "
                    f"representation. {json.dumps(prop.pop('properties'))}"
                )
            prop["description"] = text
            prop["type"] = "string"
            declared[key] = source
        types[str(fn.get("name"))] = declared
        out.append(fn)
    return out, types


def with_hint(fn: Any, language: str) -> Any:
    """``fn`` with BFCL's language hint after its description (a malformed doc unchanged)."""
    if not isinstance(fn, Mapping) or not isinstance(fn.get("description") or "", str):
        return fn
    return {**fn, "description": str(fn.get("description") or "") + LANGUAGE_HINTS[language]}


def parse_python_call(
    source: str, params: Mapping[str, Sequence[str]] | None = None
) -> tuple[str, dict[str, Any]]:
    """``(name, arguments)`` of one BFCL reference call such as ``cd(folder='document')``.

    Arguments must be Python literals. Positional arguments are named after the tool's
    parameters in declaration order (``params`` maps tool name -> parameter names), as
    BFCL executes them against the Python methods those docs describe.
    """
    try:
        tree = ast.parse(source.strip(), mode="eval").body
    except SyntaxError as exc:
        raise ValueError(f"not a Python call: {exc.msg}") from None
    if not isinstance(tree, ast.Call):
        raise ValueError("not a function call")
    name = _dotted(tree.func)
    args: dict[str, Any] = {}
    names = list((params or {}).get(name, ()))
    if len(tree.args) > len(names):
        raise ValueError(
            f"{len(tree.args)} positional argument(s), but {name!r} "
            f"declares {len(names)} parameter(s)"
        )
    try:
        for param, value in zip(names, tree.args, strict=False):
            args[param] = ast.literal_eval(value)
        for keyword in tree.keywords:
            if keyword.arg is None:
                raise ValueError("**kwargs are not supported")
            args[keyword.arg] = ast.literal_eval(keyword.value)
    except (ValueError, SyntaxError, TypeError) as exc:
        raise ValueError(f"argument is not a Python literal: {exc}") from None
    return name, _jsonable(args)


def _dotted(node: ast.expr) -> str:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return f"{_dotted(node.value)}.{node.attr}"
    raise ValueError("the called function must be a (dotted) name")


def _jsonable(value: Any) -> Any:
    # Python literals allow tuples and sets; arguments are JSON, so both become arrays.
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_jsonable(v) for v in value]
    if isinstance(value, set | frozenset):
        return [_jsonable(v) for v in sorted(value, key=repr)]
    if isinstance(value, complex | bytes):
        raise ValueError(f"{type(value).__name__} values have no JSON form")
    return value


def problem_error(problem: SchemaProblem, *, file: str, where: str) -> ImportFormatError:
    return ImportFormatError(problem.message, file=file, where=f"{where}{problem.where[1:]}")
