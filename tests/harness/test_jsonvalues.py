"""Tests for hsa.harness.jsonvalues: the quick look for values no dataset row can hold."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hsa.harness.jsonvalues import UNWRITABLE_TEXT, WIDE_TEXT, may_be_unwritable, unwritable

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
