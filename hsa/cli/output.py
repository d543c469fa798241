"""Terminal output for the CLI: one rich console, progress bars and failure lines."""

from __future__ import annotations

import contextlib
import time
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
from rich.table import Column, Table
from rich.text import Text

from hsa.errors import HsaError, check_stop


@lru_cache(maxsize=1)
def console() -> Console:
    """Standard output, printing text as it is (``plain_console``)."""
    return plain_console()


@lru_cache(maxsize=1)
def error_console() -> Console:
    """Standard error, printing text as it is (``plain_console``)."""
    return plain_console(stderr=True)


def plain_console(**options: Any) -> Console:
    """A ``Console`` that prints text as it is: no markup, no highlighting.

    What the CLI prints holds what users wrote (paths, names, descriptions, notes, errors),
    where ``[/]``, ``[red]`` and ``list[str]`` are text, not style tags: read as markup, the
    first raised ``MarkupError`` after the command's work was done, and the others vanished.
    What is styled is a ``rich.text.Text`` (``Text.assemble((name, "bold"), ...)``)."""
    return Console(**{"highlight": False, "soft_wrap": True, "markup": False, **options})


#: seconds between two lines of a task's progress in a log
LOG_EVERY = 10.0


class _Progress(Progress):
    """A ``Progress`` whose updates, and its end, are where a stop asked for is raised again
    (``check_stop``): the points between steps of the work it shows, and the point before the
    command says it is done (a stop recorded, its exception swallowed, is no "done").

    Disabled (no terminal: a log, a batch job) it draws nothing and writes lines instead,
    ``description: done/total``, for work that runs longer than ``log_every`` seconds: one
    at most every ``log_every`` seconds of a task, and its last one, so a long job's log
    shows it moving and a short one's holds only its result (or its one error line)."""

    def __init__(self, *args: Any, log_every: float = LOG_EVERY, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.log_every = log_every
        self._said: dict[Any, tuple[float, str]] = {}  # per task: when, what its last line said

    def __exit__(self, *exc: Any) -> None:
        super().__exit__(*exc)
        if exc[0] is None:  # the work it showed is done: the command is, unless it was stopped
            check_stop()

    def update(self, *args: Any, **kwargs: Any) -> None:
        check_stop()
        super().update(*args, **kwargs)
        self._log(args[0] if args else kwargs["task_id"])

    def advance(self, *args: Any, **kwargs: Any) -> None:
        check_stop()
        super().advance(*args, **kwargs)
        self._log(args[0] if args else kwargs["task_id"])

    def _log(self, task_id: Any) -> None:
        if not self.disable:
            return
        task = self._tasks[task_id]
        if not task.completed and self.log_every:  # (every step: its start too, `train: 0/4`)
            return
        done = f"{task.completed:,.0f}" + ("" if task.total is None else f"/{task.total:,.0f}")
        line = f"{task.description}: {done}"
        now = time.monotonic()
        start = now if task.start_time is None else task.start_time
        when, said = self._said.get(task_id, (start, ""))
        if line == said or (now - when < self.log_every and not (said and task.finished)):
            return
        self._said[task_id] = (now, line)
        self.console.print(line, markup=False, highlight=False)


class _Description(TextColumn):
    """A task's description, the one column that gives way on a narrow terminal: cut with an
    ellipsis, never wrapped (the others, counts and times, are never cut)."""

    def render(self, task: Any) -> Text:
        text = super().render(task)
        text.no_wrap, text.overflow = True, "ellipsis"
        return text


#: the narrowest terminal a progress line draws its bar on (narrower, the bar gives way)
BAR_COLUMNS = 100


class _Bars(_Progress):
    """A ``_Progress`` whose bar gives way on a terminal narrower than ``BAR_COLUMNS``."""

    def make_tasks_table(self, tasks: Any) -> Table:
        columns = self.columns
        # (``live``, and so ``console``, is not there yet when ``Live`` first draws)
        if hasattr(self, "live") and self.console.width < BAR_COLUMNS:
            self.columns = tuple(c for c in columns if not isinstance(c, BarColumn))
        try:
            return super().make_tasks_table(tasks)
        finally:
            self.columns = columns  # (a terminal made wider draws it again)


def progress(log_every: float = LOG_EVERY) -> Progress:
    """A progress bar for long work: drawn on a terminal; in a pipe or a log, a line every
    ``log_every`` seconds instead (``_Progress``). On a narrow terminal the description is cut
    first, then the bar left out: the done/total count and the times are never cut."""
    fixed = Column(no_wrap=True)  # (a Table cuts every column alike where the rest cannot give)
    return _Bars(
        SpinnerColumn(table_column=fixed),
        # it names files and envs, so is no markup; the one column a Table may narrow
        _Description("{task.description}", style="bold", markup=False, table_column=Column()),
        BarColumn(table_column=fixed),
        MofNCompleteColumn(table_column=fixed),
        TimeElapsedColumn(table_column=fixed),
        TimeRemainingColumn(table_column=fixed),
        console=error_console(),
        transient=False,
        disable=not error_console().is_terminal,
        log_every=log_every,
    )


def library_bars_off_terminal() -> bool:
    """Off a terminal (a log, a pipe), turn off the progress bars ``datasets`` and
    ``transformers`` draw (with carriage returns, garbling a log); True when off one."""
    if error_console().is_terminal:
        return False
    with contextlib.suppress(ImportError):  # (a command that needs one says so itself)
        import datasets

        datasets.disable_progress_bars()
    with contextlib.suppress(ImportError):
        import transformers

        transformers.utils.logging.disable_progress_bar()
    return True


def fail(message: str) -> None:
    """Stop the command with one error line (printed by ``hsa.cli.main``)."""
    raise HsaError(message)
