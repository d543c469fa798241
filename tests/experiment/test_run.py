"""The experiment run: its child processes stopped with the run, never started after it stops;
an output folder it cannot make refused before anything runs."""

from __future__ import annotations

import sys
import threading
import time
from pathlib import Path

import pytest

from hsa.errors import ExperimentError
from hsa.experiment.config import load_config
from hsa.experiment.run import Children, run

EXAMPLE = Path(__file__).parents[2] / "examples" / "experiment.yaml"

SLEEP = [sys.executable, "-c", "import time; time.sleep(60)"]


def test_stopping_the_run_stops_its_running_children_at_once():
    children = Children()
    found: list[int | None] = []
    worker = threading.Thread(target=lambda: found.append(children.run(SLEEP)))
    worker.start()
    while not children._running:  # the child has started
        time.sleep(0.01)
    started = time.monotonic()
    children.stop()
    worker.join(timeout=10)
    assert not worker.is_alive() and found == [None]  # stopped, not an exit status to report
    assert time.monotonic() - started < 10
    assert children.run(SLEEP) is None  # nothing starts once stopped


def test_a_child_that_ends_gives_its_exit_status():
    assert Children().run([sys.executable, "-c", "raise SystemExit(3)"]) == 3


def test_an_output_folder_a_file_stands_in_for_is_refused_naming_the_file(tmp_path):
    # mkdir's FileExistsError or NotADirectoryError came out of the CLI as a traceback
    blocking = tmp_path / "notadir"
    blocking.write_text("")
    for out in (blocking, blocking / "sub"):
        with pytest.raises(ExperimentError, match="where the output folder should be") as found:
            run(load_config(EXAMPLE), out)
        assert found.value.file == str(blocking)
    assert blocking.read_text() == ""
