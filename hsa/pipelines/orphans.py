"""Worker processes end with the job that started them, and the job with a worker that died.

A job killed outright (SIGKILL, the out-of-memory killer) cannot stop its workers, which
ignore Ctrl-C and SIGTERM (the job's to handle) and would go on: planning for nobody, or
writing shards beside the rerun that takes the folder over. On Linux the kernel kills a worker
whose parent dies (``PR_SET_PDEATHSIG``); elsewhere a worker outlives it, as before.

A worker killed outright leaves its share of the job undone: the job looks for one (``dead``)
while it waits on them, and stops with an error that says how it ended (``ending``).
"""

from __future__ import annotations

import ctypes
import os
import signal
import sys
from collections.abc import Iterable
from multiprocessing.connection import wait
from multiprocessing.process import BaseProcess

_PR_SET_PDEATHSIG = 1


def end_with(parent: int) -> None:
    """Have this process killed when its parent, the process ``parent``, ends; end now when
    that one has ended already (it died while this one started). Call it first thing in a
    worker, started by the job's main thread (the kernel watches the thread that forked)."""
    if not sys.platform.startswith("linux"):
        return
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    except (OSError, AttributeError):
        return
    if os.getppid() != parent:
        os._exit(1)


def dead(processes: Iterable[BaseProcess]) -> BaseProcess | None:
    """The first of ``processes`` that ended with an error (an exception, or a signal: killed,
    out of memory), or None.

    A process whose end its sentinel already shows is waited for, briefly: the kernel closes
    a dying process's files (the sentinel's pipe, which is how a pool sees it die) a moment
    before it gives its exit code, and a worker found dead by its pool read as alive here."""
    processes = list(processes)
    running = [p for p in processes if p.exitcode is None]
    for sentinel in wait([p.sentinel for p in running], timeout=0) if running else ():
        next(p for p in running if p.sentinel == sentinel).join(timeout=_REAPED_S)
    return next((p for p in processes if p.exitcode not in (None, 0)), None)


#: how long ``dead`` waits for the exit code of a process whose sentinel shows it ended
_REAPED_S = 2.0


def ending(process: BaseProcess) -> str:
    """How ``process``, ended, ended: ``killed by SIGKILL`` or ``exit code 1``."""
    code = process.exitcode
    if code is not None and code < 0:
        try:
            return f"killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    return f"exit code {code}"
