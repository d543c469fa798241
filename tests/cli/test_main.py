"""The entry point: a missing optional package is one line naming the extra that installs it."""

from __future__ import annotations

import pytest

from hsa.cli import app, main
from hsa.errors import Terminated


@pytest.fixture
def failing_command():
    def make(exc: BaseException):
        @app.command("probe-missing")
        def probe() -> None:
            raise exc

        return probe

    yield make
    app.commands.pop("probe-missing", None)


def test_a_missing_optional_package_names_its_extra(failing_command, capsys):
    failing_command(ModuleNotFoundError("No module named 'trl'", name="trl"))
    with pytest.raises(SystemExit) as done:
        main(["probe-missing"])
    assert done.value.code == 1
    err = capsys.readouterr().err
    assert err.strip().splitlines() == [
        "hsa: error: this command needs trl, which is not installed: "
        "python -m pip install -e '.[train]' (or 'hsa[train]')"
    ]


def test_another_missing_module_is_a_real_bug_and_keeps_its_traceback(failing_command):
    failing_command(ModuleNotFoundError("No module named 'hsa.nope'", name="hsa.nope"))
    with pytest.raises(ModuleNotFoundError):
        main(["probe-missing"])


@pytest.mark.parametrize(
    "exc, code, word",
    [(KeyboardInterrupt(), 130, "aborted"), (Terminated(), 143, "terminated")],
)
def test_an_interrupted_command_says_what_to_do_next(monkeypatch, capsys, exc, code, word):
    from hsa import cli

    monkeypatch.setattr(cli, "_NEXT", [])

    @app.command("probe-stopped")
    def probe() -> None:
        cli.when_interrupted("rerun with --resume")
        raise exc

    try:
        with pytest.raises(SystemExit) as done:
            main(["probe-stopped"])
    finally:
        app.commands.pop("probe-stopped", None)
    assert done.value.code == code
    assert capsys.readouterr().err.strip() == f"hsa: {word} (rerun with --resume)"


def test_input_nested_past_what_python_reads_is_one_line(failing_command, capsys):
    # a config file thousands of levels deep fails past its reader (jsonschema, hashing)
    failing_command(RecursionError("maximum recursion depth exceeded"))
    with pytest.raises(SystemExit) as done:
        main(["probe-missing"])
    assert done.value.code == 1
    assert capsys.readouterr().err.strip() == (
        "hsa: error: an input is nested too deeply to read (a JSON or YAML value thousands of "
        "levels deep)"
    )
