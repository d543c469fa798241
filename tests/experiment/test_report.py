"""The experiment's report: its tiers plot says what its tables say."""

from __future__ import annotations

import copy
import json
from pathlib import Path

from hsa.experiment.report import plot

DOCS = Path(__file__).parents[2] / "docs"


def summary() -> dict:
    """The summary of the default experiment's real run, as the documentation quotes it."""
    return json.loads((DOCS / "experiment-summary.json").read_text("utf-8"))


def only(found: dict, tier: str) -> dict:
    """``found`` with ``tier`` alone."""
    out = copy.deepcopy(found)
    for block in (*(arm["tiers"] for arm in out["arms"].values()), out["difference"]):
        for name in [t for t in block if t != tier]:
            del block[name]
    return out


def test_the_plot_of_one_tier_shows_its_whole_title(figures):
    # (a 3.6-inch figure cut it on both sides; "per held-out tier" while the tables say
    # canonical is not held out)
    plot(only(summary(), "canonical"))
    (ax,) = figures[0].axes
    title = ax.title.get_window_extent()
    width = figures[0].get_size_inches()[0] * figures[0].dpi
    assert title.x0 >= 0 and title.x1 <= width
    assert "per tier" in ax.get_title() and "held-out" not in ax.get_title()


def test_a_tier_without_episodes_is_drawn_n_a_not_zero(figures):
    # (it was a bar of height 0, where every table says n/a)
    found = summary()
    tiers = list(found["difference"])
    for arm in found["arms"].values():
        arm["tiers"][tiers[-1]]["name"] = {"value": None, "ci": [None, None]}
    plot(found)
    (ax,) = figures[0].axes
    centres = [p.get_x() + p.get_width() / 2 for p in ax.patches]
    assert len(centres) == 2 * (len(tiers) - 1)
    assert all(abs(x - (len(tiers) - 1)) > 0.5 for x in centres)
    assert [t.get_text() for t in ax.texts] == ["n/a", "n/a"]
    low, high = ax.get_xlim()
    assert all(low < t.get_position()[0] < high for t in ax.texts)
