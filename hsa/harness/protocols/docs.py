"""Tool documentation printed into the system prompt: JSON, XML, Python signatures, Markdown.

``json``, ``xml`` and ``python`` follow the function-doc formats of the BFCL v4
format-sensitivity study (``format_function_doc`` in ``bfcl_eval/model_handler/utils.py``): a
JSON list indented by four spaces; ``<function name>`` elements with ``<desc>`` and nested
``<param name type required [default]>`` elements; and Python functions whose docstrings list
``name (type[, default=...]): description`` lines, nested for object properties. The XML is
escaped (BFCL's is not); the Python doc is a real signature with keyword-only, typed
parameters (those whose names are not Python names go in ``**kwargs``, as calls pass them),
where only an optional parameter has a default (a required one's default is noted in the
docstring, ``(bool, required, default=False)``: a call that leaves it out is refused), and one
whose schema gives none has ``= ...`` (``= None`` would say None is a value it takes).
``markdown`` is a heading per tool and a nested bullet list of parameters. In all three a
parameter's description is followed by what else its schema says of its values, as BFCL adds
``Enum values: [...]``: the values it may take, the bounds its schema sets
(``Constraints: {...}``, in JSON Schema's words), then, after ``Items:``, the same of its
array's items.

Local ``$ref``s (``#/$defs/...``) are resolved for the XML, Python and Markdown docs; the JSON
doc prints the schema as stored.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from hsa.harness.jsonvalues import resolve_pointer
from hsa.harness.model import Tool
from hsa.harness.protocols import register_doc_format
from hsa.harness.protocols.pycalls import is_identifier
from hsa.harness.protocols.xmlcalls import escape_attr, escape_text

#: names for the ``**`` parameter of a Python doc: the first that no parameter has
_SPLATS = ("kwargs", "kw", "other", *(f"kwargs{i}" for i in range(1, 1000)))
# The bound keeps a recursive type (a $ref cycle through properties or items) from recursing.
_MAX_DEPTH = 32
#: how many named (``$ref``) types one tool's doc documents below their parameters at most:
#: types that link to each other (each a property of the others) have as many paths through
#: them as their orderings, and a doc of them all would outgrow any prompt (plain nested
#: objects are all documented: their doc is as long as the schema)
_MAX_NESTED = 64
#: how many named (``$ref``) schemas one type string spells out at most, for the same reason
_MAX_TYPE_NODES = 64


def _resolve(schema: Mapping[str, Any], root: Mapping[str, Any], depth: int = 0) -> Mapping:
    """``schema`` with a local ``$ref`` followed (its own keywords win over the target's)."""
    ref = schema.get("$ref")
    if not isinstance(ref, str) or not ref.startswith("#") or depth > _MAX_DEPTH:
        return schema
    node = resolve_pointer(root, ref)
    if not isinstance(node, Mapping) or node is schema:
        return schema
    merged = {**_resolve(node, root, depth + 1), **{k: v for k, v in schema.items() if k != "$ref"}}
    return merged


def _refs(schema: Mapping[str, Any], root: Mapping[str, Any]) -> frozenset[str]:
    """The local ``$ref``s ``_resolve`` follows from ``schema``: a doc that meets one of them
    again below itself is documenting a recursive type, and stops there."""
    found: set[str] = set()
    while isinstance(ref := schema.get("$ref"), str) and ref.startswith("#") and ref not in found:
        found.add(ref)
        node = resolve_pointer(root, ref)
        if not isinstance(node, Mapping):
            break
        schema = node
    return frozenset(found)


def _options(schema: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """A schema's ``anyOf`` (else ``oneOf``) alternatives: ``true``, which any value fits, as
    ``{}``; ``false``, which none does, left out."""
    options = schema.get("anyOf") or schema.get("oneOf")
    if not isinstance(options, list):
        return []
    return [o if isinstance(o, Mapping) else {} for o in options if o is not False]


def _properties(schema: Mapping[str, Any]) -> Iterator[tuple[str, Mapping[str, Any], bool]]:
    """(name, schema, required) of each property of an object schema."""
    props = schema.get("properties") or {}
    required = set(schema.get("required") or [])
    for name, sub in props.items():
        yield name, sub if isinstance(sub, Mapping) else {}, name in required


def _json_type(
    schema: Mapping[str, Any],
    root: Mapping[str, Any],
    depth: int = 0,
    seen: frozenset[str] = frozenset(),
    budget: list[int] | None = None,
) -> str:
    """A JSON Schema type in JSON Schema words: ``string``, ``array[integer]``, ``a | b``; a
    recursive type, met again below itself, by its name (as is any type once the string has
    spelled ``_MAX_TYPE_NODES`` schemas: types that link to each other have as many paths
    through them as their orderings)."""
    budget = [_MAX_TYPE_NODES] if budget is None else budget
    refs = _refs(schema, root)
    if refs & seen or (refs and budget[0] <= 0):
        return sorted(refs & seen or refs)[0].rsplit("/", 1)[-1] or "object"
    budget[0] -= 1
    seen |= refs
    schema = _resolve(schema, root)
    if depth > _MAX_DEPTH:
        return "any"
    options = _options(schema)
    if options:
        return " | ".join(
            dict.fromkeys(_json_type(o, root, depth + 1, seen, budget) for o in options)
        )
    kind = schema.get("type")
    if isinstance(kind, list):
        return " | ".join(str(k) for k in kind)
    values = [schema["const"]] if "const" in schema else schema.get("enum")
    if kind is None and isinstance(values, list) and values:  # the values' own types
        return " | ".join(dict.fromkeys(_JSON_WORDS.get(type(v), "any") for v in values))
    if kind == "array" and isinstance(schema.get("items"), Mapping):
        return f"array[{_json_type(schema['items'], root, depth + 1, seen, budget)}]"
    if kind == "object" and isinstance(schema.get("additionalProperties"), Mapping):
        return (
            f"object[{_json_type(schema['additionalProperties'], root, depth + 1, seen, budget)}]"
        )
    if kind is None:
        return "object" if "properties" in schema else "any"
    return str(kind)


#: the JSON Schema type of a JSON value, by its Python type
_JSON_WORDS = {
    str: "string",
    int: "integer",
    float: "number",
    bool: "boolean",
    type(None): "null",
    list: "array",
    dict: "object",
}

_PY_TYPES = {
    "string": "str",
    "integer": "int",
    "number": "float",
    "boolean": "bool",
    "null": "None",
    "array": "list",
    "object": "dict",
}


def _py_type(
    schema: Mapping[str, Any],
    root: Mapping[str, Any],
    depth: int = 0,
    seen: frozenset[str] = frozenset(),
    budget: list[int] | None = None,
) -> str:
    """A JSON Schema type as a Python annotation: ``str``, ``list[int]``, ``Literal['a', 'b']``.

    A ``$ref`` to a definition is named after it (``#/$defs/FlightInfo`` -> ``FlightInfo``).
    """
    ref = schema.get("$ref")
    if isinstance(ref, str) and ref.startswith("#/") and _resolve(schema, root) is not schema:
        name = ref.rsplit("/", 1)[-1]
        if name.isidentifier():
            return name
    budget = [_MAX_TYPE_NODES] if budget is None else budget
    refs = _refs(schema, root)
    if refs & seen or (refs and budget[0] <= 0):
        return "Any"  # a recursive type met again below itself (or a type string grown long)
    budget[0] -= 1
    seen |= refs
    schema = _resolve(schema, root)
    if depth > _MAX_DEPTH:
        return "Any"
    if isinstance(schema.get("enum"), list) and schema["enum"]:
        return "Literal[" + ", ".join(repr(v) for v in schema["enum"]) + "]"
    if "const" in schema:
        return f"Literal[{schema['const']!r}]"
    options = _options(schema)
    if options:
        return " | ".join(
            dict.fromkeys(_py_type(o, root, depth + 1, seen, budget) for o in options)
        )
    kind = schema.get("type")
    if isinstance(kind, list):
        return " | ".join(_PY_TYPES.get(str(k), str(k)) for k in kind)
    if kind == "array" and isinstance(schema.get("items"), Mapping):
        return f"list[{_py_type(schema['items'], root, depth + 1, seen, budget)}]"
    if kind == "object" and isinstance(schema.get("additionalProperties"), Mapping):
        return (
            f"dict[str, {_py_type(schema['additionalProperties'], root, depth + 1, seen, budget)}]"
        )
    if kind is None:
        return "dict" if "properties" in schema else "Any"
    return _PY_TYPES.get(str(kind), str(kind))


#: the keywords that bound a value beyond its type and listed values, which a doc shows as
#: the schema spells them (``format`` too: BFCL's importer writes its ``float`` type so)
_CONSTRAINTS = (
    "multipleOf",
    "minimum",
    "exclusiveMinimum",
    "maximum",
    "exclusiveMaximum",
    "minLength",
    "maxLength",
    "pattern",
    "format",
    "minItems",
    "maxItems",
    "uniqueItems",
    "minProperties",
    "maxProperties",
)


def _description(
    schema: Mapping[str, Any], root: Mapping[str, Any], seen: frozenset[str] = frozenset()
) -> str:
    """A parameter's description, with the values it may take when they are listed and the
    bounds its schema sets (``Constraints: {"maximum": 400}``), and then what its array's
    items say of themselves after ``Items:`` (their description, values and bounds:
    an array of enums takes only those values, which its type, ``array[string]``, does not
    say); a recursive type's items, met again below themselves, once."""
    refs = _refs(schema, root)
    plain = _resolve(schema, root)
    notes = [str(plain.get("description") or "").strip()]
    values = _values(plain, root)
    if values is not None:
        notes.append(f"Enum values: {json.dumps(values, ensure_ascii=False)}.")
    bounds = {key: plain[key] for key in _CONSTRAINTS if key in plain}
    if bounds:
        notes.append(f"Constraints: {json.dumps(bounds, ensure_ascii=False)}.")
    items = plain.get("items")
    if isinstance(items, Mapping) and not refs & seen:
        about = _description(items, root, seen | refs)
        if about:
            notes.append(f"Items: {about}")
    return " ".join(note for note in notes if note)


def _values(
    schema: Mapping[str, Any],
    root: Mapping[str, Any],
    depth: int = 0,
    seen: frozenset[str] = frozenset(),
    budget: list[int] | None = None,
) -> list | None:
    """The values a schema allows when it lists them: its ``enum``, its ``const``, or those of
    its ``anyOf``/``oneOf`` alternatives when each lists its own or is ``null`` (an optional
    enum, as Pydantic writes ``Optional[Literal[...]]``); None when any value of a type goes."""
    budget = [_MAX_TYPE_NODES] if budget is None else budget
    refs = _refs(schema, root)
    if refs & seen or (refs and budget[0] <= 0):
        return None  # a recursive type (or one past the budget): not a list of values
    budget[0] -= 1
    seen |= refs
    schema = _resolve(schema, root)
    if isinstance(schema.get("enum"), list):
        return list(schema["enum"])
    if "const" in schema:
        return [schema["const"]]
    options = _options(schema)
    if not options or depth > _MAX_DEPTH:
        return None
    values: list = []
    keys: set[str] = set()
    listed = False
    for option in options:
        plain = _resolve(option, root)
        if plain.get("type") == "null" and not {"enum", "const"} & plain.keys():
            continue  # null: the type says so
        found = _values(option, root, depth + 1, seen, budget)
        if found is None:
            return None
        listed = True
        for value in found:
            key = json.dumps(value, sort_keys=True)  # 1, 1.0 and true apart
            if key not in keys:
                keys.add(key)
                values.append(value)
    return values if listed else None


def _nested(
    schema: Mapping[str, Any], root: Mapping[str, Any], depth: int = 0
) -> tuple[Mapping[str, Any] | None, frozenset[str]]:
    """The object schema whose properties a parameter documents below itself, if any, and
    the ``$ref``s followed to reach it.

    That is the parameter's own object schema, or its array items', or, for an
    ``anyOf``/``oneOf``, the properties of every alternative that has some (each once, in
    order; required where every such alternative requires it; a property the alternatives
    declare differently, such as a discriminator's ``const``, as an ``anyOf`` of their
    schemas).
    """
    refs = _refs(schema, root)
    schema = _resolve(schema, root)
    if schema.get("properties"):
        return schema, refs
    if depth > 2:
        return None, refs
    items = schema.get("items")
    if isinstance(items, Mapping):
        found, more = _nested(items, root, depth + 1)
        if found is not None:
            return found, refs | more
    alternatives = []
    for option in [*(schema.get("anyOf") or []), *(schema.get("oneOf") or [])]:
        if isinstance(option, Mapping):
            found, more = _nested(option, root, depth + 1)
            if found is not None:
                alternatives.append(found)
                refs |= more
    if len(alternatives) <= 1:
        return (alternatives[0] if alternatives else None), refs
    declared: dict[str, dict[str, Mapping[str, Any]]] = {}
    for alternative in alternatives:
        for name, sub in (alternative.get("properties") or {}).items():
            key = json.dumps(sub, sort_keys=True, default=str)
            declared.setdefault(name, {}).setdefault(key, sub)
    merged = {name: _either(list(subs.values())) for name, subs in declared.items()}
    required = [
        name for name in merged if all(name in (a.get("required") or ()) for a in alternatives)
    ]
    return {"type": "object", "properties": merged, "required": required}, refs


def _either(schemas: list[Mapping[str, Any]]) -> Mapping[str, Any]:
    """One property the alternatives declare as ``schemas``: the schema, or an ``anyOf`` of
    them with what they all say alike (a discriminator's description, its type)."""
    if len(schemas) == 1:
        return schemas[0]
    alike = {
        key: schemas[0][key]
        for key in ("description", "title", "type")
        if key in schemas[0] and all(s.get(key) == schemas[0][key] for s in schemas)
    }
    return {**alike, "anyOf": schemas}


def _expands(refs: frozenset[str], seen: frozenset[str], budget: list[int]) -> bool:
    """Whether a parameter's nested object (reached through ``refs``) is documented below
    it: not when it is a type being documented above it (a recursive one: once), nor once
    the doc has documented ``_MAX_NESTED`` named types (plain nested objects always are)."""
    if not refs:
        return True  # a plain nested object: the doc is as long as the schema
    if refs & seen or budget[0] <= 0:
        return False
    budget[0] -= 1
    return True


@dataclass(frozen=True, slots=True)
class _Param:
    """One parameter as the XML, Python and Markdown docs document it."""

    name: str
    schema: Mapping[str, Any]  # as declared: type strings follow its ``$ref``s themselves
    resolved: Mapping[str, Any]
    required: bool
    #: the properties of its object documented below it; None when it has none or they are
    #: not documented (a recursive type met again, a doc grown long)
    nested: list[_Param] | None


def _params(
    schema: Mapping[str, Any],
    root: Mapping[str, Any],
    depth: int = 0,
    seen: frozenset[str] = frozenset(),
    budget: list[int] | None = None,
) -> list[_Param]:
    """The parameters of an object schema, each with those it documents below itself, in the
    order a doc prints them (which is the order the named-type budget is spent in)."""
    budget = [_MAX_NESTED] if budget is None else budget
    if depth > _MAX_DEPTH:
        return []
    params = []
    for name, sub, required in _properties(_resolve(schema, root)):
        nested, refs = _nested(sub, root)
        below = None
        if nested is not None and _expands(refs, seen, budget):
            below = _params(nested, root, depth + 1, seen | refs, budget)
        params.append(_Param(name, sub, _resolve(sub, root), required, below))
    return params


# Each doc is its tools' blocks joined: a block is made once per tool object (``Tool.derived``,
# keyed by the module-level function that makes it), as the variants of a harness share the
# tools a rewrite left alone and a rule draws several protocols for one harness.


@register_doc_format("json")
def json_docs(tools: Sequence[Tool]) -> str:
    # ``json.dumps(tools, indent=4)``: a list's items indented one level, whose lines are
    # their own indented JSON shifted by four spaces (JSON text holds no raw newline but those)
    if not tools:
        return "[]"
    return "[\n" + ",\n".join([t.derived(_json_block) for t in tools]) + "\n]"


def _json_block(tool: Tool) -> str:
    text = json.dumps(tool.to_function(), ensure_ascii=False, indent=4)
    return "    " + text.replace("\n", "\n    ")


@register_doc_format("xml")
def xml_docs(tools: Sequence[Tool]) -> str:
    return "\n\n".join([t.derived(_xml_block) for t in tools])


def _xml_block(tool: Tool) -> str:
    root = tool.parameters
    lines = [
        f'<function name="{escape_attr(tool.name)}">',
        f"  <desc>{escape_text(tool.description)}</desc>",
        "  <params>",
    ]
    lines += _xml_params(_params(root, root), root, 2)
    lines += ["  </params>", "</function>"]
    return "\n".join(lines)


def _xml_params(params: list[_Param], root: Mapping[str, Any], level: int) -> list[str]:
    pad = "  " * level
    lines: list[str] = []
    for p in params:
        attrs = (
            f'name="{escape_attr(p.name)}" type="{escape_attr(_json_type(p.schema, root))}" '
            f'required="{"true" if p.required else "false"}"'
        )
        if "default" in p.resolved:
            default = json.dumps(p.resolved["default"], ensure_ascii=False)
            attrs += f' default="{escape_attr(default)}"'
        lines.append(f"{pad}<param {attrs}>")
        lines.append(f"{pad}  <desc>{escape_text(_description(p.schema, root))}</desc>")
        if p.nested is not None:
            lines.append(f"{pad}  <params>")
            lines += _xml_params(p.nested, root, level + 2)
            lines.append(f"{pad}  </params>")
        lines.append(f"{pad}</param>")
    return lines


def _docstring_text(text: str) -> str:
    # A docstring cannot hold its own closing quotes or end in a backslash.
    return text.replace("\\", "\\\\").replace('"""', '\\"\\"\\"')


@register_doc_format("python")
def python_docs(tools: Sequence[Tool]) -> str:
    return "\n\n\n".join([t.derived(_python_block) for t in tools])


def _python_block(tool: Tool) -> str:
    root = tool.parameters
    params = list(_properties(_resolve(root, root)))
    signature = []
    for name, sub, required in params:
        if not is_identifier(name):
            continue  # a keyword argument it cannot be: in **kwargs (below)
        annotation = _py_type(sub, root)
        resolved = _resolve(sub, root)
        if required:  # a default too: the call must still pass it
            signature.append(f"{name}: {annotation}")
        elif "default" in resolved:
            signature.append(f"{name}: {annotation} = {resolved['default']!r}")
        else:  # ``...``, as stubs write a default they leave unsaid: None only if the type says
            signature.append(f"{name}: {annotation} = ...")
    star = "*, " if signature else ""
    others = [name for name, _, _ in params if not is_identifier(name)]
    if others:  # named unlike every parameter
        taken = {name for name, _, _ in params}
        signature.append("**" + next(n for n in _SPLATS if n not in taken))
    lines = [f"def {tool.name}({star}{', '.join(signature)}):", '    """']
    lines += [f"    {line}".rstrip() for line in _docstring_text(tool.description).splitlines()]
    if params:
        lines += ["", "    Args:"]
        lines += _py_args(_params(root, root), root, 2)
    if others:
        spelled = ", ".join(f"{name!r}: ..." for name in others)
        text = f"Arguments that are not Python names go in {signature[-1]}: "
        text += f"{tool.name}(**{{{spelled}}})."
        lines += ["", f"    {_docstring_text(text)}"]
    lines.append('    """')
    return "\n".join(lines)


def _py_args(params: list[_Param], root: Mapping[str, Any], level: int) -> list[str]:
    pad = "    " * level
    lines: list[str] = []
    for p in params:
        notes = [_py_type(p.schema, root)]
        if "default" in p.resolved:
            if p.required:  # passed all the same: a default alone reads as optional
                notes.append("required")
            notes.append(f"default={p.resolved['default']!r}")
        elif not p.required:
            notes.append("optional")
        text = _description(p.schema, root).replace("\n", " ")
        # an argument's name as the call writes it: a keyword, else the **kwargs key
        said = p.name if level > 2 or is_identifier(p.name) else repr(p.name)
        line = f"{said} ({', '.join(notes)}): {text}".rstrip()
        lines.append(f"{pad}{_docstring_text(line)}")
        if p.nested is not None:
            lines += _py_args(p.nested, root, level + 1)
    return lines


@register_doc_format("markdown")
def markdown_docs(tools: Sequence[Tool]) -> str:
    return "\n\n".join([t.derived(_markdown_block) for t in tools])


def _markdown_block(tool: Tool) -> str:
    root = tool.parameters
    lines = [f"### {tool.name}"]
    if tool.description.strip():
        lines += ["", tool.description.strip()]
    params = _md_params(_params(root, root), root, 0)
    lines += ["", "Parameters:", *params] if params else ["", "Parameters: none."]
    return "\n".join(lines)


def _md_params(params: list[_Param], root: Mapping[str, Any], level: int) -> list[str]:
    pad = "  " * level
    lines: list[str] = []
    for p in params:
        notes = [_json_type(p.schema, root), "required" if p.required else "optional"]
        if "default" in p.resolved:
            notes.append(f"default `{json.dumps(p.resolved['default'], ensure_ascii=False)}`")
        text = _description(p.schema, root).replace("\n", " ")
        lines.append(f"{pad}- `{p.name}` ({', '.join(notes)}){': ' + text if text else ''}")
        if p.nested is not None:
            lines += _md_params(p.nested, root, level + 1)
    return lines


@register_doc_format("lines", drawn=False)
def lines_docs(tools: Sequence[Tool]) -> str:
    """One line per tool, ``name(param: type, optional?: type): first sentence``: enum values
    as ``a|b``, a required object's properties inline as ``{...}`` (those of its object
    alternatives too; an optional object is ``object``), arrays as ``type[]``; parameter
    descriptions and defaults are left out, so prompts stay short (compact harnesses for small
    models)."""
    return "\n".join([t.derived(_lines_entry) for t in tools])


def _lines_entry(tool: Tool) -> str:
    root = tool.parameters
    summary = _first_sentence(tool.description)
    params = _line_params(root, root, 0)
    return f"- {tool.name}({params})" + (f": {summary}" if summary else "")


def _first_sentence(text: str) -> str:
    flat = " ".join(text.split())
    end = flat.find(". ")
    return flat if end < 0 else flat[: end + 1]


def _line_params(
    schema: Mapping[str, Any],
    root: Mapping[str, Any],
    depth: int,
    seen: frozenset[str] = frozenset(),
    budget: list[int] | None = None,
) -> str:
    budget = [_MAX_NESTED] if budget is None else budget
    parts = []
    for name, sub, required in _properties(_resolve(schema, root)):
        kind = _line_type(sub, root, depth, seen, budget, inline=required)
        parts.append(f"{name}{'' if required else '?'}: {kind}")
    return ", ".join(parts)


#: what a bare enum value in a ``lines`` doc may not hold: it would read as two values, or
#: end its parameter, an object or a list (a space inside a value reads as it is)
_LINE_BREAKS = re.compile(r"[|,(){}\[\]\t\n\r\f\v]")


def _line_value(value: Any) -> str:
    """An enum value as a ``lines`` doc prints it: a plain string bare, any other value (and a
    string that would read as another value, or as more than one) as JSON."""
    plain = (
        isinstance(value, str)
        and value == value.strip()
        and value != ""
        and not _LINE_BREAKS.search(value)
        and not _reads_as_json(value)
    )
    return value if plain else json.dumps(value, ensure_ascii=False)


def _reads_as_json(text: str) -> bool:
    try:
        json.loads(text)
    except ValueError:
        return False
    return True


def _line_type(
    schema: Mapping[str, Any],
    root: Mapping[str, Any],
    depth: int,
    seen: frozenset[str],
    budget: list[int],
    *,
    inline: bool = True,
) -> str:
    """A parameter's type in a ``lines`` doc: an object, its own or that of its object
    alternatives (tau2's ``anyOf: [{$ref: FlightInfo}, {type: object}]``, merged as the other
    docs merge them: ``_nested``), written ``{...}`` in place of the word ``object``."""
    refs = _refs(schema, root)
    plain = _resolve(schema, root)
    enum = plain.get("enum")
    if isinstance(enum, list) and enum:
        return "|".join(_line_value(v) for v in enum)
    if plain.get("properties") and depth < _MAX_DEPTH:  # an object of its own, whatever else
        # it says (anyOf of required sets, additionalProperties)
        return _line_object(plain, refs, root, depth, seen, budget, inline=inline)
    items = plain.get("items")
    if plain.get("type") == "array" and isinstance(items, Mapping) and depth < _MAX_DEPTH:
        inner = _line_type(items, root, depth + 1, seen | refs, budget, inline=inline)
        return f"({inner})[]" if "|" in inner else f"{inner}[]"
    kinds = _json_type(plain, root).split(" | ")
    # the object alternatives' fields: an array alternative's items are not the object's
    objects = [
        o for o in _options(plain) if not isinstance(_resolve(o, root).get("items"), Mapping)
    ]
    nested, more = _nested({"anyOf": objects}, root)
    if nested is None or "object" not in kinds or depth >= _MAX_DEPTH:
        return " | ".join(kinds)
    braces = _line_object(nested, refs | more, root, depth, seen, budget, inline=inline)
    return " | ".join(braces if kind == "object" else kind for kind in kinds)


def _line_object(
    schema: Mapping[str, Any],
    refs: frozenset[str],
    root: Mapping[str, Any],
    depth: int,
    seen: frozenset[str],
    budget: list[int],
    *,
    inline: bool,
) -> str:
    """An object in a ``lines`` doc: ``{field: type, ...}``, the word ``object`` where it is
    not written inline, its type's name where it is recursive or the doc has grown long."""
    if not inline:
        return "object"
    if refs and not _expands(refs, seen, budget):
        return sorted(refs)[0].rsplit("/", 1)[-1]
    return "{" + _line_params(schema, root, depth + 1, seen | refs, budget) + "}"
