"""The experiment run: its child processes stopped with the run, never started after it stops;
an output folder it cannot make refused before anything runs; its folder locked while it runs."""

from __future__ import annotations

import importlib
import json
import os
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from hsa.datasets.lock import hold as hold_lock
from hsa.datasets.lock import lock_path
from hsa.errors import DatasetError, ExperimentError
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


def test_a_second_run_into_the_same_folder_is_refused_at_once(tmp_path):
    # both ran: the second wrote init-s0.partial over the first's and its rename was a traceback
    out = tmp_path / "out"
    held = lock_path(out)
    held.parent.mkdir(parents=True)
    holder = {"pid": os.getpid(), "host": socket.gethostname(), "started": "x", "token": "t"}
    held.write_text(json.dumps({**holder, "command": "hsa experiment run"}))
    with pytest.raises(DatasetError, match=r"another run is writing here: .*hsa experiment run"):
        run(load_config(EXAMPLE), out)
    assert sorted(p.relative_to(out).as_posix() for p in out.rglob("*")) == [".hsa", ".hsa/lock"]


def test_the_run_holds_its_folder_and_takes_over_the_lock_of_one_killed(tmp_path, monkeypatch):
    out = tmp_path / "out"
    held = lock_path(out)
    held.parent.mkdir(parents=True)
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    held.write_text(json.dumps({"pid": dead.pid, "host": socket.gethostname(), "token": "t"}))
    seen = {}

    def steps(config, folder, progress):
        # what the inner steps lock (data/<arm>, runs/<arm>-s<seed>, eval/...) is another file
        with hold_lock(folder / "data" / "fixed"):
            seen["inner"] = lock_path(folder / "data" / "fixed").exists()
        seen["holder"] = json.loads(held.read_text())
        return {}

    # (the package's `run` is the function)
    monkeypatch.setattr(importlib.import_module("hsa.experiment.run"), "_run", steps)
    run(load_config(EXAMPLE), out)
    assert seen["inner"] and seen["holder"]["pid"] == os.getpid()
    assert seen["holder"]["command"] == "hsa experiment run"
    assert not held.exists() and not held.parent.exists()  # released when the run ends


def test_a_data_folder_of_another_dataset_is_refused_in_the_experiments_terms(tmp_path):
    # the build's own advice ("choose another --out or delete it") named an --out the
    # experiment's user never gave
    from hsa.experiment.run import build_data

    config = load_config(EXAMPLE)
    target = tmp_path / "data" / "fixed"
    target.mkdir(parents=True)
    (target / "manifest.json").write_text(
        json.dumps({"kind": "hsa.augmented", "config_hash": "40cad805" * 8}), "utf-8"
    )
    with pytest.raises(ExperimentError) as caught:
        build_data(config, tmp_path, lambda *_: None)
    assert caught.value.file == str(target)
    assert caught.value.message.startswith("holds another dataset (config hash 40cad80540ca")
    assert f"; delete {target} and run the experiment again" in caught.value.message
    assert "choose another --out or delete it" not in caught.value.message


def test_the_libraries_progress_bars_are_the_callers_again_after_a_run(tmp_path):
    # QA: a run (one refused, even) left datasets' and transformers' bars off for the process
    import datasets
    from transformers.utils import logging

    out = tmp_path / "out"
    out.mkdir()
    (out / "mine.txt").write_text("not an experiment's")
    datasets.enable_progress_bars(), logging.enable_progress_bar()  # (as a caller has them)
    with pytest.raises(ExperimentError, match="holds no experiment"):
        run(load_config(EXAMPLE), out)
    assert datasets.is_progress_bar_enabled() and logging.is_progress_bar_enabled()
