"""The garbage collector's process-wide settings that long jobs change while they run.

They belong to the process, not the job: two jobs in two threads of one process (a service,
a notebook) each saving the setting they found and putting it back when done would leave the
second one's change in place for good (the first to finish restores the original, the last
restores the first's change). So the first job in changes a setting, and the last one out
puts back what the process had.
"""

from __future__ import annotations

import gc
import threading
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from typing import Any


class _Held:
    """A process-wide setting held by any number of jobs at once: ``take`` runs when the
    first comes in, ``give_back`` (with what ``take`` returned) when the last goes out."""

    def __init__(self, take: Callable[[], object], give_back: Callable[[Any], object]):
        self._take, self._give_back = take, give_back
        self._lock = threading.Lock()
        self._holders = 0
        self._saved: object = None

    @contextmanager
    def held(self) -> Iterator[None]:
        with self._lock:
            if self._holders == 0:
                self._saved = self._take()
            self._holders += 1
        try:
            yield
        finally:
            with self._lock:
                self._holders -= 1
                if self._holders == 0:
                    self._give_back(self._saved)


#: a threshold of young-generation passes no run reaches (a full pass is never automatic)
_NEVER = 1 << 30
#: allocations between passes over the youngest generation (``fewer_young_passes``)
YOUNG_THRESHOLD = 20_000


def _threshold(generation: int, value: int) -> tuple[Callable[[], int], Callable[[int], int]]:
    """``take`` and ``give_back`` for the threshold of one generation alone, so that settings
    of two generations held at once, taken and given back in any order, never undo each
    other."""

    def put(value: int) -> int:
        thresholds = list(gc.get_threshold())
        found = thresholds[generation]
        thresholds[generation] = value
        gc.set_threshold(*thresholds)
        return found

    return (lambda: put(value)), put


def _freeze() -> object:
    # A caller's own frozen objects cannot be told apart from ours when unfreezing: where
    # there are any, nothing is frozen here (only the full passes are slower).
    if gc.get_freeze_count():
        return False
    # garbage of earlier work (a job's closed figures, in cycles) is collected first, not
    # frozen with what is kept: frozen, it would outlive the block, and a job run again and
    # again in one process grew by megabytes a call
    gc.collect()
    gc.freeze()
    return True


def _unfreeze(froze: object) -> None:
    if froze:
        gc.unfreeze()


_full_passes = _Held(*_threshold(2, _NEVER))
_young_passes = _Held(*_threshold(0, YOUNG_THRESHOLD))
_frozen = _Held(_freeze, _unfreeze)


def no_full_passes() -> AbstractContextManager[None]:
    """A block in which the collector's automatic passes are over the young generations only
    (a job that collects in full itself, at points of its own)."""
    return _full_passes.held()


def fewer_young_passes() -> AbstractContextManager[None]:
    """A block in which the youngest generation is collected every ``YOUNG_THRESHOLD``
    allocations, not every 700 (a job of many small requests: at 700 it is collected several
    times a request, promoting what the requests in flight hold)."""
    return _young_passes.held()


def frozen() -> AbstractContextManager[None]:
    """A block in which what the process holds as it starts is frozen out of the collector's
    full passes (``gc.freeze``), after one full collection; nothing is frozen where the
    process froze objects itself."""
    return _frozen.held()
