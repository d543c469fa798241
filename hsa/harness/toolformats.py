"""Tool definitions in OpenAI, MCP and Anthropic formats: detection, conversion, legal names."""

from __future__ import annotations

import hashlib
import json
import re
import unicodedata
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from hsa.errors import ImportFormatError
from hsa.harness.model import Tool

API_NAME = re.compile(r"[a-zA-Z0-9_-]{1,64}")  # fullmatch: "$" would let a final "\n" by
EMPTY_PARAMETERS = {"type": "object", "properties": {}}
#: where each format keeps a tool's argument schema
SCHEMA_KEYS = {"openai": "parameters", "mcp": "inputSchema", "anthropic": "input_schema"}


def detect_tool_format(entry: Mapping[str, Any]) -> str:
    """``openai`` (wrapped or bare function), ``mcp`` (``inputSchema``) or ``anthropic``."""
    if entry.get("type") == "function" and isinstance(entry.get("function"), Mapping):
        return "openai"
    if "inputSchema" in entry:
        return "mcp"
    if "input_schema" in entry:
        return "anthropic"
    if "parameters" in entry or ("name" in entry and "description" in entry):
        return "openai"
    kind = entry.get("type")
    if isinstance(kind, str) and kind not in ("function", "custom"):
        raise ImportFormatError(
            f"a built-in tool of its provider (type {kind!r}, as Anthropic's bash, "
            "text_editor and web_search tools are): the provider defines its schema, which the "
            "file does not hold, and hsa needs every tool's argument schema; leave it out, or "
            "write it as a tool with its input_schema"
        )
    raise ImportFormatError(
        "not a tool definition: expected OpenAI ({type: function, function: {...}} or "
        "{name, parameters}), MCP ({name, inputSchema}) or Anthropic ({name, input_schema})"
    )


def tool_entries(doc: Any) -> list[tuple[str, Any]]:
    """The tool entries of a tools document, each with its JSON path in it: a list
    (``$[i]``), ``{"tools": [...]}`` (MCP's ``tools/list`` result: ``$.tools[i]``), that result
    in its JSON-RPC response (``$.result.tools[i]``), or one tool object (``$``)."""
    at = "$"
    if isinstance(doc, Mapping) and isinstance(doc.get("result"), Mapping) and "jsonrpc" in doc:
        doc, at = doc["result"], "$.result"
    if isinstance(doc, Mapping) and isinstance(doc.get("tools"), list):
        doc, at = doc["tools"], f"{at}.tools"
    if isinstance(doc, Mapping) and ("name" in doc or "function" in doc):
        return [(at, doc)]
    if not isinstance(doc, list):
        raise ImportFormatError('a tools document must be a list of tools or {"tools": [...]}')
    return [(f"{at}[{i}]", entry) for i, entry in enumerate(doc)]


@dataclass(frozen=True, slots=True)
class ToolPlace:
    """Where a tool entry sits in its tools file, to point a problem found in the ``Tool``
    made of it (at a harness document's ``$.tools[i]...``) at what the file holds."""

    entry: str  # the entry's JSON path in the file
    body: str  # where its name and schema are: the entry, or its ``function`` (OpenAI's wrapper)
    format: str  # openai, mcp or anthropic
    own_extra: frozenset[str] = frozenset()  # the keys of its own ``extra`` (hsa's tools.json)

    def path(self, rest: str) -> str:
        """The file's path of ``rest``, a path inside the tool (``.parameters.properties.x``,
        ``.name``, ``.extra.strict``): the schema under the format's key, an ``extra`` field
        where the entry holds it."""
        if not rest:
            return self.entry
        if rest == ".parameters" or rest.startswith((".parameters.", ".parameters[")):
            return f"{self.body}.{SCHEMA_KEYS[self.format]}{rest[len('.parameters') :]}"
        if (field := _EXTRA_FIELD.match(rest)) is not None:
            key = json.loads(field["quoted"]) if field["quoted"] else field["name"]
            inside = ".extra" if key in self.own_extra else ""
            return f"{self.body}{inside}{rest[len('.extra') :]}"
        return f"{self.body}{rest}"


#: ``.extra`` and the key after it, as ``hsa.harness.validate`` writes a path
_EXTRA_FIELD = re.compile(r'\.extra(?:\.(?P<name>[^.\[]+)|\[(?P<quoted>"(?:[^"\\]|\\.)*")\])')
_TOOL_PATH = re.compile(r"\$\.tools\[(\d+)\]")


def in_file(where: str, message: str, places: Sequence[ToolPlace]) -> tuple[str, str] | None:
    """``where`` and ``message`` of a problem with a harness document's tools made of a
    tools file (``places``: where each came from), as that file's paths; None when ``where``
    is not in a tool."""
    found = _TOOL_PATH.match(where)
    if found is None or int(found[1]) >= len(places):
        return None

    def entry(match: re.Match[str]) -> str:
        k = int(match[1])
        return places[k].entry if k < len(places) else match[0]

    return places[int(found[1])].path(where[found.end() :]), _TOOL_PATH.sub(entry, message)


def tool_from_entry(entry: Any, *, where: str) -> tuple[Tool, ToolPlace]:
    """Convert the tool entry at ``where`` to a ``Tool`` (name not yet made legal), and where
    its parts are in the file (its detected format among them)."""
    if not isinstance(entry, Mapping):
        raise ImportFormatError(f"expected an object, got {type(entry).__name__}", where=where)
    try:
        fmt = detect_tool_format(entry)
    except ImportFormatError as exc:
        raise ImportFormatError(exc.message, where=where) from None
    wrapped = fmt == "openai" and "function" in entry
    body = entry["function"] if wrapped else entry
    entry_where, where = where, f"{where}.function" if wrapped else where
    schema_key = SCHEMA_KEYS[fmt]
    name = body.get("name")
    if not isinstance(name, str) or not name:
        raise ImportFormatError("tool has no name: add a non-empty string 'name'", where=where)
    params = body.get(schema_key)
    if params is None:
        params = {}
    if not isinstance(params, Mapping):
        raise ImportFormatError(
            f"{schema_key} of tool {name!r} must be a JSON Schema object, "
            f"got {type(params).__name__}",
            where=f"{where}.{schema_key}",
        )
    if params.get("type", "object") != "object":
        raise ImportFormatError(
            f"{schema_key} of tool {name!r} must be an object schema (type: object), "
            f"got type {params.get('type')!r}",
            where=f"{where}.{schema_key}.type",
        )
    # An empty schema means "no arguments", as ``Tool.from_dict`` reads it too.
    params = dict(params) if params else dict(EMPTY_PARAMETERS)
    said = "description" if body.get("description") else "title"
    description = body.get(said) or ""
    if not isinstance(description, str):
        raise ImportFormatError(
            f"{said} of tool {name!r} must be a string", where=f"{where}.{said}"
        )
    extra = body.get("extra") or {}  # as hsa writes it in tools.json
    if not isinstance(extra, Mapping):
        raise ImportFormatError(f"extra of tool {name!r} must be an object", where=f"{where}.extra")
    # the entry's other fields (OpenAI's strict, MCP's title, outputSchema, annotations,
    # Anthropic's cache_control, ...): kept aside, never shown to a model
    known = ("name", "description", schema_key, "extra")
    place = ToolPlace(entry_where, where, fmt, frozenset(extra))
    extra = {**{k: v for k, v in body.items() if k not in known}, **extra}
    return Tool(name=name, description=description, parameters=params, extra=extra), place


def legal_name(
    name: str,
    taken: set[str],
    *,
    illegal: str = r"[^a-zA-Z0-9_-]",
    longest: int = 64,
    fallback: str = "tool_",
    lead: str = "",
) -> str:
    """A legal name for ``name`` that is not in ``taken``: by default an OpenAI/Anthropic-legal
    tool name; ``illegal`` (a character class), ``longest``, ``fallback`` and ``lead`` (the
    characters a name may not begin with) give another kind's rules (a skill id's).

    Accents are dropped (``café`` -> ``cafe``), other illegal characters (dots, spaces, ...)
    become ``_``, and a name with no letter or digit left (``天気``) becomes ``fallback`` and a
    short hash; over-long names are cut and suffixed with a short hash so distinct source
    names stay distinct. The hash is of the name in Unicode's composed form (NFC), so a name
    gives one legal name however its bytes compose it.
    """
    digest = hashlib.sha1(unicodedata.normalize("NFC", name).encode("utf-8")).hexdigest()
    folded = "".join(c for c in unicodedata.normalize("NFKD", name) if not unicodedata.combining(c))
    candidate = re.sub(illegal, "_", folded).lstrip(lead)
    if not re.search(r"[a-zA-Z0-9]", candidate):
        candidate = fallback + digest[:6]
    if len(candidate) > longest or candidate in taken:
        for width in range(6, 41):
            suffix = "_" + digest[:width]
            fitted = candidate[: longest - len(suffix)] + suffix
            if fitted not in taken:
                return fitted
        raise ImportFormatError(f"cannot find a free legal name for {name!r}")
    return candidate


class DuplicateToolName(ImportFormatError):
    """Two tools of one tools document share a name."""


def tools_from_document(doc: Any, *, file: str | None = None) -> tuple[list[Tool], dict[str, str]]:
    """Tools from a tools document of any supported format, with legal, unique names.

    Returns the tools and ``name_map`` (legal name -> source name) for every renamed tool.
    Names that are already legal are kept; the others are made legal around them, so a source
    name never loses its spelling to a renamed neighbour.
    """
    tools, places = read_tools(doc, file=file)
    return legalize(tools, file=file, places=places)


def read_tools(doc: Any, *, file: str | None = None) -> tuple[list[Tool], list[ToolPlace]]:
    """The tools of a tools document as they are named there, and where each is in it."""
    try:
        entries = tool_entries(doc)
    except ImportFormatError as exc:
        raise ImportFormatError(exc.message, file=file, where="$") from None
    parsed: list[Tool] = []
    places: list[ToolPlace] = []
    for where, entry in entries:
        try:
            tool, place = tool_from_entry(entry, where=where)
        except ImportFormatError as exc:
            raise ImportFormatError(exc.message, file=file, where=exc.where) from None
        if "type" not in tool.parameters:  # tools APIs want the object type spelled out
            tool = replace(tool, parameters={"type": "object", **tool.parameters})
        parsed.append(tool)
        places.append(place)
    return parsed, places


def legalize(
    tools: Sequence[Tool],
    *,
    file: str | None = None,
    places: Sequence[ToolPlace] | None = None,
) -> tuple[list[Tool], dict[str, str]]:
    """``tools`` with API-legal, unique names, and ``name_map`` (legal name -> source name).
    A name given twice is refused at the place of its second tool (``places``; by default
    the tools are a list, the i-th at ``$[i]``)."""
    at = [p.entry for p in places] if places is not None else [f"$[{i}]" for i in range(len(tools))]
    seen: dict[str, int] = {}
    for i, tool in enumerate(tools):
        if tool.name in seen:
            raise DuplicateToolName(
                f"duplicate tool name {tool.name!r} (also at {at[seen[tool.name]]})",
                file=file,
                where=at[i],
            )
        seen[tool.name] = i
    taken = {t.name for t in tools if API_NAME.fullmatch(t.name)}
    out: list[Tool] = []
    name_map: dict[str, str] = {}
    for tool in tools:
        if API_NAME.fullmatch(tool.name):
            out.append(tool)
            continue
        legal = legal_name(tool.name, taken)
        taken.add(legal)
        name_map[legal] = tool.name
        out.append(replace(tool, name=legal))
    return out, name_map


def tools_to_mcp(
    tools: Sequence[Tool], name_map: Mapping[str, str] | None = None
) -> list[dict[str, Any]]:
    """Tools as MCP ``Tool`` objects, with the fields kept in ``extra`` back in place.

    ``name_map`` (legal name -> source name, as importers keep it in the harness's metadata)
    gives renamed tools their source names back, since MCP allows names the APIs refuse.
    """
    name_map = name_map or {}
    out = []
    for tool in tools:
        entry: dict[str, Any] = {"name": name_map.get(tool.name, tool.name)}
        if "title" in tool.extra:
            entry["title"] = tool.extra["title"]
        entry["description"] = tool.description
        entry["inputSchema"] = dict(tool.parameters)
        entry.update((k, v) for k, v in tool.extra.items() if k != "title")
        out.append(entry)
    return out
