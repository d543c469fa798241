"""Checking tool-call arguments against each tool's JSON Schema: one validator, one message.

Every layer that judges a call -- an environment executing it, the task-preservation checks,
a teacher's verification -- asks ``ArgumentChecker.problem`` (or ``checker_of(harness)``),
so a call is accepted or refused, and described, the same way everywhere:

- ``unknown tool 'NAME'; available: A, B``
- ``invalid arguments for NAME: $.json.path: what jsonschema says`` (the first problem by
  path, so the message does not depend on the order jsonschema finds them in).

Compiling a schema costs far more than validating against it, so each distinct schema is
compiled once per process (keyed by its JSON text), whichever tool, harness or variant it
comes from.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from functools import lru_cache
from typing import Any

from jsonschema.protocols import Validator
from jsonschema.validators import Draft202012Validator, validator_for

from hsa.harness.jsonvalues import json_path
from hsa.harness.model import Harness, Tool


def schema_class(schema: Any) -> type[Validator]:
    """The validator of the JSON Schema draft ``schema`` declares by its ``$schema`` (draft-07
    and draft-04 tool schemas are common: zod and older MCP servers write them); 2020-12 when
    it declares none, or one jsonschema does not know."""
    declared = schema.get("$schema") if isinstance(schema, Mapping) else None
    if not isinstance(declared, str):
        return Draft202012Validator
    return validator_for({"$schema": declared}, default=Draft202012Validator)


@lru_cache(maxsize=4096)
def _compiled(schema_json: str) -> Validator:
    # Built from the JSON text, so a schema held as tuples or read-only mappings validates
    # exactly as the same schema read from a file.
    schema = json.loads(schema_json)
    return schema_class(schema)(schema)


def validator(tool: Tool) -> Validator:
    """The compiled JSON Schema validator of ``tool``'s parameters."""
    return _compiled(json.dumps(tool.parameters, sort_keys=True, ensure_ascii=False))


def schema_problem(tool: Tool, args: Mapping[str, Any]) -> str | None:
    """Why ``args`` do not fit ``tool``'s schema (the first problem by path), or None."""
    return _problem(tool.name, validator(tool), args)


#: the keywords that judge which argument names a call gives, not the values it gives them
NAME_KEYWORDS = frozenset(
    {
        "required",
        "additionalProperties",
        "unevaluatedProperties",
        "propertyNames",
        "dependentRequired",
        "dependencies",
    }
)


def _problem(
    name: str, checker: Validator, args: Mapping[str, Any], *, values: bool = True
) -> str | None:
    instance = dict(args)
    if checker.is_valid(instance):  # the common case: skip collecting every error
        return None
    errors = [
        e for e in checker.iter_errors(instance) if values or str(e.validator) in NAME_KEYWORDS
    ]
    errors.sort(key=lambda e: list(map(str, e.path)))
    if not errors:
        return None
    first = errors[0]
    return f"invalid arguments for {name}: {json_path(first.absolute_path)}: {first.message}"


class ArgumentChecker:
    """Checks calls against a fixed set of tools (validation runs on every call, so each
    tool's validator is looked up once, on first use)."""

    def __init__(self, tools: Iterable[Tool]):
        self._tools = {t.name: t for t in tools}
        self._validators: dict[str, Validator] = {}

    def __contains__(self, tool: str) -> bool:
        return tool in self._tools

    def problem(self, tool: str, args: Mapping[str, Any], *, values: bool = True) -> str | None:
        """Why a call to ``tool`` with ``args`` is refused (unknown tool, or the first schema
        problem with its path), or None when it is accepted. Without ``values``, only the
        argument names are judged (``NAME_KEYWORDS``: a required argument missing, one the
        schema does not allow), not the values given them (their types, enums, ranges)."""
        checker = self._validators.get(tool)
        if checker is None:
            found = self._tools.get(tool)
            if found is None:
                return f"unknown tool {tool!r}; available: {', '.join(sorted(self._tools))}"
            checker = self._validators[tool] = validator(found)
        return _problem(tool, checker, args, values=values)


def _harness_checker(harness: Harness) -> ArgumentChecker:
    skill_tool = () if harness.skill_tool is None else (harness.skill_tool,)
    return ArgumentChecker((*harness.tools, *skill_tool))


def checker_of(harness: Harness) -> ArgumentChecker:
    """The checker of every tool a call under ``harness`` may name (``Harness.tool``'s: its
    skill-loading tool included), kept on the harness."""
    return harness.derived(_harness_checker)
