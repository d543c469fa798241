"""Word and template banks shipped with hsa: synonyms, description templates, hook framings,
section titles, distractor tools and skills. Read once, returned as fresh copies."""

from __future__ import annotations

import copy
import json
from functools import cache
from importlib import resources
from typing import Any

import yaml


@cache
def _read(name: str) -> Any:
    text = resources.files("hsa.augment.banks").joinpath(name).read_text("utf-8")
    return json.loads(text) if name.endswith(".json") else yaml.safe_load(text)


def bank(name: str) -> Any:
    """The bank file ``name`` (e.g. ``synonyms.yaml``), as a copy the caller may change."""
    return copy.deepcopy(_read(name))


def synonyms() -> dict[str, list[str]]:
    return _read("synonyms.yaml")
