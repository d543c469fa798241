"""Word and template banks shipped with hsa: synonyms, description templates, hook framings,
section titles, distractor tools and skills. Read once and shared, read-only."""

from __future__ import annotations

import copy
import json
from collections.abc import Mapping, Sequence
from functools import cache
from importlib import resources
from types import MappingProxyType
from typing import Any

from hsa.config import loads_yaml
from hsa.errors import HsaError
from hsa.harness.model import Skill, Tool


@cache
def _read(name: str) -> Any:
    text = resources.files("hsa.augment.banks").joinpath(name).read_text("utf-8")
    if name.endswith(".json"):
        return json.loads(text)
    return loads_yaml(text, error=HsaError, file=name)


@cache
def bank(name: str) -> Any:
    """The bank file ``name`` (e.g. ``synonyms.yaml``), read-only and shared by every caller:
    its mappings are ``MappingProxyType`` and its lists tuples (a rule draws from a bank on
    every application; a copy per draw cost more than the draw)."""
    return _frozen(_read(name))


def _frozen(value: Any) -> Any:
    if isinstance(value, dict):
        return MappingProxyType({k: _frozen(v) for k, v in value.items()})
    if isinstance(value, list):
        return tuple(_frozen(v) for v in value)
    return value


def synonyms() -> Mapping[str, Sequence[str]]:
    """The synonym bank, word -> synonyms (``bank("synonyms.yaml")``: read-only, shared)."""
    return bank("synonyms.yaml")


@cache
def distractor_tools() -> tuple[Tool, ...]:
    """The distractor tool bank as tools, built once (tools are immutable; rules copy a
    schema before changing it)."""
    return tuple(Tool.from_dict(t) for t in copy.deepcopy(_read("distractor_tools.json")))


@cache
def distractor_skills() -> tuple[Skill, ...]:
    """The distractor skill bank as skills, built once."""
    return tuple(Skill.from_dict(s) for s in copy.deepcopy(_read("distractor_skills.yaml")))
