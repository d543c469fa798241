"""How values are spoken in answers, and how a required fact is found in an answer.

Ground truth and the oracle both write values with ``show``/``dollars`` so that a fact is the
same string either way; ``has_fact`` accepts the usual variants (``$1,299.00`` for ``1299.00``,
``1.0`` for ``1``, any letter case, and for a date such as ``2025-06-24`` or ``June 24`` the
common English spellings of that day: ``June 24th``, ``24 June``, ``the 24th of June``,
``Jun. 24``, ``June 24, 2025``).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from decimal import Decimal, InvalidOperation
from typing import Any

_NUMBER = re.compile(r"(?<![\d.])\d+(?:\.\d+)?")
_THOUSANDS = re.compile(r"(?<=\d),(?=\d{3}\b)")
_NUMERIC_FACT = re.compile(r"\d+(?:\.\d+)?")

_MONTHS = (
    "january", "february", "march", "april", "may", "june",
    "july", "august", "september", "october", "november", "december",
)  # fmt: skip
# a month by its name or its three-letter abbreviation (and ``sept``)
_MONTH_NUMBER = {
    **{name: i for i, name in enumerate(_MONTHS, 1)},
    **{name[:3]: i for i, name in enumerate(_MONTHS, 1)},
    "sept": 9,
}
_MONTH = (
    r"(?<![a-z])(?P<{}>" + "|".join(sorted(_MONTH_NUMBER, key=len, reverse=True)) + r")(?![a-z])\.?"
)
_DAY = r"(?<![\w.,])(?P<{}>\d{{1,2}})(?:st|nd|rd|th)?(?!\w|\.\d)"
_YEAR = r"(?:(?:,\s*|\s+)(?P<{}>\d{{4}})(?!\d))?"
# a date in text: ``2025-06-24``, ``June 24th, 2025``, ``Jun. the 24th``, ``24th of June``
_DATES = re.compile(
    r"(?<![\w-])(?P<iso_y>\d{4})-(?P<iso_m>\d{2})-(?P<iso_d>\d{2})(?![\w-])|"
    + _MONTH.format("md_m") + r"\s+(?:the\s+)?" + _DAY.format("md_d") + _YEAR.format("md_y") + "|"
    + _DAY.format("dm_d") + r"\s+(?:of\s+)?" + _MONTH.format("dm_m") + _YEAR.format("dm_y")
)  # fmt: skip
# a date fact as the task templates write one: ``2025-06-24`` or ``June 24``
_DATE_FACT = re.compile(
    r"(?P<iso_y>\d{4})-(?P<iso_m>\d{2})-(?P<iso_d>\d{2})|(?P<md_m>[a-z]+) (?P<md_d>\d{1,2})"
)

Day = tuple[int | None, int, int]  # (year, or None where not stated; month; day)

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
        # ``["2025-06-24", "June 24"]``: the year of one alternative holds for the others too
        days = [d for alt in fact if (d := _date_fact(_normalize(alt))) is not None]
        year = next((d[0] for d in days if d[0] is not None), None)
        return any(_has_fact(alt, text, year) for alt in fact)
    return _has_fact(fact, text, None)


def _has_fact(fact: str, text: str, year: int | None) -> bool:
    norm = _normalize(text)
    want = _normalize(fact)
    day = _date_fact(want)
    if day is not None:
        want_day = (day[0] if day[0] is not None else year, day[1], day[2])
        return any(_same_day(want_day, found) for found in _dates(norm))
    if _NUMERIC_FACT.fullmatch(want):
        try:
            target = Decimal(want)
            return any(Decimal(m.group()) == target for m in _NUMBER.finditer(norm))
        except InvalidOperation:  # pragma: no cover - the regexes only admit decimals
            return False
    head = r"(?<!\w)" if want[:1].isalnum() else ""
    tail = r"(?!\w)" if want[-1:].isalnum() else ""
    return re.search(head + re.escape(want) + tail, norm) is not None


def _date(match: re.Match[str]) -> Day | None:
    """The date a ``_DATES`` or ``_DATE_FACT`` match names, or None for a month or day that is
    none (``size 10``, ``2025-13-40``)."""
    groups = match.groupdict()
    form = next(f for f in ("iso", "md", "dm") if groups.get(f"{f}_d") is not None)
    month_text = groups[f"{form}_m"]
    month = int(month_text) if month_text.isdigit() else _MONTH_NUMBER.get(month_text)
    day = int(groups[f"{form}_d"])
    if month is None or not (1 <= month <= 12 and 1 <= day <= 31):
        return None
    year = groups.get(f"{form}_y")
    return (None if year is None else int(year), month, day)


def _date_fact(want: str) -> Day | None:
    match = _DATE_FACT.fullmatch(want)
    return None if match is None else _date(match)


def _dates(text: str) -> list[Day]:
    return [day for m in _DATES.finditer(text) if (day := _date(m)) is not None]


def _same_day(want: Day, found: Day) -> bool:
    """The same month and day, and the same year where both state one."""
    same_year = want[0] is None or found[0] is None or want[0] == found[0]
    return same_year and want[1:] == found[1:]


def fact_label(fact: Fact) -> str:
    return repr(fact) if isinstance(fact, str) else "one of " + ", ".join(map(repr, fact))
