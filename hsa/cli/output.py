"""Terminal output for the CLI: one rich console, progress bars and failure lines."""

from __future__ import annotations

from functools import lru_cache

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

from hsa.errors import HsaError


@lru_cache(maxsize=1)
def console() -> Console:
    return Console(highlight=False, soft_wrap=True)


@lru_cache(maxsize=1)
def error_console() -> Console:
    return Console(stderr=True, highlight=False, soft_wrap=True)


def progress() -> Progress:
    """A progress bar for long work; it draws only on a terminal and stays quiet in pipes."""
    return Progress(
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
