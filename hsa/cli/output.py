"""Terminal output for the CLI: one rich console, progress bars and failure lines."""

from __future__ import annotations

from functools import lru_cache
from typing import Any

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    SpinnerColumn,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)

from hsa.errors import HsaError, check_stop


@lru_cache(maxsize=1)
def console() -> Console:
    return Console(highlight=False, soft_wrap=True)


@lru_cache(maxsize=1)
def error_console() -> Console:
    return Console(stderr=True, highlight=False, soft_wrap=True)


class _Progress(Progress):
    """A ``Progress`` whose updates are where a stop asked for is raised again
    (``check_stop``): the points between steps of the work it shows."""

    def update(self, *args: Any, **kwargs: Any) -> None:
        check_stop()
        super().update(*args, **kwargs)

    def advance(self, *args: Any, **kwargs: Any) -> None:
        check_stop()
        super().advance(*args, **kwargs)


def progress() -> Progress:
    """A progress bar for long work; it draws only on a terminal and stays quiet in pipes."""
    return _Progress(
        SpinnerColumn(),
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        TimeRemainingColumn(),
        console=error_console(),
        transient=False,
        disable=not error_console().is_terminal,
    )


def fail(message: str) -> None:
    """Stop the command with one error line (printed by ``hsa.cli.main``)."""
    raise HsaError(message)
