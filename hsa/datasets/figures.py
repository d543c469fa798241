"""Figures as PNG bytes: matplotlib's Agg backend, saved without metadata, so that the same
figure always gives the same bytes (dataset cards, evaluation reports, training cards)."""

from __future__ import annotations

import io
from typing import Any


def pyplot() -> Any:
    """``matplotlib.pyplot`` on the Agg backend (no display, imported on first use)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def png(fig: Any) -> bytes:
    """``fig`` laid out and saved as PNG bytes without metadata (Software, dates), then closed."""
    fig.tight_layout()
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", metadata={"Software": None})
    pyplot().close(fig)
    return buffer.getvalue()
