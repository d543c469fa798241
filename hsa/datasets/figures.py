"""Figures as PNG bytes: drawn under matplotlib's own defaults on its Agg backend and saved
without metadata, so that the same figure always gives the same bytes (dataset cards,
evaluation reports, training cards, experiment reports), whatever matplotlibrc or style the
user's machine, home or working folder holds."""

from __future__ import annotations

import functools
import io
from collections.abc import Callable
from typing import Any, ParamSpec, TypeVar

_P = ParamSpec("_P")
_R = TypeVar("_R")


def pyplot() -> Any:
    """``matplotlib.pyplot`` on the Agg backend (no display, imported on first use)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def drawn(draw: Callable[_P, _R]) -> Callable[_P, _R]:
    """``draw``, a function that draws a figure (and saves it with ``png``), run under
    matplotlib's defaults: the rc settings a user's matplotlibrc (``MATPLOTLIBRC``, the
    working folder's, ``~/.config/matplotlib``'s) or a caller's ``rcParams`` change (font
    sizes, colours, dpi...) would change its bytes. Every figure hsa draws is drawn so."""

    @functools.wraps(draw)
    def run(*args: _P.args, **kwargs: _P.kwargs) -> _R:
        # ("default" is matplotlib's own rcParamsDefault, less the settings a style may not
        # change, such as the backend: no style file of the user's is read for it)
        with pyplot().style.context("default"):
            return draw(*args, **kwargs)

    return run


def png(fig: Any) -> bytes:
    """``fig`` laid out and saved as PNG bytes without metadata (Software, dates), then closed."""
    fig.tight_layout()
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", metadata={"Software": None})
    pyplot().close(fig)
    return buffer.getvalue()
