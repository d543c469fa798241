"""Figures: the same figure gives the same bytes whatever the user's matplotlib settings."""

from __future__ import annotations

import ast
import threading
from pathlib import Path

import matplotlib

import hsa
from hsa.datasets.card import _plot
from hsa.train.card import plot_losses

#: what a matplotlibrc in the user's home, working folder or MATPLOTLIBRC may set
_USERS = {
    "font.size": 20,
    "axes.facecolor": "yellow",
    "figure.dpi": 50,
    "savefig.dpi": 50,
    "lines.linewidth": 4,
    "axes.prop_cycle": "cycler(color=['red'])",
}


def test_a_users_matplotlib_settings_change_no_figure():
    # (they did: a matplotlibrc changed every plot of a dataset card, and so its manifest)
    panels = [("kinds", {"a": 3, "b": 1}, None), ("turns", {"1": 2, "3": 1}, 1)]
    losses = [(1, 2.0), (2, 1.5), (3, 1.2)]
    plain = _plot(panels), plot_losses(losses, [(3, 1.4)])
    with matplotlib.rc_context(_USERS):
        assert (_plot(panels), plot_losses(losses, [(3, 1.4)])) == plain


def test_every_figure_hsa_draws_is_drawn_under_matplotlibs_defaults():
    # a function that saves a figure (``png(fig)``) is ``@drawn``: a new one cannot forget it
    undrawn = []
    for path in sorted(Path(hsa.__file__).parent.rglob("*.py")):
        text = path.read_text("utf-8")
        if "png(" not in text or path.name == "figures.py":
            continue
        for node in ast.walk(ast.parse(text)):
            if not isinstance(node, ast.FunctionDef):
                continue
            saves = any(
                isinstance(call, ast.Call) and getattr(call.func, "id", None) == "png"
                for call in ast.walk(node)
            )
            decorators = {getattr(d, "id", None) for d in node.decorator_list}
            if saves and "drawn" not in decorators:
                undrawn.append(f"{path.name}: {node.name}")
    assert undrawn == []


def test_drawing_leaves_the_callers_backend_and_settings_as_they_were():
    # (it did not: every card switched a notebook's backend to Agg, so its figures stopped
    # showing, and two jobs in two threads reset the caller's rcParams to the defaults)
    panels = [("kinds", {"a": 3, "b": 1}, None)]
    backend, size = matplotlib.get_backend(), matplotlib.rcParams["font.size"]
    try:
        matplotlib.use("svg")
        matplotlib.rcParams["font.size"] = 17
        plain = _plot(panels)
        assert matplotlib.get_backend() == "svg"
        assert matplotlib.rcParams["font.size"] == 17

        drawings = [threading.Thread(target=_plot, args=(panels,)) for _ in range(4)]
        for drawing in drawings:
            drawing.start()
        for drawing in drawings:
            drawing.join()
        assert matplotlib.get_backend() == "svg"
        assert matplotlib.rcParams["font.size"] == 17
        assert _plot(panels) == plain
    finally:
        matplotlib.rcParams["font.size"] = size
        matplotlib.use(backend)


def test_no_figure_is_left_open_in_pyplot():
    import matplotlib.pyplot as plt

    before = plt.get_fignums()
    _plot([("kinds", {"a": 3, "b": 1}, None)])
    plot_losses([(1, 2.0)], [])
    assert plt.get_fignums() == before
