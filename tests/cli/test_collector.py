"""``--tune-gc``: the collector is set for the block and put back after it."""

from __future__ import annotations

import gc

import pytest

from hsa.cli.collector import gc_tuned
from hsa.collect import YOUNG_THRESHOLD


def test_the_collector_is_tuned_inside_and_restored_after_even_on_error():
    before = gc.get_threshold()
    with pytest.raises(RuntimeError), gc_tuned(True):
        assert gc.get_threshold()[0] == YOUNG_THRESHOLD
        assert gc.get_freeze_count() > 0
        raise RuntimeError("stop")
    assert gc.get_threshold() == before and gc.get_freeze_count() == 0


def test_off_it_changes_nothing():
    before, frozen = gc.get_threshold(), gc.get_freeze_count()
    with gc_tuned(False):
        assert gc.get_threshold() == before and gc.get_freeze_count() == frozen
