"""Advertising compliance: the absolute claims a host must never make, and how to find them."""

from __future__ import annotations

import re

# Absolute and superlative claims that advertising rules forbid in live commerce: a host may
# quote ratings and specs, never rank a product above all others or promise certain results.
ABSOLUTE_CLAIMS: tuple[tuple[str, str], ...] = (
    ("best", r"\bbest\b"),
    ("No. 1", r"\bno\.?\s?1\b|\bnumber[\s-]one\b|#\s?1\b|\btop[\s-]?1\b"),
    ("100%", r"\b100\s?%|\bhundred percent\b"),
    ("guaranteed", r"\bguarantee(?:d|s)?\b"),
    ("perfect", r"\bperfect(?:ly)?\b"),
    ("ultimate", r"\bultimate\b"),
    ("unbeatable", r"\bunbeatable\b"),
    ("miracle", r"\bmiracle\b"),
    ("cure", r"\bcures?\b"),
    ("world's first", r"\bworld'?s\s+(?:first|leading)\b"),
    ("lowest price ever", r"\blowest\s+price\s+ever\b|\bcheapest\s+ever\b"),
    ("risk-free", r"\brisk[\s-]free\b"),
    ("zero side effects", r"\b(?:zero|no)\s+side[\s-]effects\b"),
)
_PATTERNS = tuple((label, re.compile(rx, re.IGNORECASE)) for label, rx in ABSOLUTE_CLAIMS)


def absolute_claims(text: str) -> list[str]:
    """The labels of the absolute claims ``text`` makes, in the order of ``ABSOLUTE_CLAIMS``."""
    return [label for label, pattern in _PATTERNS if pattern.search(text)]
