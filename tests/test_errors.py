"""Stops held back for a step that must not be cut in two (``stops_held``), and a stop's
exception Python could not raise said nothing of (``quiet_stops``)."""

from __future__ import annotations

import os
import signal

import pytest

from hsa.errors import (
    Terminated,
    clear_stop,
    on_sigint,
    on_sigterm,
    quiet_stops,
    stop_requested,
    stops_held,
)


@pytest.fixture(autouse=True)
def cli_handlers():
    """The handlers the CLI installs, and no stop recorded, before and after each test."""
    saved = {n: signal.getsignal(n) for n in (signal.SIGTERM, signal.SIGINT)}
    signal.signal(signal.SIGTERM, on_sigterm)
    signal.signal(signal.SIGINT, on_sigint)
    clear_stop()
    yield
    clear_stop()
    for number, handler in saved.items():
        signal.signal(number, handler)


@pytest.mark.parametrize(
    ("number", "kind"), [(signal.SIGTERM, Terminated), (signal.SIGINT, KeyboardInterrupt)]
)
def test_a_stop_during_the_step_is_raised_once_it_is_done(number, kind):
    done = []
    with pytest.raises(kind), stops_held():
        os.kill(os.getpid(), number)
        done.append("the rest of the step")
    assert done and stop_requested() is kind
    assert signal.getsignal(number) in (on_sigterm, on_sigint)  # the handlers are back


def test_a_second_stop_is_raised_at_once():
    done = []
    with pytest.raises(KeyboardInterrupt), stops_held():
        os.kill(os.getpid(), signal.SIGINT)
        os.kill(os.getpid(), signal.SIGINT)
        done.append("never")
    assert not done


def test_a_stop_held_while_the_step_fails_is_still_recorded():
    # the step's own error is what is raised; the CLI still exits as stopped (130, 143)
    with pytest.raises(OSError), stops_held():
        os.kill(os.getpid(), signal.SIGTERM)
        raise OSError("disk full")
    assert stop_requested() is Terminated


def test_an_ignored_signal_stays_ignored():
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    with stops_held():
        os.kill(os.getpid(), signal.SIGINT)
    assert stop_requested() is None and signal.getsignal(signal.SIGINT) == signal.SIG_IGN


def unraisable(exc: BaseException) -> object:
    """What Python hands ``sys.unraisablehook`` for ``exc`` raised where it cannot be."""
    import types

    return types.SimpleNamespace(
        exc_type=type(exc), exc_value=exc, exc_traceback=None, err_msg=None, object=None
    )


@pytest.mark.parametrize("stop", [KeyboardInterrupt, Terminated])
def test_a_stop_python_could_not_raise_is_said_nothing_of(stop):
    # Ctrl-C in a weakref callback during a garbage collection: the handler recorded the stop
    # and raised, and Python printed "Exception ignored in: <function WeakKeyDictionary...
    # remove>" and a traceback (the run then stopped at its next step, with one line)
    said = []
    hook = quiet_stops(said.append)
    with pytest.raises(stop):
        (on_sigint if stop is KeyboardInterrupt else on_sigterm)(0, None)
    hook(unraisable(stop()))
    assert said == []


def test_any_other_exception_python_could_not_raise_goes_to_the_hook_before():
    said = []
    hook = quiet_stops(said.append)
    error = unraisable(ValueError("a bug in a __del__"))
    hook(error)
    interrupt = unraisable(KeyboardInterrupt())  # (no stop recorded: not one of the CLI's)
    hook(interrupt)
    assert said == [error, interrupt]
