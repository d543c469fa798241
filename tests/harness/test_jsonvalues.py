"""Tests for hsa.harness.jsonvalues: the quick look for values no dataset row can hold."""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hsa.harness.jsonvalues import (
    _INT_RANGE,
    LONE_SURROGATE,
    NOT_FINITE,
    UNWRITABLE_TEXT,
    WIDE_INTEGER,
    WIDE_TEXT,
    json_path,
    may_be_unwritable,
    unwritable,
)

#: the reference the quick look is proven against: the patterns PyArrow's kernels use (RE2's
#: ASCII ``\d``), or a surrogate itself (``json.dumps(ensure_ascii=False)`` writes one so)
REFERENCE = re.compile(f"{WIDE_TEXT}|{UNWRITABLE_TEXT}|[\ud800-\udfff]", re.ASCII)

#: the pieces of what the quick look looks for, and of what only looks like it
_PIECES = (
    *'0123456789NaIfinityeE+-\\udDcF"{}[]: ,.',
    "\ud800",
    "\udfff",
    "\ud83d\ude00",
    "\U0001f600",
    "١",
    "NaN",
    "Infinity",
    "\\ud8",
    "\\uDc",
    "e+",
    "9" * 9,
)
_TEXTS = st.one_of(
    st.lists(st.sampled_from(_PIECES), max_size=30).map("".join),
    st.text(max_size=40),
)


@pytest.mark.parametrize(
    ("text", "suspect"),
    [
        ('{"n": NaN}', True),
        ('{"n": -Infinity}', True),
        ('{"n": 1e400}', True),
        ('{"n": 1.5E+999}', True),
        ('{"n": 1e-308}', True),  # (a look, not a verdict: the walk decides)
        ('{"n": 18446744073709551616}', True),
        ('{"n": 1844674407370955161}', True),  # 19 digits
        ('{"n": 184467440737095516}', False),
        ('{"s": "\\ud83d"}', True),
        ('{"s": "\\uDC00"}', True),
        ('{"s": "\ud83d"}', True),  # as json.dumps(ensure_ascii=False) writes it
        ('{"s": "\\u00e9 \U0001f600"}', False),
        ('{"s": "Nan infinity e400 \\u0041"}', False),
        ('{"s": "' + "١" * 19 + '"}', False),  # no JSON number has other digits
        ("", False),
    ],
)
def test_the_quick_look(text: str, suspect: bool) -> None:
    assert may_be_unwritable(text) is suspect


@settings(max_examples=400, deadline=None)
@given(_TEXTS)
def test_the_quick_look_finds_what_its_reference_pattern_finds(text: str) -> None:
    # the pattern led by one class of first characters is the alternation, faster
    assert may_be_unwritable(text) == (REFERENCE.search(text) is not None)


def _values() -> st.SearchStrategy[Any]:
    scalars = st.one_of(
        st.none(),
        st.booleans(),
        st.integers(),
        st.integers(min_value=-(2**70), max_value=2**70),
        st.floats(),  # NaN and the infinities included
        st.lists(st.sampled_from(_PIECES), max_size=6).map("".join),
    )
    keys = st.one_of(st.sampled_from(["a", "\ud800", "b\udfff"]), st.text(max_size=4))
    return st.recursive(
        scalars,
        lambda inner: st.one_of(
            st.lists(inner, max_size=3), st.dictionaries(keys, inner, max_size=3)
        ),
        max_leaves=8,
    )


@settings(max_examples=150, deadline=None)
@given(_values())
def test_a_value_unwritable_finds_is_suspect_however_it_is_written(value: Any) -> None:
    # render looks at the api's arguments text as written (surrogates raw), and otherwise at
    # json.dumps's (escaped): a value the walk refuses is never passed over in either
    if unwritable(value, "$") is not None:
        assert may_be_unwritable(json.dumps(value))
        assert may_be_unwritable(json.dumps(value, ensure_ascii=False))


def _reference_unwritable(value: Any, where: str, wide: bool) -> tuple[str, str] | None:
    """``unwritable`` as the plain walk writes it: each path written on the way down."""
    if isinstance(value, str):
        return (where, LONE_SURROGATE) if _surrogate(value) else None
    if isinstance(value, float):
        return None if math.isfinite(value) else (where, NOT_FINITE)
    if isinstance(value, int) and not isinstance(value, bool):
        inside = _INT_RANGE[0] <= value <= _INT_RANGE[1]
        return (where, WIDE_INTEGER) if wide and not inside else None
    if isinstance(value, Mapping):
        for key, item in value.items():
            at = where + json_path([key])[1:]
            if isinstance(key, str) and _surrogate(key):
                return at, LONE_SURROGATE
            found = _reference_unwritable(item, at, wide)
            if found is not None:
                return found
    elif isinstance(value, list):
        for i, item in enumerate(value):
            found = _reference_unwritable(item, f"{where}[{i}]", wide)
            if found is not None:
                return found
    return None


def _surrogate(text: str) -> bool:
    return any("\ud800" <= c <= "\udfff" for c in text)


class _Text(str):
    pass


class _Items(list[Any]):
    pass


def _any_values() -> st.SearchStrategy[Any]:
    """JSON values and what else may stand in a value: tuples, subclasses, non-string keys."""
    keys = st.one_of(
        st.sampled_from(["a", "a b", "_x", "1a", "\ud800", "b\udfff"]),
        st.integers(-2, 2),
        st.booleans(),
        st.none(),
    )
    return st.recursive(
        st.one_of(_values(), st.text(max_size=3).map(_Text)),
        lambda inner: st.one_of(
            st.lists(inner, max_size=3),
            st.lists(inner, max_size=3).map(tuple),
            st.lists(inner, max_size=3).map(_Items),
            st.dictionaries(keys, inner, max_size=3),
            st.dictionaries(keys, inner, max_size=3).map(MappingProxyType),
        ),
        max_leaves=10,
    )


@settings(max_examples=400, deadline=None)
@given(_any_values(), st.booleans(), st.sampled_from(["$", "$.metadata", ""]))
def test_unwritable_finds_what_the_plain_walk_finds(value: Any, wide: bool, where: str) -> None:
    # the walk writes the path only for what it finds, by exact type first: the same find
    assert unwritable(value, where, wide=wide) == _reference_unwritable(value, where, wide)
