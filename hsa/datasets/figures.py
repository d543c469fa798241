"""Figures as PNG bytes: drawn under matplotlib's own defaults on its Agg canvas and saved
without metadata, so that the same figure always gives the same bytes (dataset cards,
evaluation reports, training cards, experiment reports), whatever matplotlibrc or style the
user's machine, home or working folder holds.

hsa is used as a library, in notebooks too, so it leaves the caller's matplotlib as it found
it: figures are ``matplotlib.figure.Figure`` objects with an Agg canvas of their own, never
made through ``pyplot``, so the caller's backend is not switched and pyplot's list of open
figures does not grow."""

from __future__ import annotations

import functools
import io
import threading
from collections.abc import Callable
from typing import Any, ParamSpec, TypeVar

_P = ParamSpec("_P")
_R = TypeVar("_R")

#: held while a figure is drawn under matplotlib's defaults (``drawn``): two hsa jobs in two
#: threads take turns, so one cannot restore the caller's settings while the other draws,
#: or save the other's defaults as the settings to restore
_DEFAULTS = threading.RLock()


def load() -> None:
    """Import the parts of matplotlib that hsa draws with (a second or so the first time);
    importing them changes no matplotlib setting."""
    import matplotlib.backends.backend_agg
    import matplotlib.figure  # noqa: F401


def figure(figsize: tuple[float, float], dpi: float | None = None) -> Any:
    """A new figure ``figsize`` inches and ``dpi`` dots per inch (None: matplotlib's default,
    100), on an Agg canvas of its own: pyplot does not know of it, so it needs no closing."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=figsize, dpi=dpi)
    FigureCanvasAgg(fig)
    return fig


def drawn(draw: Callable[_P, _R]) -> Callable[_P, _R]:
    """``draw``, a function that draws a figure (and saves it with ``png``), run under
    matplotlib's defaults: the rc settings a user's matplotlibrc (``MATPLOTLIBRC``, the
    working folder's, ``~/.config/matplotlib``'s) or a caller's ``rcParams`` change (font
    sizes, colours, dpi...) would change its bytes. Every figure hsa draws is drawn so.

    matplotlib reads its settings from the one process-wide ``rcParams`` (when a figure is
    made and again when it is drawn), and has no settings for one figure alone. So while
    ``draw`` runs, ``rcParams`` are matplotlib's defaults, and the caller's come back when it
    returns. hsa's own drawings take turns (a lock), so two jobs in two threads leave the
    caller's settings as they were. What is left: a thread of the caller's that draws or
    changes ``rcParams`` while hsa draws sees the defaults, and a change it makes then is
    undone when hsa's drawing ends."""

    @functools.wraps(draw)
    def run(*args: _P.args, **kwargs: _P.kwargs) -> _R:
        from matplotlib import style

        # ("default" is matplotlib's own rcParamsDefault, less the settings a style may not
        # change, such as the backend: no style file of the user's is read for it)
        with _DEFAULTS, style.context("default"):
            return draw(*args, **kwargs)

    return run


def png(fig: Any) -> bytes:
    """``fig`` laid out and saved as PNG bytes without metadata (Software, dates)."""
    fig.tight_layout()
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", metadata={"Software": None})
    return buffer.getvalue()
