"""The experiment's child processes: stopped with the run, never started after it stops."""

from __future__ import annotations

import sys
import threading
import time

from hsa.experiment.run import Children

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
