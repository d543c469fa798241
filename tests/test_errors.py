"""An error's repr, stops held back for a step that must not be cut in two (``stops_held``), a
stop's exception Python could not raise said nothing of (``quiet_stops``), and errors that cross
a process boundary whole (pickled)."""

from __future__ import annotations

import os
import pickle
import signal
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from hsa.augment.mapping import ArgumentClash, Step
from hsa.augment.planner import HooksAlike, PromptUnrendered
from hsa.augment.registry import _NameTaken
from hsa.errors import (
    AnotherDataset,
    DatasetError,
    HarnessValidationError,
    HsaError,
    PlanError,
    Terminated,
    clear_stop,
    on_sigint,
    on_sigterm,
    quiet_stops,
    stop_requested,
    stops_held,
)
from hsa.eval.runner import EvalIncomplete, EvalReport
from hsa.harness import Harness, Hook
from hsa.pipelines.teach import TeachIncomplete, TeachReport


def test_an_errors_repr_keeps_its_file_and_place():
    # what a notebook shows for `err`, or for a list of errors
    err = DatasetError("no such file", file="out/a.parquet", where="row 3")
    assert repr(err) == "DatasetError('out/a.parquet: row 3: no such file')"
    assert repr(HsaError("bad")) == "HsaError('bad')"
    problems = [HsaError("3 is not of type 'string'", file="h.json", where="$.id")]
    assert repr(HarnessValidationError(problems)) == (
        "HarnessValidationError(\"h.json: $.id: 3 is not of type 'string'\")"
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


def test_a_stop_held_while_the_step_fails_is_still_raised():
    # the stop, with the step's own error as its context; the CLI exits as stopped (130, 143)
    with pytest.raises(Terminated) as raised, stops_held():
        os.kill(os.getpid(), signal.SIGTERM)
        raise OSError("disk full")
    assert isinstance(raised.value.__context__, OSError)
    assert stop_requested() is Terminated


def test_a_callers_own_handler_meets_the_stop_once_the_step_is_done():
    # hsa used as a library: the caller's handler runs, after the step, and hsa records no
    # stop of its own (one a later job in this process would take for an interruption)
    met = []
    signal.signal(signal.SIGINT, lambda number, frame: met.append(number))
    with stops_held():
        os.kill(os.getpid(), signal.SIGINT)
        assert not met
    assert met == [signal.SIGINT] and stop_requested() is None
    met.clear()
    with stops_held():
        os.kill(os.getpid(), signal.SIGINT)
        os.kill(os.getpid(), signal.SIGINT)  # the second: sent on at once
        assert met == [signal.SIGINT]
    assert met == [signal.SIGINT] and stop_requested() is None


def test_sigterm_with_no_handler_ends_the_process_once_the_step_is_done(tmp_path):
    script = (
        "import os, pathlib, signal, sys\n"
        "from hsa.errors import stops_held\n"
        "with stops_held():\n"
        "    os.kill(os.getpid(), signal.SIGTERM)\n"
        "    pathlib.Path(sys.argv[1]).write_text('done')\n"
        "pathlib.Path(sys.argv[1]).write_text('went on')\n"
    )
    done = tmp_path / "step"
    ended = subprocess.run([sys.executable, "-c", script, str(done)], check=False)
    assert ended.returncode == -signal.SIGTERM and done.read_text() == "done"


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


_HARNESS = Harness("acme", hooks=(Hook("a", "stop", "add_context", "Note: {{ text }}"),))


#: one of each error whose ``__init__`` takes other than the message (a report, a harness)
BUILT_OTHERWISE = [
    HsaError("bad row", file="x.jsonl", where="row 3"),
    AnotherDataset("holds another dataset (config hash 40cad80540ca)", file="out/a"),
    HarnessValidationError([HsaError("no id", file="h.yaml", where="$.id"), HsaError("dup")]),
    PlanError("rule failed", harness_id="acme", where="rule 'tools.rename'"),
    ArgumentClash("clash", where="rule 'args.move'", step=Step("add", ("a",)), at=("a",)),
    _NameTaken("taken", name="tools.rename"),
    HooksAlike(_HARNESS, where="rule 'hooks.wrapper'"),
    PromptUnrendered(_HARNESS, HsaError("no element 4"), where="rule 'protocol.switch'"),
    TeachIncomplete(
        TeachReport(
            out=Path("out/x"),
            total=5,
            written=3,
            reasons=Counter(backend=2),
            retry_reasons=Counter(t=2),
        )
    ),
    EvalIncomplete(EvalReport(out=Path("out/e"), episodes=4, retry=1, retry_reasons=Counter(t=1))),
]


@pytest.mark.parametrize("error", BUILT_OTHERWISE, ids=lambda e: type(e).__name__)
def test_an_error_unpickles_as_it_was(error):
    # raised in a worker process, it is pickled to the parent: a failed rebuild there broke
    # the whole pool (BrokenProcessPool) instead of raising the error
    copy = pickle.loads(pickle.dumps(error))
    assert type(copy) is type(error) and str(copy) == str(error) and copy.args == error.args
    assert pickle.dumps(copy) == pickle.dumps(error)  # every attribute, as it was


def test_every_error_built_otherwise_is_pickled_above():
    # of the errors loaded: this module imports each module that defines one today
    def below(cls):
        for sub in cls.__subclasses__():
            yield sub
            yield from below(sub)

    own_init = {c for c in below(HsaError) if "__init__" in vars(c)}
    assert own_init <= {type(e) for e in BUILT_OTHERWISE}
