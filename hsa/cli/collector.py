"""``--tune-gc``: the garbage collector set for a long job of many small requests.

Process-wide, so here in the CLI (``hsa teach``, ``hsa eval run``), never in the library.
"""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Iterator

import click

#: allocations between collections of the youngest generation while rollouts run
GC_THRESHOLD = 20_000

TUNE_GC = click.option(
    "--tune-gc",
    is_flag=True,
    help="Collect garbage less often while rollouts run (faster; holds more memory).",
)


@contextlib.contextmanager
def gc_tuned(enabled: bool) -> Iterator[None]:
    """With ``enabled``, collect less often for the ``with`` block.

    The environment, tasks and variants live as long as the job: freezing them keeps the
    collector's full passes short. A rollout allocates thousands of short-lived objects, and
    at the default threshold (700) the youngest generation is collected several times per
    request, promoting what the requests in flight hold. Measured on the in-process oracle
    (1,600 rollouts of ``hsa teach``): about 20% less run time.
    """
    if not enabled:
        yield
        return
    thresholds = gc.get_threshold()
    gc.freeze()
    gc.set_threshold(GC_THRESHOLD, *thresholds[1:])
    try:
        yield
    finally:
        gc.set_threshold(*thresholds)
        gc.unfreeze()
