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


class _Held:
    """A process-wide setting held by any number of jobs at once: ``take`` runs when the
    first comes in, ``give_back`` (with what ``take`` returned) when the last goes out."""

    def __init__(self, take: Callable[[], object], give_back: Callable[[object], None]):
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


def _no_full_passes() -> object:
    found = gc.get_threshold()
    gc.set_threshold(found[0], found[1], _NEVER)
    return found


def _thresholds_back(found: object) -> None:
    gc.set_threshold(*found)  # type: ignore[misc]


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


_full_passes = _Held(_no_full_passes, _thresholds_back)
_frozen = _Held(_freeze, _unfreeze)


def no_full_passes() -> AbstractContextManager[None]:
    """A block in which the collector's automatic passes are over the young generations only
    (a job that collects in full itself, at points of its own)."""
    return _full_passes.held()


def frozen() -> AbstractContextManager[None]:
    """A block in which what the process holds as it starts is frozen out of the collector's
    full passes (``gc.freeze``), after one full collection; nothing is frozen where the
    process froze objects itself."""
    return _frozen.held()
