"""The run card: what it says a run trained on."""

from __future__ import annotations

import pytest

from hsa.train.card import render_card


@pytest.mark.parametrize(("packing", "subject"), [(False, "TRL dropped"), (True, "Nothing")])
def test_rows_dropped_are_said_as_dropped_only_where_trl_drops_them(packing, subject):
    # packing keeps a row cut with nothing left to learn in its sequence: hsa counts it out,
    # TRL drops nothing
    rows = {"train": 6, "canonical": 2, "variants": 4, "dropped": 2, "dropped_variants": 2}
    resolved = {
        "command": "sft",
        "hsa": {"model": "tiny", "data": "out/ds"},
        "trl": {"packing": packing, "max_length": 64},
        "data": {"rows": rows, "manifest_hash": "abc", "dropped_because": "cut at max_length"},
    }
    card = render_card(resolved, [], [], plot=False)
    assert f"{subject} " in card and "2 more training rows" in card
    assert ("TRL dropped" in card) is not packing
