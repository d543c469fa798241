"""The dataset card: statistics tables, and plots that are the same bytes on every run."""

from __future__ import annotations

import numpy as np

from hsa.datasets.card import batch_stats, merge_stats, render_card


def stats():
    one = batch_stats(
        split="train",
        variant_counts=np.array([3, 1]),
        protocols=["api", "text/python+tag/xml-docs"],
        rules=[(), ("tools.rename", "protocol.switch")],
        canonical=[True, False],
        messages=np.array([4, 4, 6, 9]),
        calls=np.array([1, 1, 2, 0]),
        prompt_chars=np.array([1200, 1200, 1200, 5100]),
        trajectories=3,
    )
    two = batch_stats(
        split="test",
        variant_counts=np.array([1, 1]),
        protocols=["api", "api"],
        rules=[(), ("hooks.wording",)],
        canonical=[True, False],
        messages=np.array([5, 5]),
        calls=np.array([1, 1]),
        prompt_chars=np.array([900, 900]),
        trajectories=1,
    )
    return merge_stats([one, two])


def test_statistics_add_up() -> None:
    s = stats()
    assert s["rows"] == 6 and s["trajectories"] == 4 and s["canonical"] == 4
    assert s["splits"] == {"train": 4, "test": 2}
    assert s["protocols"] == {"api": 5, "text/python+tag/xml-docs": 1}
    assert s["families"] == {"hooks": 1, "protocol": 1, "tools": 1}
    assert s["messages"]["4"] == 2 and s["calls"]["1"] == 4
    assert s["prompt_chars"] == {"1000": 3, "5000": 1, "500": 2}


def test_card_text_and_plots_are_deterministic() -> None:
    manifest = {"seed": 0, "variants": 2, "config": {"seed": 0}, "config_hash": "abc", "engine": {}}
    text, plots = render_card(stats(), manifest, "demo")
    again_text, again_plots = render_card(stats(), manifest, "demo")
    assert text == again_text and plots == again_plots
    assert set(plots) == {"distributions.png", "composition.png"}
    assert all(p.startswith(b"\x89PNG") for p in plots.values())
    assert "path: data/train/*.parquet" in text and "| rows | 6 |" in text
    assert "`text/python+tag/xml-docs`" in text and "![distributions]" in text
