"""Checking tool-call arguments against each tool's JSON Schema, validators compiled once."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from jsonschema.validators import Draft202012Validator

from hsa.harness.model import Tool
from hsa.harness.validate import json_path


class ArgumentChecker:
    """Validators for a fixed set of tools, compiled once (validation runs on every call)."""

    def __init__(self, tools: Iterable[Tool]):
        self._validators = {t.name: Draft202012Validator(dict(t.parameters)) for t in tools}

    def __contains__(self, tool: str) -> bool:
        return tool in self._validators

    def problem(self, tool: str, args: Mapping[str, Any]) -> str | None:
        """Why ``args`` do not fit ``tool``'s schema (first problem, with its path), or None."""
        validator = self._validators.get(tool)
        if validator is None:
            return f"unknown tool {tool!r}; available: {', '.join(sorted(self._validators))}"
        if validator.is_valid(dict(args)):  # the common case: skip collecting every error
            return None
        errors = sorted(validator.iter_errors(dict(args)), key=lambda e: list(map(str, e.path)))
        if not errors:
            return None
        first = errors[0]
        return f"invalid arguments for {tool}: {json_path(first.absolute_path)}: {first.message}"
