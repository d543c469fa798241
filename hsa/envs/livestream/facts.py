"""How values are spoken in answers, and how a required fact is found in an answer.

Ground truth and the oracle both write values with ``show``/``dollars`` so that a fact is the
same string either way; ``has_fact`` accepts the usual variants (``$1,299.00`` for ``1299.00``,
``1.0`` for ``1``, any letter case).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from decimal import Decimal, InvalidOperation
from typing import Any

_NUMBER = re.compile(r"(?<![\d.])\d+(?:\.\d+)?")
_THOUSANDS = re.compile(r"(?<=\d),(?=\d{3}\b)")
_NUMERIC_FACT = re.compile(r"\d+(?:\.\d+)?")

Fact = str | Sequence[str]  # a string, or a list of alternatives of which one must appear


def show(value: Any) -> str:
    """A spec or count as an answer states it: ``1.0 -> 1``, ``['a', 'b'] -> a, b``."""
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return f"{value:g}"
    if isinstance(value, list | tuple):
        return ", ".join(show(v) for v in value) if value else "none"
    return str(value)


def dollars(value: float) -> str:
    """``129.9 -> 129.90``: money as tool results give it, with two decimals and no sign."""
    return f"{value:.2f}"


def _normalize(text: str) -> str:
    return " ".join(_THOUSANDS.sub("", text.lower()).split())


def has_fact(fact: Fact, text: str) -> bool:
    """Whether ``text`` states ``fact`` (for a list: any one of the alternatives)."""
    if not isinstance(fact, str):
        return any(has_fact(alt, text) for alt in fact)
    norm = _normalize(text)
    want = _normalize(fact)
    if _NUMERIC_FACT.fullmatch(want):
        try:
            target = Decimal(want)
            return any(Decimal(m.group()) == target for m in _NUMBER.finditer(norm))
        except InvalidOperation:  # pragma: no cover - the regexes only admit decimals
            return False
    head = r"(?<!\w)" if want[:1].isalnum() else ""
    tail = r"(?!\w)" if want[-1:].isalnum() else ""
    return re.search(head + re.escape(want) + tail, norm) is not None


def fact_label(fact: Fact) -> str:
    return repr(fact) if isinstance(fact, str) else "one of " + ", ".join(map(repr, fact))
