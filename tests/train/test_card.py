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


def test_the_rows_trained_on_are_said_by_verification():
    rows = {"train": 5, "canonical": 5, "verified": 2, "never_checked": 3, "unverified": 0}
    resolved = {
        "command": "sft",
        "hsa": {"model": "tiny", "data": "out/ds"},
        "trl": {},
        "data": {"rows": {**rows, "unverified_left_out": 4}, "manifest_hash": "abc"},
    }
    card = render_card(resolved, [], [], plot=False)
    assert (
        "Of the training rows, 2 are of trajectories a teacher verified, 3 of trajectories no "
        "teacher checked (`verified` null: a recorded source, augmented as it is). 4 rows of "
        "trajectories a teacher marked unverified were left out (`verified_only`)."
    ) in card
    resolved["data"]["rows"] = {**rows, "unverified": 1, "verified": 1}
    assert "1 of trajectories a teacher marked unverified (`verified_only` false)" in render_card(
        resolved, [], [], plot=False
    )
