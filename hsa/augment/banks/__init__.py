"""Word and template banks shipped with hsa: synonyms, description templates, hook framings,
section titles, distractor tools and skills. Read once, returned as fresh copies."""

from __future__ import annotations

import copy
import json
from functools import cache
from importlib import resources
from typing import Any

import yaml

from hsa.harness.model import Skill, Tool


@cache
def _read(name: str) -> Any:
    text = resources.files("hsa.augment.banks").joinpath(name).read_text("utf-8")
    return json.loads(text) if name.endswith(".json") else yaml.safe_load(text)


def bank(name: str) -> Any:
    """The bank file ``name`` (e.g. ``synonyms.yaml``), as a copy the caller may change."""
    return copy.deepcopy(_read(name))


def synonyms() -> dict[str, list[str]]:
    return _read("synonyms.yaml")


@cache
def distractor_tools() -> tuple[Tool, ...]:
    """The distractor tool bank as tools, built once (tools are immutable; rules copy a
    schema before changing it)."""
    return tuple(Tool.from_dict(t) for t in bank("distractor_tools.json"))


@cache
def distractor_skills() -> tuple[Skill, ...]:
    """The distractor skill bank as skills, built once."""
    return tuple(Skill.from_dict(s) for s in bank("distractor_skills.yaml"))
