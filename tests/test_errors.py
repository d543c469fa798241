"""Stops held back for a step that must not be cut in two (``stops_held``)."""

from __future__ import annotations

import os
import signal

import pytest

from hsa.errors import Terminated, clear_stop, on_sigint, on_sigterm, stop_requested, stops_held


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
