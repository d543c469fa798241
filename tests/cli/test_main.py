"""The entry point: a missing optional package is one line naming the extra that installs it."""

from __future__ import annotations

import pytest

from hsa.cli import app, main


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
