"""The exceptions a user of hsa can meet: one root, one subclass per area."""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Callable, Iterator
from pathlib import PurePath
from typing import Any, NoReturn


class HsaError(Exception):
    """Root of every error hsa raises on bad input.

    ``file`` and ``where`` locate the problem (a path, and a JSON path, row or rule inside it);
    ``str(err)`` reads ``file: where: message`` with the parts that are known.
    """

    def __init__(self, message: str, *, file: str | None = None, where: str | None = None):
        super().__init__(message)
        self.message = message
        self.file = None if file is None else str(file)
        self.where = where

    def __str__(self) -> str:
        return ": ".join(part for part in (self.file, self.where, self.message) if part)

    def __repr__(self) -> str:  # with the file and place ``str`` gives (a notebook shows this)
        return f"{type(self).__name__}({str(self)!r})"

    def __reduce__(self) -> tuple[Any, ...]:
        # pickled (an error raised in a worker process) as its args and attributes, and
        # rebuilt without calling ``__init__`` again: a subclass's ``__init__`` takes what
        # it made the message of (a report, a harness), not the message that
        # ``Exception.__reduce__`` would hand it (a ProcessPoolExecutor then broke on it)
        return (_unpickled, (type(self), self.args), self.__dict__)


def _unpickled(cls: type[HsaError], args: tuple[Any, ...]) -> HsaError:
    """An error of ``cls`` with ``args`` and no attributes yet (``HsaError.__reduce__``)."""
    return cls.__new__(cls, *args)


class HarnessError(HsaError):
    """A harness document, directory or component is invalid."""


class HarnessValidationError(HarnessError):
    """A harness failed validation; ``problems`` lists every problem found, not just the first."""

    def __init__(self, problems: list[HsaError]):
        self.problems = list(problems)
        first = self.problems[0]
        super().__init__(first.message, file=first.file, where=first.where)

    def __str__(self) -> str:
        return "\n".join(str(p) for p in self.problems)


class TemplateError(HsaError):
    """A template is unsafe, too large, or failed to render."""


class ImportFormatError(HsaError):
    """A source corpus or file could not be imported."""


class UnknownFormatError(ImportFormatError):
    """A source's format could not be told from it; the caller says how to name one (``hsa
    harness import``'s ``--format``)."""


class ProtocolError(HsaError):
    """A conversation could not be rendered or parsed under a harness's protocol."""


class EnvError(HsaError):
    """An environment, task or tool call is invalid."""


class RuleError(HsaError):
    """An augmentation rule, its parameters or a recipe is invalid, or a rule broke a check."""


class PlanError(RuleError):
    """A rule failed while planning the variants of one harness, ``harness_id`` (so that a job
    planning many can say which of its inputs it was)."""

    def __init__(
        self,
        message: str,
        *,
        harness_id: str | None = None,
        file: str | None = None,
        where: str | None = None,
    ):
        super().__init__(message, file=file, where=where)
        self.harness_id = harness_id


class DatasetError(HsaError):
    """A dataset directory, shard or row is invalid."""


class AnotherDataset(DatasetError):
    """The folder a run would write holds another dataset; ``reason`` says how it differs
    (a caller that owns the folder, as ``hsa experiment`` does, says what to do in its own
    terms)."""

    def __init__(self, reason: str, *, file: str):
        super().__init__(f"{reason}; choose another --out or delete it", file=file)
        self.reason = reason


class TeacherError(HsaError):
    """A teacher backend or rollout failed."""


class ConfigError(HsaError):
    """A build configuration is invalid."""


class EvalError(HsaError):
    """An evaluation's settings, recipe or run directory is invalid."""


class TrainError(HsaError):
    """A training command's config, data or model is invalid."""


class ExperimentError(HsaError):
    """An experiment's config is invalid, or one of its steps failed."""


class Terminated(KeyboardInterrupt):
    """The process was asked to stop (SIGTERM, as schedulers send it): raised where the main
    thread is, so a run unwinds as on Ctrl-C (its lock released, its scratch removed, its
    workers stopped) and the command exits 143."""


#: the stop a signal asked for, kept beside the exception raised for it: raised wherever the
#: main thread happens to be, that exception can land in a library that swallows it (an import
#: pyarrow guards) or wraps it (a class being made), and the run would go on or end in
#: another error
_STOP: list[type[KeyboardInterrupt]] = []


def request_stop(stop: KeyboardInterrupt) -> NoReturn:
    """Record that the process was asked to stop (Ctrl-C, SIGTERM) and raise ``stop``."""
    record_stop(type(stop))
    raise stop


def record_stop(kind: type[KeyboardInterrupt]) -> None:
    """Record that the process was asked to stop, without raising (an event loop's signal
    handler, which stops the run by cancelling it instead)."""
    _STOP[:] = [kind]


def on_sigterm(number: int, frame: object) -> None:
    """The signal handler the CLI installs for SIGTERM: stop as on Ctrl-C (``Terminated``)."""
    request_stop(Terminated())


def on_sigint(number: int, frame: object) -> None:
    """The signal handler the CLI installs for SIGINT (Ctrl-C)."""
    request_stop(KeyboardInterrupt())


#: the stop each of the CLI's signal handlers asks for
STOPS: dict[Callable[[int, object], None], type[KeyboardInterrupt]] = {
    on_sigterm: Terminated,
    on_sigint: KeyboardInterrupt,
}


def stop_requested() -> type[KeyboardInterrupt] | None:
    """The kind of stop a signal asked for in this process, if any (``request_stop``)."""
    return _STOP[0] if _STOP else None


def check_stop() -> None:
    """Raise the stop asked for, again: long work calls it between steps (a progress
    update), so a stop whose first exception was swallowed still stops the run."""
    if _STOP:
        raise _STOP[0]()


def clear_stop() -> None:
    """Forget a stop asked for (a new command run in this process)."""
    _STOP.clear()


def quiet_stops(previous: Callable[[Any], object]) -> Callable[[Any], None]:
    """A ``sys.unraisablehook`` that says nothing of a stop's exception Python could not raise
    (the signal came while a weakref callback or a ``__del__`` ran, in a garbage collection:
    ``Exception ignored in ...`` and a traceback), once the stop is recorded: the run stops at
    its next step (``check_stop``) and says so in one line. Any other goes to ``previous``."""

    def hook(unraisable: Any) -> None:
        kind = unraisable.exc_type
        if isinstance(kind, type) and issubclass(kind, KeyboardInterrupt) and _STOP:
            return
        previous(unraisable)

    return hook


@contextlib.contextmanager
def stops_held() -> Iterator[None]:
    """Hold Ctrl-C and SIGTERM back for a short step that must not be cut in two (forking
    worker processes, writing a finished run's files). A stop that came meanwhile is sent
    again once the step is done (also when the step raised something else), and a second one
    at once, so the handler the process had meets it as it would have without the hold: the
    CLI's stops the run, a caller's own handler runs, and where there is none SIGTERM ends the
    process. A signal the process ignores stays ignored. (Python runs signal handlers in the
    main thread whichever thread the signal reached, so the handler is what holds it, not a
    signal mask; in another thread nothing is held.)"""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    caught: list[int] = []
    # a handler installed from outside Python reads as None and cannot be put back: not held
    held = [
        n
        for n in (signal.SIGINT, signal.SIGTERM)
        if signal.getsignal(n) not in (signal.SIG_IGN, None)
    ]

    def give_back() -> None:
        for number, handler in previous.items():
            signal.signal(number, handler)

    def hold(number: int, frame: object) -> None:
        caught.append(number)
        if len(caught) > 1:  # asked again: the step is not worth waiting for
            give_back()
            signal.raise_signal(number)

    previous: dict[int, Any] = {}
    for number in held:
        previous[number] = signal.signal(number, hold)
    try:
        yield
    finally:
        give_back()
        if len(caught) == 1:  # (a second was sent on as it came)
            signal.raise_signal(caught[0])


def first_few(names: list[str], shown: int = 3) -> str:
    """``names`` for a message: the first ``shown``, then how many more (``a, b, c and 4
    more``)."""
    more = f" and {len(names) - shown} more" if len(names) > shown else ""
    return ", ".join(names[:shown]) + more


def unreadable(exc: BaseException) -> str | None:
    """Why a JSON or YAML text Python's readers take as valid could not be read: nested past
    Python's recursion limit, or holding an integer past its digit limit; None for any other
    error (the caller's to report)."""
    if isinstance(exc, RecursionError):
        return "nested too deeply to read"
    if isinstance(exc, ValueError) and "Exceeds the limit" in str(exc):
        return "an integer of more than 4,300 digits, which Python does not read"
    return None


def refuse_unreadable(
    exc: BaseException, error: type[HsaError], *, file: str | None, where: str | None = None
) -> NoReturn:
    """Raise ``error`` saying why a text could not be read (``unreadable``), or ``exc`` itself
    when it is another error: for the readers' ``except (RecursionError, ValueError)``."""
    why = unreadable(exc)
    if why is None:
        raise exc
    raise error(f"cannot read: {why}", file=file, where=where) from None


def schema_message(error: Any) -> str:
    """A jsonschema ``ValidationError``'s message, a pattern shown as people write it: ``$``
    for the ``$(?!\\n)`` hsa's schemas end patterns with (Python's ``$``, which jsonschema
    uses, also matches before a final newline), and a ``not`` by its subschema's ``title``."""
    if error.validator == "pattern" and isinstance(error.validator_value, str):
        pattern = error.validator_value.replace("$(?!\\n)", "$")
        said = f"{error.instance!r} does not match {pattern!r}"
        if pattern != error.validator_value and str(error.instance).endswith("\n"):
            said += " (a final newline is not allowed)"
        return said
    refused = error.validator_value
    if error.validator == "not" and isinstance(refused, dict) and "title" in refused:
        return f"{error.instance!r} is {refused['title']}"  # (not the list it is refused from)
    return str(error.message)


def first_line(exc: BaseException) -> str:
    """The first line of an exception's message (its type's name when it has none): a
    library's error told in an hsa error's one line."""
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def refuse_path(value: object, error: type[HsaError], name: str = "path") -> None:
    """Raise ``error`` when the argument ``name`` is no path (a string or a ``Path``)."""
    if not isinstance(value, str | PurePath):
        raise error(f"{name} must be a file or folder path, got {type(value).__name__}")


def refuse_kind(
    value: object, kind: type, name: str, reader: str, error: type[HsaError], *, none: bool = False
) -> None:
    """Raise ``error`` when the argument ``name`` is not a ``kind`` (a path where a config or
    a harness belongs, say), saying how to make one (``reader``); ``none``: None is allowed."""
    if isinstance(value, kind) or (none and value is None):
        return
    article = "an" if kind.__name__[:1] in "AEIOU" else "a"
    got = repr(value) if isinstance(value, (str, PurePath)) else type(value).__name__
    raise error(f"{name} must be {article} {kind.__name__}, got {got}; {reader}")
