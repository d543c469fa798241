"""The entry point: a missing optional package is one line naming the extra that installs it."""

from __future__ import annotations

import contextlib

import pytest

from hsa.cli import app, main
from hsa.errors import Terminated


@pytest.fixture
def probe_command():
    """Registers ``fn`` as the command ``probe`` for one test."""

    def make(fn):
        return app.command("probe")(fn)

    yield make
    app.commands.pop("probe", None)


@pytest.fixture
def failing_command(probe_command):
    def make(exc: BaseException):
        def probe() -> None:
            raise exc

        return probe_command(probe)

    return make


def test_a_missing_optional_package_names_its_extra(failing_command, capsys):
    failing_command(ModuleNotFoundError("No module named 'trl'", name="trl"))
    with pytest.raises(SystemExit) as done:
        main(["probe"])
    assert done.value.code == 1
    err = capsys.readouterr().err
    assert err.strip().splitlines() == [
        "hsa: error: this command needs trl, which is not installed: "
        "python -m pip install -e '.[train]' (or 'hsa[train]')"
    ]


def test_another_missing_module_is_a_real_bug_and_keeps_its_traceback(failing_command):
    failing_command(ModuleNotFoundError("No module named 'hsa.nope'", name="hsa.nope"))
    with pytest.raises(ModuleNotFoundError):
        main(["probe"])


@pytest.mark.parametrize(
    "exc, code, word",
    [(KeyboardInterrupt(), 130, "aborted"), (Terminated(), 143, "terminated")],
)
def test_an_interrupted_command_says_what_to_do_next(
    monkeypatch, capsys, probe_command, exc, code, word
):
    from hsa import cli

    monkeypatch.setattr(cli, "_NEXT", [])

    @probe_command
    def probe() -> None:
        cli.when_interrupted("rerun with --resume")
        raise exc

    with pytest.raises(SystemExit) as done:
        main(["probe"])
    assert done.value.code == code
    assert capsys.readouterr().err.strip() == f"hsa: {word} (rerun with --resume)"


def test_input_nested_past_what_python_reads_is_one_line(failing_command, capsys):
    # a config file thousands of levels deep fails past its reader (jsonschema, hashing)
    failing_command(RecursionError("maximum recursion depth exceeded"))
    with pytest.raises(SystemExit) as done:
        main(["probe"])
    assert done.value.code == 1
    assert capsys.readouterr().err.strip() == (
        "hsa: error: an input is nested too deeply to read (a JSON or YAML value thousands of "
        "levels deep)"
    )


@pytest.mark.parametrize(
    "handled",
    ["swallowed", "wrapped", "an hsa error"],
)
@pytest.mark.parametrize(
    ("stop", "code", "word"),
    [(KeyboardInterrupt, 130, "aborted"), (Terminated, 143, "terminated")],
)
def test_a_stop_a_library_swallows_or_wraps_still_stops_the_command(
    capsys, probe_command, handled, stop, code, word
):
    # Ctrl-C or SIGTERM raises where the main thread is: inside pyarrow's guarded import of
    # pandas it was swallowed (the run went on and exited 0), inside a class being made it was
    # wrapped (a traceback)
    from hsa.errors import HsaError, request_stop

    @probe_command
    def probe() -> None:
        try:
            request_stop(stop())
        except BaseException as exc:
            if handled == "wrapped":
                raise RuntimeError("Error calling __set_name__") from exc
            if handled == "an hsa error":
                raise HsaError("raised AttributeError: partially initialized module") from exc

    with pytest.raises(SystemExit) as done:
        main(["probe"])
    assert done.value.code == code
    assert capsys.readouterr().err.strip() == f"hsa: {word}"
    with contextlib.suppress(SystemExit):  # the next command in this process starts afresh
        main(["--version"])
    said = capsys.readouterr()
    assert "hsa" in said.out and not said.err


def test_a_progress_update_raises_a_stop_that_was_swallowed():
    from hsa.cli.output import progress
    from hsa.errors import clear_stop, request_stop

    bar = progress()
    task = bar.add_task("work", total=2)
    bar.update(task, advance=1)
    with contextlib.suppress(Terminated):  # as a library might
        request_stop(Terminated())
    try:
        with pytest.raises(Terminated):
            bar.update(task, advance=1)
        with pytest.raises(Terminated):
            bar.advance(task)
    finally:
        clear_stop()


@pytest.mark.parametrize("where", ["a weakref callback", "a library"])
def test_a_stop_whose_exception_was_lost_ends_the_command_without_done(
    capsys, monkeypatch, probe_command, where
):
    # Ctrl-C near a build's end, in a weakref callback during a garbage collection: Python
    # printed "Exception ignored in: <function WeakKeyDictionary...remove>" and a traceback,
    # the build went on to print "hsa build: done" and its summary, then "hsa: aborted" (130)
    import gc
    import sys
    import weakref

    from hsa.cli.output import progress
    from hsa.errors import on_sigint

    class Held:
        pass

    @probe_command
    def probe() -> None:
        with progress() as bar:
            bar.add_task("work", total=1)
            if where == "a library":
                with contextlib.suppress(KeyboardInterrupt):
                    on_sigint(0, None)
            else:
                held = Held()
                watch = weakref.ref(held, lambda _: on_sigint(0, None))
                del held
                gc.collect()
                assert watch() is None
        print("hsa probe: done")

    monkeypatch.setattr(sys, "unraisablehook", sys.__unraisablehook__)  # (Python's, not pytest's)
    with pytest.raises(SystemExit) as done:
        main(["probe"])
    said = capsys.readouterr()
    assert done.value.code == 130
    assert "done" not in said.out
    assert said.err.strip() == "hsa: aborted"
