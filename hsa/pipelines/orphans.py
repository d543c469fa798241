"""Worker processes end with the job that started them.

A job killed outright (SIGKILL, the out-of-memory killer) cannot stop its workers, which
ignore Ctrl-C and SIGTERM (the job's to handle) and would go on: planning for nobody, or
writing shards beside the rerun that takes the folder over. On Linux the kernel kills a worker
whose parent dies (``PR_SET_PDEATHSIG``); elsewhere a worker outlives it, as before.
"""

from __future__ import annotations

import ctypes
import os
import signal
import sys

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
